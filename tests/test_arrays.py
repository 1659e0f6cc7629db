"""unique_sorted / unique_rows return exactly what np.unique returns (values, first indices,
inverse, counts, dtypes, shapes), on random inputs of several dtypes and sizes, empty included."""
import numpy as np
import pytest

from launchtui.trace.arrays import unique_sorted
from launchtui.trace.grouping import unique_rows

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


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_unique_rows_of_wide_and_narrow_columns_match_numpy(dtype):
    """A column past the lookup table's range (ranked by sorting) beside narrow ones (ranked by the
    table), in both orders: the same rows, order and inverse as numpy's."""
    rng = np.random.default_rng(7)
    wide = rng.choice(np.array([-2**31, -5, 0, 3, 2**30, 2**31 - 1]), 400)
    narrow = rng.integers(0, 4, 400)
    for cols in ((wide, narrow), (narrow, wide), (narrow, wide, narrow[::-1])):
        mat = np.stack(cols, axis=1).astype(dtype)
        _same(unique_rows(mat, return_inverse=True), np.unique(mat, axis=0, return_inverse=True))


# ---- numpy's set and order statistics without numpy.ma ------------------------------------------
# np.isin's sort path, np.percentile and np.median of float data ask numpy.ma (a flagless np.unique,
# a masked-array NaN check) and so import it: 17-19 ms of every cold command. These give the same
# values, bit for bit, and a cold `report` then never imports it.

def _same_value(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)   # NaN equals NaN here


@pytest.mark.parametrize("seed", range(6))
def test_isin_int_matches_numpy(seed):
    from launchtui.trace.arrays import isin_int
    rng = np.random.default_rng(seed)
    for _ in range(200):
        span = int(rng.choice([3, 100, 2**40]))
        a = rng.integers(-span, span, int(rng.integers(0, 50)))
        b = rng.integers(-span, span, int(rng.integers(0, 20))).astype(rng.choice([np.int64, np.int32]) if span < 2**31 else np.int64)
        _same_value(isin_int(a, b), np.isin(a, b))


@pytest.mark.parametrize("q", [0, 1, 25, 33.3, 50, 75, 99, 100])
def test_percentile_int_matches_numpy(q):
    from launchtui.trace.arrays import percentile_int
    rng = np.random.default_rng(int(q * 10))
    for _ in range(300):
        a = rng.integers(-10**int(rng.integers(1, 18)), 10**int(rng.integers(1, 18)), int(rng.integers(1, 40)))
        got, want = percentile_int(a, q), np.percentile(a, q)
        assert got == float(want) and type(got) is float


@pytest.mark.parametrize("kind", ["int64", "int32", "float64", "float32", "nan"])
@pytest.mark.parametrize("axis", [None, 0])
@pytest.mark.parametrize("overwrite", [False, True])
def test_median_of_matches_numpy(kind, axis, overwrite):
    from launchtui.trace.arrays import median_of
    rng = np.random.default_rng(len(kind) * 7 + (axis or 0) + 2 * overwrite)
    for _ in range(150):
        shape = (int(rng.integers(1, 30)),) if axis is None and rng.random() < 0.5 else \
            (int(rng.integers(1, 30)), int(rng.integers(1, 5)))
        a = rng.normal(0, 1e6, shape) if kind in ("float64", "nan") else rng.integers(-10**9, 10**9, shape)
        a = a.astype(np.float64 if kind == "nan" else kind)
        if kind == "nan":
            a.flat[rng.integers(0, a.size)] = np.nan
        got = median_of(a.copy(), axis=axis, overwrite_input=overwrite)
        want = np.median(a.copy(), axis=axis, overwrite_input=overwrite)
        assert type(got) is type(want)
        _same_value(got, want)
    assert median_of([0.5, 0.1, 0.25]) == np.median([0.5, 0.1, 0.25])   # a list, as numpy takes


def test_a_cold_report_imports_no_numpy_ma():
    import json
    import os
    import subprocess
    import sys
    from conftest import ROOT
    script = ("import contextlib, io, json, sys\n"
              "from launchtui import cli\n"
              "with contextlib.redirect_stdout(io.StringIO()):\n"
              "    rc = cli.main(['report', sys.argv[1], '--json', '--no-cache'])\n"
              "print(json.dumps([rc, 'numpy.ma' in sys.modules]))\n")
    p = subprocess.run([sys.executable, "-c", script, str(ROOT / "fixtures" / "demo" / "demo.sqlite")],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == [0, False]
