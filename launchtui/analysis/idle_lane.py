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

import dataclasses

from dataclasses import dataclass

import numpy as np

from launchtui.analysis import exposed as ex
from launchtui.analysis import idle_causes as ic
from launchtui.analysis import intervals as iv
from launchtui.analysis.backpressure import Options, spikes
from launchtui.analysis.cold_start import cold_start
from launchtui.analysis.graph_busy import busy_trace
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


class Cancelled(Exception):
    """The caller no longer wants the lane (`build_idle_lane`'s `cancelled` said so between blocks)."""


BLOCK_GAPS = 1 << 19       # gaps per block of pieces: bounds the temporaries (5M ops: ~2.5M gaps)


def build_idle_lane(trace: Trace, device: int, it_start, it_end, base_depth: int = 0,
                    options: Options = Options(), cancelled=None) -> IdleLane:
    """The idle row of `device` for the record's iterations [it_start_k, it_end_k) (record.py
    `_gpu_figures`: gaps from the device's first op to the last iteration's end, cold-start calls
    from the whole trace's spikes at the record's backpressure options). `cancelled()`, asked
    between blocks, raises Cancelled when it turns true (the TUI wants another lane). Read through
    graph_busy.busy_trace, as the record is: `op` indexes its ops."""
    spiky, trace = trace, busy_trace(trace)   # spikes and cold starts from the trace, as the record's
    it_start = np.asarray(it_start, np.int64)
    it_end = np.asarray(it_end, np.int64)
    on = ex.device_ops(trace, device)
    calls = ex.device_launch_calls(trace, device, on)
    if not len(on) or not len(calls) or not len(it_start):
        return empty_lane(device)
    stop = cancelled or (lambda: False)
    lo = min(int(it_start.min()), int(trace.ops.start[on].min()))
    hi = int(it_end.max())
    busy = iv.union(trace.ops.start[on], trace.ops.end[on])
    g0, g1 = iv.complement(*busy, lo, hi)      # ex.device_gaps' bounds, without its ending ops
    del busy
    _check(stop)
    cold = cold_start(spiky, spikes(spiky, WHOLE, options))
    _check(stop)
    causes = ic.gap_causes(trace, on, calls, g0, g1, cold_calls=cold.calls)
    del on, calls, cold
    lane = _from_causes(device, causes, stop)
    lane.base_depth = int(base_depth)
    ended = lane.op[lane.op >= 0]
    lane.main = main_thread(trace, ended, lane.base_depth, it_start) if len(trace.ranges) else -1
    return lane


def _check(cancelled) -> None:
    if cancelled():
        raise Cancelled()


def _block(c: ic.GapCauses, a: int, b: int) -> ic.GapCauses:
    """Gaps a..b of `c` (views), with the launch calls in flight cut to their span: the same
    pieces as the whole set gives there, without its temporaries."""
    fs, fe = c.flight
    i0 = int(np.searchsorted(fe, c.g0[a], side="right"))
    i1 = int(np.searchsorted(fs, c.g1[b - 1], side="left"))
    per_gap = {f.name: getattr(c, f.name)[a:b] for f in dataclasses.fields(c)
               if f.name not in ("flight", "latency")}
    return ic.GapCauses(**per_gap, flight=(fs[i0:i1], fe[i0:i1]), latency=c.latency)


def _from_causes(device: int, c: ic.GapCauses, cancelled=lambda: False) -> IdleLane:
    """Per cause: its pieces' set, and its gaps ranked by the cause's ns in them (block by block,
    in time order, so each cause's pieces stay sorted)."""
    n = len(CAUSES)
    starts: list = [[] for _ in CAUSES]
    lengths: list = [[] for _ in CAUSES]
    cand: list = [[] for _ in CAUSES]         # (gap indices, ns) of each block's largest
    n_gaps = np.zeros(n, np.int64)
    for a in range(0, len(c.g0), BLOCK_GAPS):
        _check(cancelled)
        b = min(len(c.g0), a + BLOCK_GAPS)
        s, e, k = _block(c, a, b).pieces()
        gap = np.searchsorted(c.g0[a:b], s, side="right") - 1     # every piece lies inside one gap
        for ci in range(n):   # once per cause
            m = k == ci
            sk, lk = s[m], e[m] - s[m]
            starts[ci].append(sk)
            lengths[ci].append(lk)
            per = np.bincount(gap[m], weights=lk.astype(np.float64), minlength=b - a).astype(np.int64)
            held = np.flatnonzero(per)
            n_gaps[ci] += len(held)
            gi = held[_largest(held, per[held])]
            cand[ci].append((gi + a, per[gi]))
        del s, e, k, gap
    sets, top, top_ns = [], [], []
    total = np.zeros(n, np.int64)
    for ci in range(n):
        sk = np.concatenate(starts[ci]) if starts[ci] else np.zeros(0, np.int64)
        lk = np.concatenate(lengths[ci]) if lengths[ci] else np.zeros(0, np.int64)
        starts[ci] = lengths[ci] = None
        cum = np.zeros(len(sk) + 1, np.int64)
        np.cumsum(lk, out=cum[1:])
        sets.append(CauseSet(sk, cum))
        total[ci] = int(cum[-1])
        idx = np.concatenate([x for x, _ in cand[ci]]) if cand[ci] else np.zeros(0, np.int64)
        ns = np.concatenate([y for _, y in cand[ci]]) if cand[ci] else np.zeros(0, np.int64)
        keep = _largest(idx, ns)
        o = np.lexsort((idx[keep], -ns[keep]))   # largest first, then the earlier gap
        top.append(idx[keep][o].astype(np.int64))
        top_ns.append(ns[keep][o])
    op = c.op
    narrow = np.int32 if len(op) == 0 or int(op.max()) < 2**31 - 1 else np.int64
    return IdleLane(device, sets, np.asarray(c.g0, np.int64), np.asarray(c.g1, np.int64), op.astype(narrow),
                    top, top_ns, n_gaps, total, int(c.latency.ns))


def _largest(idx: np.ndarray, ns: np.ndarray) -> np.ndarray:
    """Positions of the TOP_GAPS largest `ns`; of those tied with the last, the lowest `idx` (`idx`
    ascending)."""
    if len(idx) <= TOP_GAPS:
        return np.arange(len(idx))
    kth = -np.partition(-ns, TOP_GAPS - 1)[TOP_GAPS - 1]
    above = np.flatnonzero(ns > kth)
    return np.concatenate([above, np.flatnonzero(ns == kth)[:TOP_GAPS - len(above)]])


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
