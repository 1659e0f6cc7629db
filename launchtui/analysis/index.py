"""The trace's derived index: every per-op lookup the analyses share, built once, then read-only.

`trace_index(trace)` returns it from the trace's memo (analysis/memo.py), building it on first use
under the key's lock, or the one the session kept there (`attach`: mapped from beside the model
entry, session.Index; the CLI and the TUI loader ask for it right after loading, before any worker
starts). After that nothing mutates it: workers only read. Distinguishing names are interned into
the trace's StringTable here, at build time, never lazily from a worker.

What it holds (definitions.md §5-§7):
- `queue_series`: pending-launch depth per (device, stream) as a step function (§5; built by
  analysis/queue_series.py);
- `depth_before_launch`: per GPU op, pending ops on its stream just before its launch call (§5, §6);
- `nvtx`: innermost push/pop range lookup per thread, and `op_ranges`: per GPU op, the innermost
  range enclosing its launch call (§7);
- `distinguishing_names`: per GPU op, the string id of its distinguishing ("full") name (§3); held
  per full name when each full name comes with one short name (the usual case), so 4 bytes per op
  less live through the analyses; `distinguishing_names_of(ops)` reads a few ops' ids;
- `op_category`: per GPU op, its timeline category (kernel, small kernel, NCCL, memcpy/memset;
  built on first use, under a lock: only the TUI's lanes and the cache save read it);
- `ops_by_api`: (sorted launch-call ids, op indices): the ops each API call launched (built on first
  use, under a lock: only the TUI's details and the cache save read it).

The public functions `queue.stream_series`, `queue.depth_before_launch`, `nvtx.op_ranges`,
`nvtx.innermost_at`, `launches.name_ids` and `lanes.op_categories` read from here.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from launchtui.analysis import memo
from launchtui.analysis.config import CONFIG
from launchtui.analysis.queue_series import QueueSeriesWork, StreamSeries
from launchtui.cpus import usable_cpus
from launchtui.trace.arrays import unique_sorted
from launchtui.trace import names as nm
from launchtui.trace.model import OP_KERNEL, RANGE_PUSHPOP, Trace
from launchtui.trace.nesting import InnermostIndex

# timeline categories of GPU ops, in drawing priority order for ties
CAT_KERNEL, CAT_SMALL, CAT_NCCL, CAT_MEM = 0, 1, 2, 3

_LAZY_LOCK = threading.Lock()   # the parts computed on first use (ops_by_api)
INDEX_KEY = "analysis.index"    # the index's key in the trace's memo
DENSE_PAIRS = 1 << 24   # (full, short) name pairs looked up in a table up to this many (16 MB of bools)


@dataclass(frozen=True)
class TraceIndex:
    queue_series: tuple[StreamSeries, ...]
    depth_before_launch: np.ndarray     # per op, -1 unmatched (int16 up to SMALL_DEPTH, else int32)
    nvtx: InnermostIndex
    op_ranges: np.ndarray               # int32 per op, -1 none
    # int32 string id per op, or per full-name string id when `op_full_name` is set
    names_table: np.ndarray = field(repr=False)
    op_api: np.ndarray = field(repr=False)   # the trace's ops.api (a reference), for ops_by_api
    # int32 (sorted call ids, op per call id); None until first asked for: only the TUI's details
    # and the cache read it, so a cold `report` never holds it
    _ops_by_api: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    # the trace's ops.full_name (a reference) when `names_table` is per full name, else None
    op_full_name: np.ndarray | None = field(default=None, repr=False)
    # int8 per op; None until first asked for (from `category_source`: the trace's ops and strings)
    _op_category: np.ndarray | None = field(default=None, repr=False)
    category_source: tuple | None = field(default=None, repr=False)

    @property
    def op_category(self) -> np.ndarray:
        got = self._op_category
        if got is None:
            with _LAZY_LOCK:
                if self._op_category is None:
                    object.__setattr__(self, "_op_category", _op_categories(*self.category_source))
                got = self._op_category
        return got

    @property
    def distinguishing_names(self) -> np.ndarray:
        """int32 string id of each op's distinguishing name (§3): a new array per call when held
        per full name (`distinguishing_names_of` reads only the ops asked for)."""
        if self.op_full_name is None:
            return self.names_table
        return self.names_table[self.op_full_name]

    def distinguishing_names_of(self, ops: np.ndarray) -> np.ndarray:
        """The distinguishing-name ids of ops `ops` (indices into trace.ops)."""
        if self.op_full_name is None:
            return self.names_table[ops]
        return self.names_table[self.op_full_name[ops]]

    @property
    def ops_by_api(self) -> tuple[np.ndarray, np.ndarray]:
        got = self._ops_by_api
        if got is None:
            with _LAZY_LOCK:
                if self._ops_by_api is None:
                    object.__setattr__(self, "_ops_by_api", _ops_by_api(self.op_api))
                got = self._ops_by_api
        return got

    def ops_of_call(self, a: int) -> np.ndarray:
        """GPU ops launched by API call `a` (O(log N))."""
        keys, idx = self.ops_by_api
        lo, hi = np.searchsorted(keys, [a, a + 1])
        return idx[lo:hi]

    # --- serialisation for the session's mapped store (plain arrays) ------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        qs = self.queue_series
        return {
            "qs.t": np.concatenate([x.t for x in qs]) if qs else np.zeros(0, np.int64),
            "qs.v": np.concatenate([x.v for x in qs]) if qs else np.zeros(0, np.int32),
            "qs.meta": np.array([[x.device, x.stream, len(x.t), x.points, x.max_graph_as_one, x.graph_ops]
                                 for x in qs], np.int64).reshape(-1, 6),
            "qs.point_mean": np.array([x.point_mean for x in qs], np.float64),
            "depth_before_launch": self.depth_before_launch,
            "op_ranges": self.op_ranges,
            "distinguishing_names": self.distinguishing_names,   # per op (the stored format)
            "op_category": self.op_category,
            "ops_by_api.keys": self.ops_by_api[0],
            "ops_by_api.ops": self.ops_by_api[1],
            **self.nvtx.to_arrays("nvtx."),
        }

    def stored_bytes_at_least(self) -> int:
        """A lower bound on the bytes of `to_arrays`, counted without building them or the parts
        computed on first use: the queue series, the per-op arrays and categories (int8)."""
        n_ops = len(self.op_api)
        names = len(self.op_full_name) if self.op_full_name is not None else len(self.names_table)
        return (sum(x.t.nbytes + x.v.nbytes for x in self.queue_series) + self.depth_before_launch.nbytes
                + self.op_ranges.nbytes + names * self.names_table.itemsize + n_ops)

    @classmethod
    def from_arrays(cls, trace: Trace, z: dict) -> TraceIndex:
        """Rebuild from `to_arrays` output; ValueError/KeyError when it does not fit the trace."""
        n = len(trace.ops)
        for key in ("depth_before_launch", "op_ranges", "distinguishing_names", "op_category"):
            if len(z[key]) != n:
                raise ValueError(f"index array {key} does not match the trace")
        if len(z["distinguishing_names"]) and int(z["distinguishing_names"].max()) >= len(trace.strings):
            raise ValueError("index string id out of range")
        t, v, meta, pm = z["qs.t"], z["qs.v"], z["qs.meta"], z["qs.point_mean"]
        ends = np.cumsum(meta[:, 2]) if len(meta) else np.zeros(0, np.int64)
        if len(v) != len(t) or (len(meta) and ends[-1] != len(t)) or len(pm) != len(meta):
            raise ValueError("index queue series do not match")
        starts = ends - meta[:, 2] if len(meta) else ends
        series = tuple(StreamSeries(device=int(m[0]), stream=int(m[1]), t=t[a:b], v=v[a:b], point_mean=float(p),
                                    points=int(m[3]), max_graph_as_one=int(m[4]), graph_ops=int(m[5]))
                       for m, a, b, p in zip(meta, starts, ends, pm))
        nvtx = InnermostIndex.from_arrays(z, "nvtx.", int((trace.ranges.kind == RANGE_PUSHPOP).sum()))
        return cls(series, z["depth_before_launch"], nvtx, z["op_ranges"], z["distinguishing_names"],
                   trace.ops.api, (z["ops_by_api.keys"], z["ops_by_api.ops"]), _op_category=z["op_category"])


def trace_index(trace: Trace) -> TraceIndex:
    """The trace's index: the one in its memo, else built (once, under the key's lock) and kept."""
    return memo.of(trace).get(INDEX_KEY, lambda: build_index(trace))


def attach(trace: Trace, idx: TraceIndex) -> TraceIndex:
    """Make `idx` what `trace_index(trace)` returns for as long as the trace lives (the session
    maps it from beside the model entry); an index kept before stays. Returns the one kept."""
    return memo.of(trace).put(INDEX_KEY, idx)


def attached(trace: Trace) -> TraceIndex | None:
    """The trace's index when one was built or attached, else None (nothing is built)."""
    idx = memo.of(trace).peek(INDEX_KEY)
    return None if idx is memo.MISS else idx


