"""Pending-launch depth per (device, stream) as a step function, and per GPU op the depth just before
its launch call (definitions.md §5, §6): the queue half of the trace's index (analysis/index.py),
built once, then read-only."""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from launchtui.trace.arrays import unique_sorted
from launchtui.trace.grouping import dense_groups
from launchtui.trace.model import API_GRAPH_LAUNCH, Trace

# depths (series values, depth before launch) are int16 when every one is at most this (the usual
# case: the launch queue holds ~1,000), leaving headroom for the readers' small offsets (`d + 1`)
SMALL_DEPTH = (1 << 14) - 1
COMPACT_BLOCK = 1 << 20   # elements per block of an in-place compaction (bounded temporaries)
# times are merged as 2 t + (1 for a +1): equal times then sort -1 first, and t comes back by a shift
_KEY_LIMIT = 1 << 62


@dataclass
class StreamSeries:
    device: int
    stream: int
    t: np.ndarray            # change times (ns), strictly increasing
    v: np.ndarray            # depth from t[i] until t[i+1] (int16 up to SMALL_DEPTH, else int32)
    point_mean: float        # HTA-style mean over every +1/-1 change point (not time-weighted)
    points: int
    max_graph_as_one: int    # max depth when a whole graph replay counts as one entry
    graph_ops: int           # matched ops launched by graph launches

    def value_at(self, times: np.ndarray) -> np.ndarray:
        """Depth in effect at each time (after all changes at that time)."""
        pos = np.searchsorted(self.t, times, side="right") - 1
        return np.where(pos >= 0, self.v[np.maximum(pos, 0)], 0)


def _stream_depth(ops_start: np.ndarray, sel: np.ndarray, api_start: np.ndarray, calls: np.ndarray):
    """`_merge_depth` of one stream's ops `sel` (in start order) and their launch calls `calls`,
    gathered straight into the halves of the merge's key array (no separate n-long copies of the
    two time columns), and the permutation that sorted the launch starts (None: already sorted;
    the depths before come back in sorted launch order)."""
    key = np.empty(len(sel) + len(calls), np.int64)
    minus, plus = key[:len(sel)], key[len(sel):]
    np.take(ops_start, sel, out=minus)
    np.take(api_start, calls, out=plus)
    perm = None
    # FIFO: a stream runs ops in launch order, so launch starts are almost always sorted
    if len(plus) > 1 and not (plus[1:] >= plus[:-1]).all():
        perm = np.argsort(plus, kind="stable")
        plus[:] = plus[perm]
    return (*_merge_depth(plus, minus, key), perm)


def _merge_depth(plus: np.ndarray, minus: np.ndarray, key: np.ndarray | None = None):
    """Depth series of one stream from its +1 times (launch calls) and -1 times (op starts), both
    sorted. Equal times apply -1 before +1. Returns (distinct times, depth after all changes at
    each, int32), the mean depth over every change point, and the depth before each +1 event.
    `key`: an array of len(minus) + len(plus) whose halves `minus` and `plus` are (reused as the
    merge's key, so both are overwritten), else None.

    One stable sort of the two runs with the event's sign in the key's low bit: numpy's stable sort
    of int64 is a timsort, which merges two sorted runs in one linear pass (cheaper than a binary
    search per launch, and no n-long int64 ranks or positions)."""
    na, n = len(plus), len(plus) + len(minus)
    if not na or not len(minus) or min(plus[0], minus[0]) < -_KEY_LIMIT or max(plus[-1], minus[-1]) >= _KEY_LIMIT:
        return _merge_depth_search(plus, minus)
    key = np.empty(n, np.int64) if key is None else key
    np.multiply(minus, 2, out=key[:n - na])
    np.multiply(plus, 2, out=key[n - na:])
    key[n - na:] += 1
    key.sort(kind="stable")
    step = np.empty(n, np.int8)
    np.bitwise_and(key, 1, out=step, casting="unsafe")
    is_plus = step.astype(bool)
    step += step
    step -= 1
    depth = np.cumsum(step, dtype=np.int32)
    del step
    before = depth[is_plus]
    before -= 1                                        # depth just before each +1, in plus order
    del is_plus
    key >>= 1                                          # the times
    return _distinct(key, depth, before)


