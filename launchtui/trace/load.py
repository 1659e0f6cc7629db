"""Open any supported trace: format detection by content, never by extension."""
from __future__ import annotations

import os
from pathlib import Path

from launchtui.errors import TraceError
from launchtui.trace.model import SourceInfo, Trace

SQLITE_MAGIC = b"SQLite format 3\x00"
NSYS_REP_MAGIC = b"NVIDIA Tegra Profiler Report "
GZIP_MAGIC = b"\x1f\x8b"


def check_readable(path: Path) -> os.stat_result:
    """Fail with one clear line for missing, directory, unreadable or empty paths."""
    if not path.exists():
        raise TraceError(path, "no such file")
    if path.is_dir():
        raise TraceError(path, "is a directory, not a trace file")
    try:
        st = path.stat()
        with open(path, "rb") as f:
            f.read(1)
    except PermissionError:
        raise TraceError(path, "permission denied") from None
    except OSError as e:
        raise TraceError(path, f"cannot read ({e.strerror or e})") from None
    if st.st_size == 0:
        raise TraceError(path, "empty file")
    return st


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


def read_trace(path: str | os.PathLike, progress=None) -> Trace:
    """Read a trace file into the model (no cache)."""
    path = Path(path)
    st = check_readable(path)
    kind = sniff(path)
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
    raise TraceError(path, "not a supported trace: expected an Nsight Systems SQLite export, an "
                           ".nsys-rep/.qdrep report, or PyTorch-profiler JSON (.json / .json.gz)")


def open_trace(path: str | os.PathLike, progress=None, use_cache: bool = True, defer_cache: bool = False) -> Trace:
    """Read a trace, through the per-user model cache unless `use_cache` is False.

    With `defer_cache`, a fresh read is cached only on `launchtui.trace.cache.commit(trace)`.
    """
    if not use_cache:
        return read_trace(path, progress)
    from launchtui.trace import cache
    return cache.load_or_read(Path(path), read_trace, progress, defer=defer_cache)
