"""What graphing would buy (docs/definitions.md §12.5): the judged iterations re-timed as if one
eager phase ran as CUDA / HIP graphs.

The model, per sampled steady iteration (each from its recorded start, the GPU work in flight then
as recorded):
- every stream runs its ops in their recorded order with their recorded GPU durations:
  end_i = max(ready_i, end_{i-1}) + wait_i + dur_i, vectorised per (iteration, stream) segment
  with a cumulative sum and `np.maximum.accumulate`;
- ready_i = the call's end, shifted as the host is shifted, + the op's own submission lag
  (min(L, recorded start - call end)); wait_i = what the op waited beyond both its call and its
  stream predecessor (a dependency: an event, another stream); so with nothing changed the
  re-timed iteration is the recorded one, op for op;
- a host sync that blocked returns as long after the op it waited for as it did (or as long after
  its own start, when the GPU was idle), so GPU time saved before it moves the host after it;
- the phase's stretches of consecutive launch calls (no sync and no host stall inside) become one
  graph launch each, at the stretch's start: their ops are ready together at its end + L, and run
  with the GPU-side gap of graphed nodes plus any dependency wait of 10 µs or more; the host after
  the stretch moves earlier by the stretch's host time less the graph launch.
Host and syncs feed each other, so the host shifts and the GPU ends are iterated to a fixed point
(exact after at most one pass per sync of an iteration, each pass vectorised).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from launchtui.analysis.idle_causes import HOST_STALL_NS
from launchtui.trace.arrays import median_of
from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, Trace

DEP_NS = 10_000            # a wait this long beyond call and predecessor is a dependency a graph keeps
MIN_GAP_SAMPLES = 20       # queued launches needed to measure the GPU-side gap between queued ops
LOOKBACK_OPS = 4096        # device ops searched before an iteration for each stream's op in flight
MAX_PASSES = 64            # fixed-point passes at most (each is vectorised over the sampled ops)
_NEG = -(1 << 60)


@dataclass
class World:
    """The sampled iterations' ops, launch calls and syncs, ready to re-time. Ops are in (sampled
    iteration, stream, start) order; calls and syncs in start order."""
    it_s: np.ndarray
    it_e: np.ndarray
    k: np.ndarray              # per op: sampled iteration
    head: np.ndarray           # per op: first of its (iteration, stream) segment
    s: np.ndarray
    e: np.ndarray
    call: np.ndarray           # per op: launch call's API row, -1 none
    fixed: np.ndarray          # per op: not launched in its iteration (kept where it ran)
    h: np.ndarray              # per op: its call's end
    a0: np.ndarray             # per op: its call's start
    thread: np.ndarray         # per op: its call's thread, -1 none
    ell: np.ndarray            # per op: its submission lag
    w: np.ndarray              # per op: its wait beyond call and predecessor (0 when `after` explains it)
    after: np.ndarray          # per op: the op on another stream it waited for (position), -1 none
    lag: np.ndarray            # per op: its start - that op's end
    e_init: np.ndarray         # per op: the predecessor's end (heads), else _NEG
    c_api: np.ndarray          # device launch calls in the sampled iterations
    c_k: np.ndarray
    c_a0: np.ndarray
    c_a1: np.ndarray
    c_graph: np.ndarray        # per call: a graph launch
    c_thread: np.ndarray       # per call: its thread
    op_cpos: np.ndarray        # per op: its call's position among the calls, -1 none
    y0: np.ndarray             # syncs on the launching threads
    y1: np.ndarray
    yk: np.ndarray
    yq: np.ndarray             # per sync: the op it waited for (position), -1 when it did not block
    latency: int
    queued_gap: int | None     # the GPU-side gap between queued ops, when measured

    @property
    def n_it(self) -> int:
        return len(self.it_s)


def _slabs(st: np.ndarray, cs, it_s: np.ndarray, it_e: np.ndarray):
    """Per sampled iteration: positions (into the device ops, start order) of its ops: those starting
    in it, and those launched in it starting up to one iteration length later."""
    parts, ks = [], []
    lo = np.searchsorted(st, it_s, side="left")
    mid = np.searchsorted(st, it_e, side="left")
    hi = np.searchsorted(st, it_e + (it_e - it_s), side="left")
    for k in range(len(it_s)):   # per sampled iteration (at most CONFIG.whatif_iterations)
        inside = np.arange(lo[k], mid[k])
        late = np.arange(mid[k], hi[k])
        c = cs(late)
        late = late[(c >= it_s[k]) & (c < it_e[k])]
        p = np.concatenate([inside, late])
        parts.append(p)
        ks.append(np.full(len(p), k, np.int64))
    return np.concatenate(parts), np.concatenate(ks)


def _in_flight(trace: Trace, on: np.ndarray, pos: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """Per op position (heads of segments): the end of the previous op on its stream among the
    LOOKBACK_OPS device ops before it, _NEG when none."""
    ops = trace.ops
    out = np.full(len(pos), _NEG, np.int64)
    for i, (p, sid) in enumerate(zip(pos.tolist(), stream.tolist())):   # per (iteration, stream) segment
        back = on[max(0, p - LOOKBACK_OPS):p]
        hit = np.flatnonzero(ops.stream[back] == sid)
        if len(hit):
            out[i] = int(ops.end[back[hit[-1]]])
    return out


def build_world(trace: Trace, it_s: np.ndarray, it_e: np.ndarray, device: int, calls: np.ndarray,
                syncs: np.ndarray, latency: int) -> World | None:
    """`calls`: the device's launch calls in start order; `syncs`: API rows of host-blocking calls."""
    ops, api = trace.ops, trace.api
    on = np.flatnonzero(ops.device == device)
    st = ops.start[on]

    def cs(p):   # call start of the ops at positions p (their own start without a call)
        a = ops.api[on[p]]
        return np.where(a >= 0, api.start[np.maximum(a, 0)], st[p])
    pos, k = _slabs(st, cs, it_s, it_e)
    if not len(pos):
        return None
    idx = on[pos]
    stream = ops.stream[idx].astype(np.int64)
    o = np.lexsort((ops.start[idx], stream, k))
    pos, idx, k, stream = pos[o], idx[o], k[o], stream[o]
    head = np.ones(len(idx), bool)
    head[1:] = (k[1:] != k[:-1]) | (stream[1:] != stream[:-1])
    s, e = ops.start[idx], ops.end[idx]
    a = ops.api[idx].astype(np.int64)
    cpos = cs(pos)
    ck = np.where(a >= 0, np.searchsorted(it_s, cpos, side="right") - 1, -1)
    fixed = (a < 0) | (ck != k) | (cpos >= it_e[np.maximum(k, 0)])
    h = np.where(a >= 0, api.end[np.maximum(a, 0)], s)
    a0 = np.where(a >= 0, api.start[np.maximum(a, 0)], s)
    e_init = np.full(len(idx), _NEG, np.int64)
    e_init[head] = _in_flight(trace, on, pos[head], stream[head])
    pred = np.where(head, e_init, np.r_[_NEG, e[:-1]])
    ell = np.minimum(latency, s - h)
    w = np.where(fixed, 0, s - np.maximum(h + ell, pred))
    after, lag = _waited_for(k, s, e, w)
    w = np.where(after >= 0, 0, w)
    queued = ~fixed & (api.kind[np.maximum(a, 0)] == API_LAUNCH) & (pred > h + latency)
    qgap = int(median_of(s[queued] - pred[queued])) if queued.sum() >= MIN_GAP_SAMPLES else None
    c_in = np.searchsorted(it_s, api.start[calls], side="right") - 1
    ok = (c_in >= 0) & (api.start[calls] < it_e[np.maximum(c_in, 0)])
    c_api, c_k = calls[ok], c_in[ok]
    by_id = np.argsort(c_api, kind="stable")
    j = np.minimum(np.searchsorted(c_api[by_id], a), max(len(c_api) - 1, 0))
    op_cpos = np.where((a >= 0) & ~fixed & (c_api[by_id[j]] == a), by_id[j], -1) if len(c_api) else np.full(len(a), -1)
    y0, y1, yk, yq = _syncs(trace, syncs, it_s, it_e, k, s, e, a0, fixed)
    thread = np.where(a >= 0, api.thread[np.maximum(a, 0)], -1)
    return World(it_s, it_e, k, head, s, e, a, fixed, h, a0, thread, ell, w, after, lag, e_init, c_api, c_k, api.start[c_api],
                 api.end[c_api], api.kind[c_api] == API_GRAPH_LAUNCH, api.thread[c_api], op_cpos,
                 y0, y1, yk, yq, latency, qgap)


