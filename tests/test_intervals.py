"""intervals.intersect: the binary-search path for disjoint sorted inputs gives the same pieces as
the sweep over all end points (kept for inputs that are not disjoint), on random sets with touching
and zero-length intervals."""
import numpy as np

from launchtui.analysis import intervals as iv


def _sweep(a, b):
    """Independent reference: coverage count over the sorted end points (close before open)."""
    t = np.concatenate([a[0], a[1], b[0], b[1]]).astype(np.int64)
    d = np.concatenate([np.ones(len(a[0])), -np.ones(len(a[1])), np.ones(len(b[0])), -np.ones(len(b[1]))])
    o = np.lexsort((d, t))
    t, cov = t[o], np.cumsum(d[o])
    pieces = [(int(t[k]), int(t[k + 1])) for k in range(len(t) - 1) if cov[k] == 2 and t[k + 1] > t[k]]
    return pieces


def test_intersect_matches_sweep_on_random_sets():
    rng = np.random.default_rng(7)
    for _ in range(500):
        sets = []
        for _ in range(2):
            n, span = int(rng.integers(0, 25)), int(rng.integers(1, 300))
            s = np.sort(rng.integers(0, span, n))
            sets.append(iv.union(s, s + rng.integers(0, 30, n)))
        if rng.random() < 0.3:   # touching and zero-length pieces
            s = np.arange(0, 100, 5)
            sets[0] = (s, s + rng.integers(0, 6, len(s)))
        got = iv.intersect(*sets)
        assert list(zip(got[0].tolist(), got[1].tolist())) == _sweep(*sets)


def test_intersect_values():
    a = (np.array([0, 20, 40]), np.array([10, 30, 50]))
    b = (np.array([5, 10, 28, 45]), np.array([10, 25, 42, 60]))
    s, e = iv.intersect(a, b)
    assert s.tolist() == [5, 20, 28, 40, 45] and e.tolist() == [10, 25, 30, 42, 50]


def test_intersect_overlapping_input_uses_the_sweep():
    a = (np.array([0, 5]), np.array([10, 20]))     # not disjoint: [0,10) and [5,20) overlap
    b = (np.array([8]), np.array([12]))
    s, e = iv.intersect(a, b)
    assert list(zip(s.tolist(), e.tolist())) == _sweep(a, b)
