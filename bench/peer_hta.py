#!/usr/bin/env python
"""HTA side of the benchmark; run with the HTA virtual environment's Python, never launchtui's.

    /tmp/peers-hta/bin/python bench/peer_hta.py TRACE_DIR

TRACE_DIR holds exactly one Kineto trace (HTA reads every trace in the directory, one per rank).
Prints one JSON line: import / load / summary seconds and the queue-length summary.
"""
import json
import sys
import time

t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis  # noqa: E402

t1 = time.perf_counter()
ta = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
summary = ta.get_queue_length_summary(ranks=[0])
t3 = time.perf_counter()

out = {"import_s": round(t1 - t0, 3), "load_s": round(t2 - t1, 3), "summary_s": round(t3 - t2, 3)}
try:
    df = summary.reset_index()
    df.columns = ["_".join(str(p) for p in c if str(p)) if isinstance(c, tuple) else str(c) for c in df.columns]
    out["queue_length_summary"] = json.loads(df.to_json(orient="records"))
except Exception as e:  # the summary's shape is informative only
    out["queue_length_summary_error"] = repr(e)
print(json.dumps(out))
