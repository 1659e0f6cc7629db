"""Range nesting: depth and innermost-enclosing lookups, vectorised per thread.

Neither Nsight nor Kineto stores a parent or depth, so both are rebuilt from the intervals.
Ranges are half-open [start, end): a range ending at t does not enclose an event at t.
"""
from __future__ import annotations

import numpy as np

from launchtui.trace.sorted_search import search_sorted

FEW_THREADS = 8   # up to this many threads with ranges, lookups select each thread's queries by a mask
LOOKUP_BLOCK = 1 << 22   # queries looked up at once: bounds the lookup's temporaries


def _groups(keys: np.ndarray):
    """(order, boundaries) so that keys[order][b[i]:b[i+1]] is one group."""
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    cut = np.nonzero(k[1:] != k[:-1])[0] + 1
    return order, np.concatenate([[0], cut, [len(k)]])


def range_depths(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Depth of each range inside its group (0 = outermost): open ranges at its start."""
    n = len(start)
    depth = np.zeros(n, np.int32)
    if n == 0:
        return depth
    order, bounds = _groups(group)
    for a, b in zip(bounds[:-1], bounds[1:]):  # one iteration per thread/domain, not per event
        idx = order[a:b]
        s, e = start[idx], end[idx]
        o = np.lexsort((-e, s))              # outer ranges first on equal starts
        s_sorted = s[o]
        ends_sorted = np.sort(e)
        opened_before = np.arange(len(o))
        closed = np.searchsorted(ends_sorted, s_sorted, side="right")
        d = np.empty(len(o), np.int32)
        d[o] = np.maximum(opened_before - closed, 0)
        depth[idx] = d
    return depth


class InnermostIndex:
    """Answers "which range on thread T encloses time t innermost?" for many queries at once.

    Per thread, the innermost enclosing range is a step function of time: it switches to a range
    at its start and back to the parent at its end. We precompute those change points, so each
    query is one searchsorted.
    """

    def __init__(self, thread: np.ndarray, start: np.ndarray, end: np.ndarray):
        self.n = len(start)
        self.by_thread: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if self.n == 0:
            return
        order, bounds = _groups(thread)
        for a, b in zip(bounds[:-1], bounds[1:]):
            idx = order[a:b]
            s, e = start[idx], end[idx]
            o = np.lexsort((-e, s))
            idx, s, e = idx[o], s[o], e[o]
            parent = _parents(s, e)
            # change points: at start -> the range itself; at end -> its parent (global ids)
            ptimes = np.concatenate([s, e])
            pvals = np.concatenate([idx, np.where(parent >= 0, idx[np.maximum(parent, 0)], -1)])
            # ends before starts at equal times; later entries win at equal times
            kind = np.concatenate([np.ones(len(s), np.int8), np.zeros(len(e), np.int8)])
            # among equal-time starts, inner ranges (later in o) must come last
            seq = np.concatenate([np.arange(len(s)), -np.arange(len(e))])
            oo = np.lexsort((seq, kind, ptimes))
            self.by_thread[int(thread[idx[0]])] = (ptimes[oo], pvals[oo])

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The per-thread change points, concatenated under `prefix` (a stored index maps them back
        with `from_arrays` instead of sorting every range again: ~20 ms of a 5M reopen)."""
        threads = list(self.by_thread)
        times = [self.by_thread[th][0] for th in threads]
        vals = [self.by_thread[th][1] for th in threads]
        return {prefix + "meta": np.array([[th, len(t)] for th, t in zip(threads, times)], np.int64).reshape(-1, 2),
                prefix + "t": np.concatenate(times) if times else np.zeros(0, np.int64),
                prefix + "v": np.concatenate(vals).astype(np.int64) if vals else np.zeros(0, np.int64),
                prefix + "n": np.array([self.n], np.int64)}

    @classmethod
    def from_arrays(cls, z, prefix: str, n_ranges: int) -> "InnermostIndex":
        """The index `to_arrays` stored, over `n_ranges` ranges; ValueError when it does not fit."""
        meta, t, v = z[prefix + "meta"], z[prefix + "t"], z[prefix + "v"]
        ends = np.cumsum(meta[:, 1]) if len(meta) else np.zeros(0, np.int64)
        if len(t) != len(v) or (len(meta) and ends[-1] != len(t)) or int(z[prefix + "n"][0]) != n_ranges:
            raise ValueError("stored NVTX lookup does not fit the trace")
        idx = cls.__new__(cls)
        idx.n = n_ranges
        idx.by_thread = {int(th): (t[b - n:b], v[b - n:b]) for (th, n), b in zip(meta.tolist(), ends.tolist())}
        return idx

    def lookup(self, thread: np.ndarray, t: np.ndarray, dtype=np.int64) -> np.ndarray:
        """Innermost enclosing range index per query, -1 when none (as `dtype`). Queries go in
        blocks of LOOKUP_BLOCK: the per-query temporaries (positions, values, indices) are bounded
        by a block, not n-long (the typed index asks once per API call)."""
        out = np.full(len(t), -1, dtype)
        if not self.by_thread or len(t) == 0:
            return out
        if len(self.by_thread) <= FEW_THREADS:   # a pass per indexed thread: no argsort of the queries
            for a in range(0, len(t), LOOKUP_BLOCK):   # one iteration per block
                blk = slice(a, a + LOOKUP_BLOCK)
                threads = thread[blk]
                for th, entry in self.by_thread.items():
                    _fill(out[blk], t[blk], _where(threads == th), entry)
            return out
        order, bounds = _groups(thread)
        for a, b in zip(bounds[:-1], bounds[1:]):   # one iteration per thread
            entry = self.by_thread.get(int(thread[order[a]]))
            for c in range(a, b, LOOKUP_BLOCK) if entry is not None else ():   # one per block
                _fill(out, t, order[c:min(c + LOOKUP_BLOCK, b)], entry)
        return out


def _fill(out: np.ndarray, t: np.ndarray, idx, entry: tuple[np.ndarray, np.ndarray]) -> None:
    """out[idx] = the innermost range at each time t[idx] of one thread's change points `entry`."""
    if not isinstance(idx, slice) and not len(idx):
        return
    times, vals = entry
    pos = search_sorted(times, t[idx], side="right")
    pos -= 1
    none = pos < 0
    np.maximum(pos, 0, out=pos)
    got = vals[pos]
    del pos
    got[none] = -1
    out[idx] = got


def _where(mask: np.ndarray):
    """Indices of a mask, or a whole slice when it is all true (then `t[idx]` is a view, not a copy)."""
    return slice(None) if mask.all() else np.flatnonzero(mask)


def _parents(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Parent position of each range (sorted by start asc, end desc) within one thread, -1 for roots.

    The parent is the latest earlier range that is still open at this start and ends no earlier.
    Solved with a stack over depth levels: depth d's parent is the last range of depth d-1 before it.
    """
    n = len(s)
    if n == 0:
        return np.zeros(0, np.int64)
    ends_sorted = np.sort(e)
    depth = np.maximum(np.arange(n) - np.searchsorted(ends_sorted, s, side="right"), 0)
    parent = np.full(n, -1, np.int64)
    pos = np.arange(n)
    # for each depth level, positions in order; parent = last position at depth-1 before pos
    order = np.lexsort((pos, depth))
    d_sorted = depth[order]
    p_sorted = pos[order]
    level_start = np.searchsorted(d_sorted, np.arange(d_sorted.max() + 2))
    has_parent = depth > 0
    pd = depth[has_parent] - 1
    lo = level_start[pd]
    hi = level_start[pd + 1]
    # searchsorted within each level's slice: positions are increasing there
    key = pd.astype(np.int64) * (n + 1) + pos[has_parent]
    level_keys = d_sorted.astype(np.int64) * (n + 1) + p_sorted
    k = np.searchsorted(level_keys, key, side="left") - 1
    valid = (k >= lo) & (k < hi)
    par = np.where(valid, p_sorted[np.maximum(k, 0)], -1)
    parent[has_parent] = par
    return parent
