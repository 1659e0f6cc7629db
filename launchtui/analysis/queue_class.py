"""Queue class per stream from evidence in the trace, never from a constant (docs/definitions.md §V3).

Judged within each iteration (time outside them, warm-up or profiler setup, never counts), then per
stream: the class most iterations fall in, ties to the more severe; the count per class is kept.
Per iteration:
- saturated: launch calls block, i.e. launch spikes (backpressure.spikes: far above the thread's
  median) at the stream's plateau depth, >= 3 of them and >= 5 % of the launches made there; or
  Nsight recorded "command buffer full" for launches on the stream.
- dry: pending <= 1 for most (> 50 %) of the stream's busy time, and most (> 50 %) of the device
  idle gaps that this stream's ops end had the op's launch call still in flight when the GPU
  went idle (the GPU waited for the launch).
- normal otherwise.
- Observed limit: the median depth (pending, the blocked call's own entry included) at which the
  blocked calls were made. Unknown when ops launched before the capture window were still
  pending (the depth is then a lower bound).
- CPU stalls: launch spikes that are not blocked calls (below the plateau, or in an iteration that
  does not saturate). Counted apart from backpressure.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from launchtui.analysis import intervals as iv
from launchtui.analysis.intervals import in_window_order, in_windows
from launchtui.analysis.backpressure import Episode, Options, command_buffer_full, spikes
from launchtui.analysis.exposed import DeviceGaps, device_ops
from launchtui.analysis.queue import StreamSeries, depth_before_launch, stream_series
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.grouping import dense_groups
from launchtui.trace.model import Trace

MIN_BLOCKED = 3
MIN_BLOCKED_SHARE = 0.05
DRY_SHARE = 0.5
MIN_LAUNCHES = 10     # fewer launches on a stream are too little evidence for dry


@dataclass
class StreamVerdict:
    device_id: int
    stream_id: int
    queue_class: str          # "dry" | "normal" | "saturated"
    max_depth: int
    observed_limit: int | None
    blocked_launches: int
    cpu_stalls: int
    reason: str
    launches: int = 0
    dry_time_share: float | None = None      # busy time with pending <= 1
    waited_gap_share: float | None = None    # idle gaps ended by this stream with the launch in flight
    command_buffer_full: int = 0
    iteration_classes: dict = field(default_factory=dict)   # class -> iterations judged so
    stalls: list = field(default_factory=list, repr=False)          # Episodes (kind "spike")
    blocked_calls: list = field(default_factory=list, repr=False)   # ApiCalls indices
    outside_stalls: list = field(default_factory=list, repr=False)  # Episodes outside the iterations
    outside_max_depth: int | None = None     # deeper outside the iterations than inside: that depth
    outside_blocked: int = 0                 # launch spikes at that plateau outside the iterations

    def to_json(self) -> dict:
        return {"device_id": self.device_id, "stream_id": self.stream_id, "queue_class": self.queue_class,
                "max_depth": self.max_depth, "observed_limit": self.observed_limit,
                "blocked_launches": self.blocked_launches, "cpu_stalls": self.cpu_stalls,
                "launches": self.launches,
                "dry_time_share": None if self.dry_time_share is None else round(self.dry_time_share, 4),
                "waited_gap_share": None if self.waited_gap_share is None else round(self.waited_gap_share, 4),
                "command_buffer_full": self.command_buffer_full, "reason": self.reason,
                "iteration_classes": self.iteration_classes,
                "outside_max_depth": self.outside_max_depth, "outside_blocked": self.outside_blocked}

    def one_line(self) -> str:
        return f"device {self.device_id} stream {self.stream_id}: {self.queue_class} — {self.reason}"


CLASSES = ("saturated", "dry", "normal")   # most severe first: ties between iteration counts go to it


def _max_in_windows(s: StreamSeries, starts: np.ndarray, ends: np.ndarray) -> int:
    """The stream's largest pending depth inside the iterations."""
    if not len(s.t):
        return 0
    at_start = s.value_at(starts)
    if in_window_order(s.t, starts, ends):
        # each iteration's changes are one slice of the series: a max per slice (reduceat over the
        # slice bounds a_0, b_0, a_1, ...; the odd results, between iterations, are dropped)
        a = np.searchsorted(s.t, starts, side="left")
        b = np.searchsorted(s.t, ends, side="left")
        ne = b > a
        inside = 0
        if ne.any():
            bounds = np.stack([a[ne], b[ne]], axis=1).ravel()
            if bounds[-1] == len(s.v):    # reduceat's last slice runs to the end anyway
                bounds = bounds[:-1]
            inside = int(np.maximum.reduceat(s.v, bounds)[0::2].max())
        return int(max(at_start.max(initial=0), inside))
    inside = s.v[in_windows(s.t, starts, ends) >= 0]
    return int(max(at_start.max(initial=0), inside.max(initial=0)))


