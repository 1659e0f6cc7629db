"""The per-rank summary a worker sends back: small, JSON-able, the same whatever engine ran it.

`rank_summary(trace)` carries the case record (`analysis/record.py`, launchtui-record/1, less its
per-iteration span lists) plus the report's launch totals, a bounded per-kernel table,
queue/backpressure counts, and the iterations' spans with the trace's clock, so the parent can set
the ranks' steps side by side (docs/definitions.md §R).
"""
from __future__ import annotations

import re

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
# Unix-epoch ns from 2000-01-01 to 2100-01-01: a trace time (plus its wall offset) outside this is on
# a clock of its own (relative to the capture or the process), not a wall clock the ranks share
EPOCH_MIN_NS, EPOCH_MAX_NS = 946_684_800 * 10**9, 4_102_444_800 * 10**9
_STEP_NUMBER = re.compile(r"^ProfilerStep#(\d+)$")


def _record(trace: Trace, record: dict | None = None) -> tuple[dict, dict | None]:
    """(the case record (`record`: build_record(trace), found elsewhere) without its per-iteration
    span lists and without the source and options (the row has the file), its iterations' spans);
    the spans go to `steps`, not the row."""
    record = build_record(trace) if record is None else record
    rec = {k: v for k, v in record.items() if k not in ("source", "options")}
    spans = None
    if rec.get("iterations"):
        spans = {k: rec["iterations"][k] for k in ("starts_ns", "ends_ns")}
        rec["iterations"] = {k: v for k, v in rec["iterations"].items() if k not in ("starts_ns", "ends_ns")}
    return rec, spans


def _clock(trace: Trace, first_ns: int | None) -> dict:
    """Whether the trace's times convert to Unix-epoch ns (definitions.md §R, step skew): Kineto's
    baseTimeNanoseconds or absolute epoch µs, Nsight's session UTC start; `why` when they do not."""
    src = trace.source
    kind = ("Nsight session UTC start" if src.format == "nsys-sqlite" else
            "Kineto baseTimeNanoseconds" if src.extra.get("clock") == "relative to baseTimeNanoseconds" else
            "Kineto absolute µs")
    off = src.wall_offset_ns
    if off is None:
        return {"wall": False, "kind": kind, "offset_ns": None, "why": "the trace holds no wall-clock origin"}
    if first_ns is not None and not EPOCH_MIN_NS <= first_ns + off < EPOCH_MAX_NS:
        return {"wall": False, "kind": kind, "offset_ns": off,
                "why": "its times are not Unix-epoch times (a clock relative to the capture or the process)"}
    return {"wall": True, "kind": kind, "offset_ns": int(off), "why": None}


def _step_numbers(trace: Trace, it: dict, starts: list[int]) -> list[int] | None:
    """The N of `ProfilerStep#N` for each iteration (the range that starts where it starts), or None
    when the iterations are not ProfilerSteps or one has no such range."""
    if it.get("source") != "ProfilerStep" or not starts:
        return None
    rg = trace.ranges
    number = {}
    for u in unique_sorted(rg.text).tolist():          # once per distinct range name
        m = _STEP_NUMBER.match(trace.strings[u])
        if m:
            number[u] = int(m.group(1))
    idx = np.flatnonzero(np.isin(rg.text, list(number)))
    idx = idx[np.lexsort((idx, rg.start[idx]))]
    s = rg.start[idx]
    want = np.asarray(starts, dtype=np.int64)
    pos = np.searchsorted(s, want)
    if not len(s) or (pos >= len(s)).any() or (s[np.minimum(pos, len(s) - 1)] != want).any():
        return None
    return [number[int(t)] for t in rg.text[idx[pos]].tolist()]


def _steps(trace: Trace, rec: dict, spans: dict | None) -> dict | None:
    """The iterations' [start, end) on the trace clock and their step numbers; None without marked
    steps (no iteration marks, a heuristic period, or an empty record)."""
    it = rec.get("iterations") or {}
    if spans is None or rec.get("empty") or it.get("source") in (None, "none") or it.get("heuristic"):
        return None
    return {"source": it["source"], "starts_ns": spans["starts_ns"], "ends_ns": spans["ends_ns"],
            "numbers": _step_numbers(trace, it, spans["starts_ns"])}


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


def rank_summary(trace: Trace, record: dict | None = None) -> dict:
    """Everything the combined view needs from one rank, and nothing proportional to its events.
    `record`: the rank's case record at the default options when already known (a stored one)."""
    tot = launch_totals(trace, WHOLE)
    rec, spans = _record(trace, record)
    steps = _steps(trace, rec, spans)
    return {
        "devices": sorted(int(d) for d in trace.device_ids()),
        "launches": tot["kernel_launches"],
        "launch_api_ms": tot["launch_api_ms"],
        "queues": _queues(trace),
        "kernels": _kernels(trace),
        "record": rec,
        "steps": steps,
        "clock": _clock(trace, steps["starts_ns"][0] if steps and steps["starts_ns"] else None),
    }
