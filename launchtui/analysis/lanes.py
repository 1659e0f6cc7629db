"""Timeline binning for the TUI: per-lane sorted arrays and prefix sums, evaluated per frame.

Everything here is pure numpy (no Textual). A *lane* is one timeline row: the launch calls of one
CPU thread for one device (CUDA API row), the GPU ops of one stream (CUDA HW row), the pending-launch
depth of one stream (queue sparkline) or the NVTX ranges of one thread at one nesting depth.

Lanes are built once per trace (``build_lanes``, kept by the TUI loader). A frame evaluates
each visible lane over ``width + 1`` bin edges with ``np.searchsorted`` and prefix sums, so its cost is
O(width · log N) and does not depend on how many events the window holds. No per-event Python loop
runs on a per-frame path.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from launchtui.analysis.config import CONFIG
from launchtui.analysis.index import CAT_KERNEL, CAT_MEM, CAT_NCCL, CAT_SMALL, trace_index  # noqa: F401
from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, API_MEMCPY, API_MEMSET, OP_KERNEL, Trace

# HW categories, in drawing priority order for ties
CAT_NAMES = ("kernel ≥10µs", "small kernel <10µs", "NCCL", "memcpy/memset")
SMALL_KERNEL_NS = CONFIG.small_kernel_ns
DEFAULT_NVTX_DEPTH = CONFIG.nvtx_depth
LEVELS = 8  # occupancy / density quantisation (eighths)


# --------------------------------------------------------------------------------------------
# primitives

def bin_edges(start: int, ns_per_col: float, width: int) -> np.ndarray:
    """``width + 1`` int64 edges; bin i is [edges[i], edges[i+1]). `start` is an int so epoch-ns
    clocks (~1.7e18, beyond float64's exact integers) stay exact; only the offsets are floats."""
    off = np.floor(ns_per_col * np.arange(width + 1, dtype=np.float64)).astype(np.int64)
    return np.int64(int(start)) + off


class Intervals:
    """A union of intervals as sorted disjoint [s, e) with a prefix sum of their lengths.

    ``busy(edges)`` gives the covered ns per bin, ``any(edges)`` whether any interval touches a bin;
    both are a few searchsorted calls over the edges. Zero-length input intervals count as 1 ns so
    instantaneous events stay visible.
    """

    __slots__ = ("s", "e", "cum")

    def __init__(self, start: np.ndarray, end: np.ndarray, presorted: bool = False):
        start = np.asarray(start, np.int64)
        end = np.maximum(np.asarray(end, np.int64), start + 1)
        if len(start) and not presorted:
            o = np.argsort(start, kind="stable")
            start, end = start[o], end[o]
        if len(start):
            run_end = np.maximum.accumulate(end)
            new = np.ones(len(start), bool)
            new[1:] = start[1:] > run_end[:-1]
            idx = np.nonzero(new)[0]
            self.s = start[idx]
            self.e = np.append(run_end[idx[1:] - 1], run_end[-1])
        else:
            self.s = np.zeros(0, np.int64)
            self.e = np.zeros(0, np.int64)
        self.cum = np.concatenate([[0], np.cumsum(self.e - self.s)]).astype(np.int64)

    def __len__(self) -> int:
        return len(self.s)

    def covered_before(self, t: np.ndarray) -> np.ndarray:
        """Covered ns in (-inf, t)."""
        i = np.searchsorted(self.s, t, side="right") - 1
        ic = np.maximum(i, 0)
        part = np.clip(t - self.s[ic], 0, self.e[ic] - self.s[ic]) if len(self.s) else np.zeros(len(t), np.int64)
        return np.where(i >= 0, self.cum[ic] + part, 0)

    def busy(self, edges: np.ndarray) -> np.ndarray:
        if not len(self.s):
            return np.zeros(len(edges) - 1, np.int64)
        c = self.covered_before(edges)
        return np.diff(c)

    def any(self, edges: np.ndarray) -> np.ndarray:
        if not len(self.s):
            return np.zeros(len(edges) - 1, bool)
        n_start = np.searchsorted(self.s, edges[1:], side="left")    # intervals starting before b
        n_ended = np.searchsorted(self.e, edges[:-1], side="right")  # intervals ended at or before a
        return n_start > n_ended


class RangeMax:
    """Maximum over index ranges [lo, hi) of a fixed array, vectorised over many queries.

    Block maxima (block size B) plus a sparse table over the blocks: memory O(N/B · log N), each
    query O(B) gathered elements for the partial blocks and O(1) for the full ones.
    """

    def __init__(self, values: np.ndarray, block: int = 32, empty=0):
        self.v = np.asarray(values)
        self.B = block
        self.empty = empty
        n = len(self.v)
        nb = n // block
        levels = []
        if nb:
            bm = self.v[:nb * block].reshape(nb, block).max(axis=1)
            levels.append(bm)
            k = 1
            while (1 << k) <= nb:
                prev = levels[-1]
                h = 1 << (k - 1)
                levels.append(np.maximum(prev[:-h], prev[h:]))
                k += 1
        self.levels = levels

    def query(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        lo = np.asarray(lo, np.int64)
        hi = np.asarray(hi, np.int64)
        B = self.B
        n = len(self.v)
        out = np.full(len(lo), self.empty, dtype=self.v.dtype if n else np.int64)
        if not n or not len(lo):
            return out
        valid = hi > lo
        bl = (lo + B - 1) // B                 # first full block
        bh = hi // B                           # end of full blocks (exclusive)
        has_full = valid & (bh > bl)
        # partial head [lo, min(hi, bl*B)) and tail [max(lo, bh*B), hi); when no full block, the
        # whole range is in the head/tail pair (< 2B elements)
        head_end = np.where(has_full, bl * B, hi)
        tail_start = np.where(has_full, bh * B, hi)
        span = np.arange(B, dtype=np.int64)
        res = out.copy()
        # the range without full blocks can straddle one block edge: head covers up to B elements,
        # the rest (< B) goes to a second head window
        for a, b in ((lo, head_end), (lo + B, head_end), (tail_start, hi)):
            idx = a[:, None] + span[None, :]
            m = (idx < b[:, None]) & valid[:, None]
            if not m.any():
                continue
            vals = self.v[np.minimum(idx, n - 1)]
            vals = np.where(m, vals, self.empty)
            res = np.maximum(res, vals.max(axis=1))
        if has_full.any() and self.levels:
            f = np.nonzero(has_full)[0]
            length = bh[f] - bl[f]
            k = np.floor(np.log2(length)).astype(np.int64)
            r = np.empty(len(f), dtype=res.dtype)
            for kk in np.unique(k).tolist():   # at most log2(N/B) distinct levels
                sel = k == kk
                lev = self.levels[kk]
                a = bl[f][sel]
                b = bh[f][sel] - (1 << kk)
                r[sel] = np.maximum(lev[a], lev[b])
            res[f] = np.maximum(res[f], r)
        return np.where(valid, res, self.empty)


# --------------------------------------------------------------------------------------------
# lanes

@dataclass
class ApiLane:
    device: int
    thread: int                 # index into trace.threads
    idx: np.ndarray             # ApiCalls indices of launch calls, sorted by start
    start: np.ndarray
    end: np.ndarray
    busy: Intervals
    launch_dur: RangeMax        # durations of API_LAUNCH calls (0 for other kinds) in start order
    spike_ns: int               # a cell whose max launch duration exceeds this is a spike cell
    median_ns: float

    @property
    def key(self) -> tuple:
        return ("api", self.device, self.thread)


@dataclass
class HwLane:
    device: int
    stream: int
    idx: np.ndarray             # GpuOps indices sorted by start
    start: np.ndarray
    end: np.ndarray
    cats: list                  # Intervals per category
    all: Intervals

    @property
    def key(self) -> tuple:
        return ("hw", self.device, self.stream)


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
        """Exact maximum pending depth per bin (same definition as analysis.queue.bin_max)."""
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


def _group_bounds(keys_sorted: np.ndarray):
    if not len(keys_sorted):
        return []
    cut = np.nonzero(keys_sorted[1:] != keys_sorted[:-1])[0] + 1
    b = np.concatenate([[0], cut, [len(keys_sorted)]])
    return list(zip(b[:-1].tolist(), b[1:].tolist()))


def op_categories(trace: Trace) -> np.ndarray:
    """Per GPU op: CAT_KERNEL, CAT_SMALL, CAT_NCCL or CAT_MEM."""
    return trace_index(trace).op_category


def _api_device(trace: Trace) -> np.ndarray:
    """Per API call: device of the first GPU op it launched, -1 when none."""
    ops = trace.ops
    out = np.full(len(trace.api), -1, np.int64)
    m = np.nonzero(ops.api >= 0)[0]
    out[ops.api[m][::-1]] = ops.device[m][::-1]
    return out


def build_lanes(trace: Trace, nvtx_depth: int = DEFAULT_NVTX_DEPTH) -> Lanes:
    """All lanes of a trace. The TUI loader builds them once, off the UI thread, and keeps them."""
    from launchtui.analysis.queue import stream_series
    ops, api, rg = trace.ops, trace.api, trace.ranges
    lanes = Lanes()

    # CUDA HW: one lane per (device, stream), categories as separate unions
    cat = op_categories(trace)
    if len(ops):
        skey = ops.device.astype(np.int64) * (1 << 40) + ops.stream
        order = np.argsort(skey, kind="stable")          # ops are sorted by start: stays in start order
        ks = skey[order]
        for a, b in _group_bounds(ks):                   # one iteration per stream
            idx = order[a:b]
            s, e, c = ops.start[idx], ops.end[idx], cat[idx]
            cats = [Intervals(s[c == ci], e[c == ci], presorted=True) for ci in range(4)]
            dev, st = int(ks[a] >> 40), int(ks[a] & ((1 << 40) - 1))
            lanes.hw.setdefault(dev, []).append(HwLane(dev, st, idx, s, e, cats, Intervals(s, e, presorted=True)))

    # CUDA API: launch calls (those that enqueued GPU work) per (device, thread)
    if len(api):
        dev_of = _api_device(trace)
        launch = np.nonzero(dev_of >= 0)[0]              # api is sorted by start
        is_launch_kind = api.kind == API_LAUNCH
        dur_all = api.end - api.start
        # per-thread median launch time, as in the engine's spike rule
        lk = np.nonzero(is_launch_kind)[0]
        med_by_thread: dict[int, float] = {}
        if len(lk):
            th = api.thread[lk]
            o = np.lexsort((dur_all[lk], th))
            ths, ds = th[o], dur_all[lk][o]
            for a, b in _group_bounds(ths):              # one iteration per thread
                n = b - a
                med_by_thread[int(ths[a])] = (ds[a + (n - 1) // 2] + ds[a + n // 2]) / 2.0
        if not len(ops):
            # no GPU ops at all (kernels not captured): still draw the launch calls, under device -1
            enq = np.isin(api.kind, (API_LAUNCH, API_GRAPH_LAUNCH, API_MEMCPY, API_MEMSET))
            dev_of = np.where(enq, -1, -2)
            launch = np.nonzero(enq)[0]
        key2 = (dev_of[launch] + 2) * (1 << 32) + api.thread[launch]
        order = np.argsort(key2, kind="stable")
        k2 = key2[order]
        for a, b in _group_bounds(k2):
            idx = launch[order[a:b]]
            dev, th = int(k2[a] >> 32) - 2, int(k2[a] & ((1 << 32) - 1))
            s, e = api.start[idx], api.end[idx]
            ld = np.where(is_launch_kind[idx], dur_all[idx], 0)
            med = med_by_thread.get(th, 0.0)
            lanes.api.setdefault(dev, []).append(ApiLane(dev, th, idx, s, e, Intervals(s, e, presorted=True),
                                                         RangeMax(ld), 0, med))

    # queue depth per stream
    for ser in stream_series(trace):
        v = ser.v.astype(np.int64)
        if len(v):
            p = int(np.argmax(v))
            peak, peak_t = int(v[p]), int(ser.t[p])
        else:
            peak, peak_t = 0, 0
        lanes.queue[(ser.device, ser.stream)] = QueueLane(ser.device, ser.stream, ser.t, v, RangeMax(v), peak, peak_t)

    # NVTX: per (thread, depth) up to nvtx_depth
    if len(rg):
        lanes.nvtx_max_depth = int(rg.depth.max()) + 1
        keep = np.nonzero(rg.depth < nvtx_depth)[0]
        key3 = rg.thread[keep].astype(np.int64) * 1024 + rg.depth[keep]
        order = np.argsort(key3, kind="stable")
        k3 = key3[order]
        for a, b in _group_bounds(k3):
            idx = keep[order[a:b]]
            s, e = rg.start[idx], rg.end[idx]
            lanes.nvtx.append(NvtxLane(int(k3[a] // 1024), int(k3[a] % 1024), idx, s, e, np.maximum.accumulate(e)))

    lanes.devices = sorted(set(lanes.hw) | set(lanes.api))
    return lanes


def set_spike_threshold(lanes: Lanes, spike_us: float = CONFIG.spike_us,
                        spike_factor: float = CONFIG.spike_factor) -> None:
    """A launch slower than spike_us and spike_factor × its thread's median is a spike (§6)."""
    for lst in lanes.api.values():
        for ln in lst:
            ln.spike_ns = int(max(spike_us * 1e3, spike_factor * ln.median_ns))


# --------------------------------------------------------------------------------------------
# per-frame evaluation (O(width · log N))

@dataclass
class ApiCells:
    level: np.ndarray      # 0..8: eighths of the cell's time spent in launch calls (≥1 when any)
    count: np.ndarray      # launch calls starting in the cell
    max_ns: np.ndarray     # longest cudaLaunch* call starting in the cell
    spike: np.ndarray      # max_ns > the lane's spike threshold


def api_cells(lane: ApiLane, edges: np.ndarray) -> ApiCells:
    lo = np.searchsorted(lane.start, edges[:-1], side="left")
    hi = np.searchsorted(lane.start, edges[1:], side="left")
    width = np.maximum(np.diff(edges), 1)
    busy = lane.busy.busy(edges)
    anyc = lane.busy.any(edges)
    level = _level(busy, width, anyc)
    mx = lane.launch_dur.query(lo, hi)
    return ApiCells(level, hi - lo, mx, mx > lane.spike_ns if lane.spike_ns > 0 else np.zeros(len(lo), bool))


@dataclass
class HwCells:
    level: np.ndarray      # 0..8 occupancy (≥1 when any op touches the cell)
    cat: np.ndarray        # dominant category (most busy time)
    count: np.ndarray      # ops starting in the cell


def hw_cells(lane: HwLane, edges: np.ndarray) -> HwCells:
    width = np.maximum(np.diff(edges), 1)
    per = np.stack([c.busy(edges) for c in lane.cats])          # 4 × W
    tot = lane.all.busy(edges)
    anyc = lane.all.any(edges)
    cat = np.argmax(per, axis=0).astype(np.int8)
    # a cell touched only by zero-length-ish ops: take the category of any op present
    none = anyc & (per.max(axis=0) == 0)
    if none.any():
        for ci in range(4):
            hit = none & lane.cats[ci].any(edges)
            cat[hit] = ci
            none &= ~hit
    lo = np.searchsorted(lane.start, edges[:-1], side="left")
    hi = np.searchsorted(lane.start, edges[1:], side="left")
    return HwCells(_level(tot, width, anyc), cat, hi - lo)


def _level(busy: np.ndarray, width: np.ndarray, anyc: np.ndarray) -> np.ndarray:
    frac = np.minimum(busy / width, 1.0)
    lv = np.ceil(frac * LEVELS).astype(np.int8)
    return np.where(anyc, np.maximum(lv, 1), 0).astype(np.int8)


@dataclass
class NvtxCells:
    range_idx: np.ndarray  # trace.ranges index shown in the cell, -1 when none
    multi: np.ndarray      # more than one range starts in the cell


def nvtx_cells(lane: NvtxLane, edges: np.ndarray) -> NvtxCells:
    a, b = edges[:-1], edges[1:]
    # the range covering the cell's midpoint, else the last one starting inside the cell
    mid = a + (b - a) // 2
    i = np.searchsorted(lane.start, mid, side="right") - 1
    ic = np.maximum(i, 0)
    cover = (i >= 0) & (lane.end[ic] > mid) if len(lane.start) else np.zeros(len(a), bool)
    j = np.searchsorted(lane.start, b, side="left") - 1
    jc = np.maximum(j, 0)
    touch = (j >= 0) & (lane.end_max[jc] > a) if len(lane.start) else np.zeros(len(a), bool)
    pick = np.where(cover, ic, np.where(touch, jc, -1))
    n_in = np.searchsorted(lane.start, b, side="left") - np.searchsorted(lane.start, a, side="left")
    rid = np.where(pick >= 0, lane.idx[np.maximum(pick, 0)] if len(lane.idx) else -1, -1)
    return NvtxCells(rid, n_in > 1)


# --------------------------------------------------------------------------------------------
# lookups at the cursor (O(log N))

def interval_at(lane, t0: int, t1: int) -> int:
    """The event on this lane (HW or API) covering t0, else the first one starting in [t0, t1),
    else -1."""
    if not len(lane.start):
        return -1
    i = int(np.searchsorted(lane.start, t0, side="right")) - 1
    if i >= 0 and lane.end[i] > t0:
        return int(lane.idx[i])
    j = i + 1
    if j < len(lane.start) and lane.start[j] < t1:
        return int(lane.idx[j])
    return -1


op_at = api_at = interval_at


def range_at(lane: NvtxLane, t0: int, t1: int) -> int:
    c = nvtx_cells(lane, np.array([t0, max(t1, t0 + 1)], np.int64))
    return int(c.range_idx[0])


# --------------------------------------------------------------------------------------------
# instances of one kernel (Enter in the table; n / N)

@dataclass
class Instances:
    ops: np.ndarray        # GpuOps indices, time order
    start: np.ndarray
    by_stream: dict        # (device, stream) -> Intervals of the instances

    def __len__(self) -> int:
        return len(self.ops)

    def next_after(self, t: int) -> int:
        """Position of the first instance starting after t (wraps to -1 when none)."""
        i = int(np.searchsorted(self.start, t, side="right"))
        return i if i < len(self.start) else -1

    def prev_before(self, t: int) -> int:
        i = int(np.searchsorted(self.start, t, side="left")) - 1
        return i


def kernel_instances(trace: Trace, name_ids: np.ndarray, name_id: int, device: int | None) -> Instances:
    ops = trace.ops
    m = name_ids == name_id
    if device is not None:
        m &= ops.device == device
    idx = np.nonzero(m)[0]
    by = {}
    if len(idx):
        skey = ops.device[idx].astype(np.int64) * (1 << 40) + ops.stream[idx]
        order = np.argsort(skey, kind="stable")
        ks = skey[order]
        for a, b in _group_bounds(ks):
            ii = idx[order[a:b]]
            by[(int(ks[a] >> 40), int(ks[a] & ((1 << 40) - 1)))] = Intervals(ops.start[ii], ops.end[ii], presorted=True)
    return Instances(idx, ops.start[idx], by)


# --------------------------------------------------------------------------------------------
# time axis

_UNITS = ((1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "µs"), (1, "ns"))


def nice_step(span_ns: float, max_ticks: int) -> int:
    """Tick step from the 1-2-5 series giving at most max_ticks ticks over span_ns."""
    if span_ns <= 0 or max_ticks <= 0:
        return 1
    raw = span_ns / max_ticks
    p = 10 ** math.floor(math.log10(max(raw, 1)))
    for m in (1, 2, 5, 10):
        if m * p >= raw:
            return int(m * p)
    return int(10 * p)


def ticks(t0: int, t1: int, max_ticks: int) -> tuple[np.ndarray, int]:
    """Tick times (int ns, exact on epoch clocks) at a 1-2-5 step, at most ~max_ticks of them."""
    t0, t1 = int(t0), int(t1)
    step = nice_step(t1 - t0, max_ticks)
    first = -(-t0 // step) * step
    n = max(0, (t1 - first) // step + 1)
    return np.int64(first) + step * np.arange(n, dtype=np.int64), step


def fmt_duration(ns: float) -> str:
    """Compact human duration: 1.5 s, 12.3 ms, 4.6 µs, 800 ns."""
    a = abs(ns)
    for div, unit in _UNITS:
        if a >= div or div == 1:
            v = ns / div
            if abs(v) >= 100 or div == 1:
                return f"{v:.0f} {unit}"
            if abs(v) >= 10:
                return f"{v:.1f} {unit}"
            return f"{v:.2f} {unit}"
    return f"{ns} ns"


def fmt_tick(t: int, step: int, origin: int | None, ref: float | None = None) -> str:
    """Tick label. With origin: relative ('+12.5ms'), in the unit of `ref` (the largest offset shown,
    so one axis uses one unit) with as many decimals as the step needs; else absolute seconds."""
    if origin is not None:
        rel = t - origin
        mag = max(abs(ref) if ref is not None else abs(rel), step)
        for div, unit in _UNITS:
            if mag >= div or div == 1:
                q = step / div
                dec = 0 if q >= 1 and step % div == 0 else min(9, int(math.ceil(-math.log10(q) - 1e-9)))
                return f"{rel / div:+.{dec}f}{unit}"
    dec = max(0, min(9, int(math.ceil(9 - math.log10(step))))) if step < 1_000_000_000 else 0
    t = int(t)
    sec, frac = divmod(t, 1_000_000_000)
    if dec == 0:
        return f"{sec + (1 if frac >= 500_000_000 else 0)}"
    q = 10 ** (9 - dec)
    f = (frac + q // 2) // q
    if f >= 10 ** dec:
        sec, f = sec + 1, 0
    return f"{sec}.{f:0{dec}d}"
