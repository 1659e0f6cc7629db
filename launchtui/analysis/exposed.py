"""Per-iteration launch figures on one device and its idle gaps (docs/definitions.md §V2).

- GPU busy: the union of the device's GPU ops (kernels, memcpy, memset, any stream, matched or
  not). GPU idle: the rest of the iteration; what each gap waited for is idle_causes.py's. The
  record reads a graph-level trace through graph_busy.busy_trace: each replay's span is an op.
- Launch calls for the device: API calls of launch kind (`cudaLaunch*`, `cuLaunch*`, HIP
  launches, graph launches) that launched at least one op on it.
- Launches and launch-API time of an iteration: the device's launch calls that start in it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from launchtui.analysis import intervals as iv
from launchtui.trace.arrays import index_type, nonzero_index
from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, Trace

GAP_BUCKETS_NS = (10_000, 100_000, 1_000_000)   # < 10 µs, 10-100 µs, 0.1-1 ms, >= 1 ms
GAP_BUCKET_LABELS = ("<10us", "10-100us", "0.1-1ms", ">=1ms")
CALL_BLOCK = 1 << 20                            # launch calls summed at a time


def launch_devices(trace: Trace, devices=None) -> dict[int, np.ndarray]:
    """Devices (of `devices`, None: all) with launched ops -> their launch calls, most launches
    first, then by id: the first is the device the record judges (definitions.md §V1)."""
    out = {}
    for d in trace.device_ids():
        if devices is not None and d not in devices:
            continue
        calls = device_launch_calls(trace, d)
        if len(calls):
            out[d] = calls
    return dict(sorted(out.items(), key=lambda x: (-len(x[1]), x[0])))


def device_ops(trace: Trace, device: int, narrow: bool = False) -> np.ndarray:
    """The device's GPU ops as ascending indices: the record gathers its columns by index, not by a
    full-length mask: an index gather costs a fraction of a masked one. `narrow`: in 32 bits while
    they fit (arrays.nonzero_index), for a caller that holds them."""
    mask = trace.ops.device == device
    return nonzero_index(mask) if narrow else np.flatnonzero(mask)


def device_launch_calls(trace: Trace, device: int, ops_on: np.ndarray | None = None) -> np.ndarray:
    """API indices of the launch-kind calls that launched an op on `device`, in start order, in
    the model's API-index dtype (ops.api: 32 bits while they fit): the record holds every device's
    calls to its end (20M: its peak). `ops_on`: device_ops(trace, device) when the caller has them."""
    ops, api = trace.ops, trace.api
    ops_on = device_ops(trace, device) if ops_on is None else ops_on
    # a mask, not a sort; one slot past the calls takes the unmatched ops' -1 (no filtering pass)
    mark = np.zeros(len(api) + 1, bool)
    mark[ops.api[ops_on]] = True
    a = np.flatnonzero(mark[:-1])
    del mark
    kind = api.kind[a]
    a = a[(kind == API_LAUNCH) | (kind == API_GRAPH_LAUNCH)]
    st = api.start[a]
    if len(a) > 1 and (st[1:] < st[:-1]).any():    # API rows are normally in start order already
        a = a[np.argsort(st, kind="stable")]
    return a.astype(ops.api.dtype, copy=False)


@dataclass
class DeviceGaps:
    """The device's idle gaps inside [lo, hi), each with the op ending it among the ops launched by
    a launch-kind call. `light()` keeps what the queue class reads (end, next_stream, waited): one
    device's gaps at 5M are ~2.5M rows."""
    busy: tuple[np.ndarray, np.ndarray] | None
    start: np.ndarray | None
    end: np.ndarray
    next_stream: np.ndarray | None   # stream of the op that ends the gap; -1 none (None: not asked for)
    waited: np.ndarray | None        # bool: that op's launch call ended after the gap began (in flight)

    def light(self) -> DeviceGaps:
        return DeviceGaps(None, None, self.end, self.next_stream, self.waited)


