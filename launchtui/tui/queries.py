"""The TUI's own queries of the session (session.py): what its first open computes that no command
does. Stored like the analyses' results, so a warm open maps or unpickles them instead:

- `TimelineLanes`: the timeline's lanes and backpressure marks (MAPPED `<entry>.lanes`: their arrays
  are as large as the model's columns; tui/lanes_cache.py is their codec);
- `IdleRow`: the idle-by-cause row of one device (MAPPED `<entry>.idle<device>`);
- `Windows`, `OptimizerRange`: whole-column scans the header, the first view and `O` need;
- `TableRows`: the kernel table's rows and stats line for a selection and the verdict's settings.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from launchtui.session import MAPPED, PICKLE, Query

if TYPE_CHECKING:
    from launchtui.analysis.backpressure import Options
    from launchtui.analysis.lanes import Lanes
    from launchtui.session import Session
    from launchtui.analysis.select import SelectionSpec
    from launchtui.tui.verdict import VerdictSettings


@dataclass(frozen=True)
class TimelineLanes(Query):
    """(lanes, marks): the timeline's lanes, spike cells at `options`' thresholds, and the whole
    trace's backpressure marks found with `options`."""
    options: Options
    store: ClassVar[str] = MAPPED

    def slot(self) -> str:
        return "lanes"

    def compute(self, session):
        return build_lanes_for(session.trace, self.options), marks_for(session, self.options)

    def encode(self, value):
        from launchtui.tui.lanes_cache import encode_lanes
        return encode_lanes(value)

    def decode(self, skeleton, arrays, trace):
        from launchtui.tui.lanes_cache import decode_lanes
        return decode_lanes(skeleton, arrays, trace)


@dataclass(frozen=True)
class IdleRow(Query):
    """The idle-by-cause row of `device` for the record's iterations (idle_lane.build_idle_lane);
    one file per device, the last inputs win."""
    device: int
    starts: tuple
    ends: tuple
    base_depth: int
    options: Options
    store: ClassVar[str] = MAPPED
    memo: ClassVar[bool] = False    # the idle view holds the lane it draws

    def slot(self) -> str:
        return f"idle{self.device}"

    def compute(self, session):
        import numpy as np

        from launchtui.analysis.idle_lane import build_idle_lane
        return build_idle_lane(session.trace, self.device, np.array(self.starts, np.int64),
                               np.array(self.ends, np.int64), self.base_depth)

    def encode(self, value):
        from launchtui.tui.lanes_cache import encode_idle
        return encode_idle(value)

    def decode(self, skeleton, arrays, trace):
        from launchtui.tui.lanes_cache import decode_idle
        return decode_idle(skeleton, arrays, trace)


@dataclass(frozen=True)
class Windows(Query):
    """(GPU-activity window, trace.window(), trace.extent()): the first view, the header's GPU-op
    window and the timeline's origin and extent (each reads whole columns)."""
    store: ClassVar[str] = PICKLE

    def compute(self, session):
        tr = session.trace
        return gpu_activity_window(tr), tr.window(), tr.extent()


@dataclass(frozen=True)
class OptimizerRange(Query):
    """(range index, note) of the optimizer phase for `O` (loader.optimizer_range)."""
    store: ClassVar[str] = PICKLE

    def compute(self, session):
        return optimizer_range(session.trace)


@dataclass(frozen=True)
class TableRows(Query):
    """(rows, stats) of the kernel table for a selection, kernel names, the verdict's settings and
    its phase base (verdict.table_rows; the stats line from session.SelectionStats). Computed by
    the table worker, which shows the rows before their phases (`Session.get(..., compute=)`)."""
    spec: SelectionSpec
    names: str
    settings: VerdictSettings
    base_depth: int
    spans: tuple
    store: ClassVar[str] = PICKLE


# ---- what they compute ---------------------------------------------------------------------
def build_lanes_for(trace, options: Options) -> Lanes:
    """The timeline lanes of `trace`, their spike cells at `options`' thresholds."""
    from launchtui.analysis.lanes import build_lanes, set_spike_threshold
    lanes = build_lanes(trace)
    set_spike_threshold(lanes, options.spike_us, options.spike_factor)
    return lanes


def marks_for(session: Session, options: Options) -> list:
    """The whole trace's backpressure marks at `options` (session.Backpressure: `report` stores the
    same, so the first open after it reuses it)."""
    from launchtui.analysis.backpressure import timeline_marks
    from launchtui.analysis.select import WHOLE
    from launchtui.session import Backpressure
    bp = session.get(Backpressure(WHOLE, options))
    return timeline_marks(session.trace, WHOLE, options, bp=bp)


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
