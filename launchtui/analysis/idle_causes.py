"""GPU idle time by cause: what the GPU waited for in each idle gap (docs/definitions.md §V2).

Every idle gap [g0, g1) of a device ends when an op starts; that op's launch call [a0, a1) tells
what the GPU waited for (domain.md §12). With L the trace's own submission latency:

    g0 ........ a0 ........ a1 + L ........ g1
    | head      | tail      | dependency    |

- head [g0, min(a0, g1)): the op was not launched yet. Launch calls in flight there are *launch*;
  the rest is the host between launches: *host* (per-op overhead) when the stretch is shorter
  than HOST_STALL_NS, else a *host stall* (data loading, Python work between GPU bursts).
- tail [max(g0, a0), e), e = min(g1, max(g0, a1 + L)): the call and its submission: *launch*;
  *sync* when the call is a copy that blocked the host (a pageable or synchronous copy stages the
  data first), *cold start* when it is a cold-start launch call (cold_start.py).
- [e, g1): the op could have started and did not: *dependency* (an event or cross-stream wait,
  a collective, unrecorded work, or a queue that held it).
- a host sync (on the thread that made the call) in flight when the GPU went idle, the call
  following within HOST_STALL_NS of its return: head and tail are *sync* instead (the host
  restarting a queue the sync drained); longer host work after a sync stays a host stall.
- the ending op is a unified-memory migration (the driver moves pages on demand; it never has a
  launch call): *migration*.
- the ending op has no other launch row, or nothing ends the gap: *unattributed*.
The parts of a gap are disjoint and cover it, so the causes add up to the idle time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from launchtui.analysis import intervals as iv
from launchtui.analysis import memo
from launchtui.analysis.config import CONFIG
from launchtui.analysis.cpu_busy import host_blocking_calls
from launchtui.trace.arrays import index_type, median_of, unique_sorted
from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, OP_MEMCPY, Trace
from launchtui.trace.sorted_search import search_sorted

CAUSES = ("launch", "host", "host_stall", "sync", "dependency", "cold_start", "migration", "unattributed")
HOST_BOUND = ("launch", "host")        # what CUDA graphs / torch.compile remove
HOST_STALL_NS = 1_000_000              # one host stretch this long is not per-op dispatch (domain.md §1)
DEFAULT_LATENCY_NS = 5_000             # when the trace shows too few launches onto an idle stream
MIN_LATENCY_SAMPLES = 20
SYNC_SLACK_NS = 5_000                  # a sync that returned this shortly before the GPU went idle
HEAD_BLOCK = 1 << 18                   # gap heads measured at a time
LATENCY_BLOCK = 1 << 18                # a stream's ops read at a time for the latency samples


@dataclass
class Latency:
    """The trace's own submission latency: median (op start − call end) over kernel launches onto
    a stream that was idle when the call returned (definitions.md §V2)."""
    ns: int
    samples: int
    measured: bool

    def to_json(self) -> dict:
        return {"us": round(self.ns / 1e3, 3), "samples": self.samples,
                "source": "measured" if self.measured else f"default (fewer than {MIN_LATENCY_SAMPLES} samples)"}


def submission_latency(trace: Trace, on: np.ndarray) -> Latency:
    """`on`: the device's ops, ascending indices (start order)."""
    return streams_latency(trace, by_stream(trace, on))


def device_latency(trace: Trace, device: int, streams_ops: Callable[[], list[np.ndarray]]) -> Latency:
    """The device's submission latency L (definitions §V2), once per trace (its memo): the gap
    causes, the queue classes and the report's ceilings read one value. The first to ask computes
    it from `streams_ops()`, the device's ops of each stream in start order (all of its streams
    with a kernel launch), which every caller holds in its own form; each form gives the same L."""
    return memo.of(trace).get(("submission_latency", device), lambda: streams_latency(trace, streams_ops()))


def by_stream(trace: Trace, on: np.ndarray) -> list[np.ndarray]:
    """`on` (ascending op indices) split by stream, each part in start order (a stable sort)."""
    so = on[np.argsort(trace.ops.stream[on], kind="stable")]   # (stream, start) order
    cuts = np.flatnonzero(np.diff(trace.ops.stream[so])) + 1
    return np.split(so, cuts) if len(so) else []


