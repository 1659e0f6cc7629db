"""Per-user cache of loaded traces ($XDG_CACHE_HOME/launchtui/models), never beside the trace.

An entry is keyed by the trace's resolved path, size, mtime and the model format version. It is one
flat file of arrays and a JSON header (trace/flatfile.py), written atomically and memory-mapped on
load. A corrupt, stale or foreign entry is ignored and rebuilt, never trusted. The directory is
bounded in size; oldest entries go first.
"""
from __future__ import annotations

import json
import math
import os
import stat
import shutil
from dataclasses import dataclass, fields
from pathlib import Path

from launchtui.paths import cache_dir
from launchtui.trace import flatfile
from launchtui.trace.cache_key import (FORMAT_VERSION, MODEL_SUFFIX, STALE_TMP_S, entry_path, models_dir,  # noqa: F401 (re-exported)
                                       sweep_stale_temporaries)
from launchtui.trace.model import (ApiCalls, ApiStacks, CpuRuns, CpuSamples, GpuOps, GraphSpans, Overheads, Ranges,
                                   SourceInfo, StackFrames, StringTable, Threads, Trace)

DEFAULT_MAX_MB = 2048
NO_LIMIT = 2**62
_TABLES = {"ops": GpuOps, "api": ApiCalls, "ranges": Ranges, "threads": Threads, "overheads": Overheads,
           "stacks": StackFrames, "api_stacks": ApiStacks, "cpu_runs": CpuRuns, "cpu_samples": CpuSamples,
           "graph_spans": GraphSpans}


def cache_root() -> Path:
    return cache_dir()


def max_bytes() -> int:
    """LAUNCHTUI_CACHE_MAX_MB in bytes: `inf` means no limit; NaN, negative or unparsable values
    give the default (2048 MB) rather than an error after the command's work is done."""
    text = os.environ.get("LAUNCHTUI_CACHE_MAX_MB", "").strip()
    try:
        mb = float(text) if text else DEFAULT_MAX_MB
    except ValueError:
        mb = DEFAULT_MAX_MB
    if mb == math.inf:
        return NO_LIMIT
    if not (0 <= mb < NO_LIMIT / 1e6):  # NaN fails too
        mb = DEFAULT_MAX_MB
    return int(mb * 1e6)


def save(trace: Trace, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    header = {
        "format_version": FORMAT_VERSION,
        "source": {**trace.source.__dict__},
        "strings": trace.strings.values,
        "devices": {str(k): v for k, v in trace.devices.items()},
        "missing": trace.missing,
        "has_cuda_tables": trace.has_cuda_tables,
    }
    arrays = {}
    for tname, cls in _TABLES.items():
        table = getattr(trace, tname)
        for f in fields(cls):
            arrays[f"{tname}.{f.name}"] = getattr(table, f.name)
    arrays["processes"] = trace.processes
    arrays["op_graph"] = trace.op_graph
    arrays["op_node"] = trace.op_node
    arrays["api_node"] = trace.api_node
    flatfile.write(dest, header, arrays)


def load(src: Path, st: os.stat_result, entry: Path) -> Trace:
    header, z = flatfile.read(entry)   # memory-mapped: pages are read when an analysis touches them
    if header.get("format_version") != FORMAT_VERSION:
        raise ValueError("format version mismatch")
    tables = {}
    for tname, cls in _TABLES.items():
        cols = {f.name: z[f"{tname}.{f.name}"] for f in fields(cls)}
        n = {len(v) for v in cols.values()}
        if len(n) > 1:
            raise ValueError("ragged table")
        tables[tname] = cls(**cols)
    s = header["source"]
    if s["size"] != st.st_size or s["mtime_ns"] != st.st_mtime_ns:
        raise ValueError("stale entry")
    strings = StringTable.from_values(header["strings"])
    for tname in ("ops", "api", "ranges", "stacks"):
        t = tables[tname]
        for col in ("name", "full_name", "text", "frame"):
            if hasattr(t, col) and len(getattr(t, col)) and int(getattr(t, col).max()) >= len(strings):
                raise ValueError("string id out of range")
    source = SourceInfo(**s)
    source.path = str(src)
    trace = Trace(source=source, strings=strings, devices={int(k): v for k, v in header["devices"].items()},
                  missing=header["missing"], has_cuda_tables=header["has_cuda_tables"], **tables)
    trace.processes = z["processes"]
    trace.op_graph = z["op_graph"]
    if len(trace.op_graph) not in (0, len(trace.ops)):
        raise ValueError("ragged graph ids")
    trace.op_node, trace.api_node = z["op_node"], z["api_node"]
    if len(trace.op_node) not in (0, len(trace.ops)) or len(trace.api_node) not in (0, len(trace.api)):
        raise ValueError("ragged graph node ids")
    return trace


@dataclass
class Opened:
    """A trace as opened through the cache: `entry` is its model entry (None: not cached, e.g. not
    a regular file or `--no-cache`), which exists unless `fresh`: read from the file, written by
    `commit(opened)` (a command that fails on bad options first leaves nothing written)."""
    trace: Trace
    entry: Path | None = None
    fresh: bool = False


def load_or_read(path: Path, reader, progress=None) -> Trace:
    """The cached model when valid, else read the trace and cache it (best effort)."""
    opened = open_model(path, reader, progress)
    commit(opened)
    return opened.trace


def open_model(path: Path, reader, progress=None) -> Opened:
    """The cached model when valid, else the trace read afresh (cached on `commit`)."""
    try:
        st = path.stat()
    except OSError:
        return Opened(reader(path, progress))  # the reader produces the proper one-line error
    if not path.is_file():
        return Opened(reader(path, progress))
    entry = entry_path(path, st)
    sweep_stale_temporaries(entry.parent, ".tmp-*")  # a directory listing: cheap, and warm runs sweep too
    if _usable_entry(entry):
        try:
            trace = load(path, st, entry)
            if progress:
                progress("loaded from cache", len(trace.ops))
            os.utime(entry)  # recently used: evicted last
            return Opened(trace, entry)
        except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError, EOFError):
            entry.unlink(missing_ok=True)  # corrupt or stale: rebuild
    return Opened(reader(path, progress), entry, fresh=True)


