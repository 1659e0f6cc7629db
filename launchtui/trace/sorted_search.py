"""`search_sorted(a, v, side)`: np.searchsorted(a, v, side), faster where the keys come in order.

The analyses search sorted times in sorted times (gap starts in op starts, gap ends in launch
calls). numpy bisects all of `a` for every key; the optional C helper (_sorted_search.c) starts each
key from the previous key's answer and gallops forward, 2-4x quicker on such keys (bench/MISSED.md).
It returns numpy's answer for any key order, so the two paths are interchangeable: int64 `a` and
keys go to C when it was built, anything else (other dtypes, a scalar key, no compiler at install)
to numpy. `a` must be sorted, as for numpy.
"""
from __future__ import annotations

import numpy as np

try:
    from launchtui.trace import _sorted_search as _native
except ImportError:     # optional: setup.py builds it where it can
    _native = None


def search_sorted(a, v, side: str = "left") -> np.ndarray:
    """np.searchsorted(a, v, side=side) (intp positions, the shape of `v`) for sorted `a`."""
    a, v = np.asarray(a), np.asarray(v)
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', not {side!r}")
    if (_native is None or v.ndim != 1 or a.ndim != 1 or a.dtype != np.int64 or v.dtype != np.int64
            or not a.flags.c_contiguous or not v.flags.c_contiguous):
        return np.searchsorted(a, v, side=side)
    out = np.empty(len(v), np.intp)
    _native.search(a, v, out, side == "right")
    return out


def native() -> bool:
    """The C helper is built and used."""
    return _native is not None
