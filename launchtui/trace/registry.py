"""The trace readers: how each recognises its content, and which facts its format can carry.

A reader is chosen by content, never by file name: first by the container's leading bytes (SQLite,
gzip, an .nsys-rep report, JSON), then, for SQLite, by the tables and columns the database holds,
since one container serves Nsight Systems, rocprofv3 (`rocpd`), RPD (rocmProfileData) and rocprof v1
alike. A gzip file is looked into: it holds either Kineto JSON or an SQLite database (an `.rpd.gz`).

Analyses never test a format name. They ask the trace (`Trace.provides(FACT_...)`) whether its
format can record a fact at all, which is what decides between "not recorded in this capture"
and "this format never carries it". `Trace.os_pids` turns a reader's process keys into OS pids.

This module imports no other launchtui module, so the model can ask it for facts without a cycle;
each reader's module is imported only when a file of its kind is read.
"""
from __future__ import annotations

import gzip
import importlib
import re
import zlib
from dataclasses import dataclass
from typing import Callable

SQLITE_MAGIC = b"SQLite format 3\x00"
NSYS_REP_MAGIC = b"NVIDIA Tegra Profiler Report "
GZIP_MAGIC = b"\x1f\x8b"

# Containers, from the leading bytes
SQLITE, SQLITE_GZ, JSON, NSYS_REP, UNKNOWN = "sqlite", "sqlite-gz", "json", "nsys-rep", "unknown"

# Facts a format can carry (whether a given capture recorded them is the data's business)
FACT_CPU_SAMPLING = "cpu-sampling"            # OS scheduling / CPU samples of threads (definitions.md §V10)
FACT_CALL_STACKS = "call-stacks"              # a call stack per launch call (§S1)
FACT_COMMAND_BUFFER_FULL = "command-buffer-full"   # the profiler marks launches that blocked (§6)
FACT_RANGES = "ranges"                        # NVTX-like ranges: NVTX, record_function, roctx (§7)
# the profiler numbers every API call in sequence (CUPTI / rocprofiler-sdk correlation ids), so ids
# missing from the trace are calls it does not hold (§V13); RPD's row ids carry other bits
FACT_CALL_NUMBERING = "call-numbering"


@dataclass(frozen=True)
class Schema:
    """What an SQLite database holds: table and view names, and columns read on demand."""
    names: frozenset[str]
    columns: Callable[[str], frozenset[str]]

    def base(self, canon: str) -> str | None:
        """The object named `canon`, else one named `canon_<suffix>` (rocpd's per-process tables
        `rocpd_region_<uuid>`; Nsight's `X_V<n>` versions), the smallest name first."""
        if canon in self.names:
            return canon
        hits = sorted(n for n in self.names if n.startswith(canon + "_") and _SUFFIX.fullmatch(n[len(canon):]))
        return hits[0] if hits else None

    def has(self, canon: str, *cols: str) -> bool:
        name = self.base(canon)
        return name is not None and set(cols) <= self.columns(name)


_SUFFIX = re.compile(r"_V\d+|_[0-9a-fA-F]{8}(?:_[0-9a-fA-F]{4}){3}_[0-9a-fA-F]{12}")


@dataclass(frozen=True)
class Reader:
    format: str          # SourceInfo.format of what it reads
    title: str           # how messages name the format: "Kineto traces carry no ..."
    container: str       # SQLITE, JSON or NSYS_REP (SQLITE covers SQLITE_GZ)
    entry: str           # "module:function" reading (path, source, progress) into a Trace
    facts: frozenset[str]
    recognise: Callable[[Schema], bool] | None = None   # SQLite: does the schema belong to it
    not_this: str = ""   # SQLite: what is missing when it does not
    peak_per_byte: float = 1.0   # peak memory per byte of input (per uncompressed byte for gzip)
    # its temporaries are column-sized arrays, made and freed while it reads: a headless command
    # recycles large blocks from its start (heap.recycle_while_reading; bench/MISSED.md)
    recycles_while_reading: bool = False
    pid_shift: int = 0   # process key -> OS pid: (key >> shift) & mask; mask -1 keeps the key
    pid_mask: int = -1

    def read(self, path, source, progress=None):
        module, _, fn = self.entry.partition(":")
        return getattr(importlib.import_module(module), fn)(path, source, progress)


NSIGHT_MARKERS = ("StringIds", "TARGET_INFO_SESSION_START_TIME", "ANALYSIS_DETAILS", "ThreadNames",
                   "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS",
                   "META_DATA_EXPORT", "EXPORT_META_DATA", "TARGET_INFO_GPU", "ProcessStreams")


def _is_nsight(s: Schema) -> bool:
    return any(s.base(m) is not None for m in NSIGHT_MARKERS)


def _is_rocpd(s: Schema) -> bool:
    return s.has("rocpd_event", "id", "stack_id", "category_id") and (
        s.has("rocpd_kernel_dispatch", "start", "end", "event_id") or s.has("rocpd_region", "start", "end", "event_id"))