def streams_latency(trace: Trace, ons: list[np.ndarray]) -> Latency:
    """The device's submission latency L (definitions §V2) from its streams' ops (`ons`, each in
    start order): the median of op start - call end over kernel launches whose op started after its
    call began, onto a stream whose previous op had ended by the call's return."""
    samples = [s for on in ons for s in _latency_samples(trace, on)]
    lat = np.concatenate(samples) if samples else np.zeros(0, np.int64)
    if len(lat) < MIN_LATENCY_SAMPLES:
        return Latency(DEFAULT_LATENCY_NS, len(lat), False)
    return Latency(max(0, int(median_of(lat))), len(lat), True)


def _latency_samples(trace: Trace, on: np.ndarray):
    """The latency samples of one stream's ops (`on`, in start order), a block of ops at a time:
    its temporaries are a block's, not the stream's (20M: the report's peak beside the record)."""
    ops, api = trace.ops, trace.api
    for lo in range(0, len(on), LATENCY_BLOCK):
        a = ops.api[on[lo:lo + LATENCY_BLOCK]]
        ok = a >= 0
        ok[ok] = api.kind[a[ok]] == API_LAUNCH
        i = np.flatnonzero(ok)
        a = a[i].astype(np.intp, copy=False)   # two gathers: numpy's fast path is for intp indices
        prev = i + (lo - 1)   # the stream's op before each, in `on`; -1 for its first
        prev_end = ops.end[on[np.maximum(prev, 0)]]
        prev_end[prev < 0] = np.iinfo(np.int64).min
        a1 = api.end[a]
        st = ops.start[on[i + lo]]
        keep = (prev_end <= a1) & (st >= api.start[a])
        yield st[keep] - a1[keep]


def ending_ops(trace: Trace, on: np.ndarray, g1: np.ndarray) -> np.ndarray:
    """Per gap end g1: the op that ends the gap, -1 when none. Of the device's ops (`on`, in start
    order) the first starting at or after g1 (a gap cut at the window's end is ended by the op
    past it); among ops starting together, one with a launch row first, then the earliest call
    start, then the lowest stream id: a rule on the data, not on the file's row order."""
    st = trace.ops.start[on]
    on = _launch_order_within_ties(trace, on, st)
    # op indices in 32 bits while they fit: one per gap, held by GapCauses (20M: the record's peak)
    out = np.full(len(g1), -1, index_type(len(trace.ops)))
    for i in range(0, len(g1), HEAD_BLOCK):    # the search's positions a block of gaps long
        j = search_sorted(st, g1[i:i + HEAD_BLOCK], side="left")
        has = j < len(on)
        out[i:i + HEAD_BLOCK][has] = on[j[has]]
    return out


def _launch_order_within_ties(trace: Trace, on: np.ndarray, st: np.ndarray) -> np.ndarray:
    """`on` with each run of equal starts reordered by (no launch row, call start, stream): the runs
    keep their positions, so a search on the starts still finds each run's first."""
    if len(st) < 2:
        return on
    eq = st[1:] == st[:-1]
    if not eq.any():
        return on
    tie = np.zeros(len(st), bool)
    tie[1:] = eq
    tie[:-1] |= eq
    pos = np.flatnonzero(tie)
    ops, api = trace.ops, trace.api
    t = on[pos]
    a = ops.api[t]
    call_start = np.where(a >= 0, api.start[np.maximum(a, 0)], 0)
    out = on.copy()
    out[pos] = t[np.lexsort((ops.stream[t], call_start, a < 0, st[pos]))]
    return out


