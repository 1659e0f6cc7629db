"""What part of a trace an analysis looks at: a time window, devices, NVTX ranges.

A GPU op is selected when it lies fully inside the window (definitions.md §8), runs on a selected
device and, with ranges, was launched from inside one of those ranges on the same thread.

One way in, used by the CLI, `export` and the TUI:

    spec = SelectionSpec.from_args(args)          # --device/--trim/--nvtx of any subcommand
    spec = SelectionSpec(device=1, window_ns=(t0, t1), label="range 1.2 ms")   # a TUI range
    spec = SelectionSpec(device=None, ranges=(4, 9), label="optimizer")        # NVTX occurrences
    spec = SelectionSpec(device=d, trim_s=(a_s, b_s))                         # = `export --trim a_s b_s`
    sel = build_selection(trace, spec)            # -> Selection (what the analyses take)
    sel = selection_from_args(trace, args)        # the same, in one call

`SelectionSpec` is frozen and hashable, so it can be compared (`spec != old`) and changed with
`dataclasses.replace(spec, device=...)`. Fields (all optional; None = not restricted):

- `device`: device number; unknown devices raise `UsageError` listing the available ones.
- `trim_s`: (A, B) seconds on the trace's own clock, validated as `--trim` (must select a GPU op).
- `window_ns`: (t0, t1) ns, taken as is (no validation): a range drawn in the TUI. Ignored when
  `trim_s` is given.
- `nvtx`: case-insensitive substring of NVTX range names (`--nvtx`); no match raises `UsageError`.
- `ranges`: explicit indices into `trace.ranges` (used instead of `nvtx` when both are given).
- `label`: what the selection is called in reports and the TUI header; defaults to what the CLI
  says ("whole trace", "A–B s", the NVTX name, "NAME in A–B s").

With ranges and no window the window spans the ranges and the GPU work they launched; with ranges
and a window, the window is the given one and the ranges still filter the ops.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from launchtui.errors import UsageError
from launchtui.trace.arrays import unique_sorted
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


@dataclass(frozen=True)
class SelectionSpec:
    """What the user asked to look at; `build_selection` turns it into a `Selection`."""
    device: int | None = None
    trim_s: tuple[float, float] | None = None
    window_ns: tuple[int, int] | None = None
    nvtx: str | None = None
    ranges: tuple[int, ...] | None = None
    label: str | None = None

    @classmethod
    def from_args(cls, args, path=None) -> SelectionSpec:
        """From the `--device`, `--trim` and `--nvtx` options (absent ones mean no restriction)."""
        dev = getattr(args, "device", None)
        trim = getattr(args, "trim", None)
        return cls(device=parse_device(dev, path), trim_s=None if not trim else (trim[0], trim[1]),
                   nvtx=getattr(args, "nvtx", None) or None)


def selection_from_args(trace: Trace, args) -> Selection:
    """`build_selection` of the `--device/--trim/--nvtx` options: what every subcommand selects."""
    return build_selection(trace, SelectionSpec.from_args(args, trace.source.path))


def parse_device(device, path=None) -> int | None:
    """`--device N|all` -> N or None (all)."""
    if device is None or str(device).lower() == "all":
        return None
    try:
        return int(device)
    except ValueError:
        raise UsageError(f"--device {device}: expected a device number or 'all'", path) from None


def build_selection(trace: Trace, spec: SelectionSpec) -> Selection:
    """The one builder of selections (see the module docstring for the rules)."""
    sel = device_selection(trace, spec.device, WHOLE)
    hits = None
    if spec.ranges is not None:
        hits = np.asarray(spec.ranges, np.int64)
        label = spec.label or "selected ranges"
        if len(hits):
            sel = range_selection(trace, hits, label, sel)
        else:
            sel = Selection(None, None, sel.devices, (), label)
    elif spec.nvtx:
        from launchtui.analysis import nvtx
        hits = nvtx.search(trace, spec.nvtx)
        if not len(hits):
            raise UsageError(f"--nvtx {spec.nvtx}: no NVTX range name contains it"
                             + ("" if len(trace.ranges) else " (the trace has no NVTX ranges)"), trace.source.path)
        sel = range_selection(trace, hits, spec.label or spec.nvtx, sel)
    if spec.trim_s is not None:
        sel = trim_selection(trace, spec.trim_s[0], spec.trim_s[1], sel)
        if hits is not None:
            what = spec.nvtx if spec.ranges is None else (spec.label or "selected ranges")
            sel = Selection(sel.t0, sel.t1, sel.devices, tuple(hits.tolist()), f"{what} in {sel.label}")
        elif spec.label:
            sel = replace(sel, label=spec.label)
    elif spec.window_ns is not None:
        t0, t1 = int(spec.window_ns[0]), int(spec.window_ns[1])
        sel = Selection(t0, t1, sel.devices, sel.ranges, spec.label or f"{fmt_s(t0)}–{fmt_s(t1)} s")
    return sel


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
    d = parse_device(device, trace.source.path)
    if d is None:
        return base.with_devices(None)
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
    calls = ops.api[matched]
    a_thread = api.thread[calls]
    a_start = api.start[calls]
    hit = np.zeros(len(calls), bool)
    r_thread = rg.thread[range_idx]
    for th in unique_sorted(r_thread):  # per thread, not per event
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
