"""Everything the TUI needs from the engine, computed off the UI thread (no Textual here).

The app calls `load()` in a thread worker and the table/stat helpers in workers after each change of
selection, so the UI thread only bins lanes for the visible window.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from launchtui.analysis.backpressure import Options
from launchtui.analysis.lanes import Lanes
from launchtui.analysis.select import WHOLE, Selection, SelectionSpec
from launchtui.trace.model import Trace


@dataclass
class Loaded:
    trace: Trace
    lanes: Lanes
    marks: list                     # backpressure episodes and spikes, time order (whole trace)
    selection: Selection            # from --trim / --device / --nvtx
    device: int | None = None       # None = all
    nvtx_hits: np.ndarray | None = None   # range indices from --nvtx
    _optimizer: tuple | None = None  # (range index, note) for O; see optimizer_range()
    timings: dict = field(default_factory=dict)
    fit_window: tuple | None = None  # the initial view: GPU activity and its launch calls
    bounds: tuple | None = None     # (trace.window(), trace.extent()) found by load(): see windows()
    clock_ns: float = 1.0           # the trace clock's tick: zoom stops at one tick per column
    spec: SelectionSpec | None = None   # what the command line asked for
    results_entry: object = None    # the model cache entry the TUI's first results are stored beside
    options: Options = Options()    # what the marks were found with
    lanes_stored: bool = False      # lanes and marks came from beside the model (tui/lanes_cache.py)
    _nvtx_summary: list | None = None

    @property
    def optimizer(self) -> tuple:
        """(range index, note) for O (optimizer_range), stored beside the model; computed on first
        use (the load worker asks for it after the view is shown, keeping its cost off the open)."""
        if self._optimizer is None:
            from launchtui.result_cache import memo
            self._optimizer = memo("tui-optimizer", (), self.results_entry, lambda: optimizer_range(self.trace))
        return self._optimizer

    def windows(self) -> tuple:
        """(trace.window(), trace.extent()): the header's GPU-op window and the timeline's time
        origin, and how far it pans. Whole-column scans, too slow for the UI thread to repeat, so
        load() finds them in its worker, or reads them stored beside the model."""
        if self.bounds is None:
            self.bounds = (self.trace.window(), self.trace.extent())
        return self.bounds

    def nvtx_summary(self) -> list:
        """NVTX range names with counts and total time (computed on first use, then kept)."""
        if self._nvtx_summary is None:
            from launchtui.analysis import nvtx
            self._nvtx_summary = nvtx.summary(self.trace)
        return self._nvtx_summary


class Throttle:
    """Batches progress callbacks: forwards at most every `interval` s, or on a new stage."""

    def __init__(self, emit, interval: float = 0.25):
        self.emit = emit
        self.interval = interval
        self.last = 0.0
        self.stage = None

    def __call__(self, stage: str, rows: int) -> None:
        now = time.monotonic()
        if stage != self.stage or now - self.last >= self.interval:
            self.stage = stage
            self.last = now
            self.emit(stage, int(rows))


def load(args, progress=None, options: Options = Options(), trace=None, defer_lanes: bool = False) -> Loaded:
    """Open the trace and precompute lanes, queue series and backpressure marks.

    `defer_lanes`: when the model came from the cache but its lanes did not (the first open after
    `report`), leave a pending placeholder (`Lanes(pending=True)`) for `build_pending_lanes`, so the
    app shows the view and computes the verdict and table while they are built (on the other core). A trace read from the file builds them here, before the verdict and
    table: their temporaries never overlap (the cold open's peak memory).

    Raises TraceError (one-line message) for unreadable traces and bad --trim/--device/--nvtx."""
    from launchtui.analysis import nvtx
    from launchtui.analysis.backpressure import backpressure, timeline_marks
    from launchtui.analysis.index import trace_index
    from launchtui.analysis.select import SelectionSpec, build_selection
    from launchtui.trace.cache import commit
    from launchtui.trace.load import open_trace

    progress = progress or (lambda stage, rows: None)
    t: dict = {}
    t0 = time.perf_counter()
    opened_here = trace is None
    if trace is None:
        # cached once the typed index exists (below), so a warm open restores it instead of rebuilding it
        trace = open_trace(args.trace, progress=progress, use_cache=not getattr(args, "no_cache", False),
                           defer_cache=True)
    t["open"] = time.perf_counter() - t0
    spec = SelectionSpec.from_args(args, trace.source.path)
    sel = build_selection(trace, spec)
    use_store = opened_here and not getattr(args, "no_cache", False)
    from launchtui import result_cache as rc
    from launchtui.tui import lanes_cache
    entry0 = rc.model_entry(args.trace) if use_store else None   # a warm open's (None before a cold one's commit)
    stored = lanes_cache.load(entry0, options, trace)
    t1 = time.perf_counter()
    if stored is not None:      # a warm open: mapped from beside the model, nothing rebuilt
        lanes, marks = stored
    elif defer_lanes and entry0 is not None and getattr(trace, "cache_entry", None) is None:
        lanes = Lanes(pending=True)     # the model came from the cache: built after the view
    else:
        progress("building timeline lanes", len(trace.ops))
        lanes = _built_lanes(trace, options)
    t["lanes"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    if stored is None:
        progress("finding backpressure", len(trace.ops))
        # `report` stores the same backpressure() beside the model: the first open after it reuses it
        bp = rc.memo(rc.BACKPRESSURE, (WHOLE, options), entry0, lambda: backpressure(trace, WHOLE, options))
        marks = timeline_marks(trace, WHOLE, options, bp=bp)
    nvtx.op_ranges(trace)
    from launchtui.tui.details import prepare as prepare_details
    prepare_details(trace)
    trace_index(trace)
    read_cold = getattr(trace, "cache_entry", None) is not None   # read from the file, not the cache
    commit(trace)   # no-op for a trace that came from the cache or is not cached
    entry = rc.model_entry(args.trace) if use_store else None
    t["marks"] = time.perf_counter() - t2
    dev = getattr(args, "device", "all")
    device = None if dev is None or str(dev).lower() == "all" else int(dev)
    hits = nvtx.search(trace, args.nvtx) if getattr(args, "nvtx", None) else None
    # stored beside the model: each reads whole columns (the fit window is a reopen's largest
    # page-ins; trace.window() and extent() would otherwise be asked on the UI thread)
    window, trace_window, extent = rc.memo("tui-windows", (), entry, lambda: (
        gpu_activity_window(trace), trace.window(), trace.extent()))
    loaded = Loaded(trace, lanes, marks, sel, device, hits, None, t,
                    fit_window=window, bounds=(trace_window, extent),
                    clock_ns=clock_tick_ns(trace), spec=spec,
                    results_entry=entry, options=options, lanes_stored=stored is not None)
    if read_cold and entry is not None:
        # a cold open holds the whole model in memory: swap the built lanes for their mapped copy
        # before the verdict and table add their temporaries (its peak; a second more of a long read)
        mapped = _store(loaded)
        if mapped is not None:
            loaded.lanes = mapped
    return loaded


def build_pending_lanes(loaded: Loaded) -> Lanes:
    """The lanes `load(defer_lanes=True)` left pending, built (off the UI thread)."""
    return _built_lanes(loaded.trace, loaded.options)


def _built_lanes(trace, options: Options) -> Lanes:
    """The timeline lanes of `trace`, their spike cells at `options`' thresholds."""
    from launchtui.analysis.lanes import build_lanes, set_spike_threshold
    lanes = build_lanes(trace)
    set_spike_threshold(lanes, options.spike_us, options.spike_factor)
    return lanes


def store_lanes(loaded: Loaded):
    """Store freshly built lanes and marks beside the model entry (after the view is shown: writing
    them takes a while on a large trace), so the next open maps them instead; and find the
    optimizer range (stored too). Returns the lanes mapped back from the file (their pages are read
    only where a frame looks, so the built arrays, as large as the model's columns, can go), or None."""
    loaded.optimizer
    return _store(loaded)


def _store(loaded: Loaded):
    if loaded.results_entry is None or loaded.lanes_stored or loaded.lanes.pending:
        return None
    from launchtui.tui import lanes_cache
    lanes_cache.store(loaded.results_entry, loaded.options, loaded.lanes, loaded.marks)
    loaded.lanes_stored = True
    mapped = lanes_cache.load(loaded.results_entry, loaded.options, loaded.trace)
    return None if mapped is None else mapped[0]


def gpu_activity_window(trace) -> tuple[int, int] | None:
    """[first start, last end] over the GPU ops and the API calls that launched them (definitions.md §T1).

    The first view fits this, not every event: a context-creation cudaMalloc of 300 ms before the
    first kernel would squeeze all kernels into a few columns. None without GPU ops."""
    ops = trace.ops
    if not len(ops):
        return trace.extent()
    lo, hi = int(ops.start.min()), int(ops.end.max())
    a = ops.api[ops.api >= 0]
    if len(a):
        lo = min(lo, int(trace.api.start[a].min()))
        hi = max(hi, int(trace.api.end[a].max()))
    return lo, hi


def clock_tick_ns(trace, sample: int = 4096) -> float:
    """The trace clock's resolution: the largest power of ten (≤ 1 µs) dividing every sampled GPU-op
    and API timestamp (Kineto JSON: 1000 ns; Nsight: 1 ns); definitions.md §T2."""
    import numpy as np
    ts = [t.start[:sample] for t in (trace.ops, trace.api) if len(t)] + \
         [t.end[:sample] for t in (trace.ops, trace.api) if len(t)]
    if not ts:
        return 1.0
    v = np.concatenate(ts).astype(np.int64)
    tick = 1000
    while tick > 1 and (v % tick).any():
        tick //= 10
    return float(tick)


def optimizer_range(trace) -> tuple[int, str]:
    """The optimizer phase for `O`: the first range whose name contains 'optim' (case-insensitive)
    that launched kernels; the first 'optim' range at all when none did; (-1, '') when absent.

    PyTorch's `Optimizer.zero_grad#…` ranges come first and usually launch no kernel (set_to_none),
    so the literal first match would show an empty table. The note says what was skipped."""
    import numpy as np

    from launchtui.analysis import nvtx
    from launchtui.analysis.select import launched_inside
    from launchtui.trace.model import OP_KERNEL
    hits = nvtx.search(trace, nvtx.OPTIMIZER_PATTERN)
    if not len(hits):
        return -1, ""
    first = int(hits[0])
    if not len(trace.ops):
        return first, ""
    is_kernel = trace.ops.kind == OP_KERNEL
    seen = set()
    for r in hits[:200].tolist():           # one candidate per distinct name, in time order
        text = int(trace.ranges.text[r])
        if text in seen:
            continue
        seen.add(text)
        if (launched_inside(trace, np.array([r], np.int64)) & is_kernel).any():
            note = "" if r == first else f" (skipped {nvtx.range_name(trace, first)}: it launched no kernels)"
            return int(r), note
    return first, " (no 'optim' range launched kernels)"


def table_rows(trace, sel: Selection, names: str = "short") -> list[dict]:
    """Every qualifying small-and-frequent kernel row (no limit), with its main NVTX phase."""
    from launchtui.analysis.launches import small_kernel_table
    rows = small_kernel_table(trace, sel, limit=0, names=names, with_phase=True)
    for r in rows:
        r.setdefault("nvtx_range", None)
        r.setdefault("nvtx_share", 0.0)
    return rows