def sync_in_flight(trace: Trace, calls: np.ndarray, t: np.ndarray, blocking: np.ndarray | None = None) -> np.ndarray:
    """Per (API call, time): was a host-blocking call on that call's thread in flight at t (started
    at or before it, ended no earlier than SYNC_SLACK_NS before it), with the call itself starting
    within HOST_STALL_NS of the sync's return? A host that works longer after the sync is a host
    stall the sync only made visible. One search per thread that syncs, not per gap. `blocking`:
    host_blocking_calls(trace) when the caller has it."""
    api = trace.api
    out = np.zeros(len(calls), bool)
    blocking = np.flatnonzero(host_blocking_calls(trace) if blocking is None else blocking)
    if not len(blocking) or not len(calls):
        return out
    th = api.thread[calls]
    for thread in unique_sorted(api.thread[blocking]).tolist():   # per syncing thread
        mine = np.flatnonzero(th == thread)
        if not len(mine):
            continue
        # one launching thread (the usual case): its calls are all of them, no gathered copies
        tm, cm = (t, calls) if len(mine) == len(calls) else (t[mine], calls[mine])
        b = blocking[api.thread[blocking] == thread]
        b = b[np.argsort(api.start[b], kind="stable")]
        s0 = api.start[b]
        s1 = np.maximum.accumulate(api.end[b])          # nested calls: the outer one's end holds
        k = search_sorted(s0, tm, side="right") - 1
        hit = k >= 0
        end = s1[np.maximum(k, 0)]
        del k
        hit &= end >= tm - SYNC_SLACK_NS
        end -= api.start[cm]
        hit &= end >= -HOST_STALL_NS                     # the call starts within HOST_STALL_NS of it
        out[mine] = hit
    return out


@dataclass
class GapCauses:
    """Per gap: its bounds, the api index of the call that launched its ending op (-1 none), and
    the cut points head | tail | dependency (all clipped into [g0, g1])."""
    g0: np.ndarray
    g1: np.ndarray
    op: np.ndarray            # the op that ends the gap, -1 none
    call: np.ndarray
    cut_tail: np.ndarray      # end of the head = start of the tail
    cut_dep: np.ndarray       # end of the tail = start of the dependency part
    sync: np.ndarray          # bool: a host sync drained the queue
    tail: np.ndarray          # int8 per gap: the tail's cause, an index into CAUSES
    stall: np.ndarray         # bool: the head is one host stall (>= HOST_STALL_NS)
    migration: np.ndarray     # bool: ended by a unified-memory migration (no launch row by nature)
    flight: tuple[np.ndarray, np.ndarray]   # the device's launch calls in flight (disjoint, sorted)
    latency: Latency

    def _normal(self) -> np.ndarray:
        return (self.call >= 0) & ~self.sync

    def _parts(self):
        """(start, end, cause) triples of per-gap arrays; the heads are split by flight later."""
        g0, g1, ct, cd = self.g0, self.g1, self.cut_tail, self.cut_dep
        att = self.call >= 0
        normal = self._normal()
        sy = att & self.sync
        mig = self.migration
        parts = [(g0[~att & ~mig], g1[~att & ~mig], "unattributed"), (g0[mig], g1[mig], "migration"),
                 (cd[att], g1[att], "dependency"), (g0[sy], cd[sy], "sync")]
        for code in unique_sorted(self.tail[normal]).tolist():
            m = normal & (self.tail == code)
            parts.append((ct[m], cd[m], CAUSES[code]))
        return parts

    def pieces(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, end, cause index into CAUSES) of every non-empty part, in start order: the
        timeline draws the gaps by cause from these."""
        parts = self._parts()
        normal = self._normal()
        heads = (self.g0[normal], self.cut_tail[normal])
        parts.append((*iv.intersect(self.flight, heads), "launch"))
        lo = int(self.g0.min()) if len(self.g0) else 0
        hi = int(self.g1.max()) if len(self.g1) else 0
        off = iv.complement(self.flight[0], self.flight[1], lo, hi)
        for stall, cause in ((False, "host"), (True, "host_stall")):
            m = self.stall[normal] == stall
            parts.append((*iv.intersect((heads[0][m], heads[1][m]), off), cause))
        s = np.concatenate([p[0] for p in parts]).astype(np.int64)
        e = np.concatenate([p[1] for p in parts]).astype(np.int64)
        c = np.concatenate([np.full(len(p[0]), CAUSES.index(p[2]), np.int8) for p in parts])
        keep = e > s
        o = np.argsort(s[keep], kind="stable")
        return s[keep][o], e[keep][o], c[keep][o]

    def measure_in(self, starts: np.ndarray, ends: np.ndarray) -> dict[str, np.ndarray]:
        """ns per cause inside each window [starts_k, ends_k)."""
        out = {c: np.zeros(len(starts), np.int64) for c in CAUSES}
        for s, e, cause in self._parts():
            out[cause] += iv.measure_in(s, e, starts, ends)
        normal = self._normal()
        per_head = self._head_flight()     # each head's flight, known: only the windows are searched
        for stall, cause in ((False, "host"), (True, "host_stall")):
            m = normal & (self.stall == stall)
            head = (self.g0[m], self.cut_tail[m])
            in_flight = iv.measure_both_known(head, per_head[m], self.flight, starts, ends)
            out[cause] += iv.measure_in(*head, starts, ends) - in_flight
            out["launch"] += in_flight
        return out

    def _head_flight(self) -> np.ndarray:
        """ns of launch calls in flight inside each normal gap's head (0 elsewhere), computed once."""
        if getattr(self, "_hf", None) is None:
            normal = self._normal()
            out = np.zeros(len(self.g0), np.int64)
            if normal.any():
                out[normal] = _measure_each(self.flight, self.g0[normal], self.cut_tail[normal])
            self._hf = out
        return self._hf

    def launch_per_gap(self) -> np.ndarray:
        """ns of the launch cause per gap: its launch tail and the launch calls in flight in its head."""
        normal = self._normal()
        return self._head_flight() + np.where(normal & (self.tail == CAUSES.index("launch")),
                                              self.cut_dep - self.cut_tail, 0)

    def host_bound_per_gap(self) -> np.ndarray:
        """ns of launch + host (per-op) per gap: what the GPU waited for the host, charged to the
        gap's ending op (its phase and call site rank the fixes). A short head is host-bound whole
        (its launch calls included); a host stall's head only by its launch calls."""
        short = self._normal() & ~self.stall
        head_host = np.where(short, self.cut_tail - self.g0 - self._head_flight(), 0)
        return head_host + self.launch_per_gap()


