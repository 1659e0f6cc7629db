"""The binary SQLite column reader: the C extension `_sqlite_scan` and the library it runs on.

`sqlite_columns.fetch_int_columns` formats every integer as text for `group_concat` and parses it
back (bench/MISSED.md: most of the cold reader's CPU). The extension instead steps the query in C
and writes `sqlite3_column_int64` straight into int64 arrays, without the GIL. It is optional: it
is used only when it was compiled, `LAUNCHTUI_NATIVE_READER` is not `0`, and the libsqlite3 that
Python's own `sqlite3` module uses exposes the functions it needs; otherwise, and for any value
that is not an integer or NULL, the pure-Python path reads the table (its semantics rule).
"""
from __future__ import annotations

import os
import sqlite3
from functools import cache

import numpy as np

ENV = "LAUNCHTUI_NATIVE_READER"   # 0: always the pure-Python group_concat path

OK, ODD_VALUE, FULL, SQLITE_ERROR, UNPACKABLE = range(5)   # scan() statuses (_sqlite_scan.c)
MAX_COLS = 64                                  # columns per scan (_sqlite_scan.c)


def _sqlite_library_candidates():
    """Where the functions Python's sqlite3 uses live, most likely first (a generator: the later
    guesses, which run `ldconfig`, are tried only when the first fail): the libsqlite3 mapped into
    this process (Linux), the `_sqlite3` module itself (a static SQLite that exports its symbols),
    then the system's libsqlite3 by name."""
    import _sqlite3
    try:
        with open("/proc/self/maps") as f:
            yield from sorted({line.split(None, 5)[5].strip() for line in f
                               if line.count(" ") >= 5 and "libsqlite3" in line.rsplit("/", 1)[-1]})
    except (OSError, IndexError):
        pass
    if getattr(_sqlite3, "__file__", None):
        yield _sqlite3.__file__
    import ctypes.util
    name = ctypes.util.find_library("sqlite3")
    if name:
        yield name


def status() -> str:
    """`native (LIBRARY)` when the C reader is used, else `python (WHY)`."""
    if os.environ.get(ENV, "1").strip() == "0":
        return f"python ({ENV}=0)"
    return _load()


@cache
def _load() -> str:
    try:
        from launchtui.trace import _sqlite_scan
    except ImportError:
        return "python (the C extension was not built)"
    for lib in _sqlite_library_candidates():
        if _sqlite_scan.load(lib):
            return f"native ({lib})"
    return "python (no libsqlite3 with the needed functions found)"


def enabled() -> bool:
    return status().startswith("native")


class Unpackable(ValueError):
    """A row whose two packed ids do not fit their halves (sqlite_columns.Packed): read them apart."""


def scan(uri: str, columns: list[str], source: str, names: list[str], required: list[bool], capacity: int,
         null_value: int, out: list[np.ndarray] | None = None, packs: list | None = None):
    """`SELECT columns FROM source` on its own connection to `uri`, into int64 arrays named `names`
    (the columns past `names` are packs' extras). The C scan runs it as one aggregate over the rows
    (`launchtui_row`, _sqlite_scan.c), so `source` is a table and its WHERE, never an ORDER BY.
    Returns (arrays, rows dropped for a NULL in a required column), or None when the pure-Python
    path must read instead (a value that is not an integer, a SQLite error, more rows than
    `capacity`). Arrays are sized `capacity` (untouched pages cost no memory) and shrunk in place;
    given `out` (contiguous int64 arrays or views, their length the capacity), the rows go there
    and the arrays returned are their leading slices. `packs[c]`: None, or (j, shift) to write
    `column c << shift | column j` (j an extra column past `names`); raises Unpackable when a
    row's pair does not fit (_sqlite_scan.c)."""
    from launchtui.trace import _sqlite_scan
    bufs = out if out is not None else [np.empty(max(capacity, 1), np.int64) for _ in names]
    sql = f"SELECT launchtui_row({', '.join(columns)}) FROM {source}"
    st, n, dropped, _ = _sqlite_scan.scan(uri, sql, bufs, required, null_value, packs)
    if st == UNPACKABLE:
        raise Unpackable("packed ids out of range")
    if st != OK:
        return None
    if out is not None:
        return {k: v[:n] for k, v in zip(names, bufs)}, dropped
    for v in bufs:
        v.resize(n, refcheck=False)    # in place: no second copy of the columns
    return dict(zip(names, bufs)), dropped


def connection_uri(con: sqlite3.Connection) -> str | None:
    """The URI a `connect_readonly` connection was opened with (None for any other connection)."""
    return getattr(con, "launchtui_uri", None)


if __name__ == "__main__":   # `python -m launchtui.trace.native_columns`: which reader this install uses
    print(status())
