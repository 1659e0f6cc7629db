"""The timeline's view over the lanes (analysis/lanes.py): per-frame cells, lookups at the cursor,
and the instances of one kernel that `n` / `N` step through.

A frame evaluates each visible lane over ``width + 1`` bin edges with ``np.searchsorted`` and prefix
sums, so its cost is O(width · log N) and does not depend on how many events the window holds. No
per-event Python loop runs on a per-frame path. Pure numpy: no Textual.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from launchtui.analysis.intervals import Intervals
from launchtui.analysis.lanes import ApiLane, HwLane, NvtxLane
from launchtui.trace.model import Trace

LEVELS = 8  # occupancy / density quantisation (eighths)


def bin_edges(start: int, ns_per_col: float, width: int) -> np.ndarray:
    """``width + 1`` int64 edges; bin i is [edges[i], edges[i+1]). `start` is an int so epoch-ns
    clocks (~1.7e18, beyond float64's exact integers) stay exact; only the offsets are floats."""
    off = np.floor(ns_per_col * np.arange(width + 1, dtype=np.float64)).astype(np.int64)
    return np.int64(int(start)) + off


# --------------------------------------------------------------------------------------------
# per-frame evaluation (O(width · log N))

@dataclass
class ApiCells:
    level: np.ndarray      # 0..8: eighths of the cell's time spent in launch calls (≥1 when any)
    count: np.ndarray      # launch calls starting in the cell
    max_ns: np.ndarray     # longest cudaLaunch* call starting in the cell
    spike: np.ndarray      # max_ns > the lane's spike threshold


def api_cells(lane: ApiLane, edges: np.ndarray) -> ApiCells:
    lo = lane.ev.n_start(edges[:-1])
    hi = lane.ev.n_start(edges[1:])
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
    lo = lane.ev.n_start(edges[:-1])
    hi = lane.ev.n_start(edges[1:])
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
    ev = lane.ev
    if not len(ev):
        return -1
    i = int(ev.n_start(np.int64(t0), "right")) - 1
    if i >= 0 and ev.end_at(i) > t0:
        return int(ev.idx[i])
    j = i + 1
    if j < len(ev) and ev.start_at(j) < t1:
        return int(ev.idx[j])
    return -1


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
    by_api_lane: dict = field(default_factory=dict)   # (device, thread) -> Intervals of their launch calls

    def __len__(self) -> int:
        return len(self.ops)

    def next_after(self, t: int) -> int:
        """Position of the first instance starting after t (wraps to -1 when none)."""
        i = int(np.searchsorted(self.start, t, side="right"))
        return i if i < len(self.start) else -1

    def prev_before(self, t: int) -> int:
        i = int(np.searchsorted(self.start, t, side="left")) - 1
        return i


def _group_bounds(keys_sorted: np.ndarray):
    if not len(keys_sorted):
        return []
    cut = np.nonzero(keys_sorted[1:] != keys_sorted[:-1])[0] + 1
    b = np.concatenate([[0], cut, [len(keys_sorted)]])
    return list(zip(b[:-1].tolist(), b[1:].tolist()))


def _intervals_by(key_hi: np.ndarray, key_lo: np.ndarray, start: np.ndarray, end: np.ndarray) -> dict:
    """(hi, lo) -> Intervals of the rows with that key pair; rows in start order stay so."""
    out = {}
    if not len(start):
        return out
    skey = key_hi.astype(np.int64) * (1 << 40) + key_lo
    order = np.argsort(skey, kind="stable")
    ks = skey[order]
    for a, b in _group_bounds(ks):    # one iteration per lane
        ii = order[a:b]
        out[(int(ks[a] >> 40), int(ks[a] & ((1 << 40) - 1)))] = Intervals(start[ii], end[ii], presorted=True)
    return out


def op_instances(trace: Trace, idx: np.ndarray, with_api: bool = False) -> Instances:
    """Instances of the GPU ops `idx` (sorted): their HW-row intervals and, with `with_api`, the
    launch calls that enqueued them, per API row (device of the op, launching thread)."""
    ops = trace.ops
    idx = np.asarray(idx, np.int64)
    by = _intervals_by(ops.device[idx], ops.stream[idx], ops.start[idx], ops.end[idx])
    api_by = {}
    if with_api and len(idx):
        a = ops.api[idx]
        ok = a >= 0
        a, dev = a[ok], ops.device[idx][ok]
        order = np.argsort(trace.api.start[a], kind="stable")
        a, dev = a[order], dev[order]
        api_by = _intervals_by(dev, trace.api.thread[a], trace.api.start[a], trace.api.end[a])
    return Instances(idx, ops.start[idx], by, api_by)


def kernel_instances(trace: Trace, name_ids: np.ndarray, name_id: int, device: int | None) -> Instances:
    ops = trace.ops
    m = name_ids == name_id
    if device is not None:
        m &= ops.device == device
    return op_instances(trace, np.nonzero(m)[0])
