"""Stand-in for the case record (analysis/record.py, issue 8) until it lands: the record keys a
diff reads, in the record's shape (primary device = the one with most launch calls; iterations
with their spans; per-iteration figures as {median, min, max}). Figures this module cannot decide
(exposed overhead, share, Amdahl bound, queue class, observed limit) are None: the diff shows n/a.
"""
from __future__ import annotations

import re

import numpy as np

from launchtui.analysis import nvtx
from launchtui.analysis.queue import queue_summary
from launchtui.analysis.select import Selection
from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, RANGE_PUSHPOP, Trace

_STEP = re.compile(r"^ProfilerStep#\d+$")


def launch_calls(trace: Trace, device: int) -> np.ndarray:
    """Launch-kind API calls that launched an op on `device`, in start order."""
    ops, api = trace.ops, trace.api
    a = np.unique(ops.api[(ops.device == device) & (ops.api >= 0)])
    a = a[np.isin(api.kind[a], (API_LAUNCH, API_GRAPH_LAUNCH))]
    return a[np.argsort(api.start[a], kind="stable")]


def _on_one_thread(trace: Trace, idx: np.ndarray) -> np.ndarray:
    """The matching push/pop ranges of the thread holding most of them, outermost only."""
    rg = trace.ranges
    idx = idx[rg.kind[idx] == RANGE_PUSHPOP]
    if not len(idx):
        return idx
    th, cnt = np.unique(rg.thread[idx], return_counts=True)
    idx = idx[rg.thread[idx] == th[np.argmax(cnt)]]
    idx = idx[np.lexsort((-rg.end[idx], rg.start[idx]))]
    keep = np.ones(len(idx), bool)
    keep[1:] = rg.start[idx][1:] >= np.maximum.accumulate(rg.end[idx])[:-1]
    return idx[keep]


def iterations(trace: Trace, iter_name: str | None, window) -> tuple[str, np.ndarray, np.ndarray]:
    """(source, starts, ends): ranges containing `iter_name`, else ProfilerStep#N, else the window."""
    rg = trace.ranges
    if iter_name:
        hits = _on_one_thread(trace, nvtx.search(trace, iter_name))
        if len(hits):
            return "named range", rg.start[hits], rg.end[hits]
    if len(rg):
        ids = [u for u in np.unique(rg.text).tolist() if _STEP.match(trace.strings[u])]
        hits = _on_one_thread(trace, np.nonzero(np.isin(rg.text, ids))[0]) if ids else []
        if len(hits):
            return "ProfilerStep", rg.start[hits], rg.end[hits]
    return "none", np.array([window[0]], np.int64), np.array([window[1]], np.int64)


def _stats(x: np.ndarray, scale: float = 1.0) -> dict:
    return {"median": float(np.median(x)) / scale, "min": float(x.min()) / scale, "max": float(x.max()) / scale}


def provisional_record(trace: Trace, iter_name: str | None = None) -> dict:
    ops, api = trace.ops, trace.api
    calls = {d: launch_calls(trace, d) for d in trace.device_ids()}
    devices = sorted((d for d in calls if len(calls[d])), key=lambda d: (-len(calls[d]), d))
    if not devices:
        return {"schema": "launchtui-record/1", "provisional": True, "empty": "no launched GPU ops",
                "iterations": None, "per_iteration": None, "streams": []}
    dev = devices[0]
    c = calls[dev]
    on = ops.device == dev
    window = (min(int(ops.start[on].min()), int(api.start[c].min())), int(ops.end[on].max()))
    source, starts, ends = iterations(trace, iter_name, window)
    cs, cum = api.start[c], np.concatenate([[0], np.cumsum(api.end[c] - api.start[c])])
    a, b = np.searchsorted(cs, starts), np.searchsorted(cs, ends)
    dur = ends - starts
    queues = queue_summary(trace, Selection(int(starts.min()), int(ends.max()), tuple(devices), None, "iterations"))
    return {
        "schema": "launchtui-record/1", "provisional": True, "device_id": dev, "devices": devices,
        "iterations": {"source": source, "count": len(starts), "median_ns": int(np.median(dur)),
                       "min_ns": int(dur.min()), "max_ns": int(dur.max()),
                       "starts_ns": starts.tolist(), "ends_ns": ends.tolist()},
        "per_iteration": {"launches": _stats(b - a), "launch_api_ms": _stats(cum[b] - cum[a], 1e6),
                          "exposed_overhead_ms": None, "iteration_ms": _stats(dur, 1e6)},
        "overhead_share": None,
        "amdahl_bound": None,
        "streams": [{"device_id": q.device_id, "stream_id": q.stream_id, "queue_class": None,
                     "max_depth": q.max_depth, "observed_limit": None} for q in queues],
    }
