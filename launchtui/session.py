"""One keyed store of what launchtui derives from a loaded trace: `Session(trace, entry).get(query)`.

A query is a frozen dataclass (`Query`): its fields are every input of its result, and its class
says how the result is computed (`compute(session)`) and how it is kept (`store`):

- MEMORY: in this session only;
- PICKLE: pickled in the per-user results directory (result_cache.py), keyed by the query and
  the model entry;
- MAPPED: a flat file of arrays beside the model entry (`<entry>.<slot>`, trace/flatfile.py),
  memory-mapped on read; its header names the key it holds, so another key is a miss.

`get` looks in memory, then on disk, then computes (and keeps the result both ways). The memory
tier is the trace's memo (analysis/memo.py), the one in-memory store of derived results: a session
and the analyses it runs (the index, the user-frame nodes) keep their results side by side there,
and two sessions on one trace share them. Equal queries
are one result, whoever asks: `report` stores its backpressure, kernel groups, selection stats and
record under the queries the TUI's workers ask, so the TUI's first open after it finds them. The
disk key covers the query's class and fields, the model entry's identity and launchtui's code
(result_cache.key_of): a rebuilt entry or changed code never reuses a result. It leaves out the path
the trace was opened by, as the model entry does: `trace.sqlite`, `./trace.sqlite`, its absolute
path or a link to it open one file, so they share its results. A result that names the path (the
record's `source`) is given the one this session opened (`Query.as_opened`). Nothing touches the
disk without a model entry, nor for a session made without one (`--no-cache`); the cache directory
is used only when private (paths.cache_dir).

The queries of the analyses live here; the TUI's own (lanes, table rows, idle row) in
tui/queries.py. Importing this module loads no analysis but the memo (nor numpy): the CLI's warm
path goes through it (`cached_output`). A query's `compute` may run in any thread: equal queries compute
once (one lock per key) and results are read-only.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from launchtui import result_cache
from launchtui.analysis import memo

if TYPE_CHECKING:
    from launchtui.analysis.backpressure import Options
    from launchtui.analysis.record_options import RecordOptions
    from launchtui.analysis.select import Selection

MEMORY, PICKLE, MAPPED = "memory", "pickle", "mapped"
MISS = memo.MISS    # peek(): nothing in memory or on disk


class Query:
    """Base of the frozen dataclasses `Session.get` takes (see the module docstring)."""

    store: ClassVar[str] = MEMORY
    # whether the session keeps the result in memory too; False for large results the view holds
    # itself and replaces (the idle row of each verdict)
    memo: ClassVar[bool] = True

    def compute(self, session: Session) -> Any:
        raise NotImplementedError

    def as_opened(self, value, trace):
        """`value` read from disk, as computed for `trace`: a stored result may have been computed
        for the same file opened by another path, and the disk key leaves the path out, so a value
        that names it takes `trace`'s."""
        return value

    # ---- MAPPED queries: one file beside the model entry per slot, the last key written wins ----
    def slot(self) -> str:
        return type(self).__name__.lower()

    def encode(self, value) -> tuple[Any, dict]:
        """(JSON-ready skeleton, named arrays) of `value`."""
        raise NotImplementedError

    def stored_bytes_at_least(self, value) -> int:
        """A lower bound on the bytes of `encode(value)`'s arrays, known without building them: a
        store it already takes past the cache's bound is refused before `encode` runs."""
        return 0

    def decode(self, skeleton, arrays: dict, trace) -> Any:
        """`value` back from `encode`'s output (arrays memory-mapped); ValueError/KeyError/TypeError
        when it does not fit `trace`."""
        raise NotImplementedError


