#!/usr/bin/env python
"""In-process measurements of launchtui (run in a fresh process by bench/run.py).

    python bench/inproc.py model FILE            # read_trace: model bytes per event, table sizes
    python bench/inproc.py profile FILE OUT.txt  # cProfile of `launchtui report FILE --json --no-cache`
    python bench/inproc.py dumps REPORT.json     # JSON output: launchtui.output.dumps vs json.dumps
    python bench/inproc.py stages FILE           # cold report's stages: peak RSS, minor faults, CPU each
    python bench/inproc.py open FILE             # warm model open (cache entry must exist): time, peak RSS
    python bench/inproc.py reader FILE           # read_trace alone: wall, CPU, faults, which column reader
    python bench/inproc.py mempeak FILE [report|record]   # where the stage's traced memory peaks, by function

`model` prints one JSON line: read time, event count, trace.nbytes(), bytes per event.
`profile` runs the CLI entry point in-process under cProfile (stdout discarded), writes the full
pstats listing to OUT.txt and prints a JSON summary: top functions by own time, and the
cumulative time of launchtui's functions. It computes the record after the report and the record's
parts in order, on the one thread cProfile sees (the CLI computes them beside each other): its total
is CPU, not wall.
"""
from __future__ import annotations

import contextlib
import cProfile
import io
import json
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def model(path: str) -> dict:
    from launchtui.trace.load import read_trace
    t = time.perf_counter()
    trace = read_trace(path)
    read_s = time.perf_counter() - t
    ev = trace.event_count()
    nb = trace.nbytes()
    return {"read_trace_s": round(read_s, 3), "events": ev, "ops": len(trace.ops), "api": len(trace.api),
            "ranges": len(trace.ranges), "threads": len(trace.threads), "overheads": len(trace.overheads),
            "strings": len(trace.strings.values), "nbytes": nb,
            "bytes_per_event": round(nb / ev, 2) if ev else None,
            "per_table_bytes": {k: getattr(trace, k).nbytes() for k in ("ops", "api", "ranges", "threads",
                                                                         "overheads")}}


def _fn_label(key) -> str:
    file, line, name = key
    if file.startswith("~"):
        return name
    p = Path(file)
    try:
        rel = p.resolve().relative_to(ROOT)
        file = str(rel)
    except ValueError:
        parts = p.parts
        file = "/".join(parts[-2:]) if len(parts) >= 2 else file
    return f"{file}:{line}({name})"


def profile(path: str, out: str, top: int = 15) -> dict:
    """cProfile sees one thread: the record is computed after the report here, on the profiled
    thread, where the CLI computes it beside the report (analysis/shared.py side_by_side), and its
    deferred parts in order, where the CLI lends them a helper lane (`lane_fits`). So the listing
    is the command's CPU, not its wall."""
    from launchtui import cli
    from launchtui.analysis import shared
    shared.side_by_side = lambda: False
    shared.lane_fits = lambda trace: False
    prof = cProfile.Profile()
    sink = io.StringIO()
    t = time.perf_counter()
    with contextlib.redirect_stdout(sink):
        prof.enable()
        rc = cli.main(["report", path, "--json", "--no-cache"])
        prof.disable()
    wall = time.perf_counter() - t
    st = pstats.Stats(prof)
    total = st.total_tt
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(40)
    buf.write("\n\n==== by cumulative time ====\n")
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(60)
    Path(out).write_text(buf.getvalue())
    rows = [(k, v) for k, v in st.stats.items()]   # v = (cc, nc, tt, ct, callers)
    by_tt = sorted(rows, key=lambda kv: -kv[1][2])[:top]
    own = [{"fn": _fn_label(k), "tottime_s": round(v[2], 3), "share": round(v[2] / total, 3), "calls": v[1]}
           for k, v in by_tt]
    lt = [(k, v) for k, v in rows if "launchtui" in k[0]]
    by_ct = sorted(lt, key=lambda kv: -kv[1][3])[:top]
    cum = [{"fn": _fn_label(k), "cumtime_s": round(v[3], 3), "share": round(v[3] / total, 3), "calls": v[1]}
           for k, v in by_ct]
    return {"rc": rc, "wall_s": round(wall, 3), "profiled_total_s": round(total, 3), "top_own_time": own,
            "launchtui_cumulative": cum, "listing": out}


