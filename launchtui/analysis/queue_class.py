"""Queue class per stream from evidence in the trace, never from a constant (docs/definitions.md §V3).

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
- CPU stalls: launch spikes that are not blocked calls (below the plateau, or on a stream that
  does not saturate). Counted apart from backpressure.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from launchtui.analysis import intervals as iv
from launchtui.analysis.backpressure import Episode, Options, command_buffer_full, spikes
from launchtui.analysis.exposed import DeviceGaps
from launchtui.analysis.queue import StreamSeries, depth_before_launch, stream_series
from launchtui.trace.arrays import unique_sorted
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
    stalls: list = field(default_factory=list, repr=False)          # Episodes (kind "spike")
    blocked_calls: list = field(default_factory=list, repr=False)   # ApiCalls indices

    def to_json(self) -> dict:
        return {"device_id": self.device_id, "stream_id": self.stream_id, "queue_class": self.queue_class,
                "max_depth": self.max_depth, "observed_limit": self.observed_limit,
                "blocked_launches": self.blocked_launches, "cpu_stalls": self.cpu_stalls,
                "launches": self.launches,
                "dry_time_share": None if self.dry_time_share is None else round(self.dry_time_share, 4),
                "waited_gap_share": None if self.waited_gap_share is None else round(self.waited_gap_share, 4),
                "command_buffer_full": self.command_buffer_full, "reason": self.reason}

    def one_line(self) -> str:
        return f"device {self.device_id} stream {self.stream_id}: {self.queue_class} — {self.reason}"


def _dry_share(s: StreamSeries, trace: Trace, lo: int, hi: int) -> float | None:
    """Share of the stream's busy time (inside [lo, hi)) during which pending <= 1."""
    ops = trace.ops
    m = (ops.device == s.device) & (ops.stream == s.stream)
    busy = iv.intersect(iv.union(ops.start[m], ops.end[m]), (np.array([lo]), np.array([hi])))
    total = int((busy[1] - busy[0]).sum())
    if total <= 0 or not len(s.t):
        return None
    low = s.v <= 1
    ends = np.append(s.t[1:], max(int(s.t[-1]), hi))
    low_set = iv.union(s.t[low], ends[low])
    # before the first change the depth is 0
    pre = (np.array([min(lo, int(s.t[0]))]), np.array([int(s.t[0])]))
    low_set = iv.union(np.concatenate([low_set[0], pre[0]]), np.concatenate([low_set[1], pre[1]]))
    both = iv.intersect(busy, low_set)
    return float((both[1] - both[0]).sum()) / total


def classify(trace: Trace, gaps: dict[int, DeviceGaps], lo: int, hi: int,
             opt: Options = Options(), devices=None) -> list[StreamVerdict]:
    """One verdict per (device, stream) with launched ops, in (device, stream) order. `gaps` maps
    device -> its idle gaps over [lo, hi) (exposed.device_gaps)."""
    ops, api = trace.ops, trace.api
    dbl = depth_before_launch(trace)
    sp: list[Episode] = spikes(trace, opt=opt)
    cbf = command_buffer_full(trace)
    out = []
    for s in stream_series(trace):  # one iteration per stream
        if devices is not None and s.device not in devices:
            continue
        on = (ops.device == s.device) & (ops.stream == s.stream)
        mine = np.nonzero(on & (ops.api >= 0))[0]
        if not len(mine):
            continue
        # one entry per launch call (a graph launch feeds several ops)
        a_u, first = unique_sorted(ops.api[mine], return_index=True)
        depth_b = dbl[mine[first]]
        max_depth = int(s.v.max()) if len(s.v) else 0
        stream_spikes = [e for e in sp if e.device == s.device and e.stream == s.stream]
        cbf_calls = a_u[cbf[a_u]]
        tol = max(1, max_depth // 100)
        n_zone = int((depth_b + 1 >= max_depth - tol).sum())
        at_plateau = [e for e in stream_spikes if e.max_depth + 1 >= max_depth - tol]
        saturated = bool(len(cbf_calls)) or (len(at_plateau) >= MIN_BLOCKED
                                             and len(at_plateau) >= MIN_BLOCKED_SHARE * n_zone)
        blocked = set()
        if saturated:
            blocked = set(cbf_calls.tolist()) | {e.worst_api for e in at_plateau}
        stalls = [e for e in stream_spikes if e.worst_api not in blocked]
        limit = None
        if blocked:
            b = np.fromiter(sorted(blocked), np.int64, len(blocked))
            limit = int(np.median(depth_b[np.searchsorted(a_u, b)] + 1))
            # ops launched before the window and still pending make the depth a lower bound
            if (on & (ops.api < 0) & (ops.start >= int(api.start[b].min()))).any():
                limit = None
        g = gaps.get(s.device)
        dry_share = _dry_share(s, trace, lo, hi)
        waited = None
        if g is not None:
            ended = g.next_stream == s.stream
            if ended.any():
                waited = float((g.next_launch_end[ended] > g.start[ended]).mean())
        if saturated:
            cls = "saturated"
            if len(cbf_calls):
                reason = f"Nsight recorded 'command buffer full' for {len(cbf_calls)} launch calls"
            else:
                med = np.median([e.worst_api_ns for e in at_plateau]) / 1e3
                reason = (f"{len(blocked)} launch calls blocked (median {med:.0f} µs) at depth "
                          f"{limit} of {n_zone} made there")
            if limit is None:
                reason += "; limit unknown: ops launched before the capture were still pending"
        elif len(a_u) < MIN_LAUNCHES:
            cls = "normal"
            reason = f"too few launches ({len(a_u)}) to judge; max pending {max_depth}"
        elif dry_share is not None and waited is not None and dry_share > DRY_SHARE and waited > DRY_SHARE:
            cls = "dry"
            reason = (f"pending <= 1 for {dry_share:.0%} of busy time; {waited:.0%} of idle gaps "
                      "ended by its ops had the launch call still in flight")
        else:
            cls = "normal"
            bits = [f"max pending {max_depth}"]
            if dry_share is not None:
                bits.append(f"pending <= 1 for {dry_share:.0%} of busy time")
            if waited is not None:
                bits.append(f"{waited:.0%} of its idle gaps waited on a launch")
            bits.append("no launch call blocked" if not at_plateau else
                        f"{len(at_plateau)} slow launches at the plateau of {n_zone} made there: not a pattern")
            reason = "; ".join(bits)
        if stalls:
            reason += f"; {len(stalls)} CPU stall{'s' if len(stalls) != 1 else ''} (slow launch at low depth)"
        out.append(StreamVerdict(s.device, s.stream, cls, max_depth, limit, len(blocked), len(stalls), reason,
                                 launches=len(a_u), dry_time_share=dry_share, waited_gap_share=waited,
                                 command_buffer_full=len(cbf_calls), stalls=stalls,
                                 blocked_calls=sorted(blocked)))
    return out
