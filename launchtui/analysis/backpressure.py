"""Backpressure: when a stream's pending queue is (nearly) full, launch calls block (§6).

Two kinds of evidence, each carrying its span, stream, worst API time and NVTX range:
- episodes: intervals where a stream's pending depth is >= `threshold` (default 1000, "approaching");
  an episode reaching `full` (default 1020) is "saturated";
- spikes: launch calls longer than `spike_us` (100 µs) and `spike_factor` (10) x their thread's
  median launch time. Nsight >= 2025.5.2 "command buffer full" overhead rows mark direct evidence.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from launchtui.analysis import memo, nvtx
from launchtui.analysis.config import CONFIG
from launchtui.analysis.queue import depth_before_launch, stream_series
from launchtui.analysis.select import WHOLE, Selection, time_window
from launchtui.trace.arrays import in_sorted, median_of, nonzero_index, unique_sorted
from launchtui.trace.grouping import dense_groups
from launchtui.trace.model import API_LAUNCH, OVERHEAD_COMMAND_BUFFER_FULL, Trace
from launchtui.trace.nesting import FEW_THREADS


@dataclass(frozen=True)
class Options:
    threshold: int = CONFIG.queue_threshold
    full: int = CONFIG.queue_full
    spike_us: float = CONFIG.spike_us
    spike_factor: float = CONFIG.spike_factor
    merge_gap_us: float = CONFIG.merge_gap_us   # dips below the threshold shorter than this join two episodes


@dataclass
class Episode:
    kind: str              # "queue" | "spike"
    start: int
    end: int
    device: int
    stream: int
    max_depth: int
    worst_api_ns: int
    worst_api: int         # ApiCalls index, -1 when none
    range_idx: int         # innermost NVTX range at the worst call (or at the episode start), -1
    level: str = ""        # "saturated" | "approaching" | "graph-dominated" | "" for spikes
    launches: int = 0
    command_buffer_full: bool = False

    def to_json(self, trace: Trace) -> dict:
        d = {"kind": self.kind, "start_ns": self.start, "end_ns": self.end, "duration_ns": self.end - self.start,
             "device_id": self.device, "stream_id": self.stream, "max_depth": self.max_depth,
             "worst_api_us": round(self.worst_api_ns / 1e3, 1),
             "worst_api_name": trace.strings[int(trace.api.name[self.worst_api])] if self.worst_api >= 0 else None,
             "nvtx_range": nvtx.path_text(trace, self.range_idx) if self.range_idx >= 0 else None}
        if self.kind == "queue":
            d["level"] = self.level
            d["launches"] = self.launches
        else:
            d["command_buffer_full"] = self.command_buffer_full
        return d


def _stream_launches(trace: Trace, device: int, stream: int):
    """A stream's matched ops' launch calls, in call-start order: (starts, durations, api indices).
    Selected by a mask per stream: no per-op key arrays for the whole trace."""
    ops, api = trace.ops, trace.api
    mine = ops.api >= 0
    mine &= ops.device == device
    mine &= ops.stream == stream
    l_api = ops.api[mine]
    del mine
    l_start = api.start[l_api]
    l_dur = _durations(api, l_api)
    if len(l_start) > 1 and not (l_start[1:] >= l_start[:-1]).all():   # FIFO: almost always sorted
        o = np.argsort(l_start, kind="stable")
        l_start, l_dur, l_api = l_start[o], l_dur[o], l_api[o]
    return l_start, l_dur, l_api


def episodes(trace: Trace, sel: Selection = WHOLE, opt: Options = Options()) -> list[Episode]:
    """Queue episodes (pending >= threshold) overlapping the selection."""
    w = time_window(sel, trace) if (sel.t0 is not None or sel.t1 is not None or sel.ranges) else None
    api = trace.api
    out = []
    for s in stream_series(trace):
        if sel.devices is not None and s.device not in sel.devices:
            continue
        above = s.v >= opt.threshold
        if not above.any():
            continue
        padded = np.zeros(len(above) + 2, np.int8)   # int8 edges: no int64 array per step
        padded[1:-1] = above
        edge = np.diff(padded)
        del padded
        starts = np.nonzero(edge == 1)[0]
        stops = np.nonzero(edge == -1)[0]      # exclusive index of the first step below
        if len(starts) > 1:  # join episodes separated by short dips (queue hovering at the threshold)
            gap = s.t[starts[1:]] - s.t[np.minimum(stops[:-1], len(s.t) - 1)]
            keep = np.concatenate([[True], gap >= opt.merge_gap_us * 1e3])
            stops = np.concatenate([stops[np.nonzero(keep)[0][1:] - 1], stops[-1:]])
            starts = starts[keep]
        l_start, l_dur, l_api = _stream_launches(trace, s.device, s.stream)
        for a, b in zip(starts.tolist(), stops.tolist()):  # one iteration per episode
            t0 = int(s.t[a])
            t1 = int(s.t[b]) if b < len(s.t) else int(s.t[-1])
            if w is not None and (t1 < w[0] or t0 > w[1]):
                continue
            lo, hi = np.searchsorted(l_start, [t0, t1])
            worst = -1
            worst_ns = 0
            if hi > lo:
                j = lo + int(np.argmax(l_dur[lo:hi]))
                worst, worst_ns = int(l_api[j]), int(l_dur[j])
            mx = int(s.v[a:b].max())
            if worst >= 0:
                rng = int(nvtx.innermost_at(trace, api.thread[[worst]], api.start[[worst]])[0])
            else:
                rng = -1
            level = "saturated" if mx >= opt.full else "approaching"
            if level == "saturated" and s.graph_ops and s.max_graph_as_one < opt.full:
                level = "graph-dominated"  # graph replays do not take one slot per op (§6)
            out.append(Episode("queue", t0, t1, s.device, s.stream, mx, worst_ns, worst, rng, level,
                               int(hi - lo)))
    return out


CALL_BLOCK = 1 << 20   # API rows (or launch calls) read at a time: bounded temporaries


def _launch_calls(api):
    """Launch calls: (API indices, durations ns, thread ids), the indices and the durations in 32
    bits while they fit: all three live through the spike stage, one element per launch call
    (20M launches: bench/MISSED.md). Durations are exact either way (`_durations`)."""
    launch = nonzero_index(api.kind == API_LAUNCH)
    return launch, _durations(api, launch), api.thread[launch]


def _durations(api, rows: np.ndarray) -> np.ndarray:
    """end - start (ns) of the API `rows`, a block at a time: int32 while every value fits, else
    int64 (a launch call past 2.1 s is rare, but must not wrap)."""
    out = np.empty(len(rows), np.int32)
    for i in range(0, len(rows), CALL_BLOCK):
        r = rows[i:i + CALL_BLOCK].astype(np.intp, copy=False)   # two gathers: numpy's fast path
        d = api.end[r] - api.start[r]
        if out.dtype == np.int32 and (d.max() > np.iinfo(np.int32).max or d.min() < np.iinfo(np.int32).min):
            out = out.astype(np.int64)
        out[i:i + CALL_BLOCK] = d
    return out


def thread_launch_medians(trace: Trace, calls=None) -> np.ndarray:
    """Per thread id: the median duration (ns) of its launch calls, 0 for threads without any (§6).
    The spike rule's baseline; the timeline's spike cells use the same values. `calls`: the
    trace's `_launch_calls`, when the caller has them."""
    api = trace.api
    launch, dur, th = _launch_calls(api) if calls is None else calls
    med = np.zeros(int(api.thread.max()) + 1 if len(api) else 0, np.float64)
    if not len(launch):
        return med
    uth = _threads_seen(th) if th.min() >= 0 else None
    if uth is not None and len(uth) <= FEW_THREADS:   # each thread's durations by a mask (np.median partitions that copy)
        for t in uth.tolist():
            med[t] = median_of(dur if len(uth) == 1 else dur[th == t],
                               overwrite_input=len(uth) > 1)
        return med
    # group rows by thread (radix sort on few ids), then np.median (a partition, not a sort) per thread
    uth, tg = dense_groups(th)
    o = np.argsort(tg.astype(np.uint16) if len(uth) < 65536 else tg, kind="stable")
    bounds = np.searchsorted(tg[o], np.arange(len(uth) + 1))
    ds = dur[o]
    for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):  # one iteration per thread
        med[uth[i]] = median_of(ds[lo:hi], overwrite_input=True)
    return med


