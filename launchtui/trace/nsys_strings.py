"""Nsight StringIds: id -> text for ids of any int64 value (definitions.md §H).

Ids are not dense from 0: Nsight 2026.2 writes 126 rows with ids up to 3,435,062, and nothing in
the schema bounds them. Every lookup therefore goes through the table's sorted ids (searchsorted
once per distinct id asked for), never through an array indexed by id. An id with no row is
`None` here; the caller shows it as `<string ID>` and counts the rows in `skipped`.
"""
from __future__ import annotations

import sqlite3
from collections import Counter
from typing import Callable

import numpy as np

from launchtui.trace.arrays import unique_sorted
from launchtui.trace.grouping import DENSE_LIMIT, dense_groups
from launchtui.trace.model import StringTable

NULL_ID = -1   # what sqlite_columns reads a NULL as; Nsight never writes a negative id
# ids marked or mapped at once: each block's ids cast to intp first, numpy's fast path for an index
# (an int32 or strided index, as a packed column's halves are, costs 2-3x as much per id); 2 MiB
# intp and 1 MiB int32 temporaries, reused block after block (cache-sized)
MAP_BLOCK = 1 << 18

SKIP_ID_TYPE = "StringIds rows whose id is not an integer"
SKIP_NULL_VALUE = "StringIds rows with a NULL value (their id counts as having no row)"
SKIP_REPEATED = "StringIds rows repeating an id (the smallest value is used)"


def missing_name(i: int) -> str:
    """How a name id with no StringIds row is shown: distinct ids stay distinct and visible."""
    return "<string NULL>" if i == NULL_ID else f"<string {i}>"


def unresolved_reason(table: str, column: str) -> str:
    return f"{table} rows whose {column} has no StringIds row (shown as <string ID>)"


def _text(v) -> str | None:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bytes):   # a BLOB value: the text as the connection decodes text
        return v.decode("utf-8", "replace")
    return str(v)              # a number stored in the TEXT column


class StringIds:
    """The StringIds table as sorted int64 ids and their texts."""

    def __init__(self, ids: np.ndarray, values: np.ndarray):
        self.ids = ids          # sorted, distinct
        self.values = values    # object array of str, aligned with ids
        # ids 0..n-1 exactly (every export before 2026.2): a distinct id is its own position
        self.dense = bool(len(ids) == 0 or (ids[0] == 0 and ids[-1] == len(ids) - 1))

    @classmethod
    def empty(cls) -> "StringIds":
        return cls(np.zeros(0, np.int64), np.zeros(0, object))

    @classmethod
    def read(cls, con: sqlite3.Connection, table: str, skipped: Counter) -> "StringIds":
        rows = con.execute(f'SELECT id, value FROM "{table}"').fetchall()
        if not rows:
            return cls.empty()
        ids_in, vals_in = zip(*rows)
        del rows
        if not all(type(i) is int for i in ids_in):   # a declared INTEGER PRIMARY KEY never fails this
            keep = [type(i) is int for i in ids_in]
            skipped[SKIP_ID_TYPE] += keep.count(False)
            ids_in = [i for i, k in zip(ids_in, keep) if k]
            vals_in = [v for v, k in zip(vals_in, keep) if k]
        values = [_text(v) for v in vals_in]
        if None in values:
            keep = [v is not None for v in values]
            skipped[SKIP_NULL_VALUE] += keep.count(False)
            ids_in = [i for i, k in zip(ids_in, keep) if k]
            values = [v for v, k in zip(values, keep) if k]
        ids = np.fromiter(ids_in, np.int64, len(ids_in))
        vals = np.empty(len(values), object)
        vals[:] = values
        order = np.argsort(ids, kind="stable")
        ids, vals = ids[order], vals[order]
        if len(ids) > 1 and (ids[1:] == ids[:-1]).any():
            ids, vals = _one_value_per_id(ids, vals, skipped)
        return cls(ids, vals)

    def find(self, uniq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position in the table, found) for each id of `uniq` (int64, any values)."""
        uniq = np.asarray(uniq, np.int64)
        if not len(self.ids):
            return np.zeros(len(uniq), np.intp), np.zeros(len(uniq), bool)
        if self.dense:
            found = (uniq >= 0) & (uniq < len(self.ids))
            return np.where(found, uniq, 0).astype(np.intp), found
        pos = np.minimum(np.searchsorted(self.ids, uniq), len(self.ids) - 1)
        return pos, self.ids[pos] == uniq

    def text(self, i: int) -> str | None:
        """The text of one id; None when the table has no row for it."""
        pos, found = self.find(np.array([i], np.int64))
        return self.values[pos[0]] if found[0] else None

    def texts(self, uniq: np.ndarray) -> tuple[list[str], np.ndarray]:
        """Each id's text, or its `missing_name`, and the mask of the ids that had no row."""
        pos, found = self.find(uniq)
        out = [self.values[p] if f else missing_name(u)
               for p, f, u in zip(pos.tolist(), found.tolist(), np.asarray(uniq).tolist())]
        return out, ~found


