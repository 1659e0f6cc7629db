"""`sorted_search.search_sorted` returns exactly np.searchsorted's positions, through the C helper
(launchtui/trace/_sorted_search.c) and through numpy, for keys in order, out of order, repeated,
outside `a`'s range and at int64's ends."""
from __future__ import annotations

import os

import numpy as np
import pytest

from launchtui.trace import sorted_search
from launchtui.trace.sorted_search import search_sorted

REQUIRE = "LAUNCHTUI_REQUIRE_NATIVE_READER"   # set by .ci/run: the C helpers must have been built
needs_native = pytest.mark.skipif(not sorted_search.native(), reason="the C search helper was not built")

I64 = np.iinfo(np.int64)


def test_native_search_built_where_required():
    if os.environ.get(REQUIRE) != "1":
        pytest.skip(f"{REQUIRE} is not set (CI sets it)")
    assert sorted_search.native()


def _cases(rng):
    """(a, v) pairs: sorted a; keys sorted, reversed, shuffled, in sorted runs, repeated, out of range."""
    for n, m, span in [(0, 5, 10), (5, 0, 10), (1, 7, 3), (1000, 1000, 50), (1000, 1000, 10**12),
                       (50, 5000, 60), (5000, 50, 10**9), (20_000, 30_000, 40_000), (3, 10, 1)]:
        a = np.sort(rng.integers(-span, span, n))
        keys = rng.integers(-span - 5, span + 5, m)
        yield a, np.sort(keys)
        yield a, np.sort(keys)[::-1].copy()
        yield a, keys
        yield a, np.concatenate([np.sort(keys[: m // 2]), np.sort(keys[m // 2:])])
        yield a, np.repeat(keys[: max(m // 10, 1)], 10)[:m]
    ends = np.array([I64.min, -1, 0, 0, 1, I64.max, I64.max])
    yield ends, np.array([I64.min, I64.min, -5, 0, 0, 1, 2, I64.max - 1, I64.max, I64.max, 0, I64.min])


@needs_native
@pytest.mark.parametrize("side", ["left", "right"])
def test_native_matches_numpy(side):
    rng = np.random.default_rng(11)
    checked = 0
    for a, v in _cases(rng):
        got = search_sorted(a, v, side)
        assert got.dtype == np.intp and got.shape == v.shape
        np.testing.assert_array_equal(got, np.searchsorted(a, v, side=side), err_msg=f"{a[:8]} {v[:8]}")
        checked += len(v)
    assert checked > 100_000


@needs_native
def test_native_path_is_the_one_taken(monkeypatch):
    """int64 arrays go to C (which returns numpy's answer); the test above then proves C, not numpy."""
    calls = []
    real = sorted_search._native.search
    monkeypatch.setattr(sorted_search._native, "search", lambda *a: (calls.append(1), real(*a))[1],
                        raising=False)
    a, v = np.arange(10, dtype=np.int64), np.array([3, 5], np.int64)
    assert search_sorted(a, v, "right").tolist() == [4, 6] and calls == [1]


@pytest.mark.parametrize("native", [True, False])
def test_other_dtypes_shapes_and_views_go_to_numpy(monkeypatch, native):
    if not native:
        monkeypatch.setattr(sorted_search, "_native", None)
    a = np.array([1, 3, 3, 7], np.int64)
    for v in (np.int64(3), np.array([[0, 3], [7, 9]]), np.array([3, 1], np.int32),
              np.array([2.5, 3.0]), np.array([9, 8, 3, 3, 1], np.int64)[::2]):
        for side in ("left", "right"):
            np.testing.assert_array_equal(search_sorted(a, v, side), np.searchsorted(a, v, side=side))
    a32 = a.astype(np.int32)
    np.testing.assert_array_equal(search_sorted(a32, np.array([3, 4]), "left"), [1, 3])
    np.testing.assert_array_equal(search_sorted(a[::-1][::-1][::2], np.array([3]), "right"), [2])
    with pytest.raises(ValueError):
        search_sorted(a, np.array([1]), "middle")


@needs_native
def test_c_helper_refuses_buffers_that_are_not_int64():
    native = sorted_search._native
    with pytest.raises(ValueError):
        native.search(np.zeros(3, np.int32), np.zeros(2, np.int64), np.zeros(2, np.int64), False)
    with pytest.raises(ValueError):
        native.search(np.zeros(3, np.int64), np.zeros(2, np.int64), np.zeros(3, np.int64), False)
