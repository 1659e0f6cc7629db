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
from rich.style import Style
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

PLAIN = Style()   # every segment carries a Style: Textual's NO_COLOR filter fails on None

GUTTER = 16
AXIS_ROWS = 2
CACHE_SIZE = 512

# ---------------------------------------------------------------------------------------------
# glyphs: meaning is carried by the symbol as well as the colour (NO_COLOR, monochrome terminals)

BLOCKS = np.array(list(" ▁▂▃▄▅▆▇█"))
BRAILLE = np.array(list(" ⡀⡄⡆⡇⣇⣧⣷⣿"))     # small kernels: dotted
SHADES = np.array(list(" ░░▒▒▓▓██"))       # NCCL
MEMS = np.array(list(" ╌╌╌╌════"))         # memcpy / memset
HW_GLYPHS = np.stack([BLOCKS, BRAILLE, SHADES, MEMS])   # [category, level]
SPARK = np.array(list(" ▁▂▃▄▅▆▇"))
HIGHLIGHT_GLYPH = "◆"
SPIKE_GLYPH = "!"
FULL_GLYPH = "█"                            # queue at or above the threshold (sparkline tops at ▇)

# style codes -> Rich styles (colours chosen to survive 256-colour down-sampling)
S_NONE, S_API, S_SPIKE, S_KERNEL, S_SMALL, S_NCCL, S_MEM, S_HIGHLIGHT, S_QUEUE, S_QFULL, \
    S_TICK, S_RULER, S_EP_FULL, S_EP_NEAR, S_EP_SPIKE, S_SEL, S_MARK, S_DEV, S_DIM, S_MULTI = range(20)
S_NVTX0 = 20
NVTX_BG = ("#303a6e", "#2e5a3a", "#6a3434", "#2f5866", "#5e5a2c", "#553266")
STYLES = [
    Style(),
    Style(color="#5fafff"),
    Style(color="#ffffff", bgcolor="#af0000", bold=True),
    Style(color="#5fd75f"),
    Style(color="#ffd75f"),
    Style(color="#d787d7"),
    Style(color="#5fd7d7"),
    Style(color="#ffffff", bgcolor="#870087", bold=True),
    Style(color="#87afd7"),
    Style(color="#ff3030", bold=True),
    Style(color="#bcbcbc"),
    Style(color="#6c6c6c"),
    Style(color="#ff3030", bold=True),
    Style(color="#ffaf00", bold=True),
    Style(color="#ff8700", bold=True),
    Style(color="#00d7ff", bold=True),
    Style(color="#00d7ff", bold=True),
    Style(color="#ffffff", bold=True),
    Style(color="#6c6c6c", italic=True),
    Style(color="#8a8a8a"),
] + [Style(color="#ffffff", bgcolor=c) for c in NVTX_BG]
HW_STYLE = np.array([S_KERNEL, S_SMALL, S_NCCL, S_MEM], np.int16)
CURSOR_STYLE = Style(reverse=True)
SELECT_STYLE = Style(bgcolor="#1c3a4a")
LABEL_STYLE = Style(color="#d0d0d0")
LABEL_SEL_STYLE = Style(color="#000000", bgcolor="#d0d0d0", bold=True)
LABEL_DEV_STYLE = Style(color="#ffffff", bold=True)
LABEL_WARN_STYLE = Style(color="#ff3030", bold=True)

def legend(cfg=CONFIG, idle: bool = False, first: str | None = None) -> str:
    """The glyph legend, with the thresholds of the analysis config; `idle`: with the idle row's
    entry; `first`: the row kind whose entry leads (the cursor's row: the line is cut at the width)."""
    parts = {"hw": f"HW █ kernel ⣿ small<{cfg.small_kernel_ns / 1000:g}µs ▓ NCCL ═ mem ◆ chosen",
             "idle": idle_row.legend_entry() if idle else "",
             "api": "API █ busy launching ! spike", "queue": f"queue ▁▇ pending █ ≥{cfg.queue_threshold}",
             "axis": "axis ━ episode ▲ blocked/spike △ not blocked ╎ iteration"}
    order = sorted(parts, key=lambda k: k != first)     # stable: the others keep their order
    return " │ ".join(parts[k] for k in order if parts[k])