def _by_start_then_launch(trace: Trace, lk: np.ndarray) -> np.ndarray:
    """Ops `lk` ordered by (start, their launch call's start), stably: the lexsort of both keys.
    Ops are stored in start order, so only runs of equal starts need the second key; the rest
    stays where it is (no sort of every launched op: the record's CPU, bench/MISSED.md)."""
    ops, api = trace.ops, trace.api
    st = ops.start[lk]
    if len(st) > 1 and (st[1:] < st[:-1]).any():    # not in start order: the general sort
        return lk[np.lexsort((api.start[ops.api[lk]], st))]
    tie = np.zeros(len(st), bool)
    if len(st) > 1:
        eq = st[1:] == st[:-1]
        tie[1:] = eq
        tie[:-1] |= eq
        del eq
    pos = np.flatnonzero(tie)
    if not len(pos):
        return lk
    # runs of equal starts keep their positions; inside a run, launch order (stable)
    out = lk.copy()
    out[pos] = lk[pos[np.lexsort((api.start[ops.api[lk[pos]]], st[pos]))]]
    return out


def device_gaps(trace: Trace, device: int, lo: int, hi: int, calls: np.ndarray | None = None,
                full: bool = True, ending: bool = True) -> DeviceGaps:
    """`calls`: device_launch_calls(trace, device) when the caller has them. `full=False`: the
    light gaps only (`DeviceGaps.light`: what the queue class reads), without the busy set.
    `ending=False`: the busy set and the gaps' bounds only (next_stream and waited None: the
    record's causes find each gap's ending op by their own rule, idle_causes.ending_ops).
    Temporaries go as soon as used: at 5M this is the record's peak (bench/MISSED.md)."""
    ops, api = trace.ops, trace.api
    on = device_ops(trace, device)
    *busy, heads = iv.union_heads(ops.start[on], ops.end[on], heads=ending)
    gs, ge, kept = iv.complement_kept(busy[0], busy[1], lo, hi)
    gs, ge = gs[kept], ge[kept]
    if not ending:
        return DeviceGaps(tuple(busy) if full else None, gs, ge, None, None)
    if heads is not None:   # per gap: the position in `on` of the busy run it ends, -1 for the last
        heads = np.concatenate([heads, np.full(1, -1, heads.dtype)])[kept]
    del kept
    busy = tuple(busy) if full else None
    # the op that ends each gap: among ops starting exactly at g1, the earliest launched by a
    # launch-kind call
    calls = device_launch_calls(trace, device, on) if calls is None else calls
    is_call = np.zeros(len(api) + 1, bool)     # the last slot, False, answers the unmatched ops' -1
    is_call[calls] = True
    keep = is_call[ops.api[on]]
    del is_call
    if heads is not None:   # per position in `on`: how many of the launched ops come before it
        before = np.empty(len(keep) + 1, index_type(len(keep)))
        before[0] = 0
        np.cumsum(keep, out=before[1:])
    lk = on if keep.all() else on[keep]     # the device's ops launched by a launch-kind call
    del on, keep
    lk = _by_start_then_launch(trace, lk)
    if heads is not None and len(lk):
        nxt = _ending_ops_by_heads(trace, lk, before, heads, ge)
        del before
    else:
        nxt = _ending_ops(trace, lk, ge)
    del lk, heads
    a_next = np.where(nxt >= 0, ops.api[np.maximum(nxt, 0)], -1)
    nst = np.where(nxt >= 0, ops.stream[np.maximum(nxt, 0)], -1)
    del nxt
    waited = np.where(a_next >= 0, api.end[np.maximum(a_next, 0)], -1) > gs
    if not full:
        return DeviceGaps(None, None, ge, nst, waited)
    return DeviceGaps(busy, gs, ge, nst, waited)


def _ending_ops(trace: Trace, lk: np.ndarray, ge: np.ndarray) -> np.ndarray:
    """Per gap end: the first of `lk` (ops in (start, launch start) order) starting exactly there,
    -1 when none."""
    key_start = trace.ops.start[lk]
    j = np.searchsorted(key_start, ge, side="left")
    if not len(lk):
        return np.full(len(ge), -1, np.int64)
    np.minimum(j, len(lk) - 1, out=j)
    return np.where(key_start[j] == ge, lk[j], -1)


