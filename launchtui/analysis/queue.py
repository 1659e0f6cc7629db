"""Pending-launch depth per (device, stream) (definitions.md §5), as a step function.

pending = +1 at the start of the launch call of every matched GPU op (kernel, memcpy, memset; a
graph launch adds one entry per op), -1 when the op starts on the GPU. Equal timestamps apply -1
before +1. Ops without a launch row are left out (the depth is a lower bound near a sliced start).

Where blocking is judged (§6, §V3), the depth also counts the stream's pre-capture backlog: its ops
without a launch row that start before its first op with one. A stream runs its ops in launch
order, so only those can have been launched before the capture; each is pending from the window
start until it starts (`backlog_starts`, `backlog_pending`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from launchtui.analysis.config import CONFIG
from launchtui.analysis.index import trace_index
from launchtui.analysis.queue_series import StreamSeries
from launchtui.analysis.select import WHOLE, Selection, time_window
from launchtui.trace.model import Trace
from launchtui.trace.sorted_search import search_sorted

DEFAULT_THRESHOLDS = CONFIG.thresholds
__all__ = ["StreamSeries", "stream_series", "depth_before_launch", "queue_summary", "QueueStats",
           "DEFAULT_THRESHOLDS", "backlog_starts", "backlog_pending", "time_at_or_above_with_backlog"]


def stream_series(trace: Trace) -> list[StreamSeries]:
    """Depth series for every stream of the whole trace (from the trace's index)."""
    return list(trace_index(trace).queue_series)


def depth_before_launch(trace: Trace) -> np.ndarray:
    """Per GPU op: pending ops on its stream just before its launch call started (-1 unmatched)."""
    return trace_index(trace).depth_before_launch


def backlog_starts(trace: Trace, on: np.ndarray) -> np.ndarray:
    """The stream's pre-capture backlog (§5): the starts, sorted, of its ops without a launch row
    that start before its first op with one. `on`: the stream's ops in start order."""
    called = trace.ops.api[on]
    if not len(on) or called[0] >= 0:
        return np.zeros(0, np.int64)
    matched = np.flatnonzero(called >= 0)
    if not len(matched):
        return trace.ops.start[on]
    head = trace.ops.start[on[:matched[0]]]
    return head[head < trace.ops.start[on[matched[0]]]]    # strictly before: any order of equal starts


def stream_ops(trace: Trace, device: int, stream: int) -> np.ndarray:
    """The stream's ops in start order (a mask: for the few streams asked about one at a time)."""
    ops = trace.ops
    m = ops.device == device
    m &= ops.stream == stream
    return np.flatnonzero(m)


def backlog_pending(backlog: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Per time: the backlog's ops still pending (not yet started; one starting at that time no
    longer is, as -1 applies before +1 in §5)."""
    pending = search_sorted(backlog, times, side="right")
    return np.subtract(len(backlog), pending, out=pending)


STEP_BLOCK = 1 << 20   # steps of a series measured per block: bounded temporaries, not n-long ones


def _time_where(t: np.ndarray, v: np.ndarray, x: int, lo: int, hi: int) -> int:
    """ns inside [lo, hi] of the steps j < len(t) - 1 (value v[j] on [t[j], t[j+1])) with v >= x.
    Each step clipped to [lo, hi] (a step outside it lasts 0), in blocks of STEP_BLOCK steps."""
    i0 = max(int(np.searchsorted(t, lo, side="right")) - 1, 0)
    i1 = min(int(np.searchsorted(t, hi, side="left")), len(t) - 1)
    total = 0
    for a in range(i0, i1, STEP_BLOCK):   # one iteration per block
        b = min(a + STEP_BLOCK, i1)
        dur = np.diff(np.clip(t[a:b + 1], lo, hi))
        total += int(np.sum(dur, where=v[a:b] >= x))
    return total


def time_at_or_above_with_backlog(s: StreamSeries, backlog: np.ndarray, x: int, lo: int | None = None,
                                  hi: int | None = None) -> int:
    """ns inside [lo, hi) (default: the series' span) during which the pending depth plus the
    backlog still pending is >= x: the time a stream spends at its blocking depth (§V3)."""
    if not len(s.t):
        return 0
    t, v = s.t, s.v
    i = 0
    if len(backlog):
        # the backlog has started by its last start: only the series before it (index < i) is
        # merged with it; the rest is read in place, the merged head's last step ending at t[i]
        i = int(np.searchsorted(t, backlog[-1], side="right"))
        head = np.concatenate([t[:i], backlog])
        head.sort(kind="stable")          # two sorted runs: merged in one pass
        head = head[np.concatenate([[True], head[1:] != head[:-1]])]
        v_head = s.value_at(head).astype(np.int64) + backlog_pending(backlog, head)
        first, last = int(head[0]), int(t[-1] if i < len(t) else head[-1])
    else:
        first, last = int(t[0]), int(t[-1])
    lo_t = first if lo is None else max(first, lo)
    hi_t = last if hi is None else min(last, hi)
    if hi_t <= lo_t:
        return 0
    total = _time_where(t[i:], v[i:], x, lo_t, hi_t)
    if len(backlog):
        total += _time_where(np.concatenate([head, t[i:i + 1]]), v_head, x, lo_t, hi_t)
    return total


@dataclass
class QueueStats:
    device_id: int
    stream_id: int
    max_depth: int
    mean_depth: float                  # time-weighted over the span
    point_mean_depth: float            # HTA-style, per change point
    span_ns: int
    time_at_or_above_ns: dict          # threshold -> ns
    max_depth_graph_as_one: int
    graph_ops: int

    def to_json(self) -> dict:
        return {"device_id": self.device_id, "stream_id": self.stream_id, "max_depth": self.max_depth,
                "mean_depth": round(self.mean_depth, 4), "point_mean_depth": round(self.point_mean_depth, 4),
                "span_ns": self.span_ns,
                "time_at_or_above_ns": {str(k): int(v) for k, v in self.time_at_or_above_ns.items()},
                "max_depth_graph_as_one": self.max_depth_graph_as_one, "graph_ops": self.graph_ops}


def _step_sums(t: np.ndarray, v: np.ndarray, i0: int, i1: int, lo: int, hi: int, thresholds):
    """Over the steps i0..i1-1 clipped to [lo, hi]: (the sum of value x ns, the highest value or 0,
    {threshold: ns at or above it}), a block of STEP_BLOCK steps at a time. Integer sums: exact,
    whatever the blocks (the float sum they replace was exact below 2^53)."""
    weighted, top, above = 0, 0, dict.fromkeys(thresholds, 0)
    for a in range(i0, i1, STEP_BLOCK):   # one iteration per block
        b = min(a + STEP_BLOCK, i1)
        dur = np.diff(np.clip(t[a:b + 1], lo, hi))
        vv = v[a:b]
        weighted += int(np.multiply(vv, dur, dtype=np.int64).sum())
        top = max(top, int(vv.max()))
        for th in above:   # each distinct threshold once (a list may repeat one)
            above[th] += int(np.sum(dur, where=vv >= th))
    return weighted, top, above


def _stats(s: StreamSeries, lo: int | None, hi: int | None, thresholds) -> QueueStats | None:
    t, v = s.t, s.v
    if not len(t):
        return None
    lo_t = t[0] if lo is None else max(int(t[0]), lo)
    hi_t = t[-1] if hi is None else min(int(t[-1]), hi)
    whole = lo is None and hi is None
    if hi_t < lo_t:
        return None
    # steps clipped to [lo_t, hi_t]: value v[i] holds on [t[i], t[i+1])
    i0 = max(np.searchsorted(t, lo_t, side="right") - 1, 0)
    i1 = int(np.searchsorted(t, hi_t, side="left"))
    if i1 > i0:
        weighted, top, above = _step_sums(t, v, i0, i1, lo_t, hi_t, thresholds)
    else:   # one step holds the whole window
        d, x = int(hi_t - lo_t), int(v[i0])
        weighted, top, above = x * d, max(x, 0), {th: d if x >= th else 0 for th in thresholds}
    span = int(hi_t - lo_t)
    mean = weighted / span if span > 0 else float(top)
    inside = v[np.searchsorted(t, lo_t, side="left"):np.searchsorted(t, hi_t, side="right")]
    mx = int(max(top, inside.max(initial=0)))
    return QueueStats(device_id=s.device, stream_id=s.stream, max_depth=mx, mean_depth=mean,
                      point_mean_depth=s.point_mean if whole else float(inside.mean()) if len(inside) else 0.0,
                      span_ns=span, time_at_or_above_ns=above,
                      max_depth_graph_as_one=s.max_graph_as_one, graph_ops=s.graph_ops)


def selection_bounds(trace: Trace, sel: Selection = WHOLE) -> tuple[int | None, int | None]:
    """The selection's time bounds for the queue statistics (None: unbounded on that side)."""
    if sel.ranges is not None:
        w = time_window(sel, trace)
        return w if w else (None, None)
    return sel.t0, sel.t1


def queue_summary(trace: Trace, sel: Selection = WHOLE, thresholds=DEFAULT_THRESHOLDS) -> list[QueueStats]:
    """Per-stream depth statistics, restricted to the selection's window and devices."""
    out = []
    lo, hi = selection_bounds(trace, sel)
    for s in stream_series(trace):
        if sel.devices is not None and s.device not in sel.devices:
            continue
        st = _stats(s, lo, hi, thresholds)
        if st is not None:
            out.append(st)
    return out