def _threads_seen(th: np.ndarray) -> np.ndarray:
    """The distinct thread ids of `th` (>= 0), ascending: marked in a table, not counted
    (np.bincount would copy the int32 ids to int64 first)."""
    seen = np.zeros(int(th.max()) + 1, bool)
    seen[th] = True
    return np.flatnonzero(seen)


def spike_threshold_ns(median_ns, spike_us: float, spike_factor: float):
    """The spike rule (§6): a launch call is a spike when it took longer than this (ns), i.e. longer
    than `spike_us` AND longer than `spike_factor` × its thread's median launch time."""
    return np.maximum(spike_us * 1e3, spike_factor * np.asarray(median_ns, np.float64))


def spikes(trace: Trace, sel: Selection = WHOLE, opt: Options = Options()) -> list[Episode]:
    """Launch calls that took > spike_us and > spike_factor x their thread's median launch time."""
    api = trace.api
    calls = _launch_calls(api)
    launch, dur, th = calls
    if not len(launch):
        return []
    thr = spike_threshold_ns(thread_launch_medians(trace, calls), opt.spike_us, opt.spike_factor)
    over = np.empty(len(launch), bool)
    for i in range(0, len(launch), CALL_BLOCK):   # the threshold per thread, read per call
        over[i:i + CALL_BLOCK] = dur[i:i + CALL_BLOCK] > thr[th[i:i + CALL_BLOCK]]
    cand = launch[over]
    del calls, launch, dur, th, over
    if not len(cand):
        return []
    ops = trace.ops
    op = _first_ops(ops.api, cand)
    dbl = depth_before_launch(trace)
    cbf = _command_buffer_full(trace, cand)
    rng = nvtx.innermost_at(trace, api.thread[cand], api.start[cand])
    w = time_window(sel, trace) if (sel.t0 is not None or sel.t1 is not None or sel.ranges) else None
    out = []
    for j, a in enumerate(cand.tolist()):  # one iteration per spike (rare events)
        k = int(op[j])
        dev = int(ops.device[k]) if k >= 0 else -1
        if sel.devices is not None and dev not in sel.devices:
            continue
        s, e = int(api.start[a]), int(api.end[a])
        if w is not None and (e < w[0] or s > w[1]):
            continue
        out.append(Episode("spike", s, e, dev, int(ops.stream[k]) if k >= 0 else -1,
                           int(dbl[k]) if k >= 0 else -1, e - s, a, int(rng[j]),
                           command_buffer_full=bool(cbf[j])))
    return out


