"""One stream's launch calls as the queue class and the report judge them (docs/definitions.md §V3).

Per call (one entry per call: a graph launch's ops count at its first op): its first op's position
in the stream's ops, its depth (pending before it, its own entry and the stream's pre-capture
backlog still pending, §5), its iteration, and whether it was dry (its op started within
L + DRY_SLACK_NS of its return). L is the device's submission latency,
idle_causes.device_latency.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from launchtui.analysis import ceiling as ce
from launchtui.analysis.backpressure import command_buffer_full_ids, first_ops
from launchtui.analysis.exposed import device_ops
from launchtui.analysis.idle_causes import device_latency
from launchtui.analysis.intervals import in_windows
from launchtui.analysis.queue import (backlog_pending, backlog_starts, depth_before_launch, stream_series,
                                      time_at_or_above_with_backlog)
from launchtui.trace.arrays import index_type, nonzero_index, unique_sorted
from launchtui.trace.grouping import dense_groups
from launchtui.trace.model import API_LAUNCH, Trace

DRY_SLACK_NS = 10_000     # an op starting within L + this of its call's return waited for the call
CALL_BLOCK = 1 << 18      # a stream's calls measured at a time (bounded temporaries)


def first_of_runs(a: np.ndarray):
    """`unique_sorted(a, return_index=True)`, without its sort when `a` is already non-decreasing
    (a stream's ops are normally in launch order)."""
    if len(a) < 2 or (a[1:] < a[:-1]).any():
        return unique_sorted(a, return_index=True)
    head = np.empty(len(a), bool)
    head[0] = True
    np.not_equal(a[1:], a[:-1], out=head[1:])
    first = nonzero_index(head)
    return a[first], first


def positions_of(a_u: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Positions in the sorted distinct `a_u` of the sorted `ids` it holds (a search per id: the
    few flagged calls, not a lookup per call)."""
    if not len(ids) or not len(a_u):
        return np.zeros(0, np.int64)
    p = np.searchsorted(a_u, ids)
    ok = p < len(a_u)
    p, ids = p[ok], ids[ok]
    return p[a_u[p] == ids]


def stream_codes(values: np.ndarray) -> tuple[dict, np.ndarray]:
    """({value: code}, code per element) for a column with few distinct values (a device's
    streams): compact codes (uint16 while they fit), so each stream's selection compares those."""
    uniq, code = dense_groups(values)
    code = code.astype(np.uint16 if len(uniq) < 65536 else np.int64)
    return {v: i for i, v in enumerate(uniq.tolist())}, code


@dataclass
class Calls:
    """One stream's launch calls, one entry per call (a graph launch's ops at its first op)."""
    api: np.ndarray        # API indices, sorted
    pos: np.ndarray        # each call's first op's position in the stream's ops (start order)
    depth: np.ndarray      # §V3 depth: pending before the call + its own entry + backlog pending
    k: np.ndarray          # the iteration holding the call's start, -1 none
    dry: np.ndarray        # its op started within L + DRY_SLACK_NS of its return (or before)
    kernel: np.ndarray     # a kernel launch call (not a graph launch, a copy or a memset)


def stream_calls(trace: Trace, on: np.ndarray, dbl: np.ndarray, backlog: np.ndarray, starts: np.ndarray,
                 ends: np.ndarray, dry_ns: int) -> Calls | None:
    """`on`: the stream's ops in start order; `dbl`: queue.depth_before_launch."""
    ops, api = trace.ops, trace.api
    called = ops.api[on]
    matched = called >= 0
    if matched.all():
        a_u, pos = first_of_runs(called)
    elif matched.any():
        a_u, first = first_of_runs(called[matched])
        pos = np.flatnonzero(matched)[first]
    else:
        return None
    del called, matched
    # positions and iterations in 32 bits while they fit: the stream's calls are held while it is
    # judged (20M: ~10M calls, the queue class's peak)
    narrow = index_type(len(on))
    pos = pos.astype(narrow, copy=False)
    n = len(a_u)
    # a depth counts pending ops: fewer than the trace's ops, so 32 bits while those fit
    depth = np.empty(n, index_type(len(ops)))
    k, dry = np.empty(n, narrow), np.empty(n, bool)
    # per call, a block of calls at a time: a block's temporaries, not the stream's (20M: the
    # report's peak, beside the record)
    for i in range(0, n, CALL_BLOCK):
        b = slice(i, i + CALL_BLOCK)
        # indices widened once per block: each feeds two gathers or more, which take numpy's
        # fast path with intp indices (int32 ones are cast in buffers at every use)
        a, op1 = a_u[b].astype(np.intp, copy=False), on[pos[b]].astype(np.intp, copy=False)
        c0 = api.start[a]
        d = dbl[op1].astype(np.int64)
        d += 1
        if len(backlog):
            d += backlog_pending(backlog, c0)
        depth[b] = d
        dry[b] = ops.start[op1] - api.end[a] <= dry_ns
        k[b] = in_windows(c0, starts, ends)
    return Calls(a_u, pos, depth, k, dry, api.kind[a_u] == API_LAUNCH)


def judge_scope(trace: Trace, calls: Calls, on: np.ndarray, scope: np.ndarray, slow: np.ndarray,
                cbf: np.ndarray, slack_ns: int) -> ce.Ceiling:
    """The ceiling over the calls of one scope; `scope`: per call, in it; `slow`, `cbf`: positions."""
    ops, api = trace.ops, trace.api
    held = {}

    def returns(p: np.ndarray) -> np.ndarray:
        if "starts" not in held:            # the stream's op starts: only when a cluster is tested
            held["starts"] = ops.start[on]
        a = calls.api[p]
        return ce.returns_on_op_start(held["starts"], calls.pos[p], api.start[a], api.end[a], slack_ns)

    def normal() -> np.ndarray:
        m = calls.kernel & scope
        m[slow] = False
        p = nonzero_index(m)
        del m
        # a copy of the sample: a strided view would hold every position
        return p[::-(-len(p) // ce.BASELINE_CALLS)].copy() if len(p) > ce.BASELINE_CALLS else p
    return ce.find(calls.depth, slow[scope[slow]], cbf[scope[cbf]], normal, returns)


def streams_ops(trace: Trace, device: int, streams: list[int]) -> list[np.ndarray]:
    """Each stream's ops on the device, ascending (start order): the device's ops once, then each
    stream's by a compact code (no full-length mask per stream)."""
    ops = trace.ops
    dev_ops = device_ops(trace, device, narrow=True)   # held: half the bytes
    by_value, code = stream_codes(ops.stream[dev_ops])
    return [dev_ops[code == by_value[st]] if st in by_value else dev_ops[:0] for st in streams]


def selection_ceilings(trace: Trace, sp: list, lo: int | None = None, hi: int | None = None,
                       devices=None) -> dict:
    """(device, stream) -> its ceiling over the launch calls starting in [lo, hi) (None: unbounded),
    for the streams whose calls there block (ceiling.find): depth, band, blocked calls, and the time
    at or above the band's low end counting the backlog. `sp`: the launch spikes of that window.
    Only streams with MIN_SLOW spikes or an Nsight-flagged call are looked at (`devices`: only
    theirs)."""
    ops = trace.ops
    by: dict = {}
    for e in sp:
        by.setdefault((e.device, e.stream), []).append(e)
    cbf_ids = command_buffer_full_ids(trace)
    first = first_ops(ops.api, cbf_ids) if len(cbf_ids) else cbf_ids
    first = first[first >= 0]
    keys = {k for k, eps in by.items() if len(eps) >= ce.MIN_SLOW}
    keys |= set(zip(ops.device[first].tolist(), ops.stream[first].tolist()))
    keys = {k for k in keys if devices is None or k[0] in devices}
    if not keys:
        return {}
    series = {(s.device, s.stream): s for s in stream_series(trace)}
    dbl = depth_before_launch(trace)
    win = (np.array([-(1 << 62) if lo is None else lo], np.int64), np.array([(1 << 62) if hi is None else hi], np.int64))
    out = {}
    for dev in sorted({d for d, _ in keys}):   # per device with a candidate stream
        streams = [st for d, st in series if d == dev]
        ons = streams_ops(trace, dev, streams)
        latency = device_latency(trace, dev, lambda: ons).ns
        for st, on in zip(streams, ons):
            if (dev, st) not in keys:
                continue
            backlog = backlog_starts(trace, on)
            calls = stream_calls(trace, on, dbl, backlog, *win, latency + DRY_SLACK_NS)
            eps = sorted(by.get((dev, st), []), key=lambda e: e.worst_api)
            slow = positions_of(calls.api, np.fromiter((e.worst_api for e in eps), np.int64, len(eps)))
            c = judge_scope(trace, calls, on, calls.k >= 0, slow, positions_of(calls.api, cbf_ids),
                            latency + ce.RETURN_SLACK_NS)
            if c.found:
                out[(dev, st)] = {"depth": c.depth, "band": list(c.band), "blocked_calls": len(c.blocked),
                                  "time_at_or_above_band_ns": time_at_or_above_with_backlog(
                                      series[(dev, st)], backlog, c.band[0], lo, hi),
                                  "depth_counts": ce.DEPTH_COUNTS, "backlog_ops": len(backlog)}
    return out
