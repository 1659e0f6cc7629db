"""The trace's derived index: every per-op lookup the analyses share, built once, then read-only.

`trace_index(trace)` returns it from the trace's memo (analysis/memo.py), building it on first use
under the key's lock, or the one the session kept there (`attach`: mapped from beside the model
entry, session.Index; the CLI and the TUI loader ask for it right after loading, before any worker
starts). After that nothing mutates it: workers only read. Distinguishing names are interned into
the trace's StringTable here, at build time, never lazily from a worker.

What it holds (definitions.md §5-§7):
- `queue_series`: pending-launch depth per (device, stream) as a step function (§5);
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
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from launchtui.analysis import memo
from launchtui.analysis.config import CONFIG
from launchtui.cpus import usable_cpus
from launchtui.trace.arrays import unique_sorted
from launchtui.trace import names as nm
from launchtui.trace.grouping import dense_groups
from launchtui.trace.model import API_GRAPH_LAUNCH, OP_KERNEL, RANGE_PUSHPOP, Trace
from launchtui.trace.nesting import InnermostIndex

# timeline categories of GPU ops, in drawing priority order for ties
CAT_KERNEL, CAT_SMALL, CAT_NCCL, CAT_MEM = 0, 1, 2, 3

_LAZY_LOCK = threading.Lock()   # the parts computed on first use (ops_by_api)
INDEX_KEY = "analysis.index"    # the index's key in the trace's memo
# depths (series values, depth before launch) are int16 when every one is at most this (the usual
# case: the launch queue holds ~1,000), leaving headroom for the readers' small offsets (`d + 1`)
SMALL_DEPTH = (1 << 14) - 1
COMPACT_BLOCK = 1 << 20   # elements per block of an in-place compaction (bounded temporaries)
DENSE_PAIRS = 1 << 24   # (full, short) name pairs looked up in a table up to this many (16 MB of bools)


@dataclass
class StreamSeries:
    device: int
    stream: int
    t: np.ndarray            # change times (ns), strictly increasing
    v: np.ndarray            # depth from t[i] until t[i+1] (int16 up to SMALL_DEPTH, else int32)
    point_mean: float        # HTA-style mean over every +1/-1 change point (not time-weighted)
    points: int
    max_graph_as_one: int    # max depth when a whole graph replay counts as one entry
    graph_ops: int           # matched ops launched by graph launches

    def value_at(self, times: np.ndarray) -> np.ndarray:
        """Depth in effect at each time (after all changes at that time)."""
        pos = np.searchsorted(self.t, times, side="right") - 1
        return np.where(pos >= 0, self.v[np.maximum(pos, 0)], 0)


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


# the queue series builds beside the rest of the index up to this many GPU ops: past it the two at
# once gained nothing measurable, and where threads keep arenas of their own (the TUI) both halves'
# transients stay resident (bench/MISSED.md)
SPLIT_MAX_OPS = 2_000_000


def build_index(trace: Trace) -> TraceIndex:
    """The index: the queue series on a second thread when there is a CPU for it and the trace is
    small enough (SPLIT_MAX_OPS), as its numpy work releases the GIL, else first on this one;
    interning stays on this thread."""
    with ThreadPoolExecutor(1, thread_name_prefix="launchtui-index") as pool:   # a thread only on submit
        if usable_cpus() >= 2 and len(trace.ops) <= SPLIT_MAX_OPS:
            queue_part = pool.submit(_queue_series, trace)
        else:
            queue_part = Future()
            queue_part.set_result(_queue_series(trace))
        nvtx_idx = _nvtx_index(trace)
        names, by_full_name = _distinguishing_name_table(trace)
        op_ranges = _op_ranges(trace, nvtx_idx)
        series, dbl = queue_part.result()
    return TraceIndex(tuple(series), dbl, nvtx_idx, op_ranges, names, trace.ops.api,
                      op_full_name=trace.ops.full_name if by_full_name else None,
                      category_source=(trace.ops, trace.strings))


# ---- pending-launch depth (definitions.md §5) ---------------------------------------------------------
# times are merged as 2 t + (1 for a +1): equal times then sort -1 first, and t comes back by a shift
_KEY_LIMIT = 1 << 62


def _stream_depth(ops_start: np.ndarray, sel: np.ndarray, api_start: np.ndarray, calls: np.ndarray):
    """`_merge_depth` of one stream's ops `sel` (in start order) and their launch calls `calls`,
    gathered straight into the halves of the merge's key array (no separate n-long copies of the
    two time columns), and the permutation that sorted the launch starts (None: already sorted;
    the depths before come back in sorted launch order)."""
    key = np.empty(len(sel) + len(calls), np.int64)
    minus, plus = key[:len(sel)], key[len(sel):]
    np.take(ops_start, sel, out=minus)
    np.take(api_start, calls, out=plus)
    perm = None
    # FIFO: a stream runs ops in launch order, so launch starts are almost always sorted
    if len(plus) > 1 and not (plus[1:] >= plus[:-1]).all():
        perm = np.argsort(plus, kind="stable")
        plus[:] = plus[perm]
    return (*_merge_depth(plus, minus, key), perm)


def _merge_depth(plus: np.ndarray, minus: np.ndarray, key: np.ndarray | None = None):
    """Depth series of one stream from its +1 times (launch calls) and -1 times (op starts), both
    sorted. Equal times apply -1 before +1. Returns (distinct times, depth after all changes at
    each, int32), the mean depth over every change point, and the depth before each +1 event.
    `key`: an array of len(minus) + len(plus) whose halves `minus` and `plus` are (reused as the
    merge's key, so both are overwritten), else None.

    One stable sort of the two runs with the event's sign in the key's low bit: numpy's stable sort
    of int64 is a timsort, which merges two sorted runs in one linear pass (cheaper than a binary
    search per launch, and no n-long int64 ranks or positions)."""
    na, n = len(plus), len(plus) + len(minus)
    if not na or not len(minus) or min(plus[0], minus[0]) < -_KEY_LIMIT or max(plus[-1], minus[-1]) >= _KEY_LIMIT:
        return _merge_depth_search(plus, minus)
    key = np.empty(n, np.int64) if key is None else key
    np.multiply(minus, 2, out=key[:n - na])
    np.multiply(plus, 2, out=key[n - na:])
    key[n - na:] += 1
    key.sort(kind="stable")
    step = np.empty(n, np.int8)
    np.bitwise_and(key, 1, out=step, casting="unsafe")
    is_plus = step.astype(bool)
    step += step
    step -= 1
    depth = np.cumsum(step, dtype=np.int32)
    del step
    before = depth[is_plus]
    before -= 1                                        # depth just before each +1, in plus order
    del is_plus
    key >>= 1                                          # the times
    return _distinct(key, depth, before)


def _merge_depth_search(plus: np.ndarray, minus: np.ndarray):
    """`_merge_depth` by one searchsorted of the +1s into the -1s: for times beyond +-2^62 (the
    key above would overflow) and empty sides."""
    na, n = len(plus), len(plus) + len(minus)
    rank = np.arange(na)
    pos = np.searchsorted(minus, plus, side="right")   # -1s applied before each +1
    before = np.subtract(rank, pos, dtype=np.int32)    # depth just before each +1
    pos += rank                                        # now the +1s' merged positions
    del rank
    is_minus = np.ones(n, bool)
    is_minus[pos] = False
    t = np.empty(n, np.int64)
    t[pos] = plus
    del pos
    t[is_minus] = minus
    step = np.ones(n, np.int8)
    step[is_minus] = -1
    del is_minus
    depth = np.cumsum(step, dtype=np.int32)
    del step
    return _distinct(t, depth, before)


def _distinct(t: np.ndarray, depth: np.ndarray, before: np.ndarray):
    """(distinct times, the depth after all changes at each, mean depth over every change, before);
    the first two compacted in their own buffers (leading slices of them)."""
    n = len(t)
    point_mean = float(depth.mean()) if n else float("nan")
    last = np.ones(n, bool)
    np.not_equal(t[1:], t[:-1], out=last[:-1])   # the value at t is the one after all changes at t
    if last.all():                               # no two changes at one time: no copies
        return t, depth, point_mean, before
    return _compact(t, last), _compact(depth, last), point_mean, before


def _compact(a: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """a[keep], written over `a`'s own leading elements block by block (a kept element only moves
    left, past elements already read), and returned as a's leading slice: equal times are few, so
    this keeps a few bytes of slack instead of allocating a second n-long copy."""
    w = 0
    for s in range(0, len(a), COMPACT_BLOCK):   # one iteration per block
        kept = a[s:s + COMPACT_BLOCK][keep[s:s + COMPACT_BLOCK]]   # a copy: the block is read first
        a[w:w + len(kept)] = kept
        w += len(kept)
    return a[:w]


def _max_without(t: np.ndarray, v: np.ndarray, plus: np.ndarray, minus: np.ndarray) -> int:
    """max over i of v[i] - (#plus <= t[i] - #minus <= t[i]): the series' peak with some entries taken
    out (each +1 at its time in `plus`, -1 at its time in `minus`). The correction only changes at
    those few times, so the series splits into runs of constant correction, each run's max taken by
    one reduceat: no n-long positions or differences."""
    e = unique_sorted(np.concatenate([plus, minus]))
    corr = np.searchsorted(np.sort(plus), e, side="right") - np.searchsorted(np.sort(minus), e, side="right")
    starts = np.concatenate([[0], np.searchsorted(t, e, side="left")])   # first t >= each change time
    corr = np.concatenate([[0], corr])
    keep = np.ones(len(starts), bool)                  # runs with no t in them (several changes
    keep[:-1] = starts[1:] > starts[:-1]               # before the next t) hold no value
    keep &= starts < len(t)
    starts, corr = starts[keep], corr[keep]
    return int((np.maximum.reduceat(v, starts).astype(np.int64) - corr).max())


def _stream_groups(device: np.ndarray, stream: np.ndarray):
    """(sorted distinct (device, stream) keys, group per op as uint16 or int64, key -> device,
    key -> stream). One key per op, device-major, in the narrowest integer type that holds it (no
    n-long int64 group ids per column)."""
    d0, d1, s0, s1 = int(device.min()), int(device.max()), int(stream.min()), int(stream.max())
    width = s1 - s0 + 1
    small = max(-d0, d1, -s0, s1, (d1 - d0 + 1) * width) < 2**30   # every step below fits int32
    key = device.astype(np.int32 if small else np.int64)
    key -= d0
    key *= width
    key -= s0
    key += stream
    skeys, grp = dense_groups(key)
    del key
    grp = grp.astype(np.uint16 if len(skeys) < 65535 else np.int64, copy=False)
    return skeys, grp, lambda k: int(k) // width + d0, lambda k: int(k) % width + s0


def _queue_series(trace: Trace) -> tuple[list[StreamSeries], np.ndarray]:
    """Depth series for every stream, and per op the depth before its launch call (int16 up to
    SMALL_DEPTH, else int32)."""
    ops, api = trace.ops, trace.api
    out: list[StreamSeries] = []
    dbl = np.full(len(ops), -1, np.int16)   # int32 once a depth passes SMALL_DEPTH
    unmatched = ops.api < 0
    if not unmatched.all():
        # (device, stream) groups over all ops (no gathered copies of the matched ones); unmatched
        # ops go to an extra last group, and a stream with no matched op is skipped
        skeys, grp, dev_of, stream_of = _stream_groups(ops.device, ops.stream)
        grp[unmatched] = len(skeys)
        del unmatched
        by_stream = np.argsort(grp, kind="stable")
        if len(by_stream) < 2**31:   # held through the loop below: 4 bytes per op, not 8
            by_stream = by_stream.astype(np.int32)
        bounds = np.zeros(len(skeys) + 1, np.int64)   # each stream's run in by_stream (unmatched last)
        np.cumsum(np.bincount(grp, minlength=len(skeys) + 1)[:-1], out=bounds[1:])
        del grp
        for g, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):  # one iteration per stream
            if lo == hi:
                continue
            sel = by_stream[lo:hi]                  # this stream's matched ops, in start order
            calls = ops.api[sel]
            t_last, v_last, point_mean, before, perm = _stream_depth(ops.start, sel, api.start, calls)
            if dbl.dtype == np.int16 and len(before) and int(before.max()) > SMALL_DEPTH:
                dbl = dbl.astype(np.int32)
            dbl[sel if perm is None else sel[perm]] = before
            del before, perm
            is_graph = api.kind[calls] == API_GRAPH_LAUNCH
            gmax = int(v_last.max())
            if gmax <= SMALL_DEPTH:
                v_last = v_last.astype(np.int16)
            if is_graph.any():
                # Counting each replay as one entry (retired when its first op starts) removes the
                # replay's other ops: each was +1 from the launch call until its own start.
                gi = np.nonzero(is_graph)[0]
                first = unique_sorted(calls[gi], return_index=True)[1]
                rest = np.delete(gi, first)
                gmax = _max_without(t_last, v_last, api.start[calls[rest]], ops.start[sel[rest]])
            out.append(StreamSeries(
                device=dev_of(skeys[g]), stream=stream_of(skeys[g]), t=t_last, v=v_last,
                point_mean=point_mean, points=2 * len(calls), max_graph_as_one=gmax,
                graph_ops=int(is_graph.sum())))
    return out, dbl


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
