"""Sets of half-open time intervals [s, e) as sorted disjoint int64 arrays, and their measures."""
from __future__ import annotations

import numpy as np


def union(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted disjoint [s, e) covering the same time; touching intervals merge."""
    start = np.asarray(start, np.int64)
    end = np.asarray(end, np.int64)
    keep = end > start
    start, end = start[keep], end[keep]
    if not len(start):
        return start, end
    o = np.argsort(start, kind="stable")
    s, e = start[o], end[o]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > run_end[:-1]
    heads = np.nonzero(new)[0]
    ends = np.append(run_end[heads[1:] - 1], run_end[-1])
    return s[heads], ends


def complement(s: np.ndarray, e: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi) minus the disjoint sorted set (s, e)."""
    gs = np.concatenate([[lo], e])
    ge = np.concatenate([s, [hi]])
    gs = np.maximum(gs, lo)
    ge = np.minimum(ge, hi)
    keep = ge > gs
    return gs[keep], ge[keep]


def intersect(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]):
    """Intersection of two disjoint sorted sets, as a disjoint sorted set."""
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


def covered(s: np.ndarray, e: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Measure of the set (s, e) before each time t: the set's cumulative coverage function."""
    t = np.asarray(t, np.int64)
    if not len(s):
        return np.zeros(len(t), np.int64)
    prefix = np.concatenate([[0], np.cumsum(e - s)])
    i = np.searchsorted(s, t, side="right") - 1
    j = np.maximum(i, 0)
    inside = np.clip(t - s[j], 0, e[j] - s[j])
    return np.where(i >= 0, prefix[j] + inside, 0)


def measure_in(s: np.ndarray, e: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Measure of the set inside each window [lo_k, hi_k)."""
    return covered(s, e, hi) - covered(s, e, lo)