class Session:
    """The results of one loaded trace. `entry`: its model cache entry (may not exist yet: results
    go to disk once it does, `save`); None keeps everything in memory. `shared`: a command's
    analysis.shared.Shared, which queries computing kernel groups or spikes reuse (None: each
    computation gets a private one, so nothing per launch outlives it)."""

    def __init__(self, trace, entry: Path | None = None, shared=None) -> None:
        self.trace = trace
        self.entry = entry
        self._shared = shared
        self._opened = None     # open(): the trace.cache.Opened that commit() writes
        self._memory = memo.of(trace)
        self._on_disk: set = set()   # queries read from or written to disk

    @classmethod
    def open(cls, path, progress=None, use_cache: bool = True) -> Session:
        """The session of the trace at `path`, its model through the per-user cache (`use_cache`
        False: read afresh, nothing stored); a fresh read is written by `commit`."""
        from launchtui.trace.load import open_cached
        opened = open_cached(path, progress, use_cache)
        session = cls(opened.trace, opened.entry)
        session._opened = opened
        return session

    @property
    def fresh(self) -> bool:
        """The trace was read from its file and its model is not committed yet."""
        return self._opened is not None and self._opened.fresh

    def commit(self, *queries: Query) -> None:
        """Write a freshly read model to the cache (nothing for one from the cache, or without
        CUDA activity), then store beside it the index and `queries` when held in memory."""
        if self._opened is not None:
            from launchtui.trace.cache import commit
            commit(self._opened)
            self.entry = self._opened.entry
        self.save(Index(), *queries)

    def use_shared(self, shared) -> None:
        """Let this session's queries reuse a command's analysis.shared.Shared."""
        self._shared = shared

    @property
    def shared(self):
        if self._shared is not None:
            return self._shared
        from launchtui.analysis.shared import Shared
        return Shared(self.trace)

    # ---- lookups ----------------------------------------------------------------------------
    def get(self, query: Query, compute: Callable[[], Any] | None = None):
        """The result of `query`: from memory, else disk, else `compute()` (default
        `query.compute(self)`), then kept in memory and, when the query persists, on disk."""
        value = self._memory.peek(query)
        if value is not MISS:
            return value
        with self._memory.lock(query):
            value = self._memory.peek(query)
            if value is MISS:
                value = self._read(query)
                if value is MISS:
                    value = compute() if compute is not None else query.compute(self)
                    self._write(query, value)
                self._keep(query, value)
        return value

    def start(self, query: Query):
        """`get(query)` begun now on a thread of its own; returns its Future, whose `result()`
        waits for the value and raises what the computation raised. The thread is a daemon: an
        interrupted command exits without waiting for it."""
        import threading
        from concurrent.futures import Future
        done: Future = Future()

        def run() -> None:
            try:
                done.set_result(self.get(query))
            except BaseException as e:   # re-raised by `result`, in the caller's thread
                done.set_exception(e)
        threading.Thread(target=run, name=f"launchtui-{type(query).__name__}", daemon=True).start()
        return done

    def peek(self, query: Query):
        """The result of `query` from memory or disk, else MISS (nothing is computed)."""
        value = self._memory.peek(query)
        if value is MISS:
            value = self._read(query)
            if value is not MISS:
                self._keep(query, value)
        return value

    def put(self, query: Query, value, remap: bool = False):
        """Keep `value` as the result of `query` (memory, and disk when it persists). `remap`: a
        MAPPED result is read back from its file, so its built arrays can go; returns what is kept."""
        self._write(query, value)
        if remap and query.store == MAPPED:
            mapped = self._read(query)
            value = value if mapped is MISS else mapped
        self._keep(query, value)
        return value

    def save(self, *queries: Query) -> None:
        """Write the results of `queries` held in memory and not on disk yet: after the model entry
        they are stored beside was committed (a cold command computes before it exists)."""
        for q in queries:
            value = self._memory.peek(q)
            if value is not MISS and q not in self._on_disk:
                self._write(q, value)

    # ---- persistence ------------------------------------------------------------------------
    def _keep(self, query: Query, value) -> None:
        if query.memo:
            self._memory.put(query, value)

    def _key(self, query: Query) -> str | None:
        """The disk key of `query` here; None without a model entry (nothing stored)."""
        if self.entry is None or query.store == MEMORY:
            return None
        return result_cache.key_of((type(query).__module__, repr(query)), self.entry)

    def _read(self, query: Query):
        key = self._key(query)
        if key is None:
            return MISS
        if query.store == PICKLE:
            value = result_cache.load_pickle(key)
        else:
            value = result_cache.load_mapped(self.entry, query.slot(), key,
                                             lambda skel, arrays: query.decode(skel, arrays, self.trace))
        if value is MISS:
            return MISS
        self._on_disk.add(query)
        return query.as_opened(value, self.trace)

    def _write(self, query: Query, value) -> None:
        key = self._key(query)
        if key is None:
            return
        if query.store == PICKLE:
            stored = result_cache.store_pickle(key, value)
        else:
            stored = result_cache.store_mapped(self.entry, query.slot(), key, lambda: query.encode(value),
                                               at_least=query.stored_bytes_at_least(value))
        if stored:
            self._on_disk.add(query)


