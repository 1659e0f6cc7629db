"""Lanes: a trace's events grouped by timeline row, as per-lane sorted arrays and prefix sums.

Everything here is pure numpy (no Textual). A *lane* is one timeline row: the launch calls of one
CPU thread for one device (CUDA API row), the GPU ops of one stream (CUDA HW row), the pending-launch
depth of one stream (queue sparkline) or the NVTX ranges of one thread at one nesting depth.

Lanes are derived data, built once per trace (``build_lanes``) and cacheable; each lane answers
covered ns, event counts and maxima over any bin edges in O(bins · log N). What the timeline shows
per frame and at the cursor is the TUI's (tui/lane_view.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from launchtui.analysis.backpressure import spike_threshold_ns, thread_launch_medians
from launchtui.analysis.config import CONFIG
from launchtui.analysis.index import trace_index
from launchtui.analysis.intervals import Intervals, RangeMax
from launchtui.trace.grouping import dense_groups
from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, API_MEMCPY, API_MEMSET, Trace

SMALL_KERNEL_NS = CONFIG.small_kernel_ns
DEFAULT_NVTX_DEPTH = CONFIG.nvtx_depth


class ArrayEvents:
    """A lane's events as their own arrays: indices `idx` into the trace's table, `s` / `e` their
    start and end, sorted by start (the layout of lanes whose events overlap)."""

    __slots__ = ("idx", "s", "e")

    def __init__(self, idx: np.ndarray, s: np.ndarray, e: np.ndarray):
        self.idx, self.s, self.e = idx, s, e

    def __len__(self) -> int:
        return len(self.idx)

    def n_start(self, t: np.ndarray, side: str = "left") -> np.ndarray:
        """Events starting before t (side "left") or at or before t ("right"): searchsorted."""
        return np.searchsorted(self.s, t, side=side)

    def start_at(self, i):
        return self.s[i]

    def end_at(self, i):
        return self.e[i]


class LaneEvents:
    """A lane's events read through the trace's own time-ordered columns, not copied: start/end
    copies and per-category sets would be most of the lanes' memory. `idx` are increasing positions into the parent columns `ps` / `pe` (trace.ops or trace.api,
    named by `src`; never stored in the lanes file) whose starts are sorted, so a binary search on
    the parent, then on `idx`, gives the searchsorted of the lane's own starts. Built only for events
    that are disjoint (a stream's ops, a thread's launch calls: each starts at or after the previous
    one's end, zero-length ones counted as 1 ns): then `cum`, the prefix sum of their lengths, gives
    the covered ns and the events present per bin (`busy`, `count`, `any`), as `Intervals` would for
    bins of positive width (the timeline's: at least one clock tick per column; Intervals merges
    touching events, so a zero-width bin at a touching point would differ)."""

    __slots__ = ("idx", "cum", "src", "ps", "pe")

    def __init__(self, idx: np.ndarray, cum: np.ndarray, src: str, ps: np.ndarray, pe: np.ndarray):
        self.idx, self.cum, self.src, self.ps, self.pe = idx, cum, src, ps, pe

    def __len__(self) -> int:
        return len(self.idx)

    def n_start(self, t: np.ndarray, side: str = "left") -> np.ndarray:
        pos = np.searchsorted(self.ps, t, side=side)
        # positions as idx's own dtype: searchsorted would otherwise cast the whole of idx
        return np.searchsorted(self.idx, np.asarray(pos).astype(self.idx.dtype), side="left")

    def start_at(self, i):
        return self.ps[self.idx[i]]

    def end_at(self, i):
        return self.pe[self.idx[i]]

    def _span(self, i: np.ndarray):
        j = self.idx[i]
        s = self.ps[j]
        return s, np.maximum(self.pe[j], s + 1)    # zero-length events count as 1 ns (Intervals)

    def covered_before(self, t: np.ndarray) -> np.ndarray:
        """Covered ns in (-inf, t)."""
        i = self.n_start(t, "right") - 1
        ic = np.maximum(i, 0)
        s, e = self._span(ic)
        return np.where(i >= 0, self.cum[ic] + np.clip(t - s, 0, e - s), 0)

    def busy(self, edges: np.ndarray) -> np.ndarray:
        if not len(self.idx):
            return np.zeros(len(edges) - 1, np.int64)
        return np.diff(self.covered_before(edges))

    def count(self, edges: np.ndarray) -> np.ndarray:
        """Events overlapping each bin: those starting before its end less those ended at or before
        its start (disjoint and in order: all but the last one starting at or before it, and that one
        if it has ended)."""
        if not len(self.idx):
            return np.zeros(len(edges) - 1, np.int64)
        started = self.n_start(edges[1:], "left")
        m = self.n_start(edges[:-1], "right")
        _, e = self._span(np.maximum(m - 1, 0))
        ended = np.maximum(m - 1, 0) + ((m >= 1) & (e <= edges[:-1]))
        return started - ended

    def any(self, edges: np.ndarray) -> np.ndarray:
        return self.count(edges) > 0


class Rest:
    """A disjoint lane's dominant category: the lane (`all`) less its other categories (`others`),
    exactly (a partition: covered ns and overlapping events add up), so it holds no arrays."""

    __slots__ = ("all", "others")

    def __init__(self, all: LaneEvents, others: list):
        self.all, self.others = all, others

    def busy(self, edges: np.ndarray) -> np.ndarray:
        out = self.all.busy(edges)
        for o in self.others:
            out = out - o.busy(edges)
        return out

    def any(self, edges: np.ndarray) -> np.ndarray:
        n = self.all.count(edges)
        for o in self.others:
            n = n - o.count(edges)
        return n > 0


@dataclass
class ApiLane:
    device: int
    thread: int                 # index into trace.threads
    ev: object                  # the launch calls (LaneEvents or ArrayEvents; `idx`: ApiCalls indices)
    busy: object                # their union (LaneEvents or Intervals)
    launch_dur: RangeMax        # durations of API_LAUNCH calls (0 for other kinds) in start order
    spike_ns: int               # a cell whose max launch duration exceeds this is a spike cell
    median_ns: float

    @property
    def key(self) -> tuple:
        return ("api", self.device, self.thread)

    idx = property(lambda self: self.ev.idx)
    start = property(lambda self: self.ev.start_at(np.arange(len(self.ev))), doc="a copy (tools, tests)")
    end = property(lambda self: self.ev.end_at(np.arange(len(self.ev))), doc="a copy (tools, tests)")


@dataclass
class HwLane:
    device: int
    stream: int
    ev: object                  # the ops (LaneEvents or ArrayEvents; `idx`: GpuOps indices)
    cats: list                  # per category: its busy set (LaneEvents, Rest or Intervals)
    all: object                 # every op's (LaneEvents or Intervals)

    @property
    def key(self) -> tuple:
        return ("hw", self.device, self.stream)

    idx = property(lambda self: self.ev.idx)
    start = property(lambda self: self.ev.start_at(np.arange(len(self.ev))), doc="a copy (tools, tests)")
    end = property(lambda self: self.ev.end_at(np.arange(len(self.ev))), doc="a copy (tools, tests)")


@dataclass
class QueueLane:
    device: int
    stream: int
    t: np.ndarray
    v: np.ndarray
    vmax: RangeMax
    peak: int
    peak_t: int

    @property
    def key(self) -> tuple:
        return ("queue", self.device, self.stream)

    def value_at(self, times: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(self.t, times, side="right") - 1
        return np.where(pos >= 0, self.v[np.maximum(pos, 0)], 0) if len(self.v) else np.zeros(len(times), np.int64)

    def bin_max(self, edges: np.ndarray) -> np.ndarray:
        """Exact maximum pending depth per bin: the value in effect at the bin start, or any value set
        inside it (definitions.md §5). O(bins · log changes), independent of the trace size."""
        at_start = self.value_at(edges[:-1])
        if not len(self.v):
            return at_start.astype(np.int32)
        lo = np.searchsorted(self.t, edges[:-1], side="left")
        hi = np.searchsorted(self.t, edges[1:], side="left")
        inner = self.vmax.query(lo, hi)
        return np.maximum(at_start, inner).astype(np.int32)


@dataclass
class NvtxLane:
    thread: int
    depth: int
    idx: np.ndarray             # Ranges indices, sorted by start
    start: np.ndarray
    end: np.ndarray
    end_max: np.ndarray         # running max of end (overlapping start/end ranges)

    @property
    def key(self) -> tuple:
        return ("nvtx", self.thread, self.depth)


@dataclass
class Lanes:
    api: dict = field(default_factory=dict)     # device -> [ApiLane]
    hw: dict = field(default_factory=dict)      # device -> [HwLane]
    queue: dict = field(default_factory=dict)   # (device, stream) -> QueueLane
    nvtx: list = field(default_factory=list)    # [NvtxLane], by thread then depth
    nvtx_max_depth: int = 0
    devices: list = field(default_factory=list)
    pending: bool = False      # a placeholder while the real lanes are built (the TUI's first open)



def _lanes_of(hi: np.ndarray, lo: np.ndarray):
    """[(hi, lo, rows)] per distinct (hi, lo) pair in key order, each group's rows in their original
    order (int32). A trace has few lanes: small non-negative ids are counted in one table (pair
    code, bincount) and each lane's rows found by one comparison pass (a few lanes) or a radix
    argsort of the dense lane ids; other ids are made dense first (not a sort of 64-bit keys)."""
    if not len(hi):
        return []
    small = _small_ids(hi) and _small_ids(lo)
    if small:
        uh, ul = None, None
        width = int(lo.max()) + 1
        code = hi.astype(np.int32)
        code *= width
        code += lo
    else:
        uh, gh = dense_groups(hi)
        ul, gl = dense_groups(lo)
        width = len(ul)
        code = gh * width + gl
        del gh, gl
    counts = np.bincount(code)
    pair = np.flatnonzero(counts)
    counts = counts[pair]
    if len(pair) <= 8:     # one pass per lane over a narrow code
        rows = [np.flatnonzero(code == p).astype(np.int32) for p in pair.tolist()]
    else:
        lut = np.zeros(int(pair[-1]) + 1, np.uint16 if len(pair) < 65536 else np.int64)
        lut[pair] = np.arange(len(pair))
        order = np.argsort(lut[code], kind="stable").astype(np.int32)
        bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
        rows = [order[bounds[i]:bounds[i + 1]] for i in range(len(pair))]
    del code
    out = []
    for p, r in zip(pair.tolist(), rows):
        h, lw = divmod(p, width)
        out.append((h if uh is None else int(uh[h]), lw if ul is None else int(ul[lw]), r))
    return out


def _small_ids(v: np.ndarray) -> bool:
    """Integer ids in [0, 2^12): a pair of them codes into an int32 and counts in a small table."""
    return v.dtype.kind in "iu" and int(v.min()) >= 0 and int(v.max()) < (1 << 12)


def _narrow(v: np.ndarray) -> np.ndarray:
    """`v` as int32 when every value fits (exact: the same maxima, half the bytes), else as is."""
    if len(v) and v.dtype.itemsize > 4 and v.min() >= -2**31 and v.max() < 2**31:
        return v.astype(np.int32)
    return v


def _sorted(v: np.ndarray) -> bool:
    return bool(len(v) < 2 or (v[1:] >= v[:-1]).all())


def _disjoint_cum(s: np.ndarray, e: np.ndarray) -> np.ndarray | None:
    """The prefix sum of the events' lengths (zero-length ones as 1 ns) when each starts at or after
    the previous one's end (LaneEvents' layout), else None."""
    d = e - s
    np.maximum(d, 1, out=d)
    if len(s) > 1 and (s[1:] < s[:-1] + d[:-1]).any():
        return None
    cum = np.empty(len(d) + 1, np.int64)
    cum[0] = 0
    np.cumsum(d, out=cum[1:])
    return cum


def op_categories(trace: Trace) -> np.ndarray:
    """Per GPU op: its timeline category (`index.CAT_KERNEL`, `CAT_SMALL`, `CAT_NCCL`, `CAT_MEM`)."""
    return trace_index(trace).op_category


def _api_device(trace: Trace) -> np.ndarray:
    """Per API call: device of the first GPU op it launched, -1 when none."""
    ops = trace.ops
    out = np.full(len(trace.api), -1, np.int32)
    m = np.nonzero(ops.api >= 0)[0]
    out[ops.api[m][::-1]] = ops.device[m][::-1]
    return out


def build_lanes(trace: Trace, nvtx_depth: int = DEFAULT_NVTX_DEPTH) -> Lanes:
    """All lanes of a trace. The TUI loader builds them once, off the UI thread, and keeps them.

    Compact, as they live as long as the TUI: indices int32; a lane's busy set shares its start/end
    arrays when its events are already disjoint (one stream's ops, one thread's launch calls);
    a lane with one category uses its busy set for it; the queue rows view the index's series."""
    ops, api, rg = trace.ops, trace.api, trace.ranges
    lanes = Lanes()

    # CUDA HW: one lane per (device, stream), categories as separate unions
    cat = op_categories(trace)
    ops_sorted = _sorted(ops.start)
    for dev, st, idx in _lanes_of(ops.device, ops.stream):   # ops are sorted by start: rows stay so
        s, e, c = ops.start[idx], ops.end[idx], cat[idx]
        present = np.bincount(c, minlength=4)
        cum = _disjoint_cum(s, e) if ops_sorted else None
        if cum is None:   # overlapping ops: the lane's own arrays and unions
            every = Intervals(s, e, presorted=True)
            cats = [every if present[ci] == len(c) else Intervals(s[c == ci], e[c == ci], presorted=True)
                    for ci in range(4)]
            lanes.hw.setdefault(dev, []).append(HwLane(dev, st, ArrayEvents(idx, s, e), cats, every))
            continue
        del s, e
        every = LaneEvents(idx, cum, "ops", ops.start, ops.end)
        top = int(np.argmax(present))
        cats = [None] * 4
        for ci in range(4):
            if ci != top:
                sub = idx[c == ci]
                cats[ci] = LaneEvents(sub, _disjoint_cum(ops.start[sub], ops.end[sub]), "ops", ops.start, ops.end)
        cats[top] = every if present[top] == len(c) else Rest(every, [cats[ci] for ci in range(4) if ci != top])
        lanes.hw.setdefault(dev, []).append(HwLane(dev, st, every, cats, every))

    # CUDA API: launch calls (those that enqueued GPU work) per (device, thread)
    if len(api):
        dev_of = _api_device(trace)
        launch = np.nonzero(dev_of >= 0)[0].astype(np.int32)   # api is sorted by start
        med_by_thread = thread_launch_medians(trace)     # the spike rule's baseline (backpressure)
        if not len(ops):
            # no GPU ops at all (kernels not captured): still draw the launch calls, under device -1
            enq = np.isin(api.kind, (API_LAUNCH, API_GRAPH_LAUNCH, API_MEMCPY, API_MEMSET))
            dev_of = np.where(enq, -1, -2).astype(np.int32)
            launch = np.nonzero(enq)[0].astype(np.int32)
        api_sorted = _sorted(api.start)
        for dev, th, rows in _lanes_of(dev_of[launch], api.thread[launch]):
            idx = launch[rows]
            s, e = api.start[idx], api.end[idx]
            ld = _narrow(np.where(api.kind[idx] == API_LAUNCH, e - s, 0))
            med = float(med_by_thread[th]) if th < len(med_by_thread) else 0.0
            cum = _disjoint_cum(s, e) if api_sorted else None
            if cum is None:
                ev, busy = ArrayEvents(idx, s, e), Intervals(s, e, presorted=True)
            else:
                ev = busy = LaneEvents(idx, cum, "api", api.start, api.end)
            del s, e
            lanes.api.setdefault(dev, []).append(ApiLane(dev, th, ev, busy, RangeMax(ld), 0, med))

    lanes.queue = queue_lanes(trace)

    # NVTX: per (thread, depth) up to nvtx_depth
    if len(rg):
        lanes.nvtx_max_depth = int(rg.depth.max()) + 1
        keep = np.nonzero(rg.depth < nvtx_depth)[0].astype(np.int32)
        for th, depth, rows in _lanes_of(rg.thread[keep], rg.depth[keep]):
            idx = keep[rows]
            s, e = rg.start[idx], rg.end[idx]
            lanes.nvtx.append(NvtxLane(th, depth, idx, s, e, np.maximum.accumulate(e)))

    lanes.devices = sorted(set(lanes.hw) | set(lanes.api))
    return lanes


