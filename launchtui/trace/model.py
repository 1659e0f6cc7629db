"""The columnar trace model shared by every reader and analysis.

One `Trace` holds numpy arrays per kind of event. All times are int64 ns on the
trace's own clock (Nsight: capture clock; Kineto: the file's `ts` clock).
Strings (kernel, API and range names) are interned in one `StringTable`.
Readers fill the arrays; `finalize()` sorts them by start time, every tie broken by the rows'
other columns (a total order on the data, docs/definitions.md §9), and joins GPU ops to their
launching API calls, so analyses can rely on both.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields

import numpy as np

from launchtui.trace import registry
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.grouping import unique_rows
from launchtui.errors import printable

# GPU op kinds
OP_KERNEL, OP_MEMCPY, OP_MEMSET = 0, 1, 2
OP_KIND_NAMES = ("kernel", "memcpy", "memset")

# API call kinds
API_OTHER, API_LAUNCH, API_GRAPH_LAUNCH, API_SYNC, API_MEMCPY, API_MEMSET = 0, 1, 2, 3, 4, 5
API_KIND_NAMES = ("other", "launch", "graph_launch", "sync", "memcpy", "memset")

# NVTX / annotation range kinds
RANGE_PUSHPOP, RANGE_STARTEND = 0, 1


class StringTable:
    """Interned strings: ids are dense ints, `values[id]` gives the text back.

    `intern` is atomic (a lock around check-and-append), so two threads interning at once never give
    one string two ids or two strings one id. Readers (`[id]`, `lookup`) take no lock."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self._index: dict[str, int] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_values(cls, values) -> StringTable:
        """The table whose ids are the positions of `values`; ValueError when a text repeats (two ids
        for one string would split its events)."""
        table = cls()
        table.values = list(values)
        table._index = dict(zip(table.values, range(len(table.values))))
        if len(table._index) != len(table.values):
            raise ValueError("duplicate strings")
        return table

    def intern(self, s: str) -> int:
        i = self._index.get(s)
        if i is None:
            with self._lock:
                i = self._index.get(s)
                if i is None:
                    i = len(self.values)
                    self.values.append(s)
                    self._index[s] = i
        return i

    def intern_many(self, strings) -> np.ndarray:
        """Ids for a sequence of strings, as `intern` on each in turn would give them: the new
        distinct values are added under one hold of the lock, and no Python call runs per string
        (a reader's names: ~1M events of a few hundred names, or ~1M distinct emit_nvtx texts)."""
        index, values = self._index, self.values
        with self._lock:
            new = [s for s in dict.fromkeys(strings) if s not in index]   # first-seen order
            first = len(values)
            values.extend(new)   # before the index: a lock-free reader never finds an id without its text
            index.update(zip(new, range(first, first + len(new))))
        return np.fromiter(map(index.__getitem__, strings), np.int32, len(strings))   # every id is final

    def lookup(self, s: str) -> int:
        return self._index.get(s, -1)

    def __getitem__(self, i: int) -> str:
        return self.values[i]

    def __len__(self) -> int:
        return len(self.values)

    def array(self) -> np.ndarray:
        """All strings as an object array, for vectorised mapping of ids."""
        return np.asarray(self.values, dtype=object)