def _one_value_per_id(ids: np.ndarray, vals: np.ndarray, skipped: Counter):
    """Rows repeating an id (possible only without the PRIMARY KEY): the smallest text wins, a rule
    on the data, not on the rows' order."""
    uniq, first, counts = unique_sorted(ids, return_index=True, return_counts=True)
    skipped[SKIP_REPEATED] += int((counts - 1).sum())
    out = vals[first].copy()
    for j in np.flatnonzero(counts > 1).tolist():   # once per repeated id
        out[j] = min(vals[first[j]:first[j] + counts[j]].tolist())
    return uniq, out


def distinct_ids(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(sorted distinct ids, index of each row's id among them), or (distinct, None) when the ids
    index a presence table as they are (small non-negative ids: no n-long inverse is built)."""
    lo, hi = int(ids.min()), int(ids.max())
    if 0 <= lo and hi < DENSE_LIMIT:
        present = np.zeros(hi + 1, bool)
        for a in range(0, len(ids), MAP_BLOCK):   # one iteration per block
            present[ids[a:a + MAP_BLOCK].astype(np.intp, copy=False)] = True
        return np.flatnonzero(present), None
    return dense_groups(ids)


class Names:
    """Nsight name ids -> the model's interned strings. An id with no StringIds row (NULL: -1)
    becomes `<string ID>` (`<string NULL>`) and its rows are counted in `skipped` under its
    (table, column) (definitions.md §H). Main thread only: the string table is not shared."""

    def __init__(self, strings: StringTable, skipped: Counter, read: Callable[[], StringIds]):
        self.strings, self.skipped, self._read = strings, skipped, read
        self._table: StringIds | None = None

    @property
    def table(self) -> StringIds:
        if self._table is None:
            self._table = self._read()
        return self._table

    def map(self, ids: np.ndarray, transform=None, what: tuple[str, str] = ("", ""),
            out: np.ndarray | None = None) -> np.ndarray:
        """Interned ids for Nsight ids, each distinct text optionally transformed first. `out`: an
        int32 array as long as `ids` to write them to (block by block: no n-long result beside it).
        Three steps: `distinct_ids` and `fill` touch numbers only, so a reader may run them on
        another thread (two columns at once); `lookup` interns, on the main thread."""
        if len(ids) == 0:
            return np.zeros(0, np.int32) if out is None else out
        return self.fill(self.lookup(ids, distinct_ids(ids), transform, what), out)

    def lookup(self, ids: np.ndarray, groups, transform=None,
               what: tuple[str, str] = ("", "")) -> tuple[np.ndarray, np.ndarray]:
        """`map`'s second step (main thread): each distinct text of `ids` interned once, in the order
        of their ids (`groups`: distinct_ids(ids), non-empty `ids`); its rows with no StringIds row
        counted. Returns (table, codes): the interned id of row i is table[codes[i]]."""
        uniq, inv = groups
        texts, missing = self.table.texts(uniq)
        mapped = self.strings.intern_many([transform(s) for s in texts] if transform else texts)   # once per distinct name
        if missing.any():
            self._count(ids, uniq[missing], what)
        if inv is None:   # small non-negative ids index a table as they are
            lut = np.zeros(int(uniq[-1]) + 1, np.int32)
            lut[uniq] = mapped
            return lut, ids
        return mapped, inv

    @staticmethod
    def fill(looked_up: tuple[np.ndarray, np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
        """`map`'s last step (numbers only): table[codes] of `lookup`, block by block into `out` or a
        new array of the table's type."""
        table, codes = looked_up
        if out is None:
            out = np.empty(len(codes), table.dtype)
        for a in range(0, len(codes), MAP_BLOCK):   # one iteration per block
            out[a:a + MAP_BLOCK] = table[codes[a:a + MAP_BLOCK].astype(np.intp, copy=False)]
        return out

    def texts(self, ids: np.ndarray, what: tuple[str, str]) -> list[str]:
        """The text of each id (few: thread names, stack frames, domains), counted when missing."""
        ids = np.asarray(ids, np.int64)
        if not len(ids):
            return []
        uniq, inv = unique_sorted(ids, return_inverse=True)
        texts, missing = self.table.texts(uniq)
        if missing.any():
            self._count(ids, uniq[missing], what)
        return [texts[i] for i in inv.tolist()]

    def _count(self, ids: np.ndarray, missing: np.ndarray, what: tuple[str, str]) -> None:
        table, column = what
        null = missing == NULL_ID
        if null.any():
            self.skipped[f"{table} rows with NULL {column} (shown as <string NULL>)"] += int((ids == NULL_ID).sum())
        if (~null).any():
            self.skipped[unresolved_reason(table, column)] += int(np.isin(ids, missing[~null]).sum())

    def thread_names(self, con: sqlite3.Connection, table: str) -> dict[int, str]:
        """globalTid -> name from ThreadNames; a row without an integer nameId and globalTid names
        nothing (counted)."""
        rows = con.execute(f'SELECT nameId, globalTid FROM "{table}"').fetchall()
        good = [(nid, gtid) for nid, gtid in rows if type(nid) is int and type(gtid) is int]
        if len(good) < len(rows):
            self.skipped[f"{table} rows without an integer nameId or globalTid (the thread stays unnamed)"] += \
                len(rows) - len(good)
        texts = self.texts(np.fromiter((nid for nid, _ in good), np.int64, len(good)), (table, "nameId"))
        return {gtid: t for (_, gtid), t in zip(good, texts)}
