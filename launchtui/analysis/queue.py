"""Pending-launch depth per (device, stream) (definitions.md §5), as a step function.

pending = +1 at the start of the launch call of every matched GPU op (kernel, memcpy, memset; a
graph launch adds one entry per op), -1 when the op starts on the GPU. Equal timestamps apply -1
before +1. Ops without a launch row are left out (the depth is a lower bound near a sliced start).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from launchtui.analysis.select import WHOLE, Selection, time_window
from launchtui.trace.model import API_GRAPH_LAUNCH, Trace

DEFAULT_THRESHOLDS = (1000, 1020)


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
    depth_before: np.ndarray = field(repr=False, default=None)  # depth just before each launch (per op)

    def value_at(self, times: np.ndarray) -> np.ndarray:
        """Depth in effect at each time (after all changes at that time)."""
        pos = np.searchsorted(self.t, times, side="right") - 1
        return np.where(pos >= 0, self.v[np.maximum(pos, 0)], 0)


def _step_series(key: np.ndarray, time: np.ndarray, delta: np.ndarray):
    """Grouped cumulative depth. Returns (order, depth after each event) with events sorted by
    (key, time, delta) so that -1 precedes +1 at equal times."""
    order = np.lexsort((delta, time, key))
    k = key[order]
    d = delta[order].astype(np.int64)
    c = np.cumsum(d)
    starts = np.ones(len(k), bool)
    starts[1:] = k[1:] != k[:-1]
    base = np.maximum.accumulate(np.where(starts, np.arange(len(k)), 0))
    depth = c - (c[base] - d[base])
    return order, depth


def stream_series(trace: Trace) -> list[StreamSeries]:
    """Depth series for every stream of the whole trace (memoised on the trace)."""
    memo = trace.derived.get("queue_series")
    if memo is not None:
        return memo
    ops, api = trace.ops, trace.api
    m = ops.api >= 0
    idx = np.nonzero(m)[0]
    out: list[StreamSeries] = []
    if len(idx):
        skey_all = ops.device.astype(np.int64) * (1 << 40) + ops.stream  # device, stream -> one key
        skey = skey_all[idx]
        a = ops.api[idx]
        n = len(idx)
        key = np.concatenate([skey, skey])
        time = np.concatenate([api.start[a], ops.start[idx]])
        delta = np.concatenate([np.ones(n, np.int8), -np.ones(n, np.int8)])
        order, depth = _step_series(key, time, delta)
        k_sorted, t_sorted = key[order], time[order]
        # depth just before each +1 (launch) = depth after it - 1
        before = np.empty(2 * n, np.int64)
        before[order] = depth - delta[order]
        depth_before_launch = before[:n]

        # graph replays as one entry: keep only the first op of each (graph launch, stream)
        is_graph = api.kind[a] == API_GRAPH_LAUNCH
        g_keep = np.ones(n, bool)
        if is_graph.any():
            gi = np.nonzero(is_graph)[0]
            gk = a[gi] * (1 << 20) + (skey[gi] % (1 << 20))
            o = np.lexsort((ops.start[idx][gi], gk))
            first = np.ones(len(o), bool)
            first[1:] = gk[o][1:] != gk[o][:-1]
            g_keep[gi] = False
            g_keep[gi[o[first]]] = True
        gidx = np.nonzero(g_keep)[0]
        gkey = np.concatenate([skey[gidx], skey[gidx]])
        gtime = np.concatenate([api.start[a[gidx]], ops.start[idx[gidx]]])
        gdelta = np.concatenate([np.ones(len(gidx), np.int8), -np.ones(len(gidx), np.int8)])
        gorder, gdepth = _step_series(gkey, gtime, gdelta)
        gk_sorted = gkey[gorder]

        bounds = np.concatenate([[0], np.nonzero(k_sorted[1:] != k_sorted[:-1])[0] + 1, [len(k_sorted)]])
        for lo, hi in zip(bounds[:-1], bounds[1:]):  # one iteration per stream
            kk = int(k_sorted[lo])
            t = t_sorted[lo:hi]
            dep = depth[lo:hi]
            last = np.ones(hi - lo, bool)
            last[:-1] = t[1:] != t[:-1]          # the value at t is the one after all changes at t
            glo, ghi = np.searchsorted(gk_sorted, [kk, kk + 1])
            sel_ops = skey == kk
            out.append(StreamSeries(
                device=int(kk >> 40), stream=int(kk & ((1 << 40) - 1)),
                t=t[last], v=dep[last].astype(np.int32),
                point_mean=float(dep.mean()), points=int(hi - lo),
                max_graph_as_one=int(gdepth[glo:ghi].max()) if ghi > glo else 0,
                graph_ops=int((is_graph & sel_ops).sum()),
                depth_before=depth_before_launch))
    trace.derived["queue_series"] = out
    # per matched op: depth on its stream just before its launch call (for spike analysis, details)
    dbl = np.full(len(ops), -1, np.int64)
    if len(idx):
        dbl[idx] = depth_before_launch
    trace.derived["depth_before_launch"] = dbl
    for s in out:
        s.depth_before = None
    return out


def depth_before_launch(trace: Trace) -> np.ndarray:
    """Per GPU op: pending ops on its stream just before its launch call started (-1 unmatched)."""
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
