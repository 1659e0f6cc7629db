"""What part of a trace an analysis looks at: a time window, devices, NVTX ranges.

A GPU op is selected when it lies fully inside the window (definitions.md §8), runs on a selected
device and, with ranges, was launched from inside one of those ranges on the same thread.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from launchtui.errors import UsageError
from launchtui.trace.model import Trace


@dataclass(frozen=True)
class Selection:
    t0: int | None = None            # ns, inclusive
    t1: int | None = None            # ns, inclusive
    devices: tuple[int, ...] | None = None
    ranges: tuple[int, ...] | None = None   # indices into trace.ranges
    label: str = "whole trace"

    def with_devices(self, devices):
        return Selection(self.t0, self.t1, None if devices is None else tuple(devices), self.ranges, self.label)

    def to_json(self) -> dict:
        return {"t0_ns": self.t0, "t1_ns": self.t1,
                "t0_s": None if self.t0 is None else self.t0 / 1e9,
                "t1_s": None if self.t1 is None else self.t1 / 1e9,
                "devices": None if self.devices is None else list(self.devices), "label": self.label}


WHOLE = Selection()


def seconds_to_ns(s: float) -> int:
    return int(round(float(s) * 1e9))


def fmt_s(ns: int) -> str:
    return f"{ns / 1e9:.3f}"


def trim_selection(trace: Trace, a_s: float, b_s: float, base: Selection = WHOLE) -> Selection:
    """Selection for `--trim A B` (seconds on the trace's own clock); errors name the valid window."""
    t0, t1 = seconds_to_ns(a_s), seconds_to_ns(b_s)
    window = trace.window()
    src = trace.source.path
    if window is None:
        raise UsageError(f"--trim {a_s} {b_s}: this trace has no GPU ops to select", src)
    if t1 <= t0:
        raise UsageError(f"--trim {a_s} {b_s}: the end must be after the start", src)
    sel = Selection(t0, t1, base.devices, base.ranges, f"{a_s}–{b_s} s")
    if not op_mask(trace, Selection(t0, t1)).any():
        raise UsageError(f"--trim {float(a_s):.3f} {float(b_s):.3f} selects no part of this profile, whose "
                         f"window is {fmt_s(window[0])} s to {fmt_s(window[1])} s on the capture clock. "
                         "Use a window inside that range, or omit --trim.", src)
    return sel


def device_selection(trace: Trace, device, base: Selection = WHOLE) -> Selection:
    """`--device N|all`; an unknown device is an error listing the available ones."""
    if device is None or str(device).lower() == "all":
        return base.with_devices(None)
    try:
        d = int(device)
    except ValueError:
        raise UsageError(f"--device {device}: expected a device number or 'all'", trace.source.path) from None
    counts = np.bincount(trace.ops.device[trace.ops.device >= 0]) if len(trace.ops) else np.zeros(0)
    avail = {i: int(c) for i, c in enumerate(counts) if c}
    if d not in avail:
        listing = ", ".join(f"{k} ({v} GPU ops)" for k, v in avail.items()) or "none (no GPU ops)"
        raise UsageError(f"--device {d}: no such device in this trace; available: {listing}", trace.source.path)
    return base.with_devices((d,))


def op_mask(trace: Trace, sel: Selection) -> np.ndarray:
    ops = trace.ops
    m = np.ones(len(ops), bool)
    if sel.t0 is not None:
        m &= ops.start >= sel.t0
    if sel.t1 is not None:
        m &= ops.end <= sel.t1
    if sel.devices is not None:
        m &= np.isin(ops.device, np.asarray(sel.devices))
    if sel.ranges is not None:
        m &= launched_inside(trace, np.asarray(sel.ranges, np.int64))
    return m


def launched_inside(trace: Trace, range_idx: np.ndarray) -> np.ndarray:
    """Ops whose launch call starts inside any of the given ranges on the same thread."""
    ops, api, rg = trace.ops, trace.api, trace.ranges
    out = np.zeros(len(ops), bool)
    matched = ops.api >= 0
    if not len(range_idx) or not matched.any():
        return out
    a = ops.api[matched]
    a_thread = api.thread[a]
    a_start = api.start[a]
    hit = np.zeros(len(a), bool)
    r_thread = rg.thread[range_idx]
    for th in np.unique(r_thread):  # per thread, not per event
        sel = range_idx[r_thread == th]
        s, e = _merge(rg.start[sel], rg.end[sel])
        on = a_thread == th
        pos = np.searchsorted(s, a_start[on], side="right") - 1
        inside = (pos >= 0) & (a_start[on] < e[np.maximum(pos, 0)])
        hit[np.nonzero(on)[0][inside]] = True
    out[np.nonzero(matched)[0][hit]] = True
    return out


def _merge(start: np.ndarray, end: np.ndarray):
    """Union of intervals as sorted disjoint [s, e)."""
    o = np.argsort(start, kind="stable")
    s, e = start[o], end[o]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] >= run_end[:-1]
    idx = np.nonzero(new)[0]
    ends = np.append(run_end[idx[1:] - 1], run_end[-1]) if len(idx) else np.zeros(0, np.int64)
    return s[idx], ends


def range_selection(trace: Trace, range_idx, label: str, base: Selection = WHOLE) -> Selection:
    """Restrict to ops launched inside these ranges; the window spans the ranges and their GPU work."""
    range_idx = np.asarray(range_idx, np.int64)
    if not len(range_idx):
        raise UsageError(f"no NVTX range matches {label!r}", trace.source.path)
    tmp = Selection(None, None, base.devices, tuple(range_idx.tolist()), label)
    m = op_mask(trace, tmp)
    t0 = int(trace.ranges.start[range_idx].min())
    t1 = int(max(trace.ranges.end[range_idx].max(), trace.ops.end[m].max() if m.any() else 0))
    return Selection(t0, t1, base.devices, tuple(range_idx.tolist()), label)


def time_window(sel: Selection, trace: Trace) -> tuple[int, int] | None:
    """The window an analysis over time (queue depth) covers: the selection, else the trace extent."""
    ext = trace.extent()
    if ext is None:
        return None
    return (ext[0] if sel.t0 is None else sel.t0, ext[1] if sel.t1 is None else sel.t1)
