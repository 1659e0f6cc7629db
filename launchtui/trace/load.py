"""Open any supported trace: the reader is chosen by content, never by extension (trace/registry.py)."""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from launchtui import heap
from launchtui.errors import TraceError, memory_message
from launchtui.trace import registry, sqlite_probe
from launchtui.trace.model import SourceInfo, Trace

_NOT_REGULAR = {stat.S_IFCHR: "a device", stat.S_IFBLK: "a device", stat.S_IFIFO: "a FIFO",
                stat.S_IFSOCK: "a socket"}


def check_readable(path: Path) -> os.stat_result:
    """Fail with one clear line for missing, directory, special, unreadable or empty paths.

    `stat` comes first: only regular files are opened (opening a FIFO blocks for ever, a device
    such as /dev/zero never ends).
    """
    try:
        st = os.stat(path)
    except OSError as e:
        raise TraceError(path, _stat_problem(path, e)) from None
    if stat.S_ISDIR(st.st_mode):
        raise TraceError(path, "is a directory, not a trace file")
    if not stat.S_ISREG(st.st_mode):
        kind = _NOT_REGULAR.get(stat.S_IFMT(st.st_mode), "not a regular file")
        raise TraceError(path, f"is {kind}, not a trace file (only regular files are read)")
    try:
        with open(path, "rb") as f:
            f.read(1)
    except PermissionError:
        raise TraceError(path, "permission denied") from None
    except OSError as e:
        raise TraceError(path, f"cannot read ({e.strerror or e})") from None
    if st.st_size == 0:
        raise TraceError(path, "empty file")
    return st


def _stat_problem(path: Path, e: OSError) -> str:
    if e.errno == errno.ENOENT:
        return "no such file (a broken symbolic link)" if os.path.islink(path) else "no such file"
    if e.errno == errno.EACCES:
        return "permission denied"
    if e.errno == errno.ENAMETOOLONG:
        return "file name too long"
    if e.errno == errno.ELOOP:
        return "too many levels of symbolic links"
    if e.errno == errno.ENOTDIR:
        return "no such file (a part of the path is not a directory)"
    return f"cannot read ({e.strerror or e})"


def sniff(path: Path) -> str:
    """The container from the first bytes (registry.SQLITE, SQLITE_GZ, JSON, NSYS_REP or UNKNOWN);
    a gzip file is looked into."""
    with open(path, "rb") as f:
        head = f.read(64)
    return registry.container(head, lambda: registry.gzip_head(path))


def source_info(path: Path, st: os.stat_result) -> SourceInfo:
    return SourceInfo(path=str(path), size=st.st_size, mtime_ns=st.st_mtime_ns, format="", producer="")


def memory_estimate(path: Path, kind: str, size: int, reader: registry.Reader | None = None) -> int:
    """About how many bytes reading `path` needs at its peak (gzip: from the stored input size)."""
    n = size
    if kind in (registry.JSON, registry.SQLITE_GZ):
        try:
            with open(path, "rb") as f:
                if f.read(2) == registry.GZIP_MAGIC and size >= 4:
                    f.seek(-4, os.SEEK_END)  # ISIZE: uncompressed size mod 2**32
                    isize = int.from_bytes(f.read(4), "little")
                    n = isize if isize >= size else isize + (size // 2**32 + 1) * 2**32
        except OSError:
            pass
    if reader is None:
        reader = {registry.JSON: registry.KINETO, registry.NSYS_REP: registry.NSYS_REPORT}.get(kind, registry.NSIGHT)
    return int(n * reader.peak_per_byte)


def preflight(path: str | os.PathLike) -> None:
    """The checks that need only a stat and the first bytes, so that the TUI fails with its one
    line before it takes over the terminal (a missing path must not flash a loading screen)."""
    path = Path(path)
    check_readable(path)
    if sniff(path) == registry.UNKNOWN:
        raise TraceError(path, registry.UNSUPPORTED)


def read_trace(path: str | os.PathLike, progress=None) -> Trace:
    """Read a trace file into the model (no cache). Running out of memory is one line that says
    about how much the read needs."""
    path = Path(path)
    st = check_readable(path)
    kind = sniff(path)
    chosen: list[registry.Reader] = []
    try:
        return _read(path, st, kind, progress, chosen)
    except MemoryError:
        reader = chosen[-1] if chosen else None
        raise TraceError(path, memory_message(memory_estimate(path, kind, st.st_size, reader))) from None


def _read(path: Path, st: os.stat_result, kind: str, progress, chosen: list) -> Trace:
    """The reader the content asks for (trace/registry.py); an SQLite database by its tables, a
    gzipped one read from a private decompressed copy in the user cache (never beside the file)."""
    src = source_info(path, st)
    if kind == registry.SQLITE:
        reader = sqlite_probe.reader_of(path)
    elif kind == registry.SQLITE_GZ:
        with sqlite_probe.decompressed(path, progress) as plain:
            reader = sqlite_probe.reader_of(plain, shown=path)
            chosen.append(reader)
            try:
                trace = _read_with(reader, plain, src, progress)
            except TraceError as e:   # about the private copy: name the user's file
                raise TraceError(path, e.problem) if e.path == str(plain) else e from None
        trace.source.extra["container"] = "gzip (read from a private decompressed copy)"
        return trace
    elif kind == registry.JSON:
        reader = registry.KINETO
    elif kind == registry.NSYS_REP:
        reader = registry.NSYS_REPORT
    else:
        raise TraceError(path, registry.UNSUPPORTED)
    chosen.append(reader)
    return _read_with(reader, path, src, progress)


def _read_with(reader: registry.Reader, path: Path, src, progress) -> Trace:
    """`reader.read`, with large blocks recycled from its start where it asks (a no-op outside a
    headless command's main thread: heap.recycle_while_reading)."""
    if reader.recycles_while_reading:
        heap.recycle_while_reading()
    return reader.read(path, src, progress)


def open_trace(path: str | os.PathLike, progress=None, use_cache: bool = True) -> Trace:
    """Read a trace, through the per-user model cache unless `use_cache` is False."""
    if not use_cache:
        return read_trace(path, progress)
    from launchtui.trace import cache
    return cache.load_or_read(Path(path), read_trace, progress)


def open_cached(path: str | os.PathLike, progress=None, use_cache: bool = True):
    """`open_trace` whose fresh read is cached only on `trace.cache.commit(opened)`: a trace.cache.Opened
    (the trace, its model entry, whether it still has to be written)."""
    from launchtui.trace import cache
    if not use_cache:
        return cache.Opened(read_trace(path, progress))
    return cache.open_model(Path(path), read_trace, progress)
