"""The per-rank summary a worker sends back: small, JSON-able, the same whatever engine ran it.

`rank_summary(trace)` carries the case record (`analysis/record.py`, launchtui-record/1, less its
per-iteration span lists) plus the report's launch totals, a bounded per-kernel table and
queue/backpressure counts (docs/definitions.md §R).
"""
from __future__ import annotations

import numpy as np

from launchtui.analysis.backpressure import backpressure
from launchtui.analysis.launches import kernel_groups
from launchtui.analysis.record import build_record
from launchtui.analysis.queue import DEFAULT_THRESHOLDS, queue_summary
from launchtui.analysis.report import launch_totals
from launchtui.analysis.select import WHOLE
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.order import string_ranks
from launchtui.trace.model import Trace

# Kernels kept per rank (by total launch-API time): bounds the summary, and so the parent's memory,
# whatever the trace's size; the cross-rank table needs only the kernels that matter somewhere.
KERNELS_PER_RANK = 50


def _record(trace: Trace) -> dict:
    """The case record without its per-iteration span lists (they grow with the run's length) and
    without the source and options (the row has the file)."""
    rec = {k: v for k, v in build_record(trace).items() if k not in ("source", "options")}
    if rec.get("iterations"):
        rec["iterations"] = {k: v for k, v in rec["iterations"].items() if k not in ("starts_ns", "ends_ns")}
    return rec


def _kernels(trace: Trace) -> list[dict]:
    """Per kernel (short name, all devices together): launches and mean launch-API / kernel time."""
    gr = kernel_groups(trace)
    if not len(gr):
        return []
    names = gr.name
    u, inv = unique_sorted(names, return_inverse=True)
    inv = inv.reshape(-1)
    count = np.bincount(inv, weights=gr.count, minlength=len(u))
    api = np.bincount(inv, weights=gr.sum_api, minlength=len(u))
    kern = np.bincount(inv, weights=gr.sum_kernel, minlength=len(u))
    keep = np.lexsort((string_ranks(trace.strings, u), -api))[:KERNELS_PER_RANK]   # ties: by name
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
        "queues": _queues(trace),
        "kernels": _kernels(trace),
        "record": _record(trace),
    }
