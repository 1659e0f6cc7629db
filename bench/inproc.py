#!/usr/bin/env python
"""In-process measurements of launchtui (run in a fresh process by bench/run.py).

    python bench/inproc.py model FILE            # read_trace: model bytes per event, table sizes
    python bench/inproc.py profile FILE OUT.txt  # cProfile of `launchtui report FILE --json --no-cache`

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


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["model"] and len(argv) == 2:
        print(json.dumps(model(argv[1])))
        return 0
    if argv[:1] == ["profile"] and len(argv) == 3:
        print(json.dumps(profile(argv[1], argv[2])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    os.environ.setdefault("LAUNCHTUI_BENCH", "1")
    raise SystemExit(main())
