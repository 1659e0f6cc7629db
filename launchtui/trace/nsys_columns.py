"""Column work of the Nsight reader (trace/nsys_sqlite.py) that needs no SQLite: the GPU ops put in
time order in place, and each part's rows numbered by thread. Both go block by block, so their
temporaries are a block long, not a column long."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import fields

import numpy as np

from launchtui.cpus import usable_cpus
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.join import in_order   # the very test finalize applies
from launchtui.trace.model import GpuOps

BLOCK = 1 << 19       # rows per block of a blockwise lookup: 4 MiB int64 temporaries
# first-table rows from which half the columns move on a second thread (merge_in_time_order): the
# read's other threads are done by then, and numpy moves them without the GIL
MOVE_BESIDE_ROWS = 1 << 18


def merge_in_time_order(ops: GpuOps, spans: list[tuple[int, int, int]]) -> None:
    """Put the ops in finalize's time order as far as (start, end, device, stream) decide it (rows
    equal in those finalize orders by their other columns) in place, when each table's rows already
    are in that order (every export seen: kernels, then memcpy, then memset, each sorted) and no
    later table's start equals a first-table start: the later tables' few rows are sorted, and the
    first table's rows moved up block by block from the back to make room. finalize then finds the
    ops in order, so it allocates no sorted copy of every column (an argsort and a take per column).
    With a second CPU, half the columns (by bytes) move on a thread of their own, block by block.
    Otherwise nothing moves and finalize sorts them."""
    runs = [(a, b) for _, a, b in spans if b > a]
    if len(runs) < 2 or runs[0][0] != 0:
        return
    start, end, dev, stream = ops.start, ops.end, ops.device, ops.stream
    if not all(in_order(start[a:b], (end[a:b], dev[a:b], stream[a:b])) for a, b in runs):
        return
    n_first = runs[0][1]
    rest = np.lexsort((stream[n_first:], dev[n_first:], end[n_first:], start[n_first:])) + n_first  # stable
    at = np.searchsorted(start[:n_first], start[rest])   # first-table rows before each later row
    if (start[np.minimum(at, n_first - 1)][at < n_first] == start[rest][at < n_first]).any():
        return   # a start tie across tables: order decided by the other keys, left to finalize
    cols = [getattr(ops, f.name) for f in fields(ops) if f.name != "api"]   # api: all -1 still
    saved = [col[rest] for col in cols]
    here, beside = _two_hands(cols)
    two = usable_cpus() >= 2 and n_first >= MOVE_BESIDE_ROWS
    with ThreadPoolExecutor(1, thread_name_prefix="launchtui-merge") if two else nullcontext() as pool:
        for a in reversed(range(0, n_first, BLOCK)):   # from the back: no row overwritten before moved
            b = min(a + BLOCK, n_first)
            lo, hi = np.searchsorted(at, (a, b))
            if lo == hi == 0:
                continue   # no later row before any of these: they stay
            dest = np.cumsum(np.bincount(at[lo:hi] - a, minlength=b - a))   # row i moves up by the
            dest += np.arange(a + lo, b + lo)                                # later rows before it
            other = pool.submit(_move, beside, dest, a, b) if pool else None
            _move(here if pool else cols, dest, a, b)
            if other is not None:
                other.result()   # the block's columns all moved before the next (earlier) block's
    pos = at + np.arange(len(rest))
    for col, vals in zip(cols, saved):
        col[pos] = vals


def _two_hands(cols: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The columns in two groups of about equal bytes, the widest placed first."""
    hands: tuple[list, list] = ([], [])
    load = [0, 0]
    for col in sorted(cols, key=lambda c: -c.itemsize):
        k = int(load[1] < load[0])
        hands[k].append(col)
        load[k] += col.itemsize
    return hands


def _move(cols: list[np.ndarray], dest: np.ndarray, a: int, b: int) -> None:
    for col in cols:
        col[dest] = col[a:b]   # overlapping: numpy buffers the source block


def thread_ids(parts: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Distinct globalTids of all parts (sorted) and each part's rows' int32 index into them: the
    result of np.unique(concatenated, return_inverse=True), without the concatenated copy or an
    int64 inverse. Distinct values are found among run heads (a thread's rows are often
    contiguous); the lookup goes block by block, so its temporaries are reused, not fresh memory."""
    if not parts:
        return np.zeros(0, np.int64), []
    uniq = np.zeros(0, np.int64)
    for p in parts:   # block by block: threads interleaved row by row make a head of every row
        for a in range(0, len(p), BLOCK):
            q = p[a:a + BLOCK]
            uniq = unique_sorted(np.concatenate([uniq, q[np.concatenate([[True], q[1:] != q[:-1]])]]))
    ids = []
    for p in parts:
        out = np.empty(len(p), np.int32)
        for a in range(0, len(p), BLOCK):
            out[a:a + BLOCK] = np.searchsorted(uniq, p[a:a + BLOCK])
        ids.append(out)
    return uniq, ids
