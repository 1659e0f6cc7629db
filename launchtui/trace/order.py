"""Total orders on the model's rows, defined on the data alone (docs/definitions.md §9).

A table's rows are put in time order with every tie broken by the rows' other columns, integers
first and names last; names compare as strings (never as interned ids, whose numbering follows
the reading order). Two rows left tied are equal in every column, so the sorted table is a
function of the set of rows, not of their order in the file.

Exported tables are mostly in time order already (runs per thread or stream buffer). Each step
pays only where needed: a neighbour test first, a stable merge sort on the start when it fails,
and the other keys are read at tied starts only.
"""
from __future__ import annotations

import numpy as np

from launchtui.trace.arrays import isin_int, unique_sorted
from launchtui.trace.model import StringTable


def string_ranks(strings: StringTable | None, ids) -> np.ndarray:
    """Per id, its rank among the distinct `ids` by string value (int64; negative ids, "no
    string", rank first). One sort of the distinct strings involved, not of the whole table.
    `ids` may also be the strings themselves (an object array; `strings` unused)."""
    ids = np.asarray(ids)
    if not len(ids):
        return np.zeros(0, np.int64)
    if ids.dtype == object:
        return np.unique(ids.astype(str), return_inverse=True)[1].reshape(-1).astype(np.int64)
    uniq, inv = unique_sorted(ids, return_inverse=True)
    texts = [strings[int(u)] if u >= 0 else "" for u in uniq.tolist()]
    # (no string, then the string): -1 sorts before "" and before every other text
    order = sorted(range(len(uniq)), key=lambda i: (uniq[i] >= 0, texts[i]))
    rank = np.empty(len(uniq), np.int64)
    rank[order] = np.arange(len(uniq))
    return rank[inv.reshape(-1)]


def in_order(first, others, order=None, names=(), strings: StringTable | None = None) -> bool:
    """Rows (in `order`, when given) sorted lexicographically by `first`, then `others`, then the
    string values of `names`? `first` is already permuted; the others are read through `order`
    at tied positions only."""
    if len(first) < 2:
        return True
    if (first[1:] < first[:-1]).any():
        return False
    tie = np.flatnonzero(first[1:] == first[:-1])
    for k in others:
        if not len(tie):
            return True
        a, b = _pairs(k, tie, order)
        if (b < a).any():
            return False
        tie = tie[b == a]
    for k in names:
        if not len(tie):
            return True
        a, b = _pairs(k, tie, order)
        diff = a != b
        if diff.any():
            r = string_ranks(strings, np.concatenate([a[diff], b[diff]]))
            if (r[diff.sum():] < r[:diff.sum()]).any():
                return False
        tie = tie[~diff]
    return True


def _pairs(k, tie, order):
    return (_take(k, tie), _take(k, tie + 1)) if order is None else (_take(k, order[tie]), _take(k, order[tie + 1]))


def _take(k, idx):
    """k[idx]; a list (e.g. of event names) gives an object array of the few rows asked for."""
    if isinstance(k, list):
        return np.array([k[i] for i in idx.tolist()], dtype=object)
    return k[idx]


def time_order(start, end, *tie_keys, names=(), strings: StringTable | None = None):
    """(permutation sorting rows by (start, end, *tie_keys, names as strings), `start` in that
    order); (None, start) when already in that order. `names`: string-id arrays of `strings`, or
    lists of the strings themselves.

    A stable merge sort on `start` handles runs of time-ordered rows in near-linear time; the
    other keys are then sorted within runs of equal starts only (no lexsort of every row)."""
    keys = (end,) + tie_keys
    if in_order(start, keys, None, names, strings):
        return None, start
    order = np.argsort(start, kind="stable")
    s = start[order]
    if not in_order(s, keys, order, names, strings):
        _order_ties(s, order, keys, names, strings)
    return order, s


def _order_ties(s, order, keys, names, strings) -> None:
    """Sort `order`'s runs of equal `s` by the keys, then the names' string values, in place."""
    tie = np.flatnonzero(s[1:] == s[:-1])
    members = unique_sorted(np.concatenate([tie, tie + 1]))   # positions in runs of equal start
    run = np.cumsum(~isin_int(members, tie + 1))           # a new run where not tied to the one before
    rows = order[members]
    cols = [run] + [_take(k, rows) for k in keys]
    o = np.lexsort(tuple(reversed(cols)))                 # stable: equal keys keep their order
    if names:
        srt = [c[o] for c in cols]
        same = np.ones(len(o) - 1, bool)
        for c in srt:
            same &= c[1:] == c[:-1]
        t2 = np.flatnonzero(same)
        if len(t2):
            m2 = unique_sorted(np.concatenate([t2, t2 + 1]))
            run2 = np.cumsum(~np.isin(m2, t2 + 1))
            r2 = rows[o[m2]]
            ranks = [string_ranks(strings, _take(k, r2)) for k in names]
            o2 = np.lexsort(tuple(reversed([run2] + ranks)))
            o[m2] = o[m2][o2]
    order[members] = rows[o]


def equal_runs(*cols) -> np.ndarray:
    """Positions i where row i equals row i + 1 in every column (rows in table order)."""
    if not len(cols) or len(cols[0]) < 2:
        return np.zeros(0, np.int64)
    tie = np.flatnonzero(cols[0][1:] == cols[0][:-1])
    for c in cols[1:]:
        if not len(tie):
            break
        tie = tie[c[tie + 1] == c[tie]]
    return tie
