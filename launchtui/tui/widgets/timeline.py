"""The timeline: one time axis for NVTX, CUDA API, CUDA HW and queue-depth rows (Line API).

Each row is binned per frame by `launchtui.tui.lane_view` (searchsorted over width + 1 edges), turned
into a few run-length segments, and cached in a strip LRU keyed by the binning. The cursor and the
selected range are drawn over cached strips, so moving them costs no rebinning.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from rich.segment import Segment
from textual.binding import Binding
from textual.geometry import Region
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from launchtui.analysis.config import CONFIG
from launchtui.tui import format as tfmt
from launchtui.tui import lane_view as lanes_fn
from launchtui.tui.messages import CursorMoved
from launchtui.tui.state import View, elide
from launchtui.tui.widgets import idle_row
from launchtui.tui.widgets.timeline_style import (
    PLAIN, S_TICK, S_RULER, S_DIM, STYLES, CURSOR_STYLE, SELECT_STYLE, LABEL_STYLE, LABEL_SEL_STYLE,
    LABEL_DEV_STYLE, LABEL_WARN_STYLE)
from launchtui.tui.widgets.timeline_style import AXIS_ROWS, GUTTER, LEGEND, legend  # noqa: F401 (re-exported)
from launchtui.tui.widgets.timeline_render import TimelineRender


@dataclass
class Row:
    kind: str            # nvtx | dev | api | idle | hw | queue | note
    lane: object
    label: str
    device: int | None = None

    @property
    def key(self) -> tuple:
        return self.lane.key if self.lane is not None else (self.kind, self.label)


# ---------------------------------------------------------------------------------------------

class Timeline(TimelineRender, Widget, can_focus=True):
    """Rows of one trace on one time axis, centred on the time cursor."""

    BINDINGS = [
        Binding("j,down", "row_down", "Next row", id="timeline.row_down", show=False),
        Binding("k,up", "row_up", "Previous row", id="timeline.row_up", show=False),
    ]

    DEFAULT_CSS = """
    Timeline { height: 1fr; min-height: 6; }
    Timeline:focus { background: $surface; }
    """

    # View state: assigning one repaints the timeline (and rebuilds rows for `device`).
    device: reactive[int | None] = reactive(None, init=False)
    relative: reactive[bool] = reactive(False, init=False)
    sel_range: reactive[tuple[int, int] | None] = reactive(None, init=False)
    pending_mark: reactive[int | None] = reactive(None, init=False)
    highlight: reactive[lanes_fn.Instances | None] = reactive(None, init=False, always_update=True)

    def __init__(self, trace, lanes, marks, *, threshold: int = CONFIG.queue_threshold, full: int = CONFIG.queue_full,
                 fit_window: tuple[int, int] | None = None, min_ns_per_col: float = 1.0,
                 windows: tuple | None = None, **kw):
        super().__init__(**kw)
        self.trace = trace
        self.lanes = lanes
        self.marks = marks
        self.threshold = threshold
        self.full = full
        # `windows`: (trace.window(), trace.extent()) computed off the UI thread (whole-column scans)
        w, ext = windows if windows is not None else (trace.window(), trace.extent())
        ext = ext or (0, 1_000_000_000)
        self.extent = ext                                   # every timed event: how far one may pan
        self.fit_window = fit_window or w or ext            # GPU activity and its launches: `0`
        self.view = View(lo=ext[0], hi=ext[1], min_ns_per_col=min_ns_per_col)
        self.view.fit(*self.fit_window)
        self.origin_ns = w[0] if w else ext[0]
        self.highlight_gen = 0
        self.selected = 0
        self.row_offset = 0
        # True until the user moves or scrolls: the offset is then the one a fresh layout at the
        # current height gives, whatever order the rows and the panel's height arrived in
        self.fresh_layout = True
        self._synced_size = None
        self._cache: OrderedDict = OrderedDict()
        self._edges_key = None
        self._edges = None
        self.rows: list[Row] = []
        self._marks_cache = {}
        self.iteration_marks = np.zeros(0, np.int64)   # iteration boundaries (ns), set by the verdict panel
        self.stall_apis: dict = {}                      # spikes not blocked: API index -> words (§V3)
        self.idle = None             # analysis.idle_lane.IdleLane of the record's device (its idle row)
        self.on_change = None        # called synchronously when the cursor row changes (else a message)
        self.build_rows()
        self.selected = self._first_data_row()

    def watch_device(self) -> None:
        self.build_rows()

    def watch_highlight(self) -> None:
        self.highlight_gen += 1

    # ---- rows ----------------------------------------------------------------------------
    def build_rows(self) -> None:
        tr, lanes = self.trace, self.lanes
        rows: list[Row] = []
        th = tr.threads
        for lane in lanes.nvtx:
            tid = int(th.tid[lane.thread]) if lane.thread < len(th) else lane.thread
            rows.append(Row("nvtx", lane, f"nvtx {tid}:{lane.depth}"))
        devices = lanes.devices if self.device is None else [d for d in lanes.devices if d == self.device]
        for d in devices:
            name = tr.devices.get(d, "")
            title = "no GPU ops" if d < 0 else f"GPU {d}" + (f" · {name}" if name and name != f"GPU {d}" else "")
            rows.append(Row("dev", None, title, d))
            if self.idle is not None and self.idle.device == d:   # the device's summary, under its title
                rows.append(Row("idle", self.idle, idle_row.LABEL, d))
            for lane in lanes.api.get(d, []):
                tid = int(th.tid[lane.thread]) if lane.thread < len(th) else lane.thread
                rows.append(Row("api", lane, f"API  {tid}", d))
            for lane in lanes.hw.get(d, []):
                rows.append(Row("hw", lane, f"HW   s{lane.stream}", d))
                q = lanes.queue.get((d, lane.stream))
                if q is not None:
                    rows.append(Row("queue", q, f"queue s{lane.stream}", d))
        if lanes.pending:
            rows = [Row("note", None, "(building the timeline lanes…)")]
        elif not any(r.kind in ("api", "hw") for r in rows):
            rows.append(Row("note", None, "(no GPU ops or CUDA launch calls to draw)"))
        self.rows = rows
        self.selected = min(self.selected, len(rows) - 1)
        if rows[self.selected].kind in ("dev", "note"):
            self.selected = self._first_data_row()
        self.row_offset = 0
        self._ensure_row_visible()

    def use_lanes(self, lanes, first: bool = False) -> None:
        """The same lanes from another source (mapped from the cache): rows, cursor and strips stay;
        `first`: the lanes that were pending (rows and the cursor row as a fresh timeline's)."""
        sel, off = self.selected, self.row_offset
        self.lanes = lanes
        if first:
            self._cache.clear()
            self.selected = 0
            self.build_rows()
            self.selected = self._first_data_row()
            self._ensure_row_visible()
        else:
            self.build_rows()
            self.selected, self.row_offset = sel, off
        self.refresh()

    def set_idle(self, lane) -> None:
        """Draw the idle row of `lane` (None: none). The cursor stays on its row and the rows scroll
        as a fresh layout would (the same screen whether the row or the lanes came first)."""
        key = self.current_row.key if self.rows else None
        self.idle = lane
        for k in [k for k in self._cache if k[0][0] == "idle"]:    # strips of the row it replaces
            del self._cache[k]
        self.build_rows()
        keys = [r.key for r in self.rows]
        if key in keys and self.rows[keys.index(key)].kind not in ("dev", "note"):
            self.selected = keys.index(key)
        if self.fresh_layout:       # else the view the user (or a jump) placed stays where it was
            self.row_offset = 0
        self._ensure_row_visible()
        self.refresh()

    def _first_data_row(self) -> int:
        for i, r in enumerate(self.rows):
            if r.kind in ("hw",):
                return i
        for i, r in enumerate(self.rows):
            if r.kind not in ("dev", "note"):
                return i
        return 0

    def row_index(self, kind: str, device: int | None = None, key=None) -> int:
        for i, r in enumerate(self.rows):
            if r.kind == kind and (device is None or r.device == device) and (key is None or r.key == key):
                return i
        return -1

    @property
    def current_row(self) -> Row:
        return self.rows[self.selected]

    @property
    def content_height(self) -> int:
        """Lines for rows: the widget less the axis, less one for the "more rows below" hint when the
        rows do not all fit."""
        h = max(1, self.size.height - AXIS_ROWS)
        return h - 1 if len(self.rows) > h and h > 1 else h

    def _max_offset(self) -> int:
        return max(0, len(self.rows) - self.content_height)

    def _ensure_row_visible(self) -> None:
        if self.size.height <= AXIS_ROWS:
            return
        h = self.content_height
        self.row_offset = max(0, min(self.row_offset, self._max_offset()))
        if self.selected < self.row_offset:
            self.row_offset = max(0, self.selected - 1)
        elif self.selected >= self.row_offset + h:
            # scroll with context: the rows around the selected one (API above, queue below)
            self.row_offset = max(0, min(self.selected - h // 2, self._max_offset()))

    def _sync_size(self) -> None:
        """Recompute the layout for the current size (idempotent): plot width, and the rows shown so the
        selected row stays on screen and no blank lines sit below rows scrolled out of view."""
        size = (self.size.width, self.size.height)
        if size != self._synced_size:
            self._synced_size = size
            self.view.resize(max(1, size[0] - GUTTER))
            if self.fresh_layout:
                self.row_offset = 0
            self._ensure_row_visible()

    def select_row(self, i: int) -> None:
        if not self.rows:
            return
        i = max(0, min(len(self.rows) - 1, i))
        self.fresh_layout = False
        old, old_off = self.selected, self.row_offset
        self.selected = i
        self._ensure_row_visible()
        if self.row_offset != old_off:
            self.refresh()
        else:
            for r in (old, i):
                self.refresh(Region(0, AXIS_ROWS + r - self.row_offset, GUTTER, 1))
        self._notify_moved()

    def _notify_moved(self) -> None:
        if self.on_change is not None:
            self.on_change()
        else:
            self.post_message(CursorMoved())

    def action_row_down(self) -> None:
        i = self.selected + 1
        while i < len(self.rows) - 1 and self.rows[i].kind == "dev":
            i += 1
        self.select_row(i)

    def action_row_up(self) -> None:
        i = self.selected - 1
        while i > 0 and self.rows[i].kind == "dev":
            i -= 1
        self.select_row(i)

    def on_mouse_scroll_down(self, event) -> None:
        self._scroll_rows(3)

    def on_mouse_scroll_up(self, event) -> None:
        self._scroll_rows(-3)

    def _scroll_rows(self, n: int) -> None:
        top = max(0, min(self.row_offset + n, self._max_offset()))
        self.fresh_layout = False
        if top != self.row_offset:
            self.row_offset = top
            self.refresh()

    # ---- view changes (the screen's keys call these) ----------------------------------------
    def on_resize(self, event) -> None:
        self._sync_size()
        self.refresh()
        self.post_message(CursorMoved())

    def _moved(self) -> None:
        """The time cursor or zoom changed: repaint, and refresh the details in the same frame."""
        self.refresh()
        self._notify_moved()

    def pan(self, cols: float) -> None:
        self.view.pan(cols)
        self._moved()

    def page(self, direction: int) -> None:
        self.view.pan(direction * self.view.width * 0.75)
        self._moved()

    def zoom(self, factor: float) -> None:
        self.view.zoom(factor)
        self._moved()

    def fit(self, lo: int | None = None, hi: int | None = None, margin: float = 0.02) -> None:
        """Fit [lo, hi], by default the GPU activity and its launch calls."""
        if lo is None or hi is None:
            lo, hi = self.fit_window
        self.view.fit(lo, hi, margin=margin)
        self._moved()

    def goto(self, t: int) -> None:
        self.view.goto(t)
        self._moved()

    # ---- binning -----------------------------------------------------------------------------
    def edges(self) -> np.ndarray:
        k = self.view.key()
        if k != self._edges_key:
            self._edges_key = k
            self._edges = lanes_fn.bin_edges(self.view.start, self.view.ns_per_col, self.view.width)
        return self._edges

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        self._sync_size()
        if y < AXIS_ROWS:
            top, ruler = self._axis_strips()
            if y == 0:
                mode = "rel" if self.relative else "abs"
                lab = Strip([Segment(f"time ({mode})".ljust(GUTTER)[:GUTTER], STYLES[S_TICK])], GUTTER)
                return Strip.join([lab, top])
            lab = Strip([Segment(tfmt.fmt_duration(self.view.ns_per_col).rjust(GUTTER - 4)[:GUTTER - 4] + "/col",
                                 STYLES[S_RULER])], GUTTER)
            return Strip.join([lab, ruler])
        r = self.row_offset + y - AXIS_ROWS
        if y - AXIS_ROWS == self.content_height and len(self.rows) > self.content_height:
            return self._more_rows(r, width)
        if r >= len(self.rows):
            return Strip.blank(width, PLAIN)
        row = self.rows[r]
        if row.kind == "dev":      # the device's whole name across the row: never cut in the gutter
            text = elide(f"━ {row.label} ", width - 1)
            return Strip([Segment(text.ljust(width, "━"), LABEL_DEV_STYLE)], width)
        plot = self._row_strip(row)
        plot = self._overlay(plot, row)
        return Strip.join([self._label(row, r), plot])

    def _more_rows(self, r: int, width: int) -> Strip:
        """The last line when rows do not fit: how many rows are above and below, and which GPUs the
        rows below belong to."""
        rest = self.rows[r:]
        devs = sorted({x.device for x in rest if x.device is not None and x.device >= 0})
        gpus = f" (GPU {', '.join(map(str, devs))})" if devs else ""
        parts = []
        if self.row_offset:
            parts.append(f"↑ {self.row_offset} row{'s' if self.row_offset != 1 else ''} above")
        if rest:
            parts.append(f"↓ {len(rest)} more row{'s' if len(rest) != 1 else ''} below{gpus}")
        text = " · ".join(parts)
        for how in (": j / k or wheel scroll, d one GPU", ": j / k scroll", ""):   # the counts come first
            if len(text) + len(how) <= width:
                text += how
                break
        return Strip([Segment(elide(text, width).ljust(width), STYLES[S_DIM])], width)

    def _label(self, row: Row, r: int) -> Strip:
        text = row.label
        style = LABEL_STYLE
        if row.kind == "queue":
            edges = self.edges()
            lo_hi = np.array([edges[0], edges[-1]], np.int64)
            peak = int(row.lane.bin_max(lo_hi)[0])
            mark = "!" if peak >= self.threshold else " "
            text = f"q s{row.lane.stream}"
            num = f"{peak}{mark}"
            room = GUTTER - 1 - len(num) - (1 if r == self.selected else 0)
            text = text.ljust(room)[:room] + num
            if peak >= self.threshold and r != self.selected:
                style = LABEL_WARN_STYLE
        if r == self.selected:
            style = LABEL_SEL_STYLE
            text = ("▶" + text)
        return Strip([Segment(text.ljust(GUTTER)[:GUTTER - 1] + " ", style)], GUTTER)

    def _overlay(self, plot: Strip, row: Row) -> Strip:
        v = self.view
        w = v.width
        parts = []
        if self.sel_range is not None and row.kind != "dev":
            a = max(0, v.col_of(self.sel_range[0]))
            b = min(w, v.col_of(self.sel_range[1]) + 1)
            if b > a:
                plot = Strip.join([plot.crop(0, a), plot.crop(a, b).apply_style(SELECT_STYLE), plot.crop(b, w)])
        c = v.cursor_col
        if 0 <= c < w:
            parts = [plot.crop(0, c), plot.crop(c, c + 1).apply_style(CURSOR_STYLE), plot.crop(c + 1, w)]
            plot = Strip.join(parts)
        return plot

    # ---- lookups for details ---------------------------------------------------------------------
    def cursor_cell(self) -> tuple[int, int]:
        t0 = int(self.view.cursor)
        return t0, int(t0 + max(self.view.ns_per_col, 1))