def _usable_entry(entry: Path) -> bool:
    """True for a regular file. Anything else at the entry's name (a FIFO would block the read, a
    directory fails it) is removed so the entry can be rebuilt."""
    try:
        st = os.lstat(entry)
    except OSError:
        return False
    if stat.S_ISREG(st.st_mode):
        return True
    try:
        shutil.rmtree(entry) if stat.S_ISDIR(st.st_mode) else entry.unlink()
    except OSError:
        pass
    return False


def commit(opened: Opened) -> None:
    """Write a freshly read trace to the cache (no-op when it came from there or was committed)."""
    fresh, opened.fresh = opened.fresh, False
    entry, trace = opened.entry, opened.trace
    if not fresh or entry is None:
        return
    if not trace.has_cuda_tables:  # nothing worth caching without CUDA activity
        opened.entry = None
        return
    try:
        save(trace, entry)
        sweep_stale_temporaries(entry.parent, ".tmp-*")
        _evict(keep=entry)
    except OSError:
        opened.entry = None  # a read-only or full cache directory must not stop the user


def _entries() -> list[Path]:
    d = models_dir()
    if not d.is_dir():
        return []
    # *.npz: entries of format versions before 8, evicted first like any old entry
    return sorted([*d.glob("*" + MODEL_SUFFIX), *d.glob("*.npz")], key=lambda p: p.stat().st_mtime)


def _with_sidecars(entry: Path) -> list[Path]:
    """The entry and the files stored beside it under its name (`<entry>.index`, the TUI's
    `<entry>.lanes`: session.py's mapped results)."""
    return [entry, *entry.parent.glob(entry.name + ".*")]


def _size(paths: list[Path]) -> int:
    total = 0
    for p in paths:
        try:
            total += p.stat().st_size
        except OSError:
            pass
    return total


def _evict(keep: Path) -> None:
    entries = [_with_sidecars(p) for p in _entries()]
    total = sum(_size(files) for files in entries)
    limit = max_bytes()
    for files in entries:
        if total <= limit:
            break
        if files[0] == keep:
            continue
        total -= _size(files)
        for p in files:
            p.unlink(missing_ok=True)


def usage() -> tuple[int, int]:
    root = cache_root()
    if not root.is_dir():
        return 0, 0
    files = [p for p in root.rglob("*") if p.is_file()]
    results = root / "results"  # finished outputs belong to their model entry: counted in its size only
    side = MODEL_SUFFIX + "."    # so do the files stored beside it (`<entry>.lanes`)
    return (sum(1 for p in files if results not in p.parents and side not in p.name),
            sum(p.stat().st_size for p in files))


def clear() -> tuple[int, int]:
    n, size = usage()
    root = cache_root()
    for sub in ("models", "nsys-export", "results"):
        shutil.rmtree(root / sub, ignore_errors=True)
    return n, size
