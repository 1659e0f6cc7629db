"""Sets of half-open time intervals [s, e) as sorted disjoint int64 arrays, and their measures.

`Intervals` (covered ns / any per bin) and `RangeMax` (max over index ranges) serve the timeline's
per-frame binning (analysis/lanes.py, tui/lane_view.py): O(width · log N) per frame."""
from __future__ import annotations

import numpy as np

from launchtui.trace.arrays import index_type, unique_sorted
from launchtui.trace.sorted_search import search_sorted


def union(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted disjoint [s, e) covering the same time; touching intervals merge. Input already in
    start order (GPU ops, API calls) is neither sorted nor copied, and input already disjoint comes
    back as the same arrays (no temporaries the size of the input): callers only read it."""
    return union_heads(start, end, heads=False)[:2]


def union_heads(start: np.ndarray, end: np.ndarray, heads: bool = True):
    """(s, e, heads): union(), and for input that needed neither dropping empty intervals nor a
    sort, each output interval's first input position (None otherwise, or when `heads` is False:
    no copy of one position per interval): the device gaps read the op that ends each gap from it
    instead of searching for it."""
    want = heads
    start = np.asarray(start, np.int64)
    end = np.asarray(end, np.int64)
    keep = end > start
    exact = bool(keep.all())
    if not exact:
        start, end = start[keep], end[keep]
    del keep
    if not len(start):
        return start, end, (np.zeros(0, np.int64) if exact else None)
    if (start[1:] < start[:-1]).any():
        exact = False
        o = np.argsort(start, kind="stable")
        start, end = start[o], end[o]
        del o
    run_end = np.maximum.accumulate(end)
    new = np.empty(len(start), bool)
    new[0] = True
    np.greater(start[1:], run_end[:-1], out=new[1:])
    if new.all():   # already disjoint (then run_end == end): the input as it is, no copies
        return start, end, (np.arange(len(start), dtype=index_type(len(start))) if exact and want else None)
    heads = np.flatnonzero(new)
    del new
    starts = start[heads]
    first = heads.copy() if exact and want else None
    # each run ends where the next begins: heads shifted by one, in place (no further full copies)
    heads[:-1] = heads[1:]
    heads[:-1] -= 1
    heads[-1] = len(run_end) - 1
    return starts, run_end[heads], first


def complement(s: np.ndarray, e: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi) minus the disjoint sorted set (s, e)."""
    gs, ge, keep = complement_kept(s, e, lo, hi)
    return gs[keep], ge[keep]


def complement_kept(s: np.ndarray, e: np.ndarray, lo: int, hi: int):
    """complement() before dropping its empty pieces: (gs, ge, keep), piece i ending where
    interval i starts (the last at hi)."""
    gs = np.concatenate([[lo], e])
    ge = np.concatenate([s, [hi]])
    gs = np.maximum(gs, lo)
    ge = np.minimum(ge, hi)
    return gs, ge, ge > gs


def disjoint_sorted(s: np.ndarray, e: np.ndarray) -> bool:
    """Each interval non-negative and starting at or after the previous one's end."""
    return bool((e >= s).all() and (s[1:] >= e[:-1]).all())


def intersect(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]):
    """Intersection of two disjoint sorted sets, as a disjoint sorted set."""
    if disjoint_sorted(*a) and disjoint_sorted(*b):
        return _intersect_pairs(a, b)
    t = np.concatenate([a[0], a[1], b[0], b[1]])
    d = np.concatenate([np.ones(len(a[0]), np.int64), -np.ones(len(a[1]), np.int64),
                        np.ones(len(b[0]), np.int64), -np.ones(len(b[1]), np.int64)])
    o = np.lexsort((d, t))           # at equal times close before open: no zero-length pieces
    t, cov = t[o], np.cumsum(d[o])
    both = np.nonzero(cov == 2)[0]
    both = both[both + 1 < len(t)]
    s, e = t[both], t[both + 1]
    keep = e > s
    return s[keep], e[keep]


PAIR_BLOCK = 1 << 20   # intervals of the shorter set per pass: bounds the pair temporaries


def _intersect_pairs(a, b):
    """intersect() for inputs known disjoint and sorted: the overlapping (a_i, b_j) pairs by binary
    search, [max of starts, min of ends) each. The same pieces as the sweep (no event of either set
    falls strictly inside an overlap), without its sort of all 4 n end points. The shorter set is
    taken in blocks of PAIR_BLOCK intervals, in order, so the pieces come out in the same order while
    the pair temporaries stay bounded (unblocked, they are several full-length arrays)."""
    (as_, ae), (bs, be) = (np.asarray(x, np.int64) for x in a), (np.asarray(x, np.int64) for x in b)
    if len(as_) > len(bs):                      # search the longer set once per shorter interval
        (as_, ae), (bs, be) = (bs, be), (as_, ae)
    parts_s, parts_e = [], []
    for at in range(0, len(as_), PAIR_BLOCK):
        s, e = _pairs_block(as_[at:at + PAIR_BLOCK], ae[at:at + PAIR_BLOCK], bs, be)
        if len(s):
            parts_s.append(s)
            parts_e.append(e)
    if not parts_s:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if len(parts_s) == 1:
        return parts_s[0], parts_e[0]
    s = np.concatenate(parts_s)
    del parts_s
    return s, np.concatenate(parts_e)


