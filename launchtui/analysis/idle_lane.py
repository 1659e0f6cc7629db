"""The timeline's idle row: one device's GPU idle gaps by cause (docs/definitions.md §T7, §V2).

Built off the UI thread for the record's device from the record's own inputs (its device and
iterations; gaps from the device's first op to the last iteration's end, cold-start calls from the
same spikes), so the row shows exactly the gaps and causes the record measures
(`idle_causes.GapCauses.pieces`). Per cause, the pieces are a sorted disjoint set kept as starts
and the prefix sum of their lengths: a frame bins each cause with W + 1 binary searches, whatever
the number of gaps (a 5M-op trace has millions). The largest gaps of each cause are ranked here
too, so stepping through them never sorts on the UI thread.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from launchtui.analysis import exposed as ex
from launchtui.analysis import idle_causes as ic
from launchtui.analysis.backpressure import Options, spikes
from launchtui.analysis.cold_start import cold_start
from launchtui.analysis.phases import attributed_phase_keys, main_thread
from launchtui.analysis.select import WHOLE
from launchtui.trace.model import Trace

CAUSES = ic.CAUSES
TOP_GAPS = 1000            # the largest gaps kept per cause for stepping (x, < / >)


class CauseSet:
    """One cause's pieces: sorted disjoint [s_i, s_i + len_i) with `cum` the prefix sum of their
    lengths (len(s) + 1 values), so a piece's length is cum[i + 1] - cum[i] and no end array is kept."""

    __slots__ = ("s", "cum")

    def __init__(self, s: np.ndarray, cum: np.ndarray):
        self.s, self.cum = s, cum

    @classmethod
    def of(cls, s: np.ndarray, e: np.ndarray) -> CauseSet:
        cum = np.zeros(len(s) + 1, np.int64)
        np.cumsum(e - s, out=cum[1:])
        return cls(np.ascontiguousarray(s, np.int64), cum)

    def __len__(self) -> int:
        return len(self.s)

    def covered_before(self, t: np.ndarray) -> np.ndarray:
        """ns of the pieces in (-inf, t)."""
        t = np.asarray(t, np.int64)
        if not len(self.s):
            return np.zeros(t.shape, np.int64)
        i = np.searchsorted(self.s, t, side="right") - 1
        ic_ = np.maximum(i, 0)
        length = self.cum[ic_ + 1] - self.cum[ic_]
        part = np.clip(t - self.s[ic_], 0, length)
        return np.where(i >= 0, self.cum[ic_] + part, 0)

    def busy(self, edges: np.ndarray) -> np.ndarray:
        return np.diff(self.covered_before(edges))


@dataclass
class IdleLane:
    """One device's idle gaps by cause. `sets[c]`: the pieces of CAUSES[c]; `g0`, `g1`: the gaps
    (sorted, disjoint), `op`: the op that ends each (-1 none); `top[c]`: gap indices of the largest
    gaps holding cause c, largest first (ties: earlier first), `top_ns[c]` their ns of c,
    `n_gaps[c]` how many gaps hold any of c, `total_ns[c]` its ns over every gap drawn. `main` and
    `base_depth` place an op's phase (§V5) as the record does."""
    device: int
    sets: list
    g0: np.ndarray
    g1: np.ndarray
    op: np.ndarray
    top: list
    top_ns: list
    n_gaps: np.ndarray
    total_ns: np.ndarray
    latency_ns: int
    main: int = -1
    base_depth: int = 0

    @property
    def key(self) -> tuple:
        return ("idle", self.device)

    def __len__(self) -> int:
        return len(self.g0)

    def gap_at(self, t0: int, t1: int) -> int:
        """The gap covering t0, else the first one starting in [t0, t1), else -1."""
        i = int(np.searchsorted(self.g0, np.int64(t0), side="right")) - 1
        if i >= 0 and int(self.g1[i]) > t0:
            return i
        j = i + 1
        return j if j < len(self.g0) and int(self.g0[j]) < t1 else -1

    def largest_piece(self, cause: int, k: int) -> tuple[int, int]:
        """[start, end) of the longest piece of `cause` inside gap k (the gap when it holds none)."""
        cs = self.sets[cause]
        i0, i1 = np.searchsorted(cs.s, [self.g0[k], self.g1[k]], side="left").tolist()
        if i1 <= i0:
            return int(self.g0[k]), int(self.g1[k])
        i = i0 + int(np.argmax(np.diff(cs.cum[i0:i1 + 1])))
        return int(cs.s[i]), int(cs.s[i] + cs.cum[i + 1] - cs.cum[i])

    def gap_split(self, k: int) -> np.ndarray:
        """ns per cause inside gap k."""
        lo_hi = np.array([self.g0[k], self.g1[k]], np.int64)
        return np.array([int(np.diff(s.covered_before(lo_hi))[0]) for s in self.sets], np.int64)