class _Columns:
    """Base for a struct-of-arrays table: every field is an equal-length array."""

    def __len__(self) -> int:
        return len(getattr(self, fields(self)[0].name))

    @staticmethod
    def _reader_dtype(f):
        """The dtype a reader fills the column with (a process key's raw int64 until `finalize`)."""
        return f.metadata.get("reader", f.metadata["dtype"])

    def take(self, idx):
        return type(self)(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    @classmethod
    def empty(cls):
        return cls(**{f.name: np.zeros(0, f.metadata["dtype"]) for f in fields(cls)})

    @classmethod
    def concat(cls, parts, consume: bool = False):
        """One table of the parts' rows. `consume`: each part's column is dropped once copied (the
        parts are unusable after), so the copy never holds two whole tables at once."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        cols = {}
        for f in fields(cls):
            cols[f.name] = np.concatenate([getattr(p, f.name) for p in parts]).astype(cls._reader_dtype(f), copy=False)
            if consume:
                for p in parts:
                    setattr(p, f.name, None)
        return cls(**cols)

    def coerce(self):
        for f in fields(self):
            setattr(self, f.name, np.ascontiguousarray(getattr(self, f.name), dtype=self._reader_dtype(f)))
        return self

    def nbytes(self) -> int:
        return sum(getattr(self, f.name).nbytes for f in fields(self))


def col(dtype, reader=None):
    """A column of `dtype`; `reader`: the dtype readers fill it with, when `finalize` narrows it."""
    return field(metadata={"dtype": dtype} if reader is None else {"dtype": dtype, "reader": reader})


def id_col():
    """An id column (stream, correlation id): int32 once `finalize` found every value fits, as
    CUDA's 32-bit ids do; the reader's int64 kept otherwise, so no id is ever changed."""
    return col(np.int32, reader=np.int64)


def process_col():
    """A process column: readers fill it with their int64 process key (-1: unknown); `finalize`
    replaces both tables' keys by dense indices into `Trace.processes` (int16, int32 past 32,767
    processes), so the model holds 2 bytes per row instead of 8 (issue 11: 57 MiB at 5M kernels)."""
    return col(np.int16, reader=np.int64)


@dataclass
class GpuOps(_Columns):
    """Kernels, memcpy and memset on the GPU (the CUDA HW row)."""
    device: np.ndarray = col(np.int32)
    stream: np.ndarray = id_col()
    start: np.ndarray = col(np.int64)
    end: np.ndarray = col(np.int64)
    corr: np.ndarray = id_col()
    pid: np.ndarray = process_col()       # process of the op, for the join (-1: join on correlation only)
    name: np.ndarray = col(np.int32)      # short (base) name id
    full_name: np.ndarray = col(np.int32)  # demangled name id
    kind: np.ndarray = col(np.int8)
    api: np.ndarray = col(np.int32)       # index of the launching ApiCalls row, -1 when unmatched


@dataclass
class ApiCalls(_Columns):
    """CUDA runtime and driver API calls (the CUDA API row)."""
    thread: np.ndarray = col(np.int32)    # index into Threads
    pid: np.ndarray = process_col()       # process of the call, for the join
    start: np.ndarray = col(np.int64)
    end: np.ndarray = col(np.int64)
    corr: np.ndarray = id_col()
    name: np.ndarray = col(np.int32)
    kind: np.ndarray = col(np.int8)


@dataclass
class Ranges(_Columns):
    """NVTX ranges (Nsight) or user annotations (Kineto) on CPU threads."""
    thread: np.ndarray = col(np.int32)
    start: np.ndarray = col(np.int64)
    end: np.ndarray = col(np.int64)
    depth: np.ndarray = col(np.int32)
    text: np.ndarray = col(np.int32)
    domain: np.ndarray = col(np.int32)    # string id of the domain name; -1 default domain
    kind: np.ndarray = col(np.int8)


@dataclass
class Threads(_Columns):
    """CPU threads that own API calls or ranges."""
    pid: np.ndarray = col(np.int64)       # OS process id
    tid: np.ndarray = col(np.int64)       # OS thread id
    key: np.ndarray = col(np.int64)       # reader's unique key (Nsight globalTid)
    name: np.ndarray = col(np.int32)      # string id, -1 when unnamed


@dataclass
class Overheads(_Columns):
    """Profiler-recorded overhead events (Nsight CUPTI_ACTIVITY_KIND_OVERHEAD)."""
    thread: np.ndarray = col(np.int32)
    start: np.ndarray = col(np.int64)
    end: np.ndarray = col(np.int64)
    corr: np.ndarray = col(np.int64)
    type: np.ndarray = col(np.int32)


OVERHEAD_COMMAND_BUFFER_FULL = 8


@dataclass
class StackFrames(_Columns):
    """Distinct call stacks, interned as a trie (docs/definitions.md §S1): node i is frame `frame[i]`
    called from node `parent[i]` (-1: outermost). One stack = one node, so many launches share one."""
    parent: np.ndarray = col(np.int32)
    frame: np.ndarray = col(np.int32)     # string id, e.g. "model.py(42): forward"


@dataclass
class GraphSpans(_Columns):
    """Nsight graph-level replays (`CUPTI_ACTIVITY_KIND_GRAPH_TRACE`, docs/definitions.md §12.2):
    one row per graph launch with the replay's GPU span and no per-node ops. Sorted by start; a row
    whose timing CUPTI did not collect has start = end = 0 (its replay is known, its GPU time not)."""
    device: np.ndarray = col(np.int32)
    stream: np.ndarray = col(np.int64)
    start: np.ndarray = col(np.int64)
    end: np.ndarray = col(np.int64)
    corr: np.ndarray = col(np.int64)
    graph: np.ndarray = col(np.int64)     # graphId, -1 unknown
    api: np.ndarray = col(np.int32)       # the graph-launch ApiCalls row, -1 when unmatched


# how an API call got its stack
STACK_NONE, STACK_DIRECT, STACK_BACKWARD = 0, 1, 2


@dataclass
class ApiStacks(_Columns):
    """Per ApiCalls row (same order; empty when the trace has no stacks): its innermost stack node."""
    node: np.ndarray = col(np.int32)      # index into StackFrames, -1 when none
    via: np.ndarray = col(np.int8)        # STACK_DIRECT, or STACK_BACKWARD (through the forward op)


@dataclass
class CpuRuns(_Columns):
    """Thread on-CPU intervals [start, end) from Nsight SCHED_EVENTS (a sched-in and the thread's next
    sched-out; docs/definitions.md §V10). Sorted by (thread, start); one thread's runs never overlap."""
    thread: np.ndarray = col(np.int64)    # Nsight globalTid (= Threads.key), not an index into Threads
    start: np.ndarray = col(np.int64)
    end: np.ndarray = col(np.int64)