def store_info() -> str:
    """One line on the per-user store: where, how many model entries, their size and the limit."""
    from launchtui.trace import cache
    n, size = cache.usage()
    limit = "none" if cache.max_bytes() >= cache.NO_LIMIT else f"{cache.max_bytes() / 1e6:.0f} MB"
    return f"{cache.cache_root()}: {n} entries, {size / 1e6:.1f} MB (limit {limit})"


def clear_store() -> str:
    """Remove every stored model and result; one line saying what went."""
    from launchtui.trace import cache
    n, size = cache.clear()
    return f"removed {n} cache entries ({size / 1e6:.1f} MB) from {cache.cache_root()}"


def cached_output(cmd: str, args, handler, emit) -> int:
    """Run a command's `handler(args)`, or emit its finished output stored by an earlier run with
    the same options (result_cache.run_cached)."""
    return result_cache.run_cached(cmd, args, handler, emit)


# ---- the analyses' queries ---------------------------------------------------------------------
@dataclass(frozen=True)
class Backpressure(Query):
    """analysis.backpressure.backpressure(): episodes and spikes of a selection."""
    sel: Selection
    options: Options
    store: ClassVar[str] = PICKLE

    def compute(self, session):
        from launchtui.analysis import backpressure as bp
        return bp.backpressure(session.trace, self.sel, self.options,
                               sp=session.shared.spikes(self.sel, self.options))


@dataclass(frozen=True)
class KernelGroups(Query):
    """The selection's kernel groups without their per-launch arrays (launches.group_totals):
    what the table's rows read, kilobytes instead of the launches' indices."""
    sel: Selection
    names: str
    store: ClassVar[str] = PICKLE

    def compute(self, session):
        from launchtui.analysis.launches import group_totals
        return group_totals(session.shared.kernel_groups(self.sel, self.names))


@dataclass(frozen=True)
class SelectionStats(Query):
    """The TUI's stats line (report.selection_stats): launch totals and the deepest queue."""
    sel: Selection
    options: Options
    store: ClassVar[str] = PICKLE

    def compute(self, session):
        from launchtui.analysis import report
        return report.selection_stats(session.trace, self.sel, self.options)


@dataclass(frozen=True)
class Record(Query):
    """(case record, API indices of its CPU-stall spikes): record.record_and_stalls."""
    sel: Selection
    options: RecordOptions
    store: ClassVar[str] = PICKLE

    def compute(self, session):
        from launchtui.analysis import record
        return record.record_and_stalls(session.trace, self.sel, self.options, session._shared)

    def as_opened(self, value, trace):
        doc, stalls = value     # the record's only mention of the path is its source (record.py)
        return {**doc, "source": trace.source.to_json()}, stalls


def default_record(iter_name: str | None = None) -> Record:
    """The case record of the whole trace with its default options (`--iter`: `iter_name`): what
    `report --json` stores when given no other options, and what `diff` and the compare view read of
    each side (analysis/diff_inputs.record_of computes the same document)."""
    from launchtui.analysis.record_options import RecordOptions
    from launchtui.analysis.select import WHOLE
    return Record(WHOLE, RecordOptions(iter_name=iter_name))


def default_records(sessions, iter_name: str | None = None) -> tuple[dict, ...]:
    """Each session's `default_record` document (a diff's two sides): read where stored, else
    computed, the sides beside each other."""
    from concurrent.futures import ThreadPoolExecutor
    query = default_record(iter_name)
    with ThreadPoolExecutor(max(1, len(sessions))) as pool:
        return tuple(pool.map(lambda s: s.get(query)[0], sessions))


@dataclass(frozen=True)
class Index(Query):
    """The trace's derived index (analysis/index.py): every per-op lookup the analyses share. A
    result mapped from disk is attached to the trace, so the analyses' `trace_index` find it. Ask
    for it before a fresh read's model is committed: building it interns the distinguishing names
    into the trace's strings, which the stored index refers to (a model saved without them makes
    the stored index not fit: rebuilt, never trusted)."""
    store: ClassVar[str] = MAPPED

    def compute(self, session):
        from launchtui.analysis.index import trace_index
        return trace_index(session.trace)

    def encode(self, value):
        return {}, value.to_arrays()

    def stored_bytes_at_least(self, value) -> int:
        return value.stored_bytes_at_least()

    def decode(self, skeleton, arrays, trace):
        from launchtui.analysis.index import TraceIndex, attach
        return attach(trace, TraceIndex.from_arrays(trace, arrays))