LEGEND = legend()


def cells_to_strip(text: str, codes: np.ndarray, styles=STYLES) -> Strip:
    """Run-length encode equal style codes into segments (one Python step per run, not per cell)."""
    n = len(codes)
    if not n:
        return Strip([], 0)
    cut = np.nonzero(codes[1:] != codes[:-1])[0] + 1
    bounds = [0, *cut.tolist(), n]
    segs = [Segment(text[a:b], styles[int(codes[a])]) for a, b in zip(bounds[:-1], bounds[1:])]
    return Strip(segs, n)


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

class Timeline(Widget, can_focus=True):
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

    def _row_strip(self, row: Row) -> Strip:
        hl = self.highlight_gen if row.kind in ("hw", "api") else 0
        key = (row.key, self.view.key(), hl)
        s = self._cache.get(key)
        if s is not None:
            self._cache.move_to_end(key)
            return s
        s = self._render_row(row, self.edges())
        self._cache[key] = s
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return s

    def _render_row(self, row: Row, edges: np.ndarray) -> Strip:
        w = len(edges) - 1
        if row.kind == "api":
            c = lanes_fn.api_cells(row.lane, edges)
            glyph = BLOCKS[c.level]
            codes = np.where(c.level > 0, S_API, S_NONE).astype(np.int16)
            if c.spike.any():
                glyph = np.where(c.spike, SPIKE_GLYPH, glyph)
                codes[c.spike] = S_SPIKE
            calls = self.highlight.by_api_lane.get((row.lane.device, row.lane.thread)) if self.highlight else None
            if calls is not None:   # the launch calls of the highlighted ops (a call site's launches)
                hit = calls.any(edges)
                if hit.any():
                    glyph = np.where(hit, HIGHLIGHT_GLYPH, glyph)
                    codes[hit] = S_HIGHLIGHT
            return cells_to_strip("".join(glyph.tolist()), codes)
        if row.kind == "hw":
            c = lanes_fn.hw_cells(row.lane, edges)
            glyph = HW_GLYPHS[c.cat, c.level]
            codes = np.where(c.level > 0, HW_STYLE[c.cat], S_NONE).astype(np.int16)
            inst = self.highlight.by_stream.get((row.lane.device, row.lane.stream)) if self.highlight else None
            if inst is not None:
                hit = inst.any(edges)
                if hit.any():
                    glyph = np.where(hit, HIGHLIGHT_GLYPH, glyph)
                    codes[hit] = S_HIGHLIGHT
            return cells_to_strip("".join(glyph.tolist()), codes)
        if row.kind == "idle":
            text, codes = idle_row.cells(row.lane, edges)
            return cells_to_strip(text, codes, idle_row.STYLES)
        if row.kind == "queue":
            lane = row.lane
            v = lane.bin_max(edges)
            scale = self.threshold if lane.peak >= self.threshold else max(lane.peak, 1)
            lv = np.clip(np.ceil(v / scale * 7), 1, 7).astype(np.int64)
            lv = np.where(v > 0, lv, 0)
            full = v >= self.threshold
            glyph = np.where(full, FULL_GLYPH, SPARK[lv])
            codes = np.where(full, S_QFULL, np.where(v > 0, S_QUEUE, S_NONE)).astype(np.int16)
            return cells_to_strip("".join(glyph.tolist()), codes)
        if row.kind == "nvtx":
            return self._render_nvtx(row.lane, edges)
        if row.kind == "dev":
            t = ("━" * w)
            return Strip([Segment(t, STYLES[S_DIM])], w)
        return Strip([Segment(" " * w, PLAIN)], w)

    def _render_nvtx(self, lane, edges: np.ndarray) -> Strip:
        c = lanes_fn.nvtx_cells(lane, edges)
        rid = c.range_idx
        w = len(rid)
        text_ids = self.trace.ranges.text
        cut = np.nonzero(rid[1:] != rid[:-1])[0] + 1
        bounds = [0, *cut.tolist(), w]
        segs = []
        strings = self.trace.strings
        for a, b in zip(bounds[:-1], bounds[1:]):     # one step per run of equal range (≤ width)
            r = int(rid[a])
            n = b - a
            if r < 0:
                multi = c.multi[a:b]
                if multi.any():
                    segs.append(Segment("".join(np.where(multi, "┆", " ").tolist()), STYLES[S_MULTI]))
                else:
                    segs.append(Segment(" " * n, PLAIN))
                continue
            tid = int(text_ids[r])
            name = strings[tid]
            if n == 1:
                txt = "┆" if c.multi[a] else "▌"
            elif n == 2:
                txt = "[]"
            else:
                # the name elided in the middle; a bar too narrow for a readable name stays a plain bar
                body = elide(name, n - 2) if n - 2 >= min(5, len(name)) else ""
                txt = "[" + body.ljust(n - 2, "─" if not body else " ") + "]"
            segs.append(Segment(txt, STYLES[S_NVTX0 + tid % len(NVTX_BG)]))
        return Strip(segs, w)

    # ---- axis ---------------------------------------------------------------------------------
    def _mark_sets(self):
        """Episode / spike intervals for the shown devices (rebuilt when the device changes)."""
        key = self.device
        m = self._marks_cache.get(key)
        if m is None:
            eps = [e for e in self.marks if self.device is None or e.device == self.device]
            sat = [e for e in eps if e.kind == "queue" and e.level == "saturated"]
            near = [e for e in eps if e.kind == "queue" and e.level != "saturated"]
            spk = [e for e in eps if e.kind == "spike" and e.worst_api not in self.stall_apis]
            stall = [e for e in eps if e.kind == "spike" and e.worst_api in self.stall_apis]

            def iv(lst):
                return lanes_fn.Intervals(np.array([e.start for e in lst], np.int64), np.array([e.end for e in lst], np.int64))
            m = self._marks_cache[key] = (iv(sat), iv(near), iv(spk), iv(stall))
        return m

    def forget_marks(self) -> None:
        """The marks or their classification changed: rebuild the axis sets on the next paint."""
        self._marks_cache = {}

    def _axis_strips(self) -> tuple[Strip, Strip]:
        v = self.view
        w = v.width
        edges = self.edges()
        origin = self.origin_ns if self.relative else None
        # tick labels
        tks, step = tfmt.ticks(v.start, v.end, max(1, w // 14))
        label = [" "] * w
        ruler = np.array(["─"] * w, dtype=object)
        rcode = np.full(w, S_RULER, np.int16)
        next_free = 0
        ref = max(abs(v.start - origin), abs(v.end - origin)) if origin is not None else None
        for t in tks.tolist():                            # ≤ width/14 ticks
            col = int((t - v.start) // v.ns_per_col)
            if 0 <= col < w:
                ruler[col] = "┬"
                txt = tfmt.fmt_tick(t, step, origin, ref)
                if col >= next_free and col + len(txt) <= w:
                    label[col:col + len(txt)] = list(txt)
                    next_free = col + len(txt) + 2
        sat, near, spk, stall = self._mark_sets()
        for iv, glyph, code in ((near, "━", S_EP_NEAR), (sat, "━", S_EP_FULL), (spk, "▲", S_EP_SPIKE),
                                (stall, "△", S_EP_NEAR)):
            if len(iv):
                hit = iv.any(edges)
                ruler[hit] = glyph
                rcode[hit] = code
        if len(self.iteration_marks):
            cols = ((self.iteration_marks - v.start) // v.ns_per_col).astype(np.int64)
            cols = cols[(cols >= 0) & (cols < w)]
            ruler[cols] = "╎"
            rcode[cols] = S_TICK
        if self.sel_range is not None:
            for t, g in ((self.sel_range[0], "["), (self.sel_range[1], "]")):
                col = v.col_of(t)
                if 0 <= col < w:
                    ruler[col] = g
                    rcode[col] = S_SEL
        if self.pending_mark is not None:
            col = v.col_of(self.pending_mark)
            if 0 <= col < w:
                ruler[col] = "┃"
                rcode[col] = S_MARK
        c = v.cursor_col
        if 0 <= c < w:
            ruler[c] = "▼"
            rcode[c] = S_SEL
        top = Strip([Segment("".join(label), STYLES[S_TICK])], w)
        return top, cells_to_strip("".join(ruler.tolist()), rcode)

    # ---- Line API ------------------------------------------------------------------------------
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
