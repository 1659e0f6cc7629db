#!/usr/bin/env python
"""In-process measurements of launchtui (run in a fresh process by bench/run.py).

    python bench/inproc.py model FILE            # read_trace: model bytes per event, table sizes
    python bench/inproc.py profile FILE OUT.txt  # cProfile of `launchtui report FILE --json --no-cache`
    python bench/inproc.py dumps REPORT.json     # JSON output: launchtui.output.dumps vs json.dumps

`model` prints one JSON line: read time, event count, trace.nbytes(), bytes per event.
`profile` runs the CLI entry point in-process under cProfile (stdout discarded), writes the full
pstats listing to OUT.txt and prints a JSON summary: top functions by own time, and the
cumulative time of launchtui's functions.
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
    from launchtui import cli
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


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["model"] and len(argv) == 2:
        print(json.dumps(model(argv[1])))
        return 0
    if argv[:1] == ["profile"] and len(argv) == 3:
        print(json.dumps(profile(argv[1], argv[2])))
        return 0
    if argv[:1] == ["dumps"] and len(argv) == 2:
        print(json.dumps(dumps(argv[1])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    os.environ.setdefault("LAUNCHTUI_BENCH", "1")
    raise SystemExit(main())
