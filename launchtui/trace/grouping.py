"""Group ids without sorting: most keys here (thread ids, string ids, device x name) have few
distinct values in a small range, where a lookup table beats np.unique's O(n log n) sort."""
from __future__ import annotations

import numpy as np

from launchtui.trace.arrays import index_type, unique_sorted

DENSE_LIMIT = 1 << 24
TABLE_FREE = 1 << 16   # a table this long costs less than any sort's set-up


def dense_groups(key: np.ndarray, narrow: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct keys, group index per element) for non-negative or any int keys. The group
    indices are int64, or with `narrow` int32 (there are fewer groups than 2^31 elements): for a
    caller that holds them per element and does no arithmetic on them that could pass 2^31."""
    key = np.asarray(key)
    idx_t = index_type(len(key)) if narrow else np.int64
    if len(key) == 0:
        return np.zeros(0, key.dtype if key.dtype.kind in "iu" else np.int64), np.zeros(0, idx_t)
    lo, hi = int(key.min()), int(key.max())
    # the table costs its span, a sort ~n log n: a few keys spread wide (a thousand ids across 2^23)
    # are sorted, as the table would cost a thousand times more
    if hi - lo < min(DENSE_LIMIT, 8 * len(key) + TABLE_FREE):
        k = key if lo == 0 and key.dtype.kind in "iu" else key - lo   # ids from 0 index the table as they are
        present = np.zeros(hi - lo + 1, bool)
        present[k] = True
        uniq = np.nonzero(present)[0]
        lut = np.cumsum(present, dtype=idx_t)
        lut -= 1
        return (uniq + lo).astype(key.dtype), lut[k]
    uniq, inv = unique_sorted(key, return_inverse=True)
    return uniq, inv.reshape(-1).astype(idx_t)


def distinct_runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(values, return_inverse=True) for values that come in long runs (a thread's or a
    process's rows are mostly contiguous in exported tables): only the run heads are sorted."""
    values = np.asarray(values)
    if not len(values):
        return values, np.zeros(0, np.int64)
    heads = np.concatenate([[True], values[1:] != values[:-1]])
    uniq = unique_sorted(values[heads])
    return uniq, np.searchsorted(uniq, values)


def unique_rows(mat: np.ndarray, return_inverse: bool = False):
    """`np.unique(mat, axis=0, return_inverse=...)` for a 2-D integer array: rows in lexicographic
    order. Each column's dense rank folds into one int64 key, column by column (the key stays below
    rows², so it never overflows). Ranks come from grouping.dense_groups: a lookup table, no sort,
    where a column (or the key so far) spans a small range, as device, stream and thread ids do."""
    mat = np.asarray(mat)
    rows = mat.shape[0]
    if not rows or mat.shape[1] == 0:
        return np.unique(mat, axis=0, return_inverse=return_inverse)
    key = np.zeros(rows, np.int64)
    for c in range(mat.shape[1]):
        distinct, r = dense_groups(mat[:, c])
        distinct, key = dense_groups(key * len(distinct) + r)
    # one row per key: equal keys are equal rows, so whichever row a repeated index keeps will do
    one = np.empty(len(distinct), np.intp)
    one[key] = np.arange(rows)
    uniq = mat[one]
    return (uniq, key.astype(np.intp)) if return_inverse else uniq