# the queue series builds beside the rest of the index up to this many GPU ops. Every thread of a
# command, the TUI's too, allocates from one arena (heap.one_arena), so the split holds no second
# arena's transients resident: at 5M the report's and the TUI's peaks are those of one thread. Past
# it (20M) the two at once gained nothing measurable, with the report's peak ~40 MiB under its
# 3 GiB target (bench/MISSED.md)
SPLIT_MAX_OPS = 8_000_000


def build_index(trace: Trace) -> TraceIndex:
    """The index: the queue series begun on a second thread when there is a CPU for it and the
    trace is small enough (SPLIT_MAX_OPS), as its numpy work releases the GIL, and finished by both
    threads once this one's parts are done; else first on this one. Interning stays on this thread."""
    work = QueueSeriesWork(trace)
    with ThreadPoolExecutor(1, thread_name_prefix="launchtui-index") as pool:   # a thread only on submit
        beside = usable_cpus() >= 2 and len(trace.ops) <= SPLIT_MAX_OPS
        helper = pool.submit(work.work) if beside else None
        if helper is None:
            work.work()
        nvtx_idx = _nvtx_index(trace)
        names, by_full_name = _distinguishing_name_table(trace)
        op_ranges = _op_ranges(trace, nvtx_idx)
        if helper is not None:
            work.work()   # the streams the helper has not begun
            helper.result()
    series, dbl = work.result()
    return TraceIndex(tuple(series), dbl, nvtx_idx, op_ranges, names, trace.ops.api,
                      op_full_name=trace.ops.full_name if by_full_name else None,
                      category_source=(trace.ops, trace.strings))