def _waited_for(k: np.ndarray, s: np.ndarray, e: np.ndarray, w: np.ndarray):
    """Per op that waited DEP_NS or more beyond its call and its stream predecessor: the op that
    ended last, no later than its start, inside that wait (on another stream: the predecessor ended
    before the wait began). The traces read hold no event ids, so the wait is taken to be for that
    op, an event recorded after it; a wait no op's end explains stays as recorded."""
    after = np.full(len(s), -1, np.int64)
    lag = np.zeros(len(s), np.int64)
    i = np.flatnonzero(w >= DEP_NS)
    if not len(i):
        return after, lag
    base = int(min(e.min(), s.min()))
    span = int(max(e.max(), s.max())) - base + 2
    key = k * span + (e - base)
    oe = np.argsort(key, kind="stable")
    j = np.searchsorted(key[oe], k[i] * span + (s[i] - base), side="right") - 1
    cand = oe[np.maximum(j, 0)]
    hit = (j >= 0) & (k[cand] == k[i]) & (e[cand] > s[i] - w[i])
    after[i[hit]] = cand[hit]
    lag[i[hit]] = s[i[hit]] - e[cand[hit]]
    return after, lag


def _syncs(trace: Trace, syncs: np.ndarray, it_s, it_e, k, s, e, a0, fixed):
    """The syncs inside the sampled iterations, and per sync the op it waited for: of the
    iteration's ops launched before it, the one ending last no later than its return, when that end
    came after the sync began (it blocked); -1 otherwise."""
    api = trace.api
    y0, y1 = api.start[syncs], api.end[syncs]
    yk = np.searchsorted(it_s, y0, side="right") - 1
    ok = (yk >= 0) & (y0 < it_e[np.maximum(yk, 0)])
    o = np.argsort(y0[ok], kind="stable")
    y0, y1, yk = y0[ok][o], y1[ok][o], yk[ok][o]
    yq = np.full(len(y0), -1, np.int64)
    if not len(y0) or not len(e):
        return y0, y1, yk, yq
    # ops in (iteration, end) order: the last end <= y1 of the sync's iteration, by one search
    span = int(max(e.max(), y1.max()) - min(e.min(), y0.min())) + 2
    base = int(min(e.min(), y0.min()))
    key = k * span + (e - base)
    oe = np.argsort(key, kind="stable")
    j = np.searchsorted(key[oe], yk * span + (y1 - base), side="right") - 1
    cand = oe[np.maximum(j, 0)]
    hit = (j >= 0) & (k[cand] == yk) & (e[cand] >= y0) & ((a0[cand] < y0) | fixed[cand])
    yq[hit] = cand[hit]
    return y0, y1, yk, yq