def _first_of_runs(a: np.ndarray):
    """`unique_sorted(a, return_index=True)`, without its sort when `a` is already non-decreasing
    (a stream's ops are normally in launch order)."""
    if len(a) < 2 or (a[1:] < a[:-1]).any():
        return unique_sorted(a, return_index=True)
    head = np.empty(len(a), bool)
    head[0] = True
    np.not_equal(a[1:], a[:-1], out=head[1:])
    first = np.flatnonzero(head)
    return a[first], first


def _dry_time(s: StreamSeries, trace: Trace, starts: np.ndarray, ends: np.ndarray, m: np.ndarray):
    """Per iteration: (busy ns of the stream, of which pending <= 1) (definitions.md §V3). `m`: the
    stream's ops (a mask or op indices in start order)."""
    ops = trace.ops
    busy = ops.start[m], ops.end[m]
    if not iv.disjoint_sorted(*busy):   # a stream runs one op at a time: normally no union to take
        busy = iv.union(*busy)
    if not len(s.t):
        total = iv.measure_in(busy[0], busy[1], starts, ends)
        return total, total
    return iv.measure_in_and_both(busy, _low_runs(s, starts, ends), starts, ends)


def _low_runs(s: StreamSeries, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The time with pending <= 1 as a disjoint sorted set: before the first change (depth 0),
    [lo0, t0), then one interval per run of consecutive low steps. A run is measured as its steps
    are, and a stream has few runs (1.8k for 500k steps at 1M kernels: the depth rarely leaves
    0-2 for long), so the intersection with the busy time searches per run, not per step."""
    low = (s.v <= 1).view(np.int8)
    edge = np.diff(low, prepend=np.int8(0), append=np.int8(0))
    first = np.flatnonzero(edge == 1)            # step index where a run begins
    past = np.flatnonzero(edge == -1)            # step index one past its end
    del edge
    last_stop = max(int(s.t[-1]), int(ends.max()))   # the last step runs to the last iteration's end
    lo0 = min(int(starts.min()), int(s.t[0]))
    rs = np.empty(len(first) + 1, np.int64)
    re = np.empty(len(first) + 1, np.int64)
    rs[0], re[0] = lo0, int(s.t[0])
    rs[1:] = s.t[first]
    at_end = past == len(s.t)
    re[1:] = s.t[np.minimum(past, len(s.t) - 1)]
    re[1:][at_end] = last_stop
    return rs, re


def _codes(values: np.ndarray) -> tuple[dict, np.ndarray]:
    """({value: code}, code per element) for a column with few distinct values (a device's
    streams): compact codes (uint16 while they fit), so each stream's selection compares those."""
    uniq, code = dense_groups(values)
    code = code.astype(np.uint16 if len(uniq) < 65536 else np.int64)
    return {v: i for i, v in enumerate(uniq.tolist())}, code


def _positions_of(a_u: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Positions in the sorted distinct `a_u` of the sorted `ids` it holds (a search per id: the
    few flagged calls, not a lookup per call)."""
    if not len(ids) or not len(a_u):
        return np.zeros(0, np.int64)
    p = np.searchsorted(a_u, ids)
    ok = p < len(a_u)
    p, ids = p[ok], ids[ok]
    return p[a_u[p] == ids]


def _gaps_ended(g: DeviceGaps, starts: np.ndarray, ends: np.ndarray):
    """Per ending stream (-1: none): the device's idle gaps it ended, and of those the ones whose
    launch call was in flight, per iteration (the op ending the gap starts in it) (§V3): one count
    per (stream, iteration) for all streams, not a pass over every gap per stream."""
    n_it = len(starts)
    streams, code = dense_groups(g.next_stream)
    key = code * (n_it + 1)
    del code
    key += in_windows(g.end, starts, ends)
    key += 1                   # iteration -1 (outside) -> column 0, dropped
    size = len(streams) * (n_it + 1)
    ended = np.bincount(key, minlength=size).reshape(len(streams), n_it + 1)[:, 1:]
    waited = np.bincount(key[g.waited], minlength=size).reshape(len(streams), n_it + 1)[:, 1:]
    return {v: i for i, v in enumerate(streams.tolist())}, ended, waited


def _share(num, den) -> float | None:
    return float(num) / float(den) if den > 0 else None


def classify(trace: Trace, gaps: Callable[[int], DeviceGaps | None], starts: np.ndarray, ends: np.ndarray,
             opt: Options = Options(), devices=None, sp: list[Episode] | None = None) -> list[StreamVerdict]:
    """One verdict per (device, stream) with launched ops, in (device, stream) order, judged within
    each iteration [starts_k, ends_k) (time outside them never counts) and then over the
    iterations: the class most iterations fall in, ties to the more severe (definitions §V3).
    `gaps(device)`: its idle gaps over the iterations' span (exposed.device_gaps, light is enough),
    asked for in device order, so a caller can hold one device's at a time; `sp`:
    spikes(trace, opt=opt) of the whole trace when the caller has them."""
    ops, api = trace.ops, trace.api
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    n_it = len(starts)
    dbl = depth_before_launch(trace)
    sp = spikes(trace, opt=opt) if sp is None else sp
    cbf_ids = np.flatnonzero(command_buffer_full(trace))    # the few calls Nsight flagged, sorted
    out = []
    dev = dev_ops = stream_code = None
    held_gaps = gap_counts = None
    for s in stream_series(trace):  # one iteration per stream, in (device, stream) order
        if devices is not None and s.device not in devices:
            continue
        if s.device != dev:       # the device's ops once, then each stream's by index (no full-length masks)
            dev = s.device
            held_gaps = gap_counts = None      # the last device's, before this one's are computed
            dev_ops = device_ops(trace, dev)
            dev_ops = dev_ops.astype(np.int32) if len(ops) < 2**31 - 1 else dev_ops   # held: half the bytes
            stream_code = _codes(ops.stream[dev_ops])
        code = stream_code[0].get(s.stream)
        on = dev_ops[stream_code[1] == code] if code is not None else dev_ops[:0]   # the stream's ops, ascending
        called = ops.api[on]
        matched = called >= 0
        mine = on if matched.all() else on[matched]
        if not len(mine):
            continue
        # one entry per launch call (a graph launch feeds several ops), inside the iterations
        a_u, first = _first_of_runs(called if len(mine) == len(on) else called[matched])
        del called, matched
        k_call = in_windows(api.start[a_u], starts, ends)
        depth_b = dbl[mine[first]]
        del first
        # the calls flagged 'command buffer full' (few), inside the iterations or not
        at_cbf = _positions_of(a_u, cbf_ids)
        cbf_out = a_u[at_cbf[k_call[at_cbf] < 0]]
        at_cbf = at_cbf[k_call[at_cbf] >= 0]
        max_depth = _max_in_windows(s, starts, ends)
        tol = max(1, max_depth // 100)
        per = lambda k, w=None: np.bincount(k, weights=w, minlength=n_it)  # noqa: E731 - per iteration
        k_1 = k_call + 1           # 0: outside the iterations, a bin dropped (no filtered copies)
        launches_k = np.bincount(k_1, minlength=n_it + 1)[1:]
        zone_k = np.bincount(k_1[depth_b + 1 >= max_depth - tol], minlength=n_it + 1)[1:]
        del k_1
        stream_spikes = [e for e in sp if e.device == s.device and e.stream == s.stream]
        sp_api = np.fromiter((e.worst_api for e in stream_spikes), np.int64, len(stream_spikes))
        sp_depth = np.fromiter((e.max_depth for e in stream_spikes), np.int64, len(stream_spikes))
        sp_k = in_windows(api.start[sp_api], starts, ends) if len(sp_api) else sp_api
        plateau = (sp_k >= 0) & (sp_depth + 1 >= max_depth - tol)
        plateau_k = per(sp_k[plateau])
        cbf_calls = a_u[at_cbf]
        cbf_k = per(k_call[at_cbf])
        sat_k = (cbf_k > 0) | ((plateau_k >= MIN_BLOCKED) & (plateau_k >= MIN_BLOCKED_SHARE * zone_k))
        # blocked: the plateau spikes and command-buffer-full calls of the saturated iterations
        blocked = set(cbf_calls[sat_k[k_call[at_cbf]]].tolist())
        blocked |= set(sp_api[plateau & sat_k[np.maximum(sp_k, 0)]].tolist())
        stalls = [e for e, k in zip(stream_spikes, sp_k.tolist()) if k >= 0 and e.worst_api not in blocked]
        # outside the iterations nothing is judged or counted; for the timeline's marks a spike there
        # is a CPU stall unless >= MIN_BLOCKED of them sit at the whole trace's plateau (then only
        # those below it are)
        top = int(s.v.max()) if len(s.v) else 0
        out_k = sp_k < 0
        at_top = out_k & (sp_depth + 1 >= top - max(1, top // 100))
        stall_out = out_k & ~at_top if at_top.sum() >= MIN_BLOCKED else out_k
        outside = [e for e, x in zip(stream_spikes, stall_out.tolist()) if x]
        limit = None
        if blocked:
            b = np.fromiter(sorted(blocked), np.int64, len(blocked))
            inside = k_call >= 0     # the calls inside the iterations, as the depths were searched
            limit = int(np.median(depth_b[inside][np.searchsorted(a_u[inside], b)] + 1))
            del inside
            # ops launched before the window and still pending make the depth a lower bound
            if ((ops.api[on] < 0) & (ops.start[on] >= int(api.start[b].min()))).any():
                limit = None
        busy_k, low_k = _dry_time(s, trace, starts, ends, on)
        g = gaps(s.device)
        ended_k = waited_k = np.zeros(n_it)
        if g is not None:
            if g is not held_gaps:   # once per device: gaps per (ending stream, iteration)
                held_gaps, gap_counts = g, _gaps_ended(g, starts, ends)
            row = gap_counts[0].get(s.stream)
            if row is None:
                ended_k = waited_k = np.zeros(n_it, np.int64)
            else:   # counts: compared and pooled as the float sums were
                ended_k, waited_k = gap_counts[1][row], gap_counts[2][row]
        dry_k = ((launches_k >= MIN_LAUNCHES) & (low_k > DRY_SHARE * busy_k) & (busy_k > 0)
                 & (waited_k > DRY_SHARE * ended_k) & (ended_k > 0))
        cls_k = np.where(sat_k, 0, np.where(dry_k, 1, 2))
        counts = np.bincount(cls_k, minlength=3)
        cls = CLASSES[int(np.argmax(counts))]      # argmax takes the first (most severe) of ties
        n_launch = int(launches_k.sum())
        # the stream's evidence: pooled over the iterations judged as the stream is
        won = cls_k == CLASSES.index(cls)
        dry_share = _share(low_k[won].sum(), busy_k[won].sum())
        waited = _share(waited_k[won].sum(), ended_k[won].sum())
        n_zone, n_plateau = int(zone_k.sum()), int(plateau_k.sum())
        if cls == "saturated":
            if len(cbf_calls) and not n_plateau:
                reason = f"Nsight recorded 'command buffer full' for {len(cbf_calls)} launch calls"
            else:
                med = np.median([e.worst_api_ns for e in stream_spikes if e.worst_api in blocked] or [0]) / 1e3
                reason = (f"{len(blocked)} launch calls blocked (median {med:.0f} µs) at depth "
                          f"{limit} of {n_zone} made there")
                if len(cbf_calls):
                    reason += f"; Nsight recorded 'command buffer full' for {len(cbf_calls)}"
            if limit is None:
                reason += "; limit unknown: ops launched before the capture were still pending"
        elif n_launch == 0:
            reason = "no launches inside the iterations"
        elif n_launch < MIN_LAUNCHES:
            reason = f"too few launches ({n_launch}) to judge; max pending {max_depth}"
        elif cls == "dry":
            reason = (f"pending <= 1 for {dry_share:.0%} of busy time; {waited:.0%} of idle gaps "
                      "ended by its ops had the launch call still in flight")
        else:
            bits = [f"max pending {max_depth}"]
            if dry_share is not None:
                bits.append(f"pending <= 1 for {dry_share:.0%} of busy time")
            if waited is not None:
                bits.append(f"{waited:.0%} of its idle gaps waited on a launch")
            bits.append("no launch call blocked" if not n_plateau else
                        f"{n_plateau} slow launches at the plateau of {n_zone} made there: not a pattern")
            reason = "; ".join(bits)
        if n_it > 1:
            reason += "; iterations: " + ", ".join(f"{int(c)} {name}" for name, c in zip(CLASSES, counts) if c)
        if stalls:
            reason += f"; {len(stalls)} CPU stall{'s' if len(stalls) != 1 else ''} (slow launch at low depth)"
        # deeper outside the iterations (an eval or inference burst after the steps): not judged, but
        # said, so the timeline's full queue there does not contradict the class (definitions §V3)
        out_depth = top if top > max_depth else None
        out_calls = set(cbf_out.tolist()) | (set(sp_api[at_top].tolist()) if at_top.sum() >= MIN_BLOCKED else set())
        out_blocked = len(out_calls) if out_depth is not None else 0
        if out_blocked:   # only with evidence of backpressure there, not for any deeper moment
            reason += f"; outside the iterations (not judged) pending reaches {out_depth} and {out_blocked} launch calls block there"
        out.append(StreamVerdict(s.device, s.stream, cls, max_depth, limit, len(blocked), len(stalls), reason,
                                 launches=n_launch, dry_time_share=dry_share, waited_gap_share=waited,
                                 command_buffer_full=len(cbf_calls), stalls=stalls,
                                 blocked_calls=sorted(blocked), outside_stalls=outside,
                                 outside_max_depth=out_depth, outside_blocked=out_blocked,
                                 iteration_classes={c: int(n) for c, n in zip(CLASSES, counts)}))
    return out