def empty_lane(device: int) -> IdleLane:
    z = np.zeros(0, np.int64)
    return IdleLane(device, [CauseSet.of(z, z) for _ in CAUSES], z, z, z, [z] * len(CAUSES),
                    [z] * len(CAUSES), np.zeros(len(CAUSES), np.int64), np.zeros(len(CAUSES), np.int64), 0)


def build_idle_lane(trace: Trace, device: int, it_start, it_end, base_depth: int = 0,
                    options: Options = Options()) -> IdleLane:
    """The idle row of `device` for the record's iterations [it_start_k, it_end_k) (record.py
    `_gpu_figures`: gaps from the device's first op to the last iteration's end, cold-start calls
    from the whole trace's spikes at the record's backpressure options)."""
    it_start = np.asarray(it_start, np.int64)
    it_end = np.asarray(it_end, np.int64)
    on = ex.device_ops(trace, device)
    calls = ex.device_launch_calls(trace, device, on)
    if not len(on) or not len(calls) or not len(it_start):
        return empty_lane(device)
    lo = min(int(it_start.min()), int(trace.ops.start[on].min()))
    hi = int(it_end.max())
    gaps = ex.device_gaps(trace, device, lo, hi, calls)
    g0, g1 = gaps.start, gaps.end
    del gaps
    cold = cold_start(trace, spikes(trace, WHOLE, options))
    causes = ic.gap_causes(trace, on, calls, g0, g1, cold_calls=cold.calls)
    op = causes.op
    latency = causes.latency.ns
    s, e, c = causes.pieces()
    del causes
    lane = _from_pieces(device, g0, g1, op, s, e, c, latency)
    lane.base_depth = int(base_depth)
    lane.main = main_thread(trace, op[op >= 0], lane.base_depth, it_start) if len(trace.ranges) else -1
    return lane


def _from_pieces(device, g0, g1, op, s, e, c, latency) -> IdleLane:
    """Per cause: its pieces' set, and its gaps ranked by the cause's ns in them."""
    n = len(CAUSES)
    gap = np.searchsorted(g0, s, side="right") - 1     # every piece lies inside one gap
    sets, top, top_ns = [], [], []
    n_gaps = np.zeros(n, np.int64)
    total = np.zeros(n, np.int64)
    for k in range(n):   # once per cause
        m = c == k
        sk, ek = s[m], e[m]
        sets.append(CauseSet.of(sk, ek))
        total[k] = int((ek - sk).sum())
        per = np.bincount(gap[m], weights=(ek - sk).astype(np.float64), minlength=len(g0)).astype(np.int64)
        del m, sk, ek
        held = np.flatnonzero(per)
        n_gaps[k] = len(held)
        if len(held) > TOP_GAPS:   # the TOP_GAPS largest; of those tied with the last, the earliest
            v = per[held]
            kth = -np.partition(-v, TOP_GAPS - 1)[TOP_GAPS - 1]
            above = held[v > kth]
            held = np.concatenate([above, held[v == kth][:TOP_GAPS - len(above)]])
        o = np.lexsort((held, -per[held]))     # largest first, then the earlier gap
        top.append(held[o].astype(np.int64))
        top_ns.append(per[held[o]])
    narrow = np.int32 if len(op) == 0 or int(op.max()) < 2**31 - 1 else np.int64
    return IdleLane(device, sets, np.asarray(g0, np.int64), np.asarray(g1, np.int64), op.astype(narrow), top,
                    top_ns, n_gaps, total, int(latency))


def op_phase(trace: Trace, lane: IdleLane, k: int, level: int = 1) -> str | None:
    """The phase (§V5) of op k at `level`, as the record's by_phase charges a gap to it; None
    outside every range."""
    if k < 0 or not len(trace.ranges):
        return None
    keys, texts, _ = attributed_phase_keys(trace, np.array([k], np.int64), lane.base_depth, level, lane.main)
    return texts[int(keys[0])] if int(keys[0]) >= 0 else None


@dataclass
class IdleCells:
    cause: np.ndarray      # int8 per bin: the cause with most idle time in it (-1: no idle)
    idle: np.ndarray       # idle ns per bin


def idle_cells(lane: IdleLane, edges: np.ndarray) -> IdleCells:
    """Per bin, the cause holding most of its idle time (ties: the first in CAUSES)."""
    per = np.stack([s.busy(edges) for s in lane.sets])    # causes × W
    tot = per.sum(axis=0)
    cause = np.argmax(per, axis=0).astype(np.int8)
    cause[tot == 0] = -1
    return IdleCells(cause, tot)
