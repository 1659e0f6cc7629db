"""unique_sorted / unique_rows return exactly what np.unique returns (values, first indices,
inverse, counts, dtypes, shapes), on random inputs of several dtypes and sizes, empty included."""
import numpy as np
import pytest

from launchtui.trace.arrays import unique_rows, unique_sorted

DTYPES = [np.int64, np.int32, np.int16, np.uint8, np.uint64, np.bool_]
SIZES = [0, 1, 2, 7, 1000]


def _same(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("flags", [(False, False, False), (True, False, False), (False, True, False),
                                   (False, False, True), (True, True, True), (False, True, True)])
def test_unique_sorted_matches_numpy(dtype, n, flags):
    rng = np.random.default_rng(n * 31 + len(flags))
    hi = 2 if dtype is np.bool_ else (max(n // 3, 1) if n else 5)   # many repeats
    a = rng.integers(0, hi + 1, n).astype(dtype)
    if dtype in (np.int64, np.int32, np.int16) and n:
        a[::3] = -a[::3]                                       # negatives too
    ri, rv, rc = flags
    _same(unique_sorted(a, ri, rv, rc), np.unique(a, return_index=ri, return_inverse=rv, return_counts=rc))


def test_unique_sorted_first_index_is_first_occurrence():
    a = np.array([5, 3, 5, 3, 3, 9, 5], np.int64)
    u, first = unique_sorted(a, return_index=True)
    assert u.tolist() == [3, 5, 9] and first.tolist() == [1, 0, 5]


def test_unique_sorted_two_dimensional_inverse_keeps_shape():
    a = np.random.default_rng(1).integers(-4, 4, (6, 5))
    _same(unique_sorted(a, return_inverse=True, return_counts=True),
          np.unique(a, return_inverse=True, return_counts=True))


def test_unique_sorted_floats_fall_back_to_numpy():
    a = np.array([1.5, np.nan, 1.5, -2.0, np.nan])
    _same(unique_sorted(a, return_counts=True), np.unique(a, return_counts=True))


@pytest.mark.parametrize("shape", [(0, 2), (1, 1), (50, 1), (200, 2), (300, 3)])
def test_unique_rows_matches_numpy(shape):
    rng = np.random.default_rng(shape[0])
    mat = rng.integers(-1, 6, shape).astype(np.int64)
    _same(unique_rows(mat, return_inverse=True), np.unique(mat, axis=0, return_inverse=True))
    _same(unique_rows(mat), np.unique(mat, axis=0))
