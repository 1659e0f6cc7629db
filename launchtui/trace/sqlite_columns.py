"""Fast read-only column fetches from SQLite into numpy.

Fetching rows as Python tuples costs ~1 µs per value. Instead SQLite itself concatenates each
integer column into one text buffer (`group_concat`), and numpy parses that buffer in C. This
keeps the reader close to the cost of SQLite's own table scan, with no per-row Python objects.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import numpy as np

from launchtui.trace import native_columns
from launchtui.trace.native_columns import Unpackable   # noqa: F401 (raised by fetch_int_columns)

NULL_INT = -1


@dataclass(frozen=True)
class Packed:
    """An output holding two integer expressions as `hi << shift | lo` (fewer, smaller columns
    than reading both). Formed only when 0 <= hi < 2^(63 - shift) and 0 <= lo < 2^shift, which
    is what makes the split exact; one row with any other pair (a NULL, a negative or a large id)
    makes `fetch_int_columns` raise Unpackable, and the caller reads the two apart. The C reader
    forms it itself; the pure-Python path evaluates `sql()`, the same rule in SQL (SQLite turns an
    overflowing integer product into a REAL, so the range is tested before multiplying)."""
    hi: str
    lo: str
    shift: int = 32

    def sql(self) -> str:
        return (f"CASE WHEN ({self.hi}) BETWEEN 0 AND {(1 << (63 - self.shift)) - 1} AND ({self.lo}) "
                f"BETWEEN 0 AND {(1 << self.shift) - 1} THEN ({self.hi}) * {1 << self.shift} + ({self.lo}) END")


def _sql(e) -> str:
    return e.sql() if isinstance(e, Packed) else e


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


class _ReadOnly(sqlite3.Connection):
    launchtui_uri: str


def connect_readonly(path: Path, immutable: bool = True) -> sqlite3.Connection:
    """Open read-only and immutable: SQLite writes nothing (no journal, no -shm/-wal beside it).

    Text comes back as bytes decoded with replacement, so invalid UTF-8 in a name is shown as
    U+FFFD instead of failing the read. `immutable=False` is for a private snapshot (see
    `side_files`), where SQLite must apply the WAL or roll back the journal.
    """
    uri = f"file:{quote(os.fsencode(path.resolve()), safe='/')}?mode={'ro&immutable=1' if immutable else 'rw'}"
    con = sqlite3.connect(uri, uri=True, check_same_thread=False, factory=_ReadOnly)
    con.launchtui_uri = uri   # the C reader opens its own connection the same way (native_columns)
    con.text_factory = _text
    con.execute("PRAGMA temp_store=MEMORY")
    return con


def side_files(path: Path) -> list[Path]:
    """A `-wal` or `-journal` beside the database that holds data: read immutably, the file alone
    would give numbers SQLite itself would not (uncheckpointed WAL frames missed, uncommitted pages
    from a killed or active writer read as if committed)."""
    out = []
    for suffix in ("-wal", "-journal"):
        side = Path(str(path) + suffix)
        try:
            if side.stat().st_size > 0:
                out.append(side)
        except OSError:
            pass
    return out


def private_snapshot(path: Path, sides: list[Path], where: Path) -> Path:
    """Copy the database and its side files into `where` (a fresh directory of ours) and open the
    copy once read-write, so SQLite applies the WAL or rolls back the hot journal there; the
    user's files are only read. Returns the consistent copy's path."""
    copy = where / "trace.sqlite"
    shutil.copyfile(path, copy)
    for side in sides:
        shutil.copyfile(side, str(copy) + str(side)[len(str(path)):])
    con = sqlite3.connect(copy)
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()  # recovery happens here
        if any(s.name.endswith("-wal") for s in sides):
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()
    return copy


def snapshot_dir(base: Path) -> Path:
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="snapshot-", dir=base))


class _Short(ValueError):
    pass


def _parse_ints(text: str | None, n: int, table: str = "") -> np.ndarray:
    if not text:
        if n > 0:
            raise _Short()
        return np.zeros(0, np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            arr = np.fromstring(text, dtype=np.int64, sep=",")
        except ValueError:  # text such as 'abc' in the column
            raise ValueError(f"a column of {table} holds values that are not integers") from None
    if n >= 0 and len(arr) != n:
        if len(arr) < n and text.count(",") + 1 < n:
            raise _Short()  # NULLs in a required column: group_concat skipped them
        raise ValueError(f"a column of {table} holds values that are not integers")
    return arr


REQUIRED = ("start", "end")  # a row without them cannot be placed in time


CHUNK_ROWS = 1 << 20   # rows per group_concat pass: bounds the column texts held at once
MAX_WINDOWS = 64       # rowid windows at most (arrays are sized by the rowid span: pages untouched
                       # past the row count cost no memory, and are given back by the final resize)


def rowid_bounds(con: sqlite3.Connection, table: str):
    """(min rowid, max rowid); (None, None) for an empty or a WITHOUT ROWID table."""
    try:   # two subqueries: SQLite answers a lone min() or max() of the rowid from the b-tree's
        # ends, while `SELECT min(rowid), max(rowid)` scans the whole table
        return con.execute(f'SELECT (SELECT min(rowid) FROM "{table}"), '
                           f'(SELECT max(rowid) FROM "{table}")').fetchone()
    except sqlite3.OperationalError:   # a WITHOUT ROWID table
        return None, None


def _dense(lo, hi) -> bool:
    return type(lo) is int and type(hi) is int and hi - lo < CHUNK_ROWS * MAX_WINDOWS


def rowid_span(con: sqlite3.Connection, table: str) -> int | None:
    """How many rowids the table spans (an upper bound of its rows, read from the b-tree's ends);
    None for an empty, a WITHOUT ROWID or a sparse table, whose size only a scan would tell."""
    lo, hi = rowid_bounds(con, table)
    return hi - lo + 1 if _dense(lo, hi) else None


def table_capacity(con: sqlite3.Connection, table: str, where: str = "") -> int:
    """At least as many rows as `fetch_int_columns(con, table, ..., where)` returns: the rowid span,
    else (empty, WITHOUT ROWID or sparse rowids) a count. Sizes the arrays it may fill (`out`)."""
    return _capacity(con, table, where, *rowid_bounds(con, table))


def _capacity(con: sqlite3.Connection, table: str, where: str, lo, hi) -> int:
    """table_capacity() with the rowid bounds known."""
    if _dense(lo, hi):
        return hi - lo + 1
    return con.execute(f'SELECT count(*) FROM "{table}"' + (f" WHERE {where}" if where else "")).fetchone()[0]


def fetch_int_columns(con: sqlite3.Connection, table: str, exprs: dict[str, str],
                      where: str = "", dropped: Counter | None = None,
                      out: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Integer columns of `table` as int64 arrays, in one table scan. NULLs become -1, except in
    NOT NULL columns and start/end: a row with a NULL there is dropped whole (all columns keep one
    length) and counted in `dropped[table]`.

    `exprs` maps output names to SQL expressions over the table's columns, or to `Packed` pairs
    (Unpackable is raised when a row's pair does not fit). A large table is read in
    rowid windows of CHUNK_ROWS into arrays sized once, so a large table's columns never exist as
    Python rows or partial copies (the reader's peak memory). `out`: int64 arrays (views too) of at
    least `table_capacity` rows, one per name, to fill instead of new arrays; the result is then
    their leading slices (several tables read into one set of arrays: no concatenated copy).
    """
    notnull = {r[1] for r in con.execute(f'PRAGMA table_info("{table}")') if r[3]}
    lo, hi = rowid_bounds(con, table)
    if native_columns.connection_uri(con) and 0 < len(exprs) <= native_columns.MAX_COLS and native_columns.enabled():
        got = _fetch_native(con, table, exprs, where, notnull, dropped, lo, hi, out)
        if got is not None:
            return got
    counted = Counter()   # merged into `dropped` only once the read succeeds (Unpackable reads again)
    got = _fetch_windows(con, table, exprs, where, notnull, counted, lo, hi, out)
    if dropped is not None:
        dropped.update(counted)
    return got


SPLIT_MIN_ROWS = 1 << 18   # a table read by two threads at once from this many rowids


def fetch_int_columns_split(con: sqlite3.Connection, table: str, exprs: dict, dropped: Counter,
                            out: dict[str, np.ndarray], elsewhere, share: float = 0.5) -> dict[str, np.ndarray]:
    """fetch_int_columns(con, table, exprs, "", dropped, out=out), the same rows in the same
    (rowid) order, with the upper `share` of the rowids offered to `elsewhere(fn)` (runs
    `fn(con=<a connection of its own>)` on another thread, returns its future): one big table's
    scan shared by two cores. An offer no thread has taken up by the time the lower part is read
    is withdrawn (its future cancelled) and read here: a busy other thread never leaves this one
    waiting, so an offer costs nothing where it was not needed. The parts' rows go to `out` at the
    lower part's rowid span, then close up; `dropped` counts only once both parts are read (an
    Unpackable part: neither)."""
    lo, hi = rowid_bounds(con, table)
    if elsewhere is None or share <= 0 or not _dense(lo, hi) or hi - lo + 1 < SPLIT_MIN_ROWS:
        return fetch_int_columns(con, table, exprs, "", dropped, out=out)
    rows = hi - lo + 1
    mid = hi + 1 - min(max(round(rows * share), 1), rows - 1)   # the upper part: rowids [mid, hi]
    span = mid - lo   # at most this many rows below mid: the upper part's rows start there
    counts = (Counter(), Counter())

    def read_upper(con):
        return fetch_int_columns(con, table, exprs, f"rowid >= {mid}", counts[1],
                                 out={k: v[span:] for k, v in out.items()})
    upper = elsewhere(read_upper)
    try:
        m1 = len(fetch_int_columns(con, table, exprs, f"rowid < {mid}", counts[0],
                                   out={k: v[:span] for k, v in out.items()})["start"])
    except BaseException:
        if not upper.cancel():
            upper.exception()   # the other thread writes into `out` until it returns
        raise
    m2 = len((read_upper(con=con) if upper.cancel() else upper.result())["start"])
    if m1 < span:
        for v in out.values():
            v[m1:m1 + m2] = v[span:span + m2]   # overlapping: numpy buffers the source
    dropped.update(counts[0] + counts[1])
    return {k: out[k][:m1 + m2] for k in exprs}


def _fetch_windows(con, table, exprs, where, notnull, dropped, lo, hi, out) -> dict[str, np.ndarray]:
    """The group_concat path: in rowid windows of CHUNK_ROWS, or in one pass when the table is
    small or its rowids are sparse (a window count past MAX_WINDOWS)."""
    if not _dense(lo, hi) or hi - lo < CHUNK_ROWS:
        got = _fetch(con, table, exprs, where, notnull, dropped)
        return got if out is None else _copy_into(out, got)
    cols = out if out is not None else {k: np.empty(hi - lo + 1, np.int64) for k in exprs}  # rowids bound the row count
    n = 0
    for a in range(lo, hi + 1, CHUNK_ROWS):
        window = f"rowid >= {a} AND rowid < {a + CHUNK_ROWS}" + (f" AND ({where})" if where else "")
        part = _fetch(con, table, exprs, window, notnull, dropped)
        m = len(next(iter(part.values()))) if part else 0
        for k, v in part.items():
            cols[k][n:n + m] = v
        n += m
        del part
    if out is not None:
        return {k: cols[k][:n] for k in exprs}
    for v in cols.values():
        v.resize(n, refcheck=False)    # in place: no second copy of the columns
    return cols


def _copy_into(out: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    m = len(next(iter(got.values()))) if got else 0
    for k, v in got.items():
        out[k][:m] = v
    return {k: out[k][:m] for k in got}


def kept_rows(con: sqlite3.Connection, table: str, exprs: dict) -> str:
    """An SQL condition true on exactly the rows `fetch_int_columns(con, table, exprs)` keeps (no
    NULL in a required column), for a query that must line up with them (a text column)."""
    notnull = {r[1] for r in con.execute(f'PRAGMA table_info("{table}")') if r[3]}
    # typeof(), not IS NOT NULL: SQLite optimises the latter away on a column declared NOT NULL
    return " AND ".join(f"typeof({e}) != 'null'" for e in _required(exprs, notnull)) or "1"


def _required(exprs: dict, notnull: set[str]) -> list[str]:
    return [e for e in exprs.values() if not isinstance(e, Packed) and (e in notnull or e in REQUIRED)]


def _fetch_native(con, table, exprs, where, notnull, dropped, lo, hi, out) -> dict[str, np.ndarray] | None:
    """One pass of the C reader over the whole table (no windows: it holds no column texts), into
    `out` or arrays sized by the rowid span, else by a count. None: let the group_concat path read it."""
    where_sql = f" WHERE {where}" if where else ""
    capacity = 0 if out is not None else _capacity(con, table, where, lo, hi)
    required = _required(exprs, notnull)
    # a Packed output selects its `hi` in place and its `lo` as an extra column after the outputs
    lows = [e for e in exprs.values() if isinstance(e, Packed)]
    if len(exprs) + len(lows) > native_columns.MAX_COLS:
        return None
    packs, sel, extra = [], [], len(exprs)
    for e in exprs.values():
        packs.append((extra, e.shift) if isinstance(e, Packed) else None)
        extra += isinstance(e, Packed)
        sel.append(e.hi if isinstance(e, Packed) else e)
    got = native_columns.scan(native_columns.connection_uri(con), sel + [e.lo for e in lows],
                              f'"{table}" NOT INDEXED{where_sql}', list(exprs),
                              [e in required for e in exprs.values()], capacity, NULL_INT,
                              out=None if out is None else [out[k] for k in exprs],
                              packs=packs if lows else None)
    if got is None:
        return None
    out, n_dropped = got
    if dropped is not None and n_dropped:
        dropped[table] += n_dropped
    return out


def _fetch(con, table, exprs, where, notnull, dropped) -> dict[str, np.ndarray]:
    """One group_concat pass. NOT INDEXED: rows in rowid order whatever indexes the export has (an
    index SQLite picked for the WHERE would reorder them, and windows would not match one pass)."""
    got = _fetch_pass(con, table, exprs, where, notnull, dropped)
    for k, e in exprs.items():   # the Packed rule: a pair that does not fit gives NULL (-1)
        if isinstance(e, Packed) and len(got[k]) and int(got[k].min()) < 0:
            raise Unpackable("packed ids out of range")
    return got


def _fetch_pass(con, table, exprs, where, notnull, dropped) -> dict[str, np.ndarray]:
    names = list(exprs)
    hint = " NOT INDEXED"
    where_sql = f" WHERE {where}" if where else ""
    required = _required(exprs, notnull)
    # required integer columns concatenate as they are (group_concat skips a NULL, which shows as
    # a short column); anything else needs a NULL sentinel
    sel = ", ".join(f"group_concat({e}, ',')" if e in required else f"group_concat(ifnull({_sql(e)}, {NULL_INT}), ',')"
                    for e in exprs.values())
    row = list(con.execute(f'SELECT count(*), {sel} FROM "{table}"{hint}{where_sql}').fetchone())
    count = row[0]
    try:
        return _parse_row(names, row, count, table)
    except _Short:
        pass
    # rare: NULLs where the schema says there are none; read again without those rows
    # typeof(), not IS NOT NULL: SQLite optimises the latter away on a column declared NOT NULL
    keep = " AND ".join(f"typeof({e}) != 'null'" for e in required)
    row = list(con.execute(f'SELECT count(*), {sel} FROM "{table}"{hint} WHERE {keep}'
                           + (f" AND ({where})" if where else "")).fetchone())
    if dropped is not None:
        dropped[table] += count - row[0]
    try:
        return _parse_row(names, row, row[0], table)
    except _Short:
        raise ValueError(f"a column of {table} holds values that are not integers") from None


def _parse_row(names, row, count, table) -> dict[str, np.ndarray]:
    """Parse each column's text, dropping it as soon as it is parsed."""
    out = {}
    for i, k in enumerate(names, 1):
        out[k] = _parse_ints(row[i], count, table)
        row[i] = None
    return out


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