# ---- NVTX attribution (definitions.md §7) -------------------------------------------------------------
def _nvtx_index(trace: Trace) -> InnermostIndex:
    rg = trace.ranges
    pp = np.nonzero(rg.kind == RANGE_PUSHPOP)[0]
    sub = InnermostIndex(rg.thread[pp], rg.start[pp], rg.end[pp])
    # map local indices back to trace.ranges indices
    sub.by_thread = {th: (t, np.where(v >= 0, pp[np.maximum(v, 0)], -1)) for th, (t, v) in sub.by_thread.items()}
    return sub


def _op_ranges(trace: Trace, nvtx_idx: InnermostIndex) -> np.ndarray:
    """Per op, its innermost range at launch (int32; -1 none): looked up once per API call, in the
    API table's own columns (no per-op gathers of thread and start), then read through ops.api."""
    ops, api = trace.ops, trace.api
    m = ops.api >= 0
    if not m.any() or not len(trace.ranges):
        return np.full(len(ops), -1, np.int32)
    per_call = nvtx_idx.lookup(api.thread, api.start, np.int32)
    out = per_call[np.maximum(ops.api, 0)]
    del per_call
    out[~m] = -1
    return out


# ---- names and categories -----------------------------------------------------------------------------
def _distinguishing_names(trace: Trace) -> np.ndarray:
    """Per op, the id of its distinguishing name (interned here, once per distinct (full, short) pair,
    in ascending pair order)."""
    table, by_full_name = _distinguishing_name_table(trace)
    return table[trace.ops.full_name] if by_full_name else table