def seg_cummax(v: np.ndarray, head: np.ndarray) -> np.ndarray:
    """Running maximum of `v` restarted at every `head` (contiguous segments)."""
    if not len(v):
        return v.copy()
    seg = np.cumsum(head) - 1
    lo = int(v.min())
    top = int(v.max()) - lo + 1
    if (int(seg[-1]) + 1) * top < (1 << 62):
        lift = seg.astype(np.int64) * top
        return np.maximum.accumulate(v - lo + lift) - lift + lo
    out = v.copy()
    bounds = np.append(np.flatnonzero(head), len(v))
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):   # per segment, spans too long to lift
        out[a:b] = np.maximum.accumulate(v[a:b])
    return out


def seg_cumsum_before(c: np.ndarray, head: np.ndarray) -> np.ndarray:
    """Per element: the sum of `c` over the earlier elements of its segment."""
    cs = np.cumsum(c)
    before = cs - c
    return before - before[np.flatnonzero(head)][np.cumsum(head) - 1]


@dataclass
class Runs:
    """The stretches to graph: per run its sampled iteration, host start (the graph launch), host
    end, the host time it removes less the graph launch (`saved`), and per op the run it joins."""
    k: np.ndarray
    t0: np.ndarray
    t1: np.ndarray
    saved: np.ndarray
    cost: np.ndarray           # per run: its graph launch's host cost
    op_run: np.ndarray         # per op: its run, -1 when it stays as it ran


