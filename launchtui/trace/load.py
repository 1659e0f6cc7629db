"""Open any supported trace: format detection by content, never by extension."""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from launchtui.errors import TraceError, memory_message
from launchtui.trace.model import SourceInfo, Trace

SQLITE_MAGIC = b"SQLite format 3\x00"
NSYS_REP_MAGIC = b"NVIDIA Tegra Profiler Report "
GZIP_MAGIC = b"\x1f\x8b"


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
    """'nsys-sqlite', 'nsys-rep', 'json' or 'unknown' from the first bytes."""
    with open(path, "rb") as f:
        head = f.read(64)
    if head.startswith(SQLITE_MAGIC):
        return "nsys-sqlite"
    if head.startswith(NSYS_REP_MAGIC):
        return "nsys-rep"
    if head.startswith(GZIP_MAGIC):
        return "json"
    if head.lstrip()[:1] in (b"{", b"["):
        return "json"
    return "unknown"


def source_info(path: Path, st: os.stat_result) -> SourceInfo:
    return SourceInfo(path=str(path), size=st.st_size, mtime_ns=st.st_mtime_ns, format="", producer="")


# peak memory per byte of input, measured (issue 12: a 315 MB Kineto JSON needs 810 MB; an Nsight
# export's columns need about its own size)
PEAK_PER_BYTE = {"json": 2.6, "nsys-sqlite": 1.0, "nsys-rep": 8.0}


def memory_estimate(path: Path, kind: str, size: int) -> int:
    """About how many bytes reading `path` needs at its peak (gzip: from the stored input size)."""
    n = size
    if kind == "json":
        try:
            with open(path, "rb") as f:
                if f.read(2) == GZIP_MAGIC and size >= 4:
                    f.seek(-4, os.SEEK_END)  # ISIZE: uncompressed size mod 2**32
                    isize = int.from_bytes(f.read(4), "little")
                    n = isize if isize >= size else isize + (size // 2**32 + 1) * 2**32
        except OSError:
            pass
    return int(n * PEAK_PER_BYTE.get(kind, 1.0))


_UNSUPPORTED = ("not a supported trace: expected an Nsight Systems SQLite export, an .nsys-rep/.qdrep report, "
                "or PyTorch-profiler JSON (.json / .json.gz)")


def preflight(path: str | os.PathLike) -> None:
    """The checks that need only a stat and the first bytes, so that the TUI fails with its one
    line before it takes over the terminal (a missing path must not flash a loading screen)."""
    path = Path(path)
    check_readable(path)
    if sniff(path) == "unknown":
        raise TraceError(path, _UNSUPPORTED)


def read_trace(path: str | os.PathLike, progress=None) -> Trace:
    """Read a trace file into the model (no cache). Running out of memory is one line that says
    about how much the read needs."""
    path = Path(path)
    st = check_readable(path)
    kind = sniff(path)
    try:
        return _read(path, st, kind, progress)
    except MemoryError:
        raise TraceError(path, memory_message(memory_estimate(path, kind, st.st_size))) from None


def _read(path: Path, st: os.stat_result, kind: str, progress) -> Trace:
    src = source_info(path, st)
    if kind == "nsys-sqlite":
        from launchtui.trace.nsys_sqlite import read_nsys_sqlite
        return read_nsys_sqlite(path, src, progress)
    if kind == "json":
        from launchtui.trace.kineto import read_kineto
        return read_kineto(path, src, progress)
    if kind == "nsys-rep":
        from launchtui.trace.nsys_rep import export_report
        sqlite_path = export_report(path, progress)
        from launchtui.trace.nsys_sqlite import read_nsys_sqlite
        trace = read_nsys_sqlite(sqlite_path, src, progress)
        from launchtui.trace.nsys_rep import report_version
        trace.source.extra["report_version"] = report_version(path)
        trace.source.extra["exported_by_nsys"] = trace.source.version
        trace.source.version = f"report {report_version(path)}"
        return trace
    raise TraceError(path, _UNSUPPORTED)


def open_trace(path: str | os.PathLike, progress=None, use_cache: bool = True, defer_cache: bool = False) -> Trace:
    """Read a trace, through the per-user model cache unless `use_cache` is False.

    With `defer_cache`, a fresh read is cached only on `launchtui.trace.cache.commit(trace)`.
    """
    if not use_cache:
        return read_trace(path, progress)
    from launchtui.trace import cache
    return cache.load_or_read(Path(path), read_trace, progress, defer=defer_cache)
