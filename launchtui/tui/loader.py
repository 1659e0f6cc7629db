"""Everything the TUI needs from the engine, computed off the UI thread (no Textual here).

The app calls `load()` in a thread worker and the table/stat helpers in workers after each change of
selection, so the UI thread only bins lanes for the visible window.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from launchtui import heap
from launchtui.analysis.backpressure import Options
from launchtui.analysis.lanes import Lanes
from launchtui.analysis.select import Selection, SelectionSpec
from launchtui.session import MISS, Session
from launchtui.tui.queries import build_lanes_for, marks_for
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
    session: Session | None = None  # the trace's results (session.py): the TUI's workers ask it
    options: Options = Options()    # what the marks were found with
    lanes_stored: bool = False      # lanes and marks came from beside the model (queries.TimelineLanes)
    graph_join: tuple | None = None  # --capture: (GraphJoin, source per op): tui/capture_view.py
    read_cold: bool = False         # the model was read from the file (nothing stored beside it yet)
    _nvtx_summary: list | None = None

    def __post_init__(self) -> None:
        if self.session is None:
            self.session = Session(self.trace)

    @property
    def optimizer(self) -> tuple:
        """(range index, note) for O (optimizer_range), stored beside the model; computed on first
        use (the load worker asks for it after the view is shown, off the open)."""
        from launchtui.tui.queries import OptimizerRange
        return self.session.get(OptimizerRange())

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
    from launchtui.analysis.select import SelectionSpec, build_selection
    from launchtui.session import Index
    from launchtui.tui.queries import TimelineLanes, Windows

    progress = progress or (lambda stage, rows: None)
    t: dict = {}
    t0 = time.perf_counter()
    if trace is None:   # a warm open's model entry exists; a cold one's after commit
        session = Session.open(args.trace, progress, use_cache=not getattr(args, "no_cache", False))
    else:
        session = Session(trace)    # injected: nothing stored
    trace = session.trace
    t["open"] = time.perf_counter() - t0
    spec = SelectionSpec.from_args(args, trace.source.path)
    sel = build_selection(trace, spec)
    session.get(Index())        # mapped from beside the model entry when stored, before any analysis
    heap.recycle_large_blocks()  # the model and index are built (a no-op but in the policy's owner)
    stored = session.peek(TimelineLanes(options))
    t1 = time.perf_counter()
    if stored is not MISS:      # a warm open: mapped from beside the model, nothing rebuilt
        lanes, marks = stored
    elif defer_lanes and session.entry is not None and not session.fresh:
        lanes = Lanes(pending=True)     # the model came from the cache: built after the view
    else:
        progress("building timeline lanes and finding backpressure", len(trace.ops))
        lanes, marks = _lanes_beside_marks(session, options)
    t["lanes"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    if stored is MISS and lanes.pending:
        progress("finding backpressure", len(trace.ops))
        marks = marks_for(session, options)
    nvtx.op_ranges(trace)
    from launchtui.tui.details import prepare as prepare_details
    prepare_details(trace)
    read_cold = session.fresh    # read from the file, not the cache
    session.commit()   # the model (when read afresh) and, beside it, the index
    t["marks"] = time.perf_counter() - t2
    dev = getattr(args, "device", "all")
    device = None if dev is None or str(dev).lower() == "all" else int(dev)
    hits = nvtx.search(trace, args.nvtx) if getattr(args, "nvtx", None) else None
    # stored beside the model: each reads whole columns (a reopen's largest page-ins), asked here,
    # off the UI thread
    window, trace_window, extent = session.get(Windows())
    loaded = Loaded(trace, lanes, marks, sel, device, hits, None, t,
                    fit_window=window, bounds=(trace_window, extent),
                    clock_ns=clock_tick_ns(trace), spec=spec,
                    session=session, options=options, lanes_stored=stored is not MISS,
                    read_cold=read_cold or session.entry is None)
    if read_cold and session.entry is not None:
        # a cold open holds the whole model in memory: swap the built lanes for their mapped copy
        # before the verdict and table add their temporaries (its peak)
        mapped = _store(loaded)
        if mapped is not None:
            loaded.lanes = mapped
    return loaded


def _lanes_beside_marks(session: Session, options: Options) -> tuple:
    """(lanes, marks) of a trace read afresh, the marks found in a second thread while the lanes
    are built: both are numpy passes over the index (asked before), which release the GIL in their
    big operations, and the view waits for both (the cold open's time to interactive, §T10)."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(1, thread_name_prefix="marks") as pool:
        marks = pool.submit(marks_for, session, options)
        lanes = build_lanes_for(session.trace, options)
        return lanes, marks.result()


def build_pending_lanes(loaded: Loaded) -> Lanes:
    """The lanes `load(defer_lanes=True)` left pending, built (off the UI thread)."""
    return build_lanes_for(loaded.trace, loaded.options)


def store_lanes(loaded: Loaded):
    """Store freshly built lanes and marks beside the model entry (after the view is shown: writing
    them takes a while on a large trace), so the next open maps them instead; and find the
    optimizer range (stored too). Returns the lanes mapped back from the file (their pages are read
    only where a frame looks, so the built arrays can go), or None."""
    loaded.optimizer
    return _store(loaded)


def _store(loaded: Loaded):
    if loaded.session.entry is None or loaded.lanes_stored or loaded.lanes.pending:
        return None
    from launchtui.tui.queries import TimelineLanes
    built = (loaded.lanes, loaded.marks)
    kept = loaded.session.put(TimelineLanes(loaded.options), built, remap=True)
    loaded.lanes_stored = True
    return None if kept is built else kept[0]


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


def table_rows(trace, sel: Selection, names: str = "short") -> list[dict]:
    """Every qualifying small-and-frequent kernel row (no limit), with its main NVTX phase."""
    from launchtui.analysis.launches import small_kernel_table
    rows = small_kernel_table(trace, sel, limit=0, names=names, with_phase=True)
    for r in rows:
        r.setdefault("nvtx_range", None)
        r.setdefault("nvtx_share", 0.0)
    return rows