def _copies_inside(W: World, op_run: np.ndarray, t0, t1, rk) -> None:
    """Ops of other calls (asynchronous copies and memsets: capturable) made inside a stretch's host
    span join its graph: no launch of another phase lies between the stretch's launches, so they
    are its work."""
    other = (W.op_cpos < 0) & ~W.fixed & (W.call >= 0)
    if not len(t0) or not other.any():
        return
    i = np.flatnonzero(other)
    r = np.searchsorted(t0, W.a0[i], side="right") - 1
    ok = r >= 0
    rr = np.maximum(r, 0)
    ok &= (W.a0[i] < t1[rr]) & (rk[rr] == W.k[i])
    op_run[i[ok]] = r[ok]


def retime(W: World, runs: Runs | None, node_gap: int, max_passes: int | None = None) -> tuple[np.ndarray, bool]:
    """(per sampled iteration its re-timed duration in ns, whether the passes reached the fixed
    point). `runs` None: nothing changes (the recorded iterations come back)."""
    n_runs = 0 if runs is None else len(runs.k)
    # host items in time order: graphed runs (shift by -saved) and syncs (return after what they wait on)
    t0 = np.concatenate([runs.t0 if n_runs else np.zeros(0, np.int64), W.y0])
    t1 = np.concatenate([runs.t1 if n_runs else np.zeros(0, np.int64), W.y1])
    ik = np.concatenate([runs.k if n_runs else np.zeros(0, np.int64), W.yk])
    o = np.lexsort((t0, ik))
    t0, t1, ik = t0[o], t1[o], ik[o]
    is_sync = o >= n_runs
    si = np.where(is_sync, o - n_runs, 0)
    q = np.where(is_sync, np.append(W.yq, -1)[si], -1)
    blocked = q >= 0
    dq = np.where(blocked, W.e[np.maximum(q, 0)], 0)
    a = np.where(is_sync, np.where(blocked, np.append(W.y0, 0)[si] - dq, 0), -(runs.saved[np.where(is_sync, 0, o)] if n_runs else 0))
    ihead = np.ones(len(ik), bool)
    ihead[1:] = ik[1:] != ik[:-1]
    A = seg_cumsum_before(a, ihead) + a
    member = runs.op_run >= 0 if n_runs else np.zeros(len(W.s), bool)
    run_pos = np.zeros(n_runs, np.int64)
    if n_runs:
        run_pos[o[~is_sync]] = np.flatnonzero(~is_sync)
    dep = np.where(W.w >= DEP_NS, W.w, 0)
    dur = W.e - W.s
    c = np.where(W.fixed, dur, np.where(member, dur + node_gap + dep, dur + W.w))
    C = seg_cumsum_before(c, W.head)
    # the item before each op's call, searched once (items are disjoint, in time order per iteration)
    key_t = ik * (1 << 40) + (t1 - W.it_s[np.maximum(ik, 0)]) if len(ik) else ik
    op_key = W.k * (1 << 40) + (W.a0 - W.it_s[W.k])
    at = np.searchsorted(key_t, op_key, side="right") - 1
    at_ok = (at >= 0) & (ik[np.maximum(at, 0)] == W.k) if len(ik) else np.zeros(len(W.k), bool)
    e_new = W.e.copy()
    x = np.zeros(len(ik), np.int64)
    waits = W.after >= 0
    limit = max_passes or min(MAX_PASSES, (int(np.bincount(W.yk).max()) if len(W.yk) else 0)
                              + (int(np.bincount(W.k[waits]).max()) if waits.any() else 0) + 2)
    for n_pass in range(limit):   # to the fixed point: a pass settles at least the next sync or wait
        b = np.where(blocked, e_new[np.maximum(q, 0)] - dq, _NEG)
        x_new = A + np.maximum(seg_cummax(np.maximum(b - A, -1), ihead), 0) if len(ik) else x
        d_call = np.where(at_ok, x_new[np.maximum(at, 0)], 0) if len(ik) else np.zeros(len(W.k), np.int64)
        prev_x = np.where(ihead, 0, np.r_[0, x_new[:-1]]) if len(ik) else x_new
        r = np.where(W.fixed, W.s, W.h + d_call + W.ell)
        if n_runs:
            rr = runs.t0 + prev_x[run_pos] + runs.cost + W.latency
            r = np.where(member, rr[np.maximum(runs.op_run, 0)], r)
        if n_pass == 0:   # a first guess: each op moved as its readiness did (a uniform shift settles at once)
            e_new = W.e + np.where(W.fixed, 0, r - (W.h + W.ell))
        r = np.where(waits, np.maximum(r, e_new[np.maximum(W.after, 0)] + W.lag), r)
        first = np.maximum(r - C, np.where(W.head, W.e_init, _NEG))
        e_next = seg_cummax(first, W.head) + C + c
        settled = n_pass > 0 and np.array_equal(x_new, x) and np.array_equal(e_next, e_new)
        x, e_new = x_new, e_next
        if settled:
            break
    return _iteration_ends(W, e_new, x, ik, t1) - W.it_s, settled