def _pairs_block(as_, ae, bs, be):
    lo = np.searchsorted(be, as_, side="right")  # first b ending after a_i starts
    hi = np.searchsorted(bs, ae, side="left")    # b starting before a_i ends
    n = hi
    n -= lo
    np.maximum(n, 0, out=n)
    total = int(n.sum())
    if not total:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    i = np.repeat(np.arange(len(as_)), n)
    first = np.cumsum(n)
    first -= n                                   # offset of a_i's run among the pairs
    del n
    j = np.arange(total)
    j -= first[i]
    j += lo[i]
    del first, lo
    s = np.maximum(as_[i], bs[j])
    e = np.minimum(ae[i], be[j])
    del i, j
    keep = e > s
    if keep.all():
        return s, e
    return s[keep], e[keep]


def in_windows(t: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per time: index of the iteration [start, end) holding it, -1 when none (starts sorted).
    Times already in order (launch calls, gaps, depth changes) in disjoint windows are labelled
    run by run (np.repeat of the window index over each run) instead of a search per time."""
    t = np.asarray(t)
    starts, ends = np.asarray(starts), np.asarray(ends)
    if not in_window_order(t, starts, ends):
        k = np.searchsorted(starts, t, side="right") - 1
        return np.where((k >= 0) & (t < ends[np.maximum(k, 0)]), k, -1)
    # run bounds 0, a_0, b_0, a_1, b_1, ..., n: outside, window 0, outside, window 1, ..., outside
    bounds = np.empty(2 * len(starts) + 2, np.int64)
    bounds[0], bounds[-1] = 0, len(t)
    bounds[1:-1:2] = search_sorted(t, starts, side="left")
    bounds[2:-1:2] = search_sorted(t, ends, side="left")
    label = np.full(len(bounds) - 1, -1, np.int64)
    label[1::2] = np.arange(len(starts))
    return np.repeat(label, np.diff(bounds))


def in_window_order(t, starts, ends) -> bool:
    """Times non-decreasing and the windows disjoint and in order: a window's times are one run."""
    return not ((len(t) > 1 and (t[1:] < t[:-1]).any()) or not len(starts)
                or (ends < starts).any() or (ends[:-1] > starts[1:]).any())


def _prefix(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Covered measure before each interval: [0, cumsum of lengths]."""
    prefix = np.empty(len(s) + 1, np.int64)
    prefix[0] = 0
    np.cumsum(e - s, out=prefix[1:])
    return prefix


def covered(s: np.ndarray, e: np.ndarray, t: np.ndarray, prefix: np.ndarray | None = None) -> np.ndarray:
    """Measure of the set (s, e) before each time t: the set's cumulative coverage function.
    `prefix`: _prefix(s, e) when the caller asks for several t."""
    t = np.asarray(t, np.int64)
    if not len(s):
        return np.zeros(len(t), np.int64)
    prefix = _prefix(s, e) if prefix is None else prefix
    # in place where possible: t can be one value per gap (20M: the record's peak, bench/MISSED.md)
    j = search_sorted(s, t, side="right")
    j -= 1
    before_all = j < 0
    np.maximum(j, 0, out=j)
    sj = s[j]
    inside = t - sj
    length = e[j]
    length -= sj
    del sj
    np.clip(inside, 0, length, out=inside)
    del length
    inside += prefix[j]
    inside[before_all] = 0
    return inside


def measure_in(s: np.ndarray, e: np.ndarray, lo: np.ndarray, hi: np.ndarray, block: int | None = None) -> np.ndarray:
    """Measure of the set inside each window [lo_k, hi_k); `block`: at most this many windows'
    searches at a time (many windows: the searches' temporaries stay a block long)."""
    if not len(s):
        return np.zeros(len(np.asarray(lo)), np.int64)
    prefix = _prefix(s, e)      # once for both ends (a full-length array at 5M ops)
    if block is None or len(lo) <= block:
        out = covered(s, e, hi, prefix)
        out -= covered(s, e, lo, prefix)
        return out
    out = np.empty(len(lo), np.int64)
    for i in range(0, len(lo), block):   # a block of windows at a time
        part = out[i:i + block]
        part[:] = covered(s, e, hi[i:i + block], prefix)
        part -= covered(s, e, lo[i:i + block], prefix)
    return out


def measure_both_in(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray],
                    lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """`measure_in(*intersect(a, b), lo, hi)` for two disjoint sorted sets (touching allowed),
    without the intersection's pieces: with S the set of fewer intervals and B the other,
    G(t) = |a ∩ b ∩ (-inf, t)| = sum over S's intervals before t of |B ∩ S_r| (B's prefix sum at
    S's end points) plus |B ∩ [s_r, t)| for the S interval holding t; each window is G(hi) - G(lo).
    Searches 2 |S| + 4 |windows| times and builds no piece per overlap, which pays when S is much
    smaller than B (the queue class's dry time: a stream's few low-depth runs against its many busy
    intervals)."""
    lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
    (ss, se), (bs, be) = (np.asarray(x, np.int64) for x in a), (np.asarray(x, np.int64) for x in b)
    if len(ss) > len(bs):
        (ss, se), (bs, be) = (bs, be), (ss, se)
    if not len(ss) or not len(bs):
        return np.zeros(len(lo), np.int64)
    return _both_in(ss, se, bs, be, _prefix(bs, be), lo, hi)


def measure_in_and_both(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray],
                        lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(measure_in(*a, lo, hi), measure_both_in(a, b, lo, hi)), with a's prefix sum computed once
    when b has fewer intervals (a stream's busy time and its low-depth part, §V3)."""
    lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
    (as_, ae), (bs, be) = (np.asarray(x, np.int64) for x in a), (np.asarray(x, np.int64) for x in b)
    if not len(as_):
        z = np.zeros(len(lo), np.int64)
        return z, z.copy()
    if len(bs) > len(as_) or not len(bs):
        return measure_in(as_, ae, lo, hi), measure_both_in(a, b, lo, hi)
    prefix = _prefix(as_, ae)
    total = covered(as_, ae, hi, prefix) - covered(as_, ae, lo, prefix)
    return total, _both_in(bs, be, as_, ae, prefix, lo, hi)


def measure_both_known(a: tuple[np.ndarray, np.ndarray], per: np.ndarray, b: tuple[np.ndarray, np.ndarray],
                       lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """`measure_both_in(a, b, lo, hi)` when `per`, |a_r ∩ b| for each interval a_r of `a`, is known
    (the gap heads' launch calls in flight): only the windows' ends are searched, not a's."""
    lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
    (ss, se), (bs, be) = (np.asarray(x, np.int64) for x in a), (np.asarray(x, np.int64) for x in b)
    if not len(ss) or not len(bs):
        return np.zeros(len(lo), np.int64)
    return _both_from(ss, se, np.asarray(per, np.int64), bs, be, _prefix(bs, be), lo, hi)


def _both_in(ss, se, bs, be, prefix, lo, hi):
    """measure_both_in's sum over the smaller set S = (ss, se), B's prefix sum given."""
    at_s = covered(bs, be, ss, prefix)
    per = covered(bs, be, se, prefix)
    per -= at_s                                   # |B ∩ S_r|
    return _both_from(ss, se, per, bs, be, prefix, lo, hi, at_s)


def _both_from(ss, se, per, bs, be, prefix, lo, hi, at_s=None):
    """G(hi) - G(lo) from per = |B ∩ S_r|; `at_s`: B's coverage at S's starts, else searched at the
    windows' ends only."""
    before = np.empty(len(ss) + 1, np.int64)
    before[0] = 0
    np.cumsum(per, out=before[1:])

    def g(t: np.ndarray) -> np.ndarray:
        r = np.searchsorted(ss, t, side="right") - 1
        rr = np.maximum(r, 0)
        at = at_s[rr] if at_s is not None else covered(bs, be, ss[rr], prefix)
        part = covered(bs, be, np.minimum(t, se[rr]), prefix) - at
        return np.where(r >= 0, before[rr] + np.maximum(part, 0), 0)
    return g(hi) - g(lo)


class Intervals:
    """A union of intervals as sorted disjoint [s, e) with a prefix sum of their lengths.

    ``busy(edges)`` gives the covered ns per bin, ``any(edges)`` whether any interval touches a bin;
    both are a few searchsorted calls over the edges. Zero-length input intervals count as 1 ns so
    instantaneous events stay visible.
    """

    __slots__ = ("s", "e", "cum")

    def __init__(self, start: np.ndarray, end: np.ndarray, presorted: bool = False):
        start = np.asarray(start, np.int64)
        end = np.asarray(end, np.int64)
        if len(start) and not (end > start).all():
            end = np.maximum(end, start + 1)
        if len(start) and not presorted:
            o = np.argsort(start, kind="stable")
            start, end = start[o], end[o]
        if len(start):
            run_end = np.maximum.accumulate(end)
            new = np.ones(len(start), bool)
            new[1:] = start[1:] > run_end[:-1]
            if new.all():   # already disjoint (then run_end == end): share the caller's arrays
                self.s, self.e = start, end
            else:
                idx = np.nonzero(new)[0]
                self.s = start[idx]
                self.e = np.append(run_end[idx[1:] - 1], run_end[-1])
        else:
            self.s = np.zeros(0, np.int64)
            self.e = np.zeros(0, np.int64)
        self.cum = np.concatenate([[0], np.cumsum(self.e - self.s)]).astype(np.int64)

    def __len__(self) -> int:
        return len(self.s)

    def covered_before(self, t: np.ndarray) -> np.ndarray:
        """Covered ns in (-inf, t)."""
        i = np.searchsorted(self.s, t, side="right") - 1
        ic = np.maximum(i, 0)
        part = np.clip(t - self.s[ic], 0, self.e[ic] - self.s[ic]) if len(self.s) else np.zeros(len(t), np.int64)
        return np.where(i >= 0, self.cum[ic] + part, 0)

    def busy(self, edges: np.ndarray) -> np.ndarray:
        if not len(self.s):
            return np.zeros(len(edges) - 1, np.int64)
        c = self.covered_before(edges)
        return np.diff(c)

    def any(self, edges: np.ndarray) -> np.ndarray:
        if not len(self.s):
            return np.zeros(len(edges) - 1, bool)
        n_start = np.searchsorted(self.s, edges[1:], side="left")    # intervals starting before b
        n_ended = np.searchsorted(self.e, edges[:-1], side="right")  # intervals ended at or before a
        return n_start > n_ended


class RangeMax:
    """Maximum over index ranges [lo, hi) of a fixed array, vectorised over many queries.

    Block maxima (block size B) plus a sparse table over the blocks: memory O(N/B · log N), each
    query O(B) gathered elements for the partial blocks and O(1) for the full ones.
    """

    def __init__(self, values: np.ndarray, block: int = 32, empty=0):
        self.v = np.asarray(values)
        self.B = block
        self.empty = empty
        n = len(self.v)
        nb = n // block
        levels = []
        if nb:
            bm = self.v[:nb * block].reshape(nb, block).max(axis=1)
            levels.append(bm)
            k = 1
            while (1 << k) <= nb:
                prev = levels[-1]
                h = 1 << (k - 1)
                levels.append(np.maximum(prev[:-h], prev[h:]))
                k += 1
        self.levels = levels

    @classmethod
    def from_tables(cls, values: np.ndarray, block: int, empty, levels: list) -> RangeMax:
        """The RangeMax of `values` from its block and sparse tables as built before (stored beside
        the model): nothing recomputed, `values` not read."""
        out = cls.__new__(cls)
        out.v, out.B, out.empty, out.levels = np.asarray(values), block, empty, levels
        return out

    def query(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        lo = np.asarray(lo, np.int64)
        hi = np.asarray(hi, np.int64)
        B = self.B
        n = len(self.v)
        out = np.full(len(lo), self.empty, dtype=self.v.dtype if n else np.int64)
        if not n or not len(lo):
            return out
        valid = hi > lo
        bl = (lo + B - 1) // B                 # first full block
        bh = hi // B                           # end of full blocks (exclusive)
        has_full = valid & (bh > bl)
        # partial head [lo, min(hi, bl*B)) and tail [max(lo, bh*B), hi); when no full block, the
        # whole range is in the head/tail pair (< 2B elements)
        head_end = np.where(has_full, bl * B, hi)
        tail_start = np.where(has_full, bh * B, hi)
        span = np.arange(B, dtype=np.int64)
        res = out.copy()
        # the range without full blocks can straddle one block edge: head covers up to B elements,
        # the rest (< B) goes to a second head window
        for a, b in ((lo, head_end), (lo + B, head_end), (tail_start, hi)):
            idx = a[:, None] + span[None, :]
            m = (idx < b[:, None]) & valid[:, None]
            if not m.any():
                continue
            vals = self.v[np.minimum(idx, n - 1)]
            vals = np.where(m, vals, self.empty)
            res = np.maximum(res, vals.max(axis=1))
        if has_full.any() and self.levels:
            f = np.nonzero(has_full)[0]
            length = bh[f] - bl[f]
            k = np.floor(np.log2(length)).astype(np.int64)
            r = np.empty(len(f), dtype=res.dtype)
            for kk in unique_sorted(k).tolist():   # at most log2(N/B) distinct levels
                sel = k == kk
                lev = self.levels[kk]
                a = bl[f][sel]
                b = bh[f][sel] - (1 << kk)
                r[sel] = np.maximum(lev[a], lev[b])
            res[f] = np.maximum(res[f], r)
        return np.where(valid, res, self.empty)


# --------------------------------------------------------------------------------------------
# lanes