def dumps(report_json: str, target_bytes: int = 1_400_000, repeat: int = 7) -> dict:
    """Encode a report document repeated up to ~1.4 MB (the size issue 11 measured) with launchtui's
    encoder and with the standard library's (the previous encoder); best of `repeat`, CPU time too."""
    from launchtui.output import dumps as lt_dumps
    one = json.loads(Path(report_json).read_text())
    k = max(1, -(-target_bytes // len(json.dumps(one, indent=1, ensure_ascii=False))))
    doc = {"reports": [one] * k}

    def best(fn):
        walls, cpus = [], []
        for _ in range(repeat):
            t, c = time.perf_counter(), time.process_time()
            text = fn()
            walls.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
        return min(walls), min(cpus), text
    std_w, std_c, std = best(lambda: json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    lt_w, lt_c, lt = best(lambda: lt_dumps(doc))
    return {"bytes": len(lt.encode()), "copies": k, "identical": lt == std, "launchtui_s": round(lt_w, 4),
            "launchtui_cpu_s": round(lt_c, 4), "stdlib_s": round(std_w, 4), "stdlib_cpu_s": round(std_c, 4),
            "speedup": round(std_w / lt_w, 1) if lt_w else None}


def _proc_status() -> dict:
    """VmRSS / VmHWM (the peak so far) in MiB, from /proc/self/status (Linux)."""
    out = {}
    try:
        for line in open("/proc/self/status"):
            if line.startswith(("VmRSS:", "VmHWM:")):
                k, v = line.split(":")
                out[k] = round(int(v.split()[0]) / 1024, 1)
    except OSError:
        pass
    return out


def stages(path: str) -> dict:
    """The cold `report --json` pipeline stage by stage (reader steps from its progress callback,
    then the typed index, the report, the case record): after each, the process's peak RSS so far,
    its RSS, and the minor page faults and CPU seconds the stage took (issue 11: where the peak and
    the fresh-memory faults are)."""
    import resource
    rows = []
    last = {"t": time.perf_counter(), "flt": 0, "cpu": 0.0, "sys": 0.0}

    def mark(stage: str) -> None:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        cpu = ru.ru_utime + ru.ru_stime
        st = _proc_status()
        now = time.perf_counter()
        rows.append({"stage": stage, "wall_s": round(now - last["t"], 3), "cpu_s": round(cpu - last["cpu"], 3),
                     "sys_s": round(ru.ru_stime - last["sys"], 3),   # kernel time: mostly page faults
                     "minor_faults": int(ru.ru_minflt - last["flt"]), "rss_mb": st.get("VmRSS"),
                     "peak_rss_mb": st.get("VmHWM")})
        last.update(t=now, flt=ru.ru_minflt, cpu=cpu, sys=ru.ru_stime)

    mark("start-up and imports")
    from launchtui.analysis.index import trace_index
    from launchtui.analysis.record import build_record
    from launchtui.analysis.report import build_report
    from launchtui.trace.load import read_trace
    mark("import launchtui")
    seen = set()

    def progress(stage, rows_):
        if stage not in seen:        # the callback repeats a stage while it advances
            seen.add(stage)
            mark(stage)
    trace = read_trace(path, progress)
    mark("reader: the rest (stacks, CPU tables)")
    _mark_index_steps(mark)
    trace_index(trace)
    mark("typed index: the rest (names, categories)")
    from launchtui import heap
    heap.recycle_large_blocks()   # as the CLI does once the model and index are built (cli._open)
    # as `report --json` does: one memo of the kernel groups and spikes for both documents
    from launchtui.analysis.shared import Shared
    shared = Shared(trace)
    build_report(trace, shared=shared)
    mark("report")
    build_record(trace, shared=shared)
    mark("case record")
    heap.default_large_blocks()
    return {"stages": rows}


def reader(path: str) -> dict:
    """read_trace alone (the Nsight reader: integer and text columns, the join, interning), in
    process, and which column reader ran (`LAUNCHTUI_NATIVE_READER`; trace/native_columns.py)."""
    import resource
    from launchtui.trace import native_columns
    from launchtui.trace.load import read_trace
    ru0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    trace = read_trace(path)
    ru, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - t0
    return {"column_reader": native_columns.status(), "events": trace.event_count(), "wall_s": round(wall, 3),
            "cpu_s": round(ru.ru_utime + ru.ru_stime - ru0.ru_utime - ru0.ru_stime, 3),
            "minor_faults": ru.ru_minflt - ru0.ru_minflt, **_proc_status()}


def mempeak(path: str, which: str = "record", top: int = 30) -> dict:
    """Where the report's or the case record's memory peaks (the record after the report, as `report
    --json` runs them): per launchtui function, the largest traced peak (tracemalloc: numpy's data
    too) reached while it ran, above the stage's start, with what was live when it was entered and
    its caller. The functions sharing the top figure are the path to the peak; what is held at a
    function's entry is what its callers keep alive. Not for timing (the hook slows calls)."""
    import tracemalloc
    from launchtui.analysis.index import trace_index
    from launchtui.analysis.record import build_record
    from launchtui.analysis.report import build_report
    from launchtui.analysis.shared import Shared
    from launchtui.trace.load import read_trace
    trace = read_trace(path)
    trace_index(trace)
    shared = Shared(trace)
    if which == "record":
        build_report(trace, shared=shared)
    tracemalloc.start(1)
    base = tracemalloc.get_traced_memory()[0]
    stack = [[None, base, base, None]]      # per open frame: [function, live at entry, peak, caller]
    best: dict = {}

    def hook(frame, event, arg):
        if event == "call":
            cur, peak = tracemalloc.get_traced_memory()
            stack[-1][2] = max(stack[-1][2], peak)
            tracemalloc.reset_peak()
            code = frame.f_code
            name = _fn_label((code.co_filename, code.co_firstlineno, code.co_name)) if "launchtui" in code.co_filename else None
            stack.append([name, cur, cur, stack[-1][0] if name else stack[-1][3]])
        elif event == "return" and len(stack) > 1:
            peak = tracemalloc.get_traced_memory()[1]
            fn, entry, top_, caller = stack.pop()
            top_ = max(top_, peak)
            stack[-1][2] = max(stack[-1][2], top_)
            tracemalloc.reset_peak()
            if fn and top_ > best.get(fn, (0,))[0]:
                best[fn] = (top_, entry, caller)
    sys.setprofile(hook)
    try:
        (build_record if which == "record" else build_report)(trace, shared=shared)
    finally:
        sys.setprofile(None)
    peak = max(stack[0][2], tracemalloc.get_traced_memory()[1])
    tracemalloc.stop()
    mib = lambda b: round((b - base) / 2**20, 1)   # noqa: E731
    rows = sorted(best.items(), key=lambda kv: -kv[1][0])[:top]
    return {"stage": which, "peak_above_start_mib": mib(peak),
            "functions": [{"fn": fn, "peak_mib": mib(p), "live_at_entry_mib": mib(e), "caller": c}
                          for fn, (p, e, c) in rows]}


def _mark_index_steps(mark) -> None:
    """Mark each large step of the typed index build as a stage of its own (the index's peak and
    faults by step), by wrapping the module's step functions for this process."""
    from launchtui.analysis import index

    def marked(fn, stage):
        def run(*args):
            out = fn(*args)
            mark(stage)
            return out
        return run
    work = index.QueueSeriesWork
    work.result = marked(work.result, "typed index: queue series, depth before launch")
    index._op_ranges = marked(index._op_ranges, "typed index: NVTX lookup, op ranges")


def warm_open(path: str) -> dict:
    """The model from the cache (memory-mapped) and the typed index mapped from beside it: what a
    warm TUI or an uncached command pays before any analysis (the result cache bypassed)."""
    import resource
    t, c = time.perf_counter(), time.process_time()
    from launchtui.session import Index, Session
    from launchtui.trace.load import open_cached
    imp = time.perf_counter() - t
    stages = []
    opened = open_cached(path, progress=lambda stage, rows: stages.append(stage))
    trace = opened.trace
    if stages != ["loaded from cache"]:
        return {"error": "no cache entry: the trace was read, not opened from the cache"}
    Session(trace, opened.entry).get(Index())
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"import_s": round(imp, 3), "open_s": round(time.perf_counter() - t - imp, 3),
            "cpu_s": round(time.process_time() - c, 3), "ops": len(trace.ops),
            "minor_faults": int(ru.ru_minflt), "peak_rss_mb": _proc_status().get("VmHWM")}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["model"] and len(argv) == 2:
        print(json.dumps(model(argv[1])))
        return 0
    if argv[:1] == ["profile"] and len(argv) == 3:
        print(json.dumps(profile(argv[1], argv[2])))
        return 0
    if argv[:1] == ["open"] and len(argv) == 2:
        print(json.dumps(warm_open(argv[1])))
        return 0
    if argv[:1] == ["stages"] and len(argv) == 2:
        print(json.dumps(stages(argv[1])))
        return 0
    if argv[:1] == ["reader"] and len(argv) == 2:
        print(json.dumps(reader(argv[1])))
        return 0
    if argv[:1] == ["mempeak"] and len(argv) in (2, 3) and argv[2:] in ([], ["report"], ["record"]):
        print(json.dumps(mempeak(*argv[1:])))
        return 0
    if argv[:1] == ["dumps"] and len(argv) == 2:
        print(json.dumps(dumps(argv[1])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    os.environ.setdefault("LAUNCHTUI_BENCH", "1")
    raise SystemExit(main())
