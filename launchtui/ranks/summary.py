"""The per-rank summary a worker sends back: small, JSON-able, the same whatever engine ran it.

`rank_summary(trace)` is the seam to the case record (issue 8): until `analysis/record.py` exists it
is built from the report's own analyses (launch totals, per-kernel table, queue summary,
backpressure counts) plus iterations from ProfilerStep ranges (docs/definitions.md §Ranks).
"""
from __future__ import annotations

import re

import numpy as np

from launchtui.analysis.backpressure import backpressure
from launchtui.analysis.launches import kernel_groups, launched_kernels
from launchtui.analysis.queue import DEFAULT_THRESHOLDS, queue_summary
from launchtui.analysis.report import launch_totals
from launchtui.analysis.select import WHOLE
from launchtui.trace.model import Trace

# Kernels kept per rank (by total launch-API time): bounds the summary, and so the parent's memory,
# whatever the trace's size; the cross-rank table needs only the kernels that matter somewhere.
KERNELS_PER_RANK = 50
_STEP = re.compile(r"ProfilerStep#(\d+)$")


def iteration_spans(trace: Trace) -> np.ndarray:
    """(n, 2) int64 [start, end) per ProfilerStep#N, over all threads that mark it, in time order."""
    rg = trace.ranges
    if not len(rg):
        return np.zeros((0, 2), np.int64)
    texts = np.unique(rg.text)
    step_ids = [int(t) for t in texts.tolist() if _STEP.match(trace.strings[int(t)])]
    if not step_ids:
        return np.zeros((0, 2), np.int64)
    m = np.isin(rg.text, step_ids)
    tx, st, en = rg.text[m], rg.start[m], rg.end[m]
    u, inv = np.unique(tx, return_inverse=True)
    inv = inv.reshape(-1)
    lo = np.full(len(u), np.iinfo(np.int64).max)
    hi = np.full(len(u), np.iinfo(np.int64).min)
    np.minimum.at(lo, inv, st)
    np.maximum.at(hi, inv, en)
    spans = np.stack([lo, hi], axis=1)
    return spans[np.argsort(lo, kind="stable")]


def _in_spans(t: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """Mask of times inside any span (spans sorted by start; overlaps tolerated via running max end)."""
    if not len(spans) or not len(t):
        return np.zeros(len(t), bool)
    i = np.searchsorted(spans[:, 0], t, side="right") - 1
    run_end = np.maximum.accumulate(spans[:, 1])
    return (i >= 0) & (t < run_end[np.maximum(i, 0)])


def _iterations(trace: Trace) -> dict:
    spans = iteration_spans(trace)
    n = len(spans)
    if not n:
        return {"count": 0, "median_ms": None, "launches_per_iter": None, "launch_api_ms_per_iter": None}
    k = launched_kernels(trace)
    a = trace.ops.api[k]
    s, e = trace.api.start[a], trace.api.end[a]
    inside = _in_spans(s, spans)
    dur = spans[:, 1] - spans[:, 0]
    return {
        "count": n,
        "median_ms": round(float(np.median(dur)) / 1e6, 3),
        "launches_per_iter": round(int(inside.sum()) / n, 1),
        "launch_api_ms_per_iter": round(float((e[inside] - s[inside]).sum()) / n / 1e6, 3),
    }


def _kernels(trace: Trace) -> list[dict]:
    """Per kernel (short name, all devices together): launches and mean launch-API / kernel time."""
    gr = kernel_groups(trace)
    if not len(gr):
        return []
    names = gr.name
    u, inv = np.unique(names, return_inverse=True)
    inv = inv.reshape(-1)
    count = np.bincount(inv, weights=gr.count, minlength=len(u))
    api = np.bincount(inv, weights=gr.sum_api, minlength=len(u))
    kern = np.bincount(inv, weights=gr.sum_kernel, minlength=len(u))
    keep = np.lexsort((u, -api))[:KERNELS_PER_RANK]
    return [{"kernel_name": trace.strings[int(u[i])], "launches": int(count[i]),
             "total_api_ms": round(float(api[i]) / 1e6, 3),
             "avg_api_us": round(float(api[i]) / count[i] / 1e3, 2),
             "avg_kernel_us": round(float(kern[i]) / count[i] / 1e3, 3)} for i in keep.tolist()]


def _queues(trace: Trace) -> dict:
    qs = queue_summary(trace, thresholds=DEFAULT_THRESHOLDS)
    bp = backpressure(trace)
    return {
        "streams": len(qs),
        "max_depth": max((q.max_depth for q in qs), default=0),
        "time_at_or_above_ms": {str(th): round(sum(q.time_at_or_above_ns[th] for q in qs) / 1e6, 3)
                                for th in DEFAULT_THRESHOLDS},
        "episodes": len(bp["episodes"]),
        "spikes": len(bp["spikes"]),
        "command_buffer_full_events": bp["command_buffer_full_events"],
    }


def rank_summary(trace: Trace) -> dict:
    """Everything the combined view needs from one rank, and nothing proportional to its events."""
    tot = launch_totals(trace, WHOLE)
    return {
        "devices": sorted(int(d) for d in trace.device_ids()),
        "launches": tot["kernel_launches"],
        "launch_api_ms": tot["launch_api_ms"],
        "iterations": _iterations(trace),
        "queues": _queues(trace),
        "kernels": _kernels(trace),
        "record": None,  # the case record (launchtui-record/1) once analysis/record.py lands
    }
