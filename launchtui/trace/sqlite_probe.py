"""Which reader an SQLite database belongs to (trace/registry.py), and private copies to read from.

The schema is read read-only and immutable (nothing is written beside the file). A gzipped
database is decompressed into a fresh directory of the user cache, read there and removed; the
trace keeps the compressed file's path, size and mtime, so it is cached as that file.
"""
from __future__ import annotations

import contextlib
import gzip
import shutil
import sqlite3
import tempfile
import zlib
from pathlib import Path

from launchtui.errors import TraceError
from launchtui.trace import registry
from launchtui.trace.sqlite_columns import (connect_readonly, private_snapshot, side_files, snapshot_dir)

_COPY_CHUNK = 1 << 20


def schema_of(con: sqlite3.Connection) -> registry.Schema:
    """The database's tables and views; each one's columns read when a reader asks for them."""
    names = frozenset(str(n) for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
                      if n is not None)
    cache: dict[str, frozenset[str]] = {}

    def columns(name: str) -> frozenset[str]:
        if name not in cache:
            try:
                cache[name] = frozenset(str(r[1]) for r in con.execute(f'PRAGMA table_info("{name}")'))
            except sqlite3.Error:   # a view over a missing table
                cache[name] = frozenset()
        return cache[name]
    return registry.Schema(names, columns)


def reader_of(path: Path, shown: Path | None = None) -> registry.Reader:
    """The first SQLite reader whose schema test holds. A database whose schema cannot be read, or
    that has a -wal / -journal beside it (its schema may lie there), goes to the Nsight reader,
    which reads such files through a private snapshot and says what is wrong in its own words."""
    try:
        con = connect_readonly(path)
        try:
            found = registry.recognise(schema_of(con))
        finally:
            con.close()
    except (sqlite3.Error, UnicodeDecodeError, ValueError):
        return registry.NSIGHT
    if found is not None:
        return found
    if side_files(path):
        return registry.NSIGHT
    raise TraceError(shown or path, registry.not_any_sqlite())


@contextlib.contextmanager
def private_dir():
    """A fresh directory under the user cache (the system temp directory when the cache cannot be
    written), removed on exit."""
    from launchtui.paths import cache_dir
    try:
        d = snapshot_dir(cache_dir() / "snapshots")
    except OSError:
        d = snapshot_dir(Path(tempfile.gettempdir()) / "launchtui-snapshots")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def decompressed(path: Path, progress=None):
    """The gzipped database `path` decompressed into a private directory, for the read only."""
    with private_dir() as d:
        plain = d / "trace.sqlite"
        try:
            with gzip.open(path, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst, _COPY_CHUNK)
        except (EOFError, zlib.error, gzip.BadGzipFile) as e:
            raise TraceError(path, f"cannot decompress (a damaged or truncated gzip file: {e})") from None
        except OSError as e:
            raise TraceError(path, f"cannot decompress into the user cache ({e.strerror or e})") from None
        if progress:
            progress("decompressed", plain.stat().st_size)
        yield plain


@contextlib.contextmanager
def consistent(path: Path):
    """A connection to `path`, read-only and immutable; when a -wal or -journal beside it holds
    data, to a private copy with them applied instead (read immutably, the file alone would give
    numbers SQLite itself would not)."""
    sides = side_files(path)
    if not sides:
        con = connect_readonly(path)
        try:
            yield con, path
        finally:
            con.close()
        return
    with private_dir() as d:
        try:
            copy = private_snapshot(path, sides, d)
        except (OSError, sqlite3.Error) as e:
            names = ", ".join(s.name[len(path.name):] for s in sides)
            raise TraceError(path, f"has a {names} file beside it (a writer's unfinished or uncheckpointed "
                                   f"changes) and a private copy to read it safely failed ({e})") from None
        con = connect_readonly(copy, immutable=False)
        try:
            yield con, copy
        finally:
            con.close()