def _merge_depth_search(plus: np.ndarray, minus: np.ndarray):
    """`_merge_depth` by one searchsorted of the +1s into the -1s: for times beyond +-2^62 (the
    key above would overflow) and empty sides."""
    na, n = len(plus), len(plus) + len(minus)
    rank = np.arange(na)
    pos = np.searchsorted(minus, plus, side="right")   # -1s applied before each +1
    before = np.subtract(rank, pos, dtype=np.int32)    # depth just before each +1
    pos += rank                                        # now the +1s' merged positions
    del rank
    is_minus = np.ones(n, bool)
    is_minus[pos] = False
    t = np.empty(n, np.int64)
    t[pos] = plus
    del pos
    t[is_minus] = minus
    step = np.ones(n, np.int8)
    step[is_minus] = -1
    del is_minus
    depth = np.cumsum(step, dtype=np.int32)
    del step
    return _distinct(t, depth, before)


def _distinct(t: np.ndarray, depth: np.ndarray, before: np.ndarray):
    """(distinct times, the depth after all changes at each, mean depth over every change, before);
    the first two compacted in their own buffers (leading slices of them)."""
    n = len(t)
    point_mean = float(depth.mean()) if n else float("nan")
    last = np.ones(n, bool)
    np.not_equal(t[1:], t[:-1], out=last[:-1])   # the value at t is the one after all changes at t
    if last.all():                               # no two changes at one time: no copies
        return t, depth, point_mean, before
    return _compact(t, last), _compact(depth, last), point_mean, before