def _ending_ops_by_heads(trace: Trace, lk: np.ndarray, before: np.ndarray, heads: np.ndarray,
                         ge: np.ndarray) -> np.ndarray:
    """`_ending_ops` without the search, when the busy union neither sorted nor dropped any of the
    device's ops (in start order): a gap ending where a busy run begins ends at the run's first
    position h, and every op before h starts earlier (its end, > its start, is before the run), so
    the search's answer is the count of `lk` ops before h (`before[h]`; `lk` is the device's ops
    less those not launched by a launch-kind call, ties in launch order). Gaps clipped at hi, and
    the last one, are searched."""
    j = before[np.maximum(heads, 0)]
    np.minimum(j, len(lk) - 1, out=j)
    nxt = lk[j]
    hit = trace.ops.start[nxt] == ge
    odd = heads < 0
    nxt[~hit] = -1
    if odd.any():
        nxt[odd] = _ending_ops(trace, lk, ge[odd])
    return nxt


@dataclass
class IterationFigures:
    """One value per iteration (arrays), all int64 ns except counts."""
    launches: np.ndarray
    launch_api_ns: np.ndarray
    busy_ns: np.ndarray
    idle_ns: np.ndarray
    exposed_ns: np.ndarray
    iteration_ns: np.ndarray


def per_iteration(trace: Trace, device: int, starts: np.ndarray, ends: np.ndarray, exposed_ns: np.ndarray,
                  gaps: DeviceGaps | None = None, calls: np.ndarray | None = None) -> IterationFigures:
    """`exposed_ns`: the launch cause per iteration (idle_causes.GapCauses.measure_in)."""
    lo, hi = int(starts.min()), int(ends.max())
    calls = device_launch_calls(trace, device) if calls is None else calls
    g = gaps or device_gaps(trace, device, lo, hi, calls)
    api = trace.api
    cs = api.start[calls]
    a = np.searchsorted(cs, starts, side="left")
    b = np.searchsorted(cs, ends, side="left")
    del cs
    length = ends - starts
    busy = iv.measure_in(g.busy[0], g.busy[1], starts, ends)
    return IterationFigures(
        launches=(b - a).astype(np.int64), launch_api_ns=_duration_sums(api, calls, a, b),
        busy_ns=busy.astype(np.int64), idle_ns=(length - busy).astype(np.int64),
        exposed_ns=np.asarray(exposed_ns, np.int64),
        iteration_ns=length.astype(np.int64))


def _duration_sums(api, calls: np.ndarray, a: np.ndarray, b: np.ndarray, block: int = CALL_BLOCK) -> np.ndarray:
    """Per window k: the total duration (int64 ns, exact) of calls[a_k:b_k], from the calls'
    prefix sums taken at the window bounds only, a block of calls at a time: no full-length
    cumulative sum (20M: one of the record's peaks)."""
    pos = np.concatenate([a, b])
    order = np.argsort(pos, kind="stable")
    at = pos[order]
    cum = np.zeros(len(pos), np.int64)      # sum of the durations before each bound
    done = 0
    for s in range(0, len(calls), block):   # bounds p in (s, s + len(c)] read this block's sums
        c = calls[s:s + block]
        part = np.cumsum(api.end[c] - api.start[c], dtype=np.int64)
        i, j = np.searchsorted(at, [s + 1, s + len(c) + 1], side="left")
        cum[order[i:j]] = done + part[at[i:j] - s - 1]
        done += int(part[-1])
    return cum[len(a):] - cum[:len(a)]


def gap_histogram(g: DeviceGaps, starts: np.ndarray, ends: np.ndarray) -> dict:
    """Idle gaps inside the iterations by length bucket: count and total ms. A gap is cut where an
    iteration ends; each piece counts by its own length."""
    ws, we = iv.union(starts, ends)
    # a gap inside one window is its own piece; only those crossing or outside the windows (at
    # most two per window cross one) are intersected
    w = iv.in_windows(g.start, ws, we) if len(ws) else np.full(len(g.start), -1, np.int64)
    full = w >= 0
    if len(ws):
        full &= g.end <= we[np.maximum(w, 0)]
    del w
    length = g.end[full] - g.start[full]
    if not full.all():
        rest = ~full
        ps, pe = iv.intersect((g.start[rest], g.end[rest]), (ws, we))
        length = np.concatenate([length, pe - ps])
    b = np.searchsorted(np.asarray(GAP_BUCKETS_NS), length, side="right")
    out = {}
    for i, label in enumerate(GAP_BUCKET_LABELS):
        m = b == i
        out[label] = {"count": int(m.sum()), "total_ms": round(float(length[m].sum()) / 1e6, 3)}
    return out