@dataclass
class CpuSamples(_Columns):
    """CPU IP/backtrace samples from Nsight COMPOSITE_EVENTS (definitions.md §V10), sorted by (thread, time)."""
    thread: np.ndarray = col(np.int64)    # Nsight globalTid (= Threads.key)
    time: np.ndarray = col(np.int64)
    state: np.ndarray = col(np.int8)      # ENUM_SAMPLING_THREAD_STATE (1 = Running); -1 unknown


@dataclass
class SourceInfo:
    path: str
    size: int
    mtime_ns: int
    format: str                 # the reader's format (trace/registry.py): "nsys-sqlite", "kineto-json", ...
    producer: str               # "Nsight Systems", "PyTorch profiler (Kineto)", "rocprofv3", ...
    version: str = ""           # producer / schema version where known
    wall_offset_ns: int | None = None  # add to trace times for Unix-epoch ns, when known
    extra: dict = field(default_factory=dict)  # small facts worth showing (schema, rank, ...)

    def to_json(self) -> dict:
        return {"path": printable(self.path), "size": self.size, "mtime_ns": self.mtime_ns, "format": self.format,
                "producer": self.producer, "version": self.version}


@dataclass
class Trace:
    source: SourceInfo
    strings: StringTable
    ops: GpuOps
    api: ApiCalls
    ranges: Ranges
    threads: Threads
    overheads: Overheads
    devices: dict[int, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)   # human lines: what is absent and what it disables
    has_cuda_tables: bool = True
    stacks: StackFrames = field(default_factory=StackFrames.empty)
    api_stacks: ApiStacks = field(default_factory=ApiStacks.empty)
    cpu_runs: CpuRuns = field(default_factory=CpuRuns.empty)          # empty: not recorded (or Kineto)
    cpu_samples: CpuSamples = field(default_factory=CpuSamples.empty)
    # the readers' distinct process keys (Nsight globalPid, Kineto pid), ascending: ops.pid and
    # api.pid index it once `finalize` ran
    processes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # per GPU op (ops order): the CUDA graph id it was replayed from, -1 none; empty when the trace
    # records no graph id at all (docs/definitions.md §12.2), so traces without graphs pay nothing
    op_graph: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    graph_spans: GraphSpans = field(default_factory=GraphSpans.empty)   # empty: none (graph-level mode only)
    # Nsight graph node lineage (docs/definitions.md §12.6; trace/graph_nodes.py), ids per process:
    # per GPU op, the captured (root) node id it ran, and per API call, the node id created inside
    # it; -1 none; empty when the trace has no node table
    op_node: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    api_node: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    # --- derived lookups -------------------------------------------------
    def device_ids(self) -> list[int]:
        ids = set(unique_sorted(self.ops.device).tolist())
        return sorted(ids)

    def streams(self) -> list[tuple[int, int]]:
        if not len(self.ops):
            return []
        pairs = unique_rows(np.stack([self.ops.device.astype(np.int64), self.ops.stream]).T).T
        return [(int(d), int(s)) for d, s in pairs.T]

    def provides(self, fact: str) -> bool:
        """Whether this trace's format can carry `fact` (registry.FACT_*) at all; whether this
        capture recorded it is for the data to say."""
        return fact in registry.facts_of(self.source.format)

    def format_title(self) -> str:
        """How messages name the trace's format: "Nsight Systems", "Kineto", "RPD", ..."""
        r = registry.reader_for(self.source.format)
        return r.title if r is not None else self.source.format

    def os_pids(self, keys: np.ndarray) -> np.ndarray:
        """OS process ids of reader process keys (`process_keys`; Nsight: the pid bits of a
        globalPid); -1 stays -1."""
        keys = np.asarray(keys, np.int64)
        r = registry.reader_for(self.source.format)
        if r is None or r.pid_mask == -1:
            return keys
        return np.where(keys >= 0, (keys >> r.pid_shift) & r.pid_mask, -1)

    def process_keys(self, codes: np.ndarray) -> np.ndarray:
        """The reader's int64 process keys of ops.pid / api.pid values (-1 stays -1)."""
        codes = np.asarray(codes)
        if not len(self.processes):
            return np.full(codes.shape, -1, np.int64)
        return np.where(codes >= 0, self.processes[np.maximum(codes, 0)], -1)

    def window(self) -> tuple[int, int] | None:
        """The valid trim window: [first kernel start, last kernel end] (all GPU ops if no kernels)."""
        if not len(self.ops):
            return None
        k = self.ops.kind == OP_KERNEL
        if not k.any():
            k = slice(None)
        return int(self.ops.start[k].min()), int(self.ops.end[k].max())

    def extent(self) -> tuple[int, int] | None:
        """Span of all timed events (ops, API calls, ranges)."""
        lo, hi = [], []
        for t in (self.ops, self.api, self.ranges):
            if len(t):
                lo.append(int(t.start.min()))
                hi.append(int(t.end.max()))
        if not lo:
            return None
        return min(lo), max(hi)

    def nbytes(self) -> int:
        return sum(t.nbytes() for t in (self.ops, self.api, self.ranges, self.threads, self.overheads,
                                        self.cpu_runs, self.cpu_samples))

    def event_count(self) -> int:
        return len(self.ops) + len(self.api) + len(self.ranges)
