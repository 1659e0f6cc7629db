"""The record's cold-path shortcuts (issue 11) give what the direct computations give: the measure of
an intersection without its pieces, the dry time's low-depth runs against the per-step set."""
from __future__ import annotations

import numpy as np
import pytest

from launchtui.analysis import intervals as iv
from launchtui.analysis import queue_class as qc
from launchtui.analysis.index import StreamSeries


def _random_set(rng, n, span):
    s = np.sort(rng.integers(0, span, n))
    return iv.union(s, s + rng.integers(0, 30, n))


def _windows(rng, span, k, overlap):
    edges = np.sort(rng.choice(span + 60, 2 * k, replace=False)).astype(np.int64) - 30
    lo, hi = edges[0::2], edges[1::2]
    if overlap:                                 # measure_in's windows need not be disjoint
        hi = hi + rng.integers(0, span, k)
    return lo, hi


@pytest.mark.parametrize("overlap", [False, True])
def test_measure_both_in_equals_the_measure_of_the_pieces(overlap):
    rng = np.random.default_rng(13)
    for _ in range(400):
        span = int(rng.integers(1, 400))
        a = _random_set(rng, int(rng.integers(0, 40)), span)
        b = _random_set(rng, int(rng.integers(0, 40)), span)
        if rng.random() < 0.3:                  # touching and zero-length intervals
            s = np.arange(0, span, 5)
            b = (s, s + rng.integers(0, 6, len(s)))
        lo, hi = _windows(rng, span, int(rng.integers(1, 6)), overlap)
        want = iv.measure_in(*iv.intersect(a, b), lo, hi)
        got = iv.measure_both_in(a, b, lo, hi)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(iv.measure_both_in(b, a, lo, hi), want)


def _low_steps(s, starts, ends):
    """The per-step low set the runs replaced: [lo0, t0), then each step with depth <= 1."""
    low = s.v <= 1
    stop = np.append(s.t[1:], max(int(s.t[-1]), int(ends.max())))
    lo0 = min(int(starts.min()), int(s.t[0]))
    return np.concatenate([[lo0], s.t[low]]), np.concatenate([[int(s.t[0])], stop[low]])


def test_low_runs_cover_the_low_steps():
    rng = np.random.default_rng(17)
    for _ in range(300):
        n = int(rng.integers(1, 80))
        t = np.cumsum(rng.integers(1, 20, n)).astype(np.int64) + int(rng.integers(-50, 50))
        v = rng.choice([0, 1, 1, 2, 3, 7], n).astype(np.int32)
        s = StreamSeries(0, 7, t, v, 0.0, n, 0, 0)
        lo, hi = _windows(rng, int(t[-1]) + 40, int(rng.integers(1, 5)), False)
        runs = qc._low_runs(s, lo, hi)
        steps = _low_steps(s, lo, hi)
        assert len(runs[0]) <= len(steps[0])
        assert (runs[1] >= runs[0]).all() and (runs[0][1:] >= runs[1][:-1]).all()   # disjoint, sorted
        np.testing.assert_array_equal(iv.union(*runs)[0], iv.union(*steps)[0])
        np.testing.assert_array_equal(iv.union(*runs)[1], iv.union(*steps)[1])
        busy = _random_set(rng, int(rng.integers(0, 40)), int(t[-1]) + 40)
        np.testing.assert_array_equal(iv.measure_both_in(busy, runs, lo, hi),
                                      iv.measure_in(*iv.intersect(busy, steps), lo, hi))