def _measure_each(s: tuple[np.ndarray, np.ndarray], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Measure of the disjoint sorted set `s` inside each window (windows disjoint and sorted), a
    block of windows at a time: one window per gap, the searches' temporaries (five 8-byte values a
    window) stay a block long (20M: the record's peak)."""
    return iv.measure_in(s[0], s[1], lo, hi, block=HEAD_BLOCK)


def gap_causes(trace: Trace, on: np.ndarray, calls: np.ndarray, g0: np.ndarray, g1: np.ndarray,
               latency: Latency | None = None, cold_calls: np.ndarray | None = None,
               blocking: np.ndarray | None = None) -> GapCauses:
    """The causes of the device's idle gaps [g0, g1) (disjoint, sorted). `on`: the device's ops
    (ascending indices), `calls`: its launch calls (exposed.device_launch_calls), `cold_calls`:
    the cold-start launch calls (sorted API indices, cold_start.py), `latency`:
    submission_latency(trace, on) and `blocking`: host_blocking_calls(trace) when the caller has them."""
    blocking = host_blocking_calls(trace) if blocking is None else blocking
    lat = submission_latency(trace, on) if latency is None else latency
    nxt = ending_ops(trace, on, g1)
    flight = iv.union(trace.api.start[calls], trace.api.end[calls])
    return causes_of(trace, nxt, g0, g1, lat, flight, cold_calls, blocking)


def attributed_calls(trace: Trace, nxt: np.ndarray) -> np.ndarray:
    """Per gap: the api index of the call that launched its ending op `nxt` (-1 none), in ops.api's
    dtype (32-bit call indices), not widened."""
    call = trace.ops.api[np.maximum(nxt, 0)]
    call[nxt < 0] = -1
    return call


def unattributed(trace: Trace, nxt: np.ndarray) -> np.ndarray:
    """Per gap (`nxt`: ending_ops): bool, its idle is unattributed (no launch row, no migration)."""
    att = attributed_calls(trace, nxt) >= 0
    return ~att & ~_migrations(trace, nxt, att)


def causes_of(trace: Trace, nxt: np.ndarray, g0: np.ndarray, g1: np.ndarray, lat: Latency,
              flight: tuple[np.ndarray, np.ndarray], cold_calls: np.ndarray | None,
              blocking: np.ndarray) -> GapCauses:
    """gap_causes from the gaps' ending ops (`nxt`: ending_ops) and the launch calls in flight
    (`flight`: their union, or the part of it over the gaps' span): gaps taken a block at a time
    give each block's causes."""
    api = trace.api
    call = attributed_calls(trace, nxt)
    att = call >= 0
    unatt = np.flatnonzero(~att)           # a gap without a call: its head and tail are empty
    c = np.maximum(call, 0)
    cut_tail = api.start[c]                # a0, clipped into the gap
    np.clip(cut_tail, g0, g1, out=cut_tail)
    cut_tail[unatt] = g0[unatt]
    cut_dep = api.end[c]                   # a1 + L, clipped into the gap, not before the tail
    del c
    cut_dep[unatt] = g0[unatt]
    cut_dep += lat.ns
    np.maximum(cut_dep, g0, out=cut_dep)
    np.minimum(cut_dep, g1, out=cut_dep)
    np.maximum(cut_dep, cut_tail, out=cut_dep)
    sync = np.zeros(len(g0), bool)
    if att.any():
        sync[att] = sync_in_flight(trace, call[att], g0[att], blocking)
    stall = (cut_tail - g0) >= HOST_STALL_NS
    return GapCauses(g0, g1, nxt, call, cut_tail, cut_dep, sync, _tail_causes(trace, nxt, call, cold_calls, blocking), stall,
                     _migrations(trace, nxt, att), flight, lat)


def _migrations(trace: Trace, op: np.ndarray, att: np.ndarray) -> np.ndarray:
    """Per gap: ended by a unified-memory migration op without a launch row (Nsight copy kinds
    11-13, named `[CUDA memcpy Unified ...]`)."""
    ops, names = trace.ops, trace.strings
    cand = ~att & (op >= 0)
    out = np.zeros(len(op), bool)
    if cand.any():
        o = op[cand]
        uniq = unique_sorted(ops.full_name[o])
        um = uniq[[("Unified" in names[int(u)]) for u in uniq.tolist()]]
        out[cand] = (ops.kind[o] == OP_MEMCPY) & np.isin(ops.full_name[o], um)
    return out


def _tail_causes(trace: Trace, op: np.ndarray, call: np.ndarray, cold_calls: np.ndarray | None,
                 host_blocking: np.ndarray) -> np.ndarray:
    """Per gap, the cause of its tail by the ending op's call: a kernel or graph launch is launch
    (cold start when it is a cold-start call); a copy call is sync when it blocked the host: a
    synchronous copy, a copy to or from pageable memory (Kineto names it `Pageable`), or, where
    the trace does not say the memory kind (Nsight's op names), a call longer than the spike floor
    (§6); any other call (an asynchronous pinned copy, a memset) is a submission like a launch.
    `host_blocking`: host_blocking_calls(trace)."""
    api, ops = trace.api, trace.ops
    c = np.maximum(call, 0)
    kind = api.kind[c]
    launch = (kind == API_LAUNCH) | (kind == API_GRAPH_LAUNCH)
    copy = np.flatnonzero(~launch & (call >= 0) & (ops.kind[np.maximum(op, 0)] == OP_MEMCPY))
    blocking = np.zeros(len(call), bool)
    if len(copy):     # the copy calls' gaps only
        names = trace.strings
        opn, cc = ops.full_name[op[copy]], c[copy]
        uniq = unique_sorted(opn)
        pageable = uniq[[("Pageable" in names[int(u)]) for u in uniq.tolist()]]
        typed = uniq[[("->" in names[int(u)]) for u in uniq.tolist()]]       # the name says the memory kind
        long_call = (api.end[cc] - api.start[cc]) > CONFIG.spike_us * 1e3
        blocking[copy] = np.isin(opn, pageable) | host_blocking[cc] | (long_call & ~np.isin(opn, typed))
    out = np.where(blocking, CAUSES.index("sync"), CAUSES.index("launch")).astype(np.int8)
    if cold_calls is not None and len(cold_calls):
        pos = np.minimum(np.searchsorted(cold_calls, call), len(cold_calls) - 1)
        out[(cold_calls[pos] == call) & (call >= 0)] = CAUSES.index("cold_start")
    return out
