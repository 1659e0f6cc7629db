"""Pending-launch depth per (device, stream) (definitions.md §5), as a step function.

pending = +1 at the start of the launch call of every matched GPU op (kernel, memcpy, memset; a
graph launch adds one entry per op), -1 when the op starts on the GPU. Equal timestamps apply -1
before +1. Ops without a launch row are left out (the depth is a lower bound near a sliced start).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from launchtui.analysis.config import CONFIG
from launchtui.analysis.select import WHOLE, Selection, time_window
from launchtui.trace.grouping import dense_groups
from launchtui.trace.model import API_GRAPH_LAUNCH, Trace

DEFAULT_THRESHOLDS = CONFIG.thresholds


@dataclass
class StreamSeries:
    device: int
    stream: int
    t: np.ndarray            # change times (ns), strictly increasing
    v: np.ndarray            # depth from t[i] until t[i+1]
    point_mean: float        # HTA-style mean over every +1/-1 change point (not time-weighted)
    points: int
    max_graph_as_one: int    # max depth when a whole graph replay counts as one entry
    graph_ops: int           # matched ops launched by graph launches

    def value_at(self, times: np.ndarray) -> np.ndarray:
        """Depth in effect at each time (after all changes at that time)."""
        pos = np.searchsorted(self.t, times, side="right") - 1
        return np.where(pos >= 0, self.v[np.maximum(pos, 0)], 0)


def _merge_depth(plus: np.ndarray, minus: np.ndarray):
    """Depth series of one stream from its +1 times (launch calls) and -1 times (op starts), both
    sorted. Equal times apply -1 before +1. Returns (times, depth after each event, depth after
    each +1 event) in merged order. The stable sort of two sorted runs is a linear merge."""
    nb = len(minus)
    t = np.concatenate([minus, plus])
    d = np.concatenate([np.full(nb, -1, np.int64), np.ones(len(plus), np.int64)])
    order = np.argsort(t, kind="stable")     # ties keep the -1 run (first) before the +1 run
    depth = np.cumsum(d[order])
    where = np.empty(len(t), np.int64)
    where[order] = np.arange(len(t))
    return t[order], depth, depth[where[nb:]]


def _sorted_with_order(x: np.ndarray):
    """(sorted x, permutation or None when x was already sorted)."""
    if len(x) < 2 or (x[1:] >= x[:-1]).all():
        return x, None
    o = np.argsort(x, kind="stable")
    return x[o], o


def stream_series(trace: Trace) -> list[StreamSeries]:
    """Depth series for every stream of the whole trace (memoised on the trace)."""
    memo = trace.derived.get("queue_series")
    if memo is not None:
        return memo
    ops, api = trace.ops, trace.api
    idx = np.nonzero(ops.api >= 0)[0]
    out: list[StreamSeries] = []
    dbl = np.full(len(ops), -1, np.int64)
    if len(idx):
        devs, di = dense_groups(ops.device[idx])
        strs, si = dense_groups(ops.stream[idx])
        skeys, grp = dense_groups(di * len(strs) + si)  # (device, stream) pairs present
        by_stream = np.argsort(grp.astype(np.uint16) if len(skeys) < 65536 else grp, kind="stable")
        bounds = np.searchsorted(grp[by_stream], np.arange(len(skeys) + 1))
        for g, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):  # one iteration per stream
            sel = idx[by_stream[lo:hi]]             # this stream's matched ops, in start order
            a = ops.api[sel]
            minus = ops.start[sel]
            # FIFO: a stream runs ops in launch order, so launch starts are almost always sorted
            plus, perm = _sorted_with_order(api.start[a])
            t, dep, after_plus = _merge_depth(plus, minus)
            before = after_plus - 1
            if perm is None:
                dbl[sel] = before
            else:
                dbl[sel[perm]] = before
            is_graph = api.kind[a] == API_GRAPH_LAUNCH
            last = np.ones(len(t), bool)
            last[:-1] = t[1:] != t[:-1]          # the value at t is the one after all changes at t
            t_last, v_last = t[last], dep[last]
            gmax = int(v_last.max())
            if is_graph.any():
                # Counting each replay as one entry (retired when its first op starts) removes the
                # replay's other ops: each was +1 from the launch call until its own start.
                gi = np.nonzero(is_graph)[0]
                first = np.unique(a[gi], return_index=True)[1]
                rest = np.delete(gi, first)
                on = np.searchsorted(np.sort(api.start[a[rest]]), t_last, side="right")
                off = np.searchsorted(np.sort(minus[rest]), t_last, side="right")
                gmax = int((v_last - (on - off)).max())
            d_i, s_i = divmod(int(skeys[g]), len(strs))
            out.append(StreamSeries(
                device=int(devs[d_i]), stream=int(strs[s_i]), t=t_last, v=v_last.astype(np.int32),
                point_mean=float(dep.mean()), points=len(t), max_graph_as_one=gmax,
                graph_ops=int(is_graph.sum())))
    trace.derived["queue_series"] = out
    trace.derived["depth_before_launch"] = dbl  # per op: pending on its stream before its launch call
    return out


def depth_before_launch(trace: Trace) -> np.ndarray:
    """Per GPU op: pending ops on its stream just before its launch call started (-1 unmatched)."""
    stream_series(trace)
    if "depth_before_launch" not in trace.derived:  # series came from elsewhere: rebuild both
        trace.derived.pop("queue_series", None)
        stream_series(trace)
    return trace.derived["depth_before_launch"]


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


def _stats(s: StreamSeries, lo: int | None, hi: int | None, thresholds) -> QueueStats | None:
    t, v = s.t, s.v
    if not len(t):
        return None
    a = t[0] if lo is None else max(int(t[0]), lo)
    b = t[-1] if hi is None else min(int(t[-1]), hi)
    whole = lo is None and hi is None
    if b < a:
        return None
    # steps clipped to [a, b]: value v[i] holds on [t[i], t[i+1])
    i0 = max(np.searchsorted(t, a, side="right") - 1, 0)
    i1 = np.searchsorted(t, b, side="left")
    tt = np.concatenate([[a], t[i0 + 1:i1], [b]])
    vv = v[i0:i1] if i1 > i0 else v[i0:i0 + 1]
    dur = np.diff(tt)
    vv = vv[:len(dur)]
    span = int(b - a)
    mean = float((vv.astype(np.float64) * dur).sum() / span) if span > 0 else float(vv.max(initial=0))
    inside = v[np.searchsorted(t, a, side="left"):np.searchsorted(t, b, side="right")]
    mx = int(max(vv.max(initial=0), inside.max(initial=0)))
    return QueueStats(device_id=s.device, stream_id=s.stream, max_depth=mx, mean_depth=mean,
                      point_mean_depth=s.point_mean if whole else float(inside.mean()) if len(inside) else 0.0,
                      span_ns=span, time_at_or_above_ns={th: int(dur[vv >= th].sum()) for th in thresholds},
                      max_depth_graph_as_one=s.max_graph_as_one, graph_ops=s.graph_ops)


def queue_summary(trace: Trace, sel: Selection = WHOLE, thresholds=DEFAULT_THRESHOLDS) -> list[QueueStats]:
    """Per-stream depth statistics, restricted to the selection's window and devices."""
    out = []
    lo = sel.t0
    hi = sel.t1
    if sel.ranges is not None:
        w = time_window(sel, trace)
        lo, hi = (w if w else (None, None))
    for s in stream_series(trace):
        if sel.devices is not None and s.device not in sel.devices:
            continue
        st = _stats(s, lo, hi, thresholds)
        if st is not None:
            out.append(st)
    return out


def bin_max(s: StreamSeries, edges: np.ndarray) -> np.ndarray:
    """Exact maximum depth within each bin [edges[i], edges[i+1]): the value in effect at the bin
    start, or any value set inside it. O(bins · log changes), independent of the trace size."""
    t, v = s.t, s.v
    nb = len(edges) - 1
    if nb <= 0:
        return np.zeros(0, np.int32)
    at_start = s.value_at(edges[:-1])
    if not len(v):
        return at_start.astype(np.int32)
    lo = np.searchsorted(t, edges[:-1], side="left")
    hi = np.searchsorted(t, edges[1:], side="left")
    # reduceat over interleaved [lo_i, hi_i) pairs; a sentinel keeps index len(v) valid
    vv = np.append(v, 0)
    starts = np.empty(2 * nb, np.int64)
    starts[0::2] = lo
    starts[1::2] = hi
    inner = np.maximum.reduceat(vv, starts)[0::2]
    inner = np.where(hi > lo, inner, 0)
    return np.maximum(at_start, inner).astype(np.int32)
