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


def _random_set(rng, max_n: int, max_span: int):
    """A disjoint sorted set: the union of up to `max_n` random intervals in [0, `max_span` + 30)."""
    n, span = int(rng.integers(0, max_n)), int(rng.integers(1, max_span))
    s = np.sort(rng.integers(0, span, n))
    return iv.union(s, s + rng.integers(0, 30, n))


def test_intersect_matches_sweep_on_random_sets():
    rng = np.random.default_rng(7)
    for _ in range(500):
        sets = [_random_set(rng, 25, 300) for _ in range(2)]
        if rng.random() < 0.3:   # touching and zero-length pieces
            s = np.arange(0, 100, 5)
            sets[0] = (s, s + rng.integers(0, 6, len(s)))
        got = iv.intersect(*sets)
        assert list(zip(got[0].tolist(), got[1].tolist())) == _sweep(*sets)


def test_intersect_in_blocks_gives_the_same_pieces(monkeypatch):
    """The shorter set taken a few intervals at a time (PAIR_BLOCK) gives the sweep's pieces in order."""
    monkeypatch.setattr(iv, "PAIR_BLOCK", 3)
    rng = np.random.default_rng(11)
    for _ in range(300):
        sets = [_random_set(rng, 40, 400) for _ in range(2)]
        got = iv.intersect(*sets)
        assert got[0].dtype == np.int64 and got[1].dtype == np.int64
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


def test_union_matches_a_coverage_count():
    """union: the sorted disjoint runs of the coverage, touching intervals merged, zero-length ones
    dropped; checked against a per-ns coverage array."""
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(0, 30))
        s = rng.integers(0, 200, n)
        e = s + rng.integers(0, 25, n)
        if rng.random() < 0.5:
            o = np.argsort(s, kind="stable")
            s, e = s[o], e[o]
        cov = np.zeros(260, bool)
        for a, b in zip(s.tolist(), e.tolist()):
            cov[a:b] = True
        edges = np.flatnonzero(np.diff(np.concatenate([[0], cov.astype(np.int8), [0]])))
        us, ue = iv.union(s, e)
        assert us.tolist() == edges[0::2].tolist() and ue.tolist() == edges[1::2].tolist()


def _points(st, max_t: int = 400):
    """Independent reference: which integer times [t, t + 1) the set covers."""
    cov = np.zeros(max_t, bool)
    for s, e in zip(st[0].tolist(), st[1].tolist()):
        cov[s:e] = True
    return cov


def test_measure_both_known_matches_a_count_of_covered_points():
    """The time covered by both sets inside each window, given each of a's intervals' overlap with
    b (the gap heads' launch calls in flight): what measure_both_in finds by searching a's ends."""
    rng = np.random.default_rng(23)
    for _ in range(300):
        a, b = _random_set(rng, 25, 300), _random_set(rng, 25, 300)
        both = _points(a) & _points(b)
        per = np.array([int(both[s:e].sum()) for s, e in zip(a[0].tolist(), a[1].tolist())], np.int64)
        lo = np.sort(rng.integers(0, 350, int(rng.integers(1, 6))))
        hi = lo + rng.integers(0, 60, len(lo))
        want = [int(both[x:y].sum()) for x, y in zip(lo.tolist(), hi.tolist())]
        assert iv.measure_both_known(a, per, b, lo, hi).tolist() == want
        assert iv.measure_both_in(a, b, lo, hi).tolist() == want


def test_measure_in_by_blocks_of_windows_counts_the_covered_points():
    """measure_in a few windows at a time (the gap heads, one window per gap) gives each window's
    covered time, as in one pass."""
    rng = np.random.default_rng(29)
    for _ in range(100):
        a = _random_set(rng, 25, 300)
        cov = _points(a)
        lo = np.sort(rng.integers(0, 350, int(rng.integers(1, 12))))
        hi = lo + rng.integers(0, 40, len(lo))
        want = [int(cov[x:y].sum()) for x, y in zip(lo.tolist(), hi.tolist())]
        assert iv.measure_in(*a, lo, hi, block=3).tolist() == want
        assert iv.measure_in(*a, lo, hi).tolist() == want