def _distinguishing_name_table(trace: Trace) -> tuple[np.ndarray, bool]:
    """(ids per full-name string id, True) when every full name comes with one short name, else
    (ids per op, False): the ids of `_distinguishing_names`, interned in the same order."""
    ops = trace.ops
    width = len(trace.strings) + 1
    if not len(ops):
        return np.zeros(0, np.int32), False
    if ops.full_name.min() >= 0 and ops.name.min() >= 0:
        by_full = _pair_by_full_name(trace, width)
        if by_full is not None:
            return by_full, True
    if width * width <= DENSE_PAIRS and ops.full_name.min() >= 0 and ops.name.min() >= 0:
        # a presence table over the pairs: no sort of n elements
        pair = ops.full_name * np.int32(width)
        pair += ops.name
        present = np.zeros(width * width, bool)
        present[pair] = True
        uniq = np.flatnonzero(present)
        del present
        inv = None
    else:
        uniq, inv = unique_sorted(ops.full_name.astype(np.int64) * width + ops.name, return_inverse=True)
    ids = np.empty(len(uniq), np.int32)
    for i, p in enumerate(uniq.tolist()):  # once per distinct (full, short) pair
        full, short = divmod(p, width)
        ids[i] = trace.strings.intern(nm.distinguishing_name(trace.strings[short], trace.strings[full]))
    if inv is not None:
        return ids[inv.reshape(-1)], False
    lut = np.zeros(width * width, np.int32)
    lut[uniq] = ids
    return np.take(lut, pair, out=pair), False


def _pair_by_full_name(trace: Trace, width: int) -> np.ndarray | None:
    """`_distinguishing_names` as a table over full-name ids, when every full name comes with one
    short name (the usual case: the short name is derived from it): tables as long as the string
    table, no n-long int64 keys or sort. None when a full name has two."""
    full, short = trace.ops.full_name, trace.ops.name
    short_of = np.full(width, -1, np.int32)
    short_of[full] = short
    if not np.array_equal(short_of[full], short):
        return None
    uniq = np.flatnonzero(short_of >= 0)   # ascending full name = ascending (full, short) pair
    lut = np.zeros(width, np.int32)
    for f in uniq.tolist():  # once per distinct full name, in the general path's order
        lut[f] = trace.strings.intern(nm.distinguishing_name(trace.strings[int(short_of[f])], trace.strings[f]))
    return lut


def _op_categories(ops, strings) -> np.ndarray:
    """Per GPU op (`ops`: the trace's): CAT_KERNEL, CAT_SMALL (< CONFIG.small_kernel_ns), CAT_NCCL
    or CAT_MEM."""
    cat = np.full(len(ops), CAT_KERNEL, np.int8)
    dur = ops.end - ops.start
    k = ops.kind == OP_KERNEL
    cat[k & (dur < CONFIG.small_kernel_ns)] = CAT_SMALL
    cat[~k] = CAT_MEM
    if len(ops):
        uniq = unique_sorted(ops.name[k])
        nccl_ids = [u for u in uniq.tolist() if "nccl" in strings[u].lower()]
        if nccl_ids:
            cat[k & np.isin(ops.name, nccl_ids)] = CAT_NCCL
    return cat


def _ops_by_api(op_api: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(launch-call ids ascending, the op of each): both int32."""
    m = np.flatnonzero(op_api >= 0).astype(np.int32)
    keys = op_api[m]
    if len(keys) > 1 and not (keys[1:] >= keys[:-1]).all():
        o = np.argsort(keys, kind="stable")
        keys, m = keys[o], m[o]
    return keys, m
