"""np.unique by sort and compare. numpy >= 2.3 answers a plain `np.unique` on integers with a hash
table (~0.2 µs per element here, 10-50x a sort of the same array: bench/MISSED.md), and
`np.unique(axis=0)` sorts rows as structured records (~0.5 s per million rows). Both helpers return
exactly what the np.unique call they replace returns (values sorted ascending, first-occurrence
indices, inverse of the input's shape, counts). And the two halves of a packed id column, and
the positions of a mask as narrow indices."""
from __future__ import annotations

import sys

import numpy as np

from launchtui.trace.sorted_search import search_sorted

PACK = 1 << 32       # two ids in one int64 (sqlite_columns.Packed, shift 32)
_HIGH = 1 if sys.byteorder == "little" else 0   # which int32 half of an int64 holds its high bits


def halves(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two ids of a `high * PACK + low` int64 column as strided views of its buffer: the upper
    32 bits as int32 (exactly `packed >> 32`, which always fits; -1 for a NULL) and the lower 32 as
    uint32 (exactly `packed & (PACK - 1)`). No n-long temporaries: fresh memory is most of a large
    read's system time."""
    return packed.view(np.int32)[_HIGH::2], packed.view(np.uint32)[1 - _HIGH::2]


def keep_low(packed: np.ndarray) -> np.ndarray:
    """Clear the high ids of a packed column in place once they are read (`halves`) and return it:
    the low ids as int64, in the packed column's own buffer (no second column)."""
    return np.bitwise_and(packed, PACK - 1, out=packed)


NONZERO_BLOCK = 1 << 20   # mask elements read at a time by `nonzero_index`


def index_type(n: int):
    """The dtype of positions into n elements: int32 while they fit, half the memory of int64 for
    the per-op and per-launch arrays the analyses hold (bench/MISSED.md)."""
    return np.int32 if n < 2**31 - 1 else np.int64


def nonzero_index(mask: np.ndarray) -> np.ndarray:
    """np.flatnonzero(mask) in `index_type(len(mask))`: counted, then filled a block at a time, so
    nothing but the result is as long as the hits (per launch or per op, the largest array of the
    stage that asks: 20M, bench/MISSED.md)."""
    out = np.empty(int(np.count_nonzero(mask)), index_type(len(mask)))
    at = 0
    for i in range(0, len(mask), NONZERO_BLOCK):
        hits = np.flatnonzero(mask[i:i + NONZERO_BLOCK])
        part = out[at:at + len(hits)]
        part[:] = hits
        part += i
        at += len(hits)
    return out


def unique_sorted(a, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False):
    """`np.unique(a, return_index=..., return_inverse=..., return_counts=...)` for integer or bool
    arrays (other dtypes go to np.unique: NaN handling stays numpy's)."""
    a = np.asarray(a)
    if a.dtype.kind not in "iub":
        return np.unique(a, return_index=return_index, return_inverse=return_inverse, return_counts=return_counts)
    flat = a.reshape(-1)
    n = len(flat)
    if return_index or return_inverse:
        perm = np.argsort(flat)          # any order within equal values: first indices by a min below
        s = flat[perm]
    else:
        perm = None
        s = np.sort(flat)
    head = np.empty(n, bool)
    if n:
        head[0] = True
        np.not_equal(s[1:], s[:-1], out=head[1:])
    starts = np.flatnonzero(head)
    out = [s[starts]]
    if return_index:
        out.append(np.minimum.reduceat(perm, starts) if n else np.zeros(0, np.intp))
    if return_inverse:
        inv = np.empty(n, np.intp)
        inv[perm] = np.cumsum(head) - 1
        out.append(inv.reshape(a.shape))
    if return_counts:
        out.append(np.diff(np.append(starts, n)))
    return out[0] if len(out) == 1 else tuple(out)


def isin_int(a, b) -> np.ndarray:
    """`np.isin(a, b)` for integer arrays: each value of `a` found among `b`'s, by a search in `b`
    sorted (search_sorted: `a` in runs of ascending values, as ids per thread are, costs a probe or
    two per value). numpy's own sort path calls a flagless np.unique, which asks numpy.ma whether `b` is
    masked and so imports it (17-19 ms of a cold command's start, bench/MISSED.md)."""
    return in_sorted(a, np.sort(np.asarray(b).reshape(-1)))


def in_sorted(a, keys: np.ndarray) -> np.ndarray:
    """`isin_int(a, keys)` for `keys` already sorted: a caller asking block by block sorts once."""
    a = np.asarray(a)
    if not len(keys):
        return np.zeros(a.shape, bool)
    pos = search_sorted(keys, a)
    np.minimum(pos, len(keys) - 1, out=pos)
    return keys[pos] == a


def percentile_int(a, q: float) -> float:
    """`float(np.percentile(a, q))` for a non-empty 1-D integer array, bit for bit: numpy's linear
    method (the value at (n - 1) q / 100 between its two neighbours, by numpy's own two-sided
    lerp) on a partition, without numpy's np.unique of the indices, which imports numpy.ma."""
    a = np.asarray(a).reshape(-1)
    n = len(a)
    at = (n - 1) * (np.float64(q) / 100)
    lo = int(np.floor(at))
    hi = min(lo + 1, n - 1)
    part = np.partition(a, [lo, hi]) if hi != lo else np.partition(a, lo)
    below, above, t = part[lo], part[hi], at - lo
    diff = np.subtract(above, below)
    return float(np.subtract(above, diff * (1 - t)) if t >= 0.5 else np.add(below, diff * t))


def median_of(a, axis: int | None = None, overwrite_input: bool = False):
    """`np.median(a, axis, overwrite_input=...)`, bit for bit: numpy's own steps (a partition at the
    middle one or two, their mean, NaN where the data hold one), without its NaN check for float
    data, which asks numpy.ma and so imports it (17-19 ms of a cold command's start,
    bench/MISSED.md)."""
    a = np.asanyarray(a)
    if a.size == 0 or type(a) is not np.ndarray or a.ndim == 0:
        return np.median(a, axis=axis, overwrite_input=overwrite_input)   # numpy's warning; subclasses
    if axis is None:
        data, axis = (a.ravel() if overwrite_input else a.reshape(-1)), 0
    else:
        data = a
    sz = data.shape[axis]
    kth = [sz // 2 - 1, sz // 2] if sz % 2 == 0 else [(sz - 1) // 2]
    nans = np.issubdtype(a.dtype, np.inexact) or a.dtype.kind in "Mm"
    if nans:
        kth.append(-1)   # a NaN sorts last
    if overwrite_input:
        data.partition(kth, axis=axis)
        part = data
    else:
        part = np.partition(data, kth, axis=axis)
    index = sz // 2
    middle = [slice(None)] * part.ndim
    middle[axis] = slice(index, index + 1) if sz % 2 == 1 else slice(index - 1, index + 1)
    out = np.mean(part[tuple(middle)], axis=axis)
    if nans:
        last = part.take(-1, axis=axis)
        nan = np.isnan(last)
        if nan.any():
            if isinstance(out, np.generic):
                return last
            np.copyto(out, last, where=nan)
    return out