def _first_ops(op_api: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """The first op (lowest index) each of the sorted `calls` launched, -1 when none: a lookup-table
    membership pass over the ops (no per-call array as long as the API table)."""
    hits = np.flatnonzero(np.isin(op_api, calls, kind="table"))
    u, first = unique_sorted(op_api[hits], return_index=True)
    out = np.full(len(calls), -1, np.int64)
    if len(u):
        pos = np.minimum(np.searchsorted(u, calls), len(u) - 1)
        found = u[pos] == calls
        out[found] = hits[first[pos[found]]]
    return out


def _command_buffer_full(trace: Trace, calls: np.ndarray | None = None) -> np.ndarray:
    """Per API call: did Nsight record a 'command buffer full' overhead for it (same thread + corr)?
    `calls`: only these API calls (one flag each), so a few spikes need no key per API row."""
    api, ov = trace.api, trace.overheads
    out = np.zeros(len(api) if calls is None else len(calls), bool)
    m = ov.type == OVERHEAD_COMMAND_BUFFER_FULL
    if not m.any() or not len(out):
        return out
    thread, corr = (api.thread, api.corr) if calls is None else (api.thread[calls], api.corr[calls])
    key_ov = np.sort(ov.thread[m].astype(np.int64) * (1 << 40) + ov.corr[m])
    for a in range(0, len(out), CALL_BLOCK):   # a block of keys at a time: no int64 key per API row
        key_api = thread[a:a + CALL_BLOCK].astype(np.int64)
        key_api *= 1 << 40
        key_api += corr[a:a + CALL_BLOCK]
        out[a:a + CALL_BLOCK] = in_sorted(key_api, key_ov)
    return out


def command_buffer_full_ids(trace: Trace) -> np.ndarray:
    """The API calls Nsight flagged 'command buffer full', sorted indices: once per trace (the
    report's ceilings and the record's queue classes both read them; few, where the per-call flags
    are as long as the API table)."""
    return memo.of(trace).get("analysis.backpressure.command_buffer_full_ids",
                              lambda: np.flatnonzero(_command_buffer_full(trace)))


first_ops = _first_ops   # a public name for other analyses (queue class)


def backpressure(trace: Trace, sel: Selection = WHOLE, opt: Options = Options(), sp: list | None = None) -> dict:
    """Episodes and spikes, merged in time order, plus direct Nsight evidence counts. `sp`:
    spikes(trace, sel, opt) when the caller has them (analysis/shared.py)."""
    ep = episodes(trace, sel, opt)
    sp = spikes(trace, sel, opt) if sp is None else sp
    ov = trace.overheads
    return {
        "threshold": opt.threshold, "full": opt.full, "spike_us": opt.spike_us, "spike_factor": opt.spike_factor,
        "episodes": sorted(ep, key=lambda e: (e.start, e.device, e.stream)),
        "spikes": sorted(sp, key=lambda e: (e.start, e.device, e.stream)),
        "command_buffer_full_events": int((ov.type == OVERHEAD_COMMAND_BUFFER_FULL).sum()),
    }


def timeline_marks(trace: Trace, sel: Selection = WHOLE, opt: Options = Options(), bp: dict | None = None) -> list[Episode]:
    """Episodes and spikes in one time-ordered list, for b/B navigation (`bp`: backpressure() of the same, when known)."""
    bp = backpressure(trace, sel, opt) if bp is None else bp
    return sorted(bp["episodes"] + bp["spikes"], key=lambda e: (e.start, e.kind, e.device, e.stream))