def _is_rpd(s: Schema) -> bool:
    return s.has("rocpd_api", "id", "start", "end", "apiName_id") and s.has("rocpd_op", "id", "start", "end", "opType_id")


def _is_rocprof_v1(s: Schema) -> bool:
    cols = ("BeginNs", "EndNs", "Index", "Name")
    return s.has("HIP", *cols, "pid", "tid") or (s.has("OPS", *cols) or s.has("COPY", *cols))


NSIGHT = Reader("nsys-sqlite", "Nsight Systems", SQLITE, "launchtui.trace.nsys_sqlite:read_nsys_sqlite",
                frozenset({FACT_CPU_SAMPLING, FACT_CALL_STACKS, FACT_COMMAND_BUFFER_FULL, FACT_RANGES,
                           FACT_CALL_NUMBERING}),
                _is_nsight, "not an Nsight Systems export (no StringIds, CUPTI_ACTIVITY_KIND_* or NVTX_EVENTS tables)",
                peak_per_byte=1.0, pid_shift=24, pid_mask=0xFFFFFF, recycles_while_reading=True)
ROCPD = Reader("rocpd-sqlite", "rocprofv3 rocpd", SQLITE, "launchtui.trace.rocpd:read_rocpd",
               frozenset({FACT_RANGES, FACT_CALL_NUMBERING}), _is_rocpd,
               "not a rocprofv3 rocpd database (no rocpd_event with rocpd_region or rocpd_kernel_dispatch)",
               peak_per_byte=2.0, pid_mask=0xFFFFFFFF)
RPD = Reader("rpd-sqlite", "RPD", SQLITE, "launchtui.trace.rpd:read_rpd", frozenset({FACT_RANGES}), _is_rpd,
             "not an RPD (rocmProfileData) database (no rocpd_api and rocpd_op tables)", peak_per_byte=2.0)
ROCPROF_V1 = Reader("rocprof-v1-sqlite", "rocprof v1", SQLITE, "launchtui.trace.rocprof_v1:read_rocprof_v1",
                    frozenset(), _is_rocprof_v1, "not a rocprof v1 database (no HIP, OPS or COPY tables)",
                    peak_per_byte=2.0)
KINETO = Reader("kineto-json", "Kineto", JSON, "launchtui.trace.kineto:read_kineto",
                frozenset({FACT_CALL_STACKS, FACT_RANGES, FACT_CALL_NUMBERING}), peak_per_byte=2.6)
NSYS_REPORT = Reader("nsys-sqlite", "Nsight Systems", NSYS_REP, "launchtui.trace.nsys_rep:read_report",
                     NSIGHT.facts, peak_per_byte=8.0, pid_shift=24, pid_mask=0xFFFFFF)

# SQLite readers in the order they are tried: the first whose schema test holds reads the file
SQLITE_READERS = (NSIGHT, ROCPD, RPD, ROCPROF_V1)
READERS = (*SQLITE_READERS, KINETO, NSYS_REPORT)
_BY_FORMAT = {r.format: r for r in reversed(READERS)}   # nsys-sqlite: the SQLite reader

UNSUPPORTED = ("not a supported trace: expected an Nsight Systems SQLite export, an .nsys-rep/.qdrep report, "
               "PyTorch-profiler JSON (.json / .json.gz), a rocprofv3 rocpd database, or an RPD (.rpd / .rpd.gz) "
               "or rocprof v1 database")


def reader_for(fmt: str) -> Reader | None:
    """The reader that writes SourceInfo.format `fmt` (None for an unknown one)."""
    return _BY_FORMAT.get(fmt)


def facts_of(fmt: str) -> frozenset[str]:
    r = reader_for(fmt)
    return r.facts if r is not None else frozenset()


def container(head: bytes, gz_head: Callable[[], bytes]) -> str:
    """The container from a file's first bytes; `gz_head()` gives the first decompressed bytes of a
    gzip file (Kineto's .json.gz or a gzipped SQLite database such as an .rpd.gz)."""
    if head.startswith(SQLITE_MAGIC):
        return SQLITE
    if head.startswith(NSYS_REP_MAGIC):
        return NSYS_REP
    if head.startswith(GZIP_MAGIC):
        return SQLITE_GZ if gz_head().startswith(SQLITE_MAGIC) else JSON
    if head.lstrip()[:1] in (b"{", b"["):
        return JSON
    return UNKNOWN


def gzip_head(path, n: int = 16) -> bytes:
    """The first `n` decompressed bytes of a gzip file (b"" when they cannot be read: the JSON
    reader then reports the damage in its own words)."""
    try:
        with gzip.open(path, "rb") as f:
            return f.read(n)
    except (OSError, EOFError, zlib.error):
        return b""


def recognise(schema: Schema) -> Reader | None:
    for r in SQLITE_READERS:
        if r.recognise(schema):
            return r
    return None


def not_any_sqlite() -> str:
    """One line for an SQLite database no reader recognises: what it is not, reader by reader."""
    return "SQLite database is none of the supported exports: " + "; ".join(r.not_this for r in SQLITE_READERS)
