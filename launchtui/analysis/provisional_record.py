"""Stand-in for the case record (analysis/record.py, issue 8) until it lands: the iteration spans
and the record keys a diff reads, with the figures this module cannot decide (exposed overhead,
share, Amdahl bound, queue class, observed limit) left as None, which the diff shows as "n/a".
"""
from __future__ import annotations

import re

import numpy as np

from launchtui.analysis import nvtx
from launchtui.analysis.iteration_tables import in_spans, merge_spans
from launchtui.analysis.queue import queue_summary
from launchtui.analysis.select import Selection
from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, Trace

_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def iterations(trace: Trace, iter_name: str | None = None):
    """(source, spans (n, 2), defining range indices): ProfilerStep#N ranges (one span per N, the
    union over threads), else ranges containing `iter_name`, else the whole window."""
    rg = trace.ranges
    if iter_name:
        hits = nvtx.search(trace, iter_name)
        if len(hits):
            return f"NVTX range '{iter_name}'", np.stack([rg.start[hits], rg.end[hits]], 1), hits
    if len(rg):
        texts = np.unique(rg.text)
        step_no = {int(t): _STEP.match(trace.strings[int(t)]) for t in texts.tolist()}
        step_no = {t: int(mm.group(1)) for t, mm in step_no.items() if mm}
        if step_no:
            hits = np.nonzero(np.isin(rg.text, list(step_no)))[0]
            nums = np.array([step_no[int(t)] for t in rg.text[hits]])
            spans = [[int(rg.start[hits[nums == n]].min()), int(rg.end[hits[nums == n]].max())]
                     for n in sorted(set(nums.tolist()))]
            return "ProfilerStep#N", np.asarray(spans, np.int64), hits
    w = trace.extent()
    return "whole window", np.asarray([w] if w else [], np.int64).reshape(-1, 2), np.zeros(0, np.int64)


def provisional_record(trace: Trace, iter_name: str | None = None) -> dict:
    source, spans, _ = iterations(trace, iter_name)
    n = max(len(spans), 1)
    merged = merge_spans(spans)
    api = trace.api
    launch = ((api.kind == API_LAUNCH) | (api.kind == API_GRAPH_LAUNCH)) & in_spans(api.start, merged)
    dur = spans[:, 1] - spans[:, 0] if len(spans) else np.zeros(1, np.int64)
    lo, hi = (int(merged[0, 0]), int(merged[-1, 1])) if len(merged) else (None, None)
    queues = queue_summary(trace, Selection(lo, hi, None, None, "iterations"))
    return {
        "schema": "launchtui-record/1",
        "provisional": True,
        "iterations": {"source": source, "count": len(spans), "median_ns": int(np.median(dur)),
                       "min_ns": int(dur.min()), "max_ns": int(dur.max())},
        "per_iteration": {
            "launches": float(launch.sum()) / n,
            "launch_api_ms": float((api.end[launch] - api.start[launch]).sum()) / n / 1e6,
            "exposed_overhead_ms": None,
            "iteration_ms": float(np.median(dur)) / 1e6,
        },
        "overhead_share": None,
        "amdahl_bound": None,
        "streams": [{"device_id": q.device_id, "stream_id": q.stream_id, "queue_class": None,
                     "max_depth": q.max_depth, "observed_limit": None} for q in queues],
    }