def queue_lanes(trace: Trace, stored: dict | None = None) -> dict:
    """(device, stream) -> QueueLane over the index's depth series (views, no copies; the lanes
    cache stores only their sparse tables and peaks: `stored`, (device, stream) -> (length, peak,
    peak time, block, empty, levels), skips reading every series value on a reopen)."""
    from launchtui.analysis.queue import stream_series
    out = {}
    for ser in stream_series(trace):
        v = ser.v if ser.v.dtype.kind in "iu" else ser.v.astype(np.int64)
        got = (stored or {}).get((ser.device, ser.stream))
        if got is not None and got[0] == len(v):
            _, peak, peak_t, block, empty, levels = got
            vmax = RangeMax.from_tables(v, block, empty, levels)   # the stored tables of these values
        else:
            if len(v):
                p = int(np.argmax(v))
                peak, peak_t = int(v[p]), int(ser.t[p])
            else:
                peak, peak_t = 0, 0
            vmax = RangeMax(v)
        out[(ser.device, ser.stream)] = QueueLane(ser.device, ser.stream, ser.t, v, vmax, peak, peak_t)
    return out


def set_spike_threshold(lanes: Lanes, spike_us: float = CONFIG.spike_us,
                        spike_factor: float = CONFIG.spike_factor) -> None:
    """A launch slower than spike_us and spike_factor × its thread's median is a spike (§6)."""
    for lst in lanes.api.values():
        for lane in lst:
            lane.spike_ns = int(spike_threshold_ns(lane.median_ns, spike_us, spike_factor))