def _compact(a: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """a[keep], written over `a`'s own leading elements block by block (a kept element only moves
    left, past elements already read), and returned as a's leading slice: equal times are few, so
    this keeps a few bytes of slack instead of allocating a second n-long copy."""
    w = 0
    for s in range(0, len(a), COMPACT_BLOCK):   # one iteration per block
        kept = a[s:s + COMPACT_BLOCK][keep[s:s + COMPACT_BLOCK]]   # a copy: the block is read first
        a[w:w + len(kept)] = kept
        w += len(kept)
    return a[:w]


def _max_without(t: np.ndarray, v: np.ndarray, plus: np.ndarray, minus: np.ndarray) -> int:
    """max over i of v[i] - (#plus <= t[i] - #minus <= t[i]): the series' peak with some entries taken
    out (each +1 at its time in `plus`, -1 at its time in `minus`). The correction only changes at
    those few times, so the series splits into runs of constant correction, each run's max taken by
    one reduceat: no n-long positions or differences."""
    e = unique_sorted(np.concatenate([plus, minus]))
    corr = np.searchsorted(np.sort(plus), e, side="right") - np.searchsorted(np.sort(minus), e, side="right")
    starts = np.concatenate([[0], np.searchsorted(t, e, side="left")])   # first t >= each change time
    corr = np.concatenate([[0], corr])
    keep = np.ones(len(starts), bool)                  # runs with no t in them (several changes
    keep[:-1] = starts[1:] > starts[:-1]               # before the next t) hold no value
    keep &= starts < len(t)
    starts, corr = starts[keep], corr[keep]
    return int((np.maximum.reduceat(v, starts).astype(np.int64) - corr).max())


def _stream_groups(device: np.ndarray, stream: np.ndarray):
    """(sorted distinct (device, stream) keys, group per op as uint16 or int64, key -> device,
    key -> stream). One key per op, device-major, in the narrowest integer type that holds it (no
    n-long int64 group ids per column)."""
    d0, d1, s0, s1 = int(device.min()), int(device.max()), int(stream.min()), int(stream.max())
    width = s1 - s0 + 1
    small = max(-d0, d1, -s0, s1, (d1 - d0 + 1) * width) < 2**30   # every step below fits int32
    key = device.astype(np.int32 if small else np.int64)
    key -= d0
    key *= width
    key -= s0
    key += stream
    skeys, grp = dense_groups(key)
    del key
    grp = grp.astype(np.uint16 if len(skeys) < 65535 else np.int64, copy=False)
    return skeys, grp, lambda k: int(k) // width + d0, lambda k: int(k) % width + s0


class QueueSeriesWork:
    """Depth series for every stream, and per op the depth before its launch call (int16 up to
    SMALL_DEPTH, else int32), one stream at a time, the largest first, on every thread that calls
    `work`: the index's helper begins it beside the index's other parts, and the index's own thread
    takes the streams left once those are done (two streams of 500k ops each at 1M kernels, where
    the helper alone ran ~50 ms after the other parts ended). Each stream's series and depths are
    its own, whoever computes them; the depths are written in turn (`_lock`), as each stream ends,
    so no more than one stream's depths per thread is held."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self.dbl = np.full(len(trace.ops), -1, np.int16)   # int32 once a depth passes SMALL_DEPTH
        self._lock = threading.Lock()
        self._setup_lock = threading.Lock()
        self._ready = False
        self._todo: list[tuple[int, int, int, int]] = []   # (ops, group, lo, hi), the largest last
        self._done: list[tuple[int, StreamSeries]] = []

    def _setup(self) -> None:
        """(device, stream) groups over all ops (no gathered copies of the matched ones); unmatched
        ops go to an extra last group, and a stream with no matched op is skipped."""
        ops = self.trace.ops
        unmatched = ops.api < 0
        if unmatched.all():
            return
        skeys, grp, self._dev_of, self._stream_of = _stream_groups(ops.device, ops.stream)
        grp[unmatched] = len(skeys)
        del unmatched
        by_stream = np.argsort(grp, kind="stable")
        if len(by_stream) < 2**31:   # held while streams are left: 4 bytes per op, not 8
            by_stream = by_stream.astype(np.int32)
        bounds = np.zeros(len(skeys) + 1, np.int64)   # each stream's run in by_stream (unmatched last)
        np.cumsum(np.bincount(grp, minlength=len(skeys) + 1)[:-1], out=bounds[1:])
        del grp
        self._skeys, self._by_stream = skeys, by_stream
        self._todo = sorted((int(hi - lo), g, int(lo), int(hi))
                            for g, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])) if hi > lo)

    def work(self) -> None:
        """Compute streams on this thread until none is left untaken (the first caller groups the
        ops first; a caller arriving meanwhile waits for the groups)."""
        with self._setup_lock:
            if not self._ready:
                self._setup()
                self._ready = True
        while True:
            with self._lock:
                if not self._todo:
                    return
                _, g, lo, hi = self._todo.pop()
            self._one_stream(g, self._by_stream[lo:hi])   # this stream's matched ops, in start order

    def result(self) -> tuple[list[StreamSeries], np.ndarray]:
        """Once every stream is done (each `work` call has returned): the series in (device,
        stream) order and the depths before launch."""
        self._by_stream = None
        return [s for _, s in sorted(self._done, key=lambda d: d[0])], self.dbl

    def _one_stream(self, g: int, sel: np.ndarray) -> None:
        ops, api = self.trace.ops, self.trace.api
        calls = ops.api[sel]
        t_last, v_last, point_mean, before, perm = _stream_depth(ops.start, sel, api.start, calls)
        with self._lock:
            if self.dbl.dtype == np.int16 and len(before) and int(before.max()) > SMALL_DEPTH:
                self.dbl = self.dbl.astype(np.int32)
            self.dbl[sel if perm is None else sel[perm]] = before
        del before, perm
        is_graph = api.kind[calls] == API_GRAPH_LAUNCH
        gmax = int(v_last.max())
        if gmax <= SMALL_DEPTH:
            v_last = v_last.astype(np.int16)
        if is_graph.any():
            # Counting each replay as one entry (retired when its first op starts) removes the
            # replay's other ops: each was +1 from the launch call until its own start.
            gi = np.nonzero(is_graph)[0]
            first = unique_sorted(calls[gi], return_index=True)[1]
            rest = np.delete(gi, first)
            gmax = _max_without(t_last, v_last, api.start[calls[rest]], ops.start[sel[rest]])
        series = StreamSeries(device=self._dev_of(self._skeys[g]), stream=self._stream_of(self._skeys[g]),
                              t=t_last, v=v_last, point_mean=point_mean, points=2 * len(calls),
                              max_graph_as_one=gmax, graph_ops=int(is_graph.sum()))
        with self._lock:
            self._done.append((g, series))
