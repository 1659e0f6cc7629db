"""Fast read-only column fetches from SQLite into numpy.

Fetching rows as Python tuples costs ~1 µs per value. Instead SQLite itself concatenates each
integer column into one text buffer (`group_concat`), and numpy parses that buffer in C. This
keeps the reader close to the cost of SQLite's own table scan, with no per-row Python objects.
"""
from __future__ import annotations

import sqlite3
import warnings
from pathlib import Path
from urllib.parse import quote

import numpy as np

NULL_INT = -1


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open read-only and immutable: SQLite writes nothing (no journal, no -shm/-wal beside it)."""
    uri = f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"
    con = sqlite3.connect(uri, uri=True, check_same_thread=False)
    con.execute("PRAGMA temp_store=MEMORY")
    return con


def _parse_ints(text: str | None, n: int) -> np.ndarray:
    if not text:
        return np.zeros(0, np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        arr = np.fromstring(text, dtype=np.int64, sep=",")
    if n >= 0 and len(arr) != n:
        raise ValueError(f"column parse gave {len(arr)} values, expected {n}")
    return arr


def fetch_int_columns(con: sqlite3.Connection, table: str, exprs: dict[str, str],
                      where: str = "") -> dict[str, np.ndarray]:
    """Integer columns of `table` as int64 arrays, in one table scan. NULLs become -1.

    `exprs` maps output names to SQL expressions over the table's columns.
    """
    names = list(exprs)
    where_sql = f" WHERE {where}" if where else ""
    notnull = {r[1] for r in con.execute(f'PRAGMA table_info("{table}")') if r[3]}
    # NOT NULL integer columns concatenate as they are; anything else needs a NULL sentinel
    sel = ", ".join(f"group_concat({e}, ',')" if e in notnull else f"group_concat(ifnull({e}, {NULL_INT}), ',')"
                    for e in exprs.values())
    row = con.execute(f'SELECT count(*), {sel} FROM "{table}"{where_sql}').fetchone()
    count = row[0]
    return {k: _parse_ints(v, count) for k, v in zip(names, row[1:])}


UNIT_SEP = "\x1f"


def fetch_text_column(con: sqlite3.Connection, table: str, expr: str, where: str = "") -> list[str]:
    """One text column as a list of str, concatenated by SQLite and split in C (no row tuples)."""
    where_sql = f" WHERE {where}" if where else ""
    count, text = con.execute(
        f"SELECT count(*), group_concat(({expr}), char(31)) FROM \"{table}\"{where_sql}").fetchone()
    if not count:
        return []
    out = text.split(UNIT_SEP)
    if len(out) != count:  # a value held the separator itself: fall back to plain rows
        out = [r[0] for r in con.execute(f'SELECT ({expr}) FROM "{table}"{where_sql}')]
    return out


def table_columns(con: sqlite3.Connection) -> dict[str, set[str]]:
    """Every table and its columns, from sqlite_master and PRAGMA table_info."""
    out = {}
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'"):
        cols = {r[1] for r in con.execute(f'PRAGMA table_info("{name}")')}
        out[name] = cols
    return out