def _iteration_ends(W: World, e_new: np.ndarray, x: np.ndarray, ik: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """Per sampled iteration: its end once the host has reached its end mark (moved by the host
    shift there) and the GPU has run its work (as far past the mark as it ran)."""
    n = W.n_it
    d_end = np.zeros(n, np.int64)
    if len(ik):
        last = np.flatnonzero(np.r_[ik[1:] != ik[:-1], True])
        d_end[ik[last]] = x[last]
    own = ~W.fixed
    gpu = np.full(n, _NEG, np.int64)
    gpu_new = np.full(n, _NEG, np.int64)
    np.maximum.at(gpu, W.k[own], W.e[own])
    np.maximum.at(gpu_new, W.k[own], e_new[own])
    spill = np.maximum(gpu - W.it_e, 0)
    return np.where(gpu > _NEG, np.maximum(W.it_e + d_end, gpu_new - spill), W.it_e + d_end)


def graphed_runs(W: World, member_call: np.ndarray, cost: int, per_node: int | None, low: bool) -> Runs:
    """The phase's stretches: consecutive device launch calls of the phase in one iteration, with no
    sync starting and no host stall (>= 1 ms) between two of them; a stretch of one launch stays a
    launch. The low end (`low`): the host time before the stretch's first call (from the previous
    launch call, sync or the iteration's start; under 1 ms) is removed too, as §V2 charges it to the
    phase, and the graph launch costs the lesser of `cost` and `per_node` x its nodes; the high end
    keeps that host time and takes the greater (a graph launch's host cost grows with its nodes on
    some runtimes: HIP in the shared samples)."""
    n = len(W.c_api)
    m = member_call
    gap = W.c_a0[1:] - W.c_a1[:-1]
    ysync = np.searchsorted(W.y0, W.c_a0[1:]) - np.searchsorted(W.y0, W.c_a1[:-1])
    join = m[1:] & m[:-1] & (W.c_k[1:] == W.c_k[:-1]) & (gap < HOST_STALL_NS) & (ysync == 0)
    start = m.copy()
    start[1:] &= ~join
    rid = np.cumsum(start) - 1
    rid[~m] = -1
    size = np.bincount(rid[m], minlength=int(start.sum()))
    keep = size >= 2
    first = np.flatnonzero(start)[keep]
    last = first + size[keep] - 1
    t0, t1 = W.c_a0[first], W.c_a1[last]
    head = np.zeros(len(first), np.int64)
    if low and len(first):
        prev = np.where((first > 0) & (W.c_k[np.maximum(first - 1, 0)] == W.c_k[first]),
                        W.c_a1[np.maximum(first - 1, 0)], W.it_s[W.c_k[first]])
        if len(W.y1):   # the last sync of the iteration ending before the stretch
            j = np.searchsorted(W.y1, t0, side="right") - 1
            prev = np.where((j >= 0) & (W.yk[np.maximum(j, 0)] == W.c_k[first]),
                            np.maximum(prev, W.y1[np.maximum(j, 0)]), prev)
        head = t0 - prev
        head = np.where((head > 0) & (head < HOST_STALL_NS), head, 0)
    new_id = np.full(len(size), -1, np.int64)
    new_id[keep] = np.arange(int(keep.sum()))
    call_run = np.where(rid >= 0, new_id[np.maximum(rid, 0)], -1)
    op_run = np.where(W.op_cpos >= 0, call_run[np.maximum(W.op_cpos, 0)], -1)
    _copies_inside(W, op_run, t0, t1, W.c_k[first])
    n = size[keep]
    c = np.full(len(first), cost, np.int64)
    if per_node is not None:
        c = (np.minimum if low else np.maximum)(c, per_node * n)
    return Runs(W.c_k[first], t0 - head, t1, (t1 - t0) + head - c, c, op_run)
