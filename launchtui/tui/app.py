"""The launchtui Textual app: `launchtui TRACE` (see `run_app`).

The first frame (header, progress bar, footer) appears before numpy or the engine is imported; the
trace loads in a thread worker that posts batched progress. After loading, the app is a thin layer
over the engine: widgets bin lanes per frame, workers recompute the table when the selection changes.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Footer, Input, Label, ProgressBar, Static

from launchtui.tui.commands import LaunchCommands
from launchtui.tui.messages import (CursorMoved, KernelChosen, LoadFailed, LoadProgress, TableReady,
                                    TableRowMoved, TraceLoaded)

# App-level keys (work whatever has focus). Every binding has an id for remapping via set_keymap(),
# LAUNCHTUI_KEYS="id=key;id=key" or ~/.config/launchtui/keys.conf.
BINDINGS = [
    Binding("q", "quit", "Quit", id="quit"),
    Binding("question_mark", "help", "Help", id="help"),
    Binding("h,left", "pan(-4)", "Pan left", id="pan_left", show=False),
    Binding("l,right", "pan(4)", "Pan right", id="pan_right", show=False),
    Binding("comma", "pan(-1)", "Cursor 1 column left", id="nudge_left", show=False),
    Binding("full_stop", "pan(1)", "Cursor 1 column right", id="nudge_right", show=False),
    Binding("H,pageup", "page(-1)", "Page left", id="page_left", show=False),
    Binding("L,pagedown", "page(1)", "Page right", id="page_right", show=False),
    Binding("plus,equals_sign", "zoom(0.5)", "Zoom in", id="zoom_in", key_display="+"),
    Binding("minus", "zoom(2)", "Zoom out", id="zoom_out", key_display="-"),
    Binding("0", "fit", "Fit all", id="fit", show=False),
    Binding("g,home", "goto_start", "Start", id="goto_start", show=False),
    Binding("G,end", "goto_end", "End", id="goto_end", show=False),
    Binding("o", "nvtx_picker", "NVTX", id="nvtx_picker"),
    Binding("O", "optimizer", "Optimizer", id="optimizer"),
    Binding("left_square_bracket", "occurrence(-1)", "Prev occurrence", id="occurrence_prev", key_display="["),
    Binding("right_square_bracket", "occurrence(1)", "Next occurrence", id="occurrence_next", key_display="]"),
    Binding("a", "all_occurrences", "All occurrences", id="all_occurrences", show=False),
    Binding("b", "mark(1)", "Backpressure", id="backpressure_next"),
    Binding("B", "mark(-1)", "Prev backpressure", id="backpressure_prev", show=False),
    Binding("n", "instance(1)", "Next instance", id="instance_next"),
    Binding("N", "instance(-1)", "Prev instance", id="instance_prev", show=False),
    Binding("v", "mark_range", "Range", id="mark_range"),
    Binding("escape", "clear", "Clear", id="clear", show=False),
    Binding("e", "export", "Export", id="export"),
    Binding("d", "cycle_device", "Device", id="cycle_device"),
    Binding("t", "toggle_time", "Abs/rel time", id="toggle_time", show=False),
    Binding("D", "toggle_names", "Short/full names", id="toggle_names", show=False),
    Binding("slash", "filter", "Filter", id="filter", key_display="/"),
    Binding("i", "info", "Info", id="info", show=False),
]

HELP_NOTES = (
    "Timeline: the cursor is the middle column (▼); panning moves it, zooming keeps it.\n"
    "Rows: NVTX ranges, then per GPU the CUDA API row of each launching thread and, per stream, the CUDA HW\n"
    "row (█ kernel ≥10 µs, ⣿ small <10 µs, ▓ NCCL, ═ memcpy/memset, ◆ chosen kernel) and its queue row\n"
    "(pending launches; █ = at or above the backpressure threshold, label = peak in view, ! ≥ threshold).\n"
    "API row: █ height = share of time in launch calls; ! = a launch slower than the spike threshold.\n"
    "Axis: ━ backpressure episode (red saturated, orange approaching), ▲ launch spike, [ ] selected range.\n"
    "Remap keys: LAUNCHTUI_KEYS='pan_left=a;pan_right=d' or ~/.config/launchtui/keys.conf (id=key lines);\n"
    "ids: " + ", ".join(b.id for b in BINDINGS)
)

CSS = """
Screen { layout: vertical; }
#header { height: 2; background: $boost; color: $text; text-wrap: nowrap; text-overflow: ellipsis; }
#loading { height: 1fr; align: center middle; }
#loading Label { width: 100%; content-align: center middle; }
#loading ProgressBar { width: auto; }
#details { height: 4; background: $boost; }
#stats { height: 1; color: $text-muted; }
#legend { height: 1; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
#filter { dock: bottom; display: none; height: 3; }
#filter.visible { display: block; }
KernelTable { height: 30%; min-height: 4; max-height: 16; }
"""


def _human_rows(n: int) -> str:
    return f"{n:,}"


class LaunchApp(App):
    """launchtui's TUI. `trace=` injects an in-memory Trace (tests); otherwise args.trace is opened."""

    TITLE = "launchtui"
    CSS = CSS
    BINDINGS = BINDINGS
    COMMANDS = App.COMMANDS | {LaunchCommands}
    ENABLE_COMMAND_PALETTE = True

    def __init__(self, args, trace=None, keymap: dict | None = None):
        super().__init__()
        self.args = args
        self._injected = trace
        self.loaded = None
        self.error_message: str | None = None
        self.names = "short"
        self.device = None
        self.sel_spec = ("args",)
        self.selection = None
        self.sel_gen = 0
        self.table_busy = False
        self.nvtx_occ = None         # (text_id, occurrences array, position)
        self.nvtx_all = False        # table over every occurrence of the name, not just the current one
        self.context = ""            # last jump / event, shown in the details panel
        self.stats = {}
        self._keymap_extra = keymap or {}
        self.timings = {}
        self.export_paths: list[str] = []

    # ---- layout ---------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        path = getattr(self.args, "trace", "") or "(in memory)"
        yield Static(f" launchtui  {path}\n loading…", id="header")
        with Vertical(id="loading"):
            yield Label(f"Loading {Path(str(path)).name}", id="load-title")
            yield ProgressBar(total=None, show_eta=False, id="load-bar")
            yield Label("starting", id="load-stage")
        yield Footer()

    def on_mount(self) -> None:
        import time
        self.timings["mounted"] = time.perf_counter()
        km = load_keymap()
        km.update(self._keymap_extra)
        if km:
            self.set_keymap(km)
        self._load()

    # ---- loading --------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="load")
    def _load(self) -> None:
        from launchtui.errors import TraceError
        from launchtui.tui.loader import Throttle, load
        progress = Throttle(lambda stage, rows: self.post_message(LoadProgress(stage, rows)))
        try:
            if self._injected is not None:
                loaded = load(self.args, progress, trace=self._injected)
            else:
                loaded = load(self.args, progress)
        except TraceError as e:
            self.post_message(LoadFailed(str(e)))
            return
        except Exception as e:  # an engine bug: still exit cleanly with one line
            self.post_message(LoadFailed(f"{getattr(self.args, 'trace', '')}: internal error while loading: "
                                         f"{type(e).__name__}: {e}"))
            return
        self.post_message(TraceLoaded(loaded))

    def on_load_progress(self, m: LoadProgress) -> None:
        try:
            self.query_one("#load-stage", Label).update(f"{m.stage}: {_human_rows(m.rows)} rows")
        except Exception:
            pass

    def on_load_failed(self, m: LoadFailed) -> None:
        self.error_message = m.message
        self.exit(return_code=2)

    def on_trace_loaded(self, m: TraceLoaded) -> None:
        import time
        from launchtui.tui.widgets.kernel_table import KernelTable
        from launchtui.tui.widgets.panel import TextPanel
        from launchtui.tui.widgets.timeline import LEGEND, Timeline
        ld = self.loaded = m.loaded
        tr = ld.trace
        self.device = ld.device
        self.selection = ld.selection
        self.query_one("#loading").remove()
        self.timeline = Timeline(tr, ld.lanes, ld.marks, id="timeline")
        self.details = TextPanel(id="details")
        self.stats_line = TextPanel(id="stats")
        self.table = KernelTable(id="table")
        self.filter_input = Input(placeholder="filter kernels by name (Enter keeps, Esc clears)", id="filter")
        footer = self.query_one(Footer)
        self.mount(self.timeline, Static(LEGEND, id="legend"), self.details, self.stats_line, self.table,
                   self.filter_input, before=footer)
        self.timeline.device = self.device
        self.timeline.on_change = self.update_details
        self.timeline.build_rows()
        self.table.multi_device = len(ld.lanes.devices) > 1
        self.timeline.focus()
        sel = ld.selection
        if sel.t0 is not None and sel.t1 is not None and sel.ranges is None:
            self.timeline.sel_range = (sel.t0, sel.t1)
            self.sel_spec = ("range", sel.t0, sel.t1, sel.label)
        if ld.nvtx_hits is not None and len(ld.nvtx_hits):
            r = int(ld.nvtx_hits[0])
            self.sel_spec = ("args",)
            self._zoom_to_range(r)
        elif sel.t0 is not None and sel.t1 is not None:
            self.timeline.view.fit(sel.t0, sel.t1)
        if tr.missing:
            self.context = "missing: " + "; ".join(tr.missing)
            for line in tr.missing:
                self.notify(line, title="Not in this trace", severity="warning", timeout=8)
        if not len(tr.ops):
            self.table.empty_text = "(No small-and-frequent kernel launch data found: the trace has no GPU ops)"
        self._fit_layout()
        self.update_header()
        self.update_details()
        self.refresh_selection(keep_spec=True)
        self.timings["loaded"] = time.perf_counter()
        self.call_after_refresh(self._mark_interactive)
        self.refresh_bindings()

    def on_resize(self, event) -> None:
        self._fit_layout()

    def _fit_layout(self) -> None:
        """Small terminals (80×24): drop the legend line to give the timeline a row more."""
        try:
            self.query_one("#legend").display = self.size.height >= 30
        except Exception:
            pass

    def _mark_interactive(self) -> None:
        import time
        self.timings["interactive"] = time.perf_counter()

    # ---- header / details / stats ---------------------------------------------------------------
    def origin(self):
        return self.timeline.origin_ns if self.timeline.relative else None

    def update_header(self) -> None:
        tr = self.loaded.trace
        src = tr.source
        w = tr.window()
        from launchtui.analysis.lanes import fmt_duration
        win = f"{w[0] / 1e9:.6f}–{w[1] / 1e9:.6f} s ({fmt_duration(w[1] - w[0])})" if w else "no GPU ops"
        devs = ", ".join(f"{d}: {n}" for d, n in sorted(tr.devices.items())) or "none"
        shown = "all" if self.device is None else str(self.device)
        label = self._spec_label()
        name = Path(src.path).name
        ver = f" {src.version}" if src.version else ""
        l1 = f" {name} │ {src.producer}{ver} │ GPUs {devs}"
        l2 = f" capture window {win} │ device shown: {shown} │ selected: {label} │ names: {self.names}"
        self.query_one("#header", Static).update(_escape(l1) + "\n" + _escape(l2))

    def _spec_label(self) -> str:
        spec = self.sel_spec
        if spec[0] == "range":
            return spec[3]
        if spec[0] == "nvtx":
            return spec[2]
        if spec[0] == "args" and self.loaded is not None:
            return self.loaded.selection.label
        return "whole trace"

    def on_cursor_moved(self, m: CursorMoved) -> None:
        self.update_details()

    def update_details(self) -> None:
        if self.loaded is None:
            return
        from launchtui.analysis import lanes as ln
        from launchtui.tui import details as dt
        tl = self.timeline
        tr = self.loaded.trace
        row = tl.current_row
        t0, t1 = tl.cursor_cell()
        origin = self.origin()
        lines: list[str]
        trow = self.table.selected_row() if self.focused is self.table else None
        if trow is not None:
            label = self.selection.label if self.selection is not None else "whole trace"
            head = f"table row {self.table.cursor + 1}/{len(self.table.order)}"
            if self.context:
                head += f" │ {self.context}"
            self.details.set_lines([head] + dt.describe_row(trow, label))
            return
        if row.kind == "hw":
            k = ln.op_at(row.lane, t0, t1)
            lines = dt.describe_op(tr, k, origin) if k >= 0 else dt.describe_idle(tr, row.lane, t0, origin)
        elif row.kind == "api":
            a = ln.api_at(row.lane, t0, t1)
            if a >= 0:
                lines = dt.describe_api(tr, a, row.lane, origin)
            else:
                lines = [f"no launch call on thread {dt.thread_label(tr, row.lane.thread)} at the cursor", "", ""]
        elif row.kind == "queue":
            lines = dt.describe_queue(tr, row.lane, t0, t1, self.loaded.marks, origin, tl.threshold)
        elif row.kind == "nvtx":
            r = ln.range_at(row.lane, t0, t1)
            lines = dt.describe_range(tr, r, origin) if r >= 0 else ["no range at the cursor on this row", "", ""]
        else:
            lines = [row.label, "", ""]
        head = f"cursor {dt.fmt_time(t0, origin)} │ {ln.fmt_duration(tl.view.ns_per_col)}/col"
        if self.context:
            head += f" │ {self.context}"
        self.details.set_lines([head] + lines[:3])

    def update_stats(self) -> None:
        from launchtui.analysis.lanes import fmt_duration
        s = self.stats
        if not s:
            self.stats_line.set_lines([])
            return
        label = self.selection.label if self.selection else "whole trace"
        q = ""
        if s.get("queue_peak_stream"):
            d, st = s["queue_peak_stream"]
            q = f" │ queue peak {s['queue_peak']} (GPU {d} s{st})"
            if s.get("time_above_ns"):
                q += f", ≥{self.timeline.threshold} for {fmt_duration(s['time_above_ns'])}"
        n_marks = len(self.visible_marks())
        t = self.table
        shown = len(t.order)
        filt = f" │ filter '{t.filter_text}'" if t.filter_text else ""
        nccl = " │ NCCL hidden" if t.hide_nccl else ""
        self.stats_line.set_lines([
            f" Small & frequent (≥100 launches, <10 µs) in {label}: {shown} rows │ {s['launches']:,} launches, "
            f"API {s['launch_api_ms']:.3f} ms{q} │ {n_marks} backpressure marks{filt}{nccl}"])

    # ---- selection & table ------------------------------------------------------------------------
    def build_selection(self, spec, device):
        from launchtui.analysis.select import WHOLE, Selection, range_selection
        devs = None if device is None else (device,)
        tr = self.loaded.trace
        if spec[0] == "args":
            return self.loaded.selection.with_devices(devs) if device is not None or \
                self.loaded.selection.devices is not None else self.loaded.selection
        if spec[0] == "range":
            return Selection(spec[1], spec[2], devs, None, spec[3])
        if spec[0] == "nvtx":
            try:
                return range_selection(tr, spec[1], spec[2], WHOLE.with_devices(devs))
            except Exception:
                return Selection(None, None, devs, tuple(spec[1]), spec[2])
        return WHOLE.with_devices(devs)

    def refresh_selection(self, keep_spec: bool = False) -> None:
        """The selection spec changed: rebuild the Selection, table and stats in a worker (they are
        O(N) over the trace; the timeline keeps repainting meanwhile)."""
        self.sel_gen += 1
        self.table_busy = True
        self.update_header()
        self._compute_table(self.sel_gen, self.sel_spec, self.device, self.names)

    @work(thread=True, exclusive=True, group="table")
    def _compute_table(self, gen: int, spec, device, names: str) -> None:
        from launchtui.tui.loader import selection_stats, table_rows
        tr = self.loaded.trace
        sel = self.build_selection(spec, device)
        rows = table_rows(tr, sel, names)
        stats = selection_stats(tr, sel)
        self.post_message(TableReady(gen, rows, stats, sel))

    def on_table_ready(self, m: TableReady) -> None:
        if m.gen != self.sel_gen:
            return
        self.table_busy = False
        self.selection = m.selection
        self.update_header()
        self.stats = m.stats
        if not m.rows:
            self.table.empty_text = self._empty_table_text()
        self.table.set_rows(m.rows)
        self.update_stats()

    def _empty_table_text(self) -> str:
        tr = self.loaded.trace
        base = "(No small-and-frequent kernel launch data found"
        if not len(tr.ops):
            return base + ": the trace has no GPU ops)"
        if self.sel_spec[0] == "nvtx" and self.nvtx_occ is not None and not self.nvtx_all \
                and len(self.nvtx_occ[1]) > 1:
            return base + f" in this occurrence: no kernel reaches 100 launches; press a to pool all " \
                          f"{len(self.nvtx_occ[1])} occurrences)"
        if self.sel_spec[0] != "whole" and self.selection is not None and self.selection.t0 is not None:
            return base + " in this selection; Esc widens it)"
        return base + ")"

    def on_table_row_moved(self, m: TableRowMoved) -> None:
        if self.focused is getattr(self, "table", None):
            self.update_details()

    def on_descendant_focus(self, event) -> None:
        if self.loaded is not None and getattr(self, "details", None) is not None:
            self.update_details()

    def sort_table(self, key) -> None:
        if self.loaded is not None:
            self.table.sort_by(key)

    # ---- timeline navigation -------------------------------------------------------------------
    def check_action(self, action: str, parameters) -> bool | None:
        if action in ("quit", "help", "command_palette") or action.startswith("app."):
            return True
        if self.loaded is None:
            return False if action not in ("quit", "help") else True
        if action == "instance":
            return True if getattr(self.timeline, "highlight", None) is not None else False
        if action in ("occurrence", "all_occurrences"):
            return True if self.nvtx_occ is not None else False
        return True

    def _changed(self) -> None:
        """The view moved: repaint the timeline and the details panel in the same frame."""
        self.timeline.refresh()
        self.update_details()

    def action_pan(self, cols: int) -> None:
        self.timeline.view.pan(cols)
        self._changed()

    def action_page(self, direction: int) -> None:
        self.timeline.view.pan(direction * self.timeline.view.width * 0.75)
        self._changed()

    def action_zoom(self, factor: float) -> None:
        self.timeline.view.zoom(factor)
        self._changed()

    def action_fit(self) -> None:
        self.timeline.view.fit(*self.timeline.extent)
        self._changed()

    def action_goto_start(self) -> None:
        self.timeline.view.goto(self.timeline.extent[0])
        self._changed()

    def action_goto_end(self) -> None:
        self.timeline.view.goto(self.timeline.extent[1])
        self._changed()

    def jump(self, t: int, context: str | None = None) -> None:
        self.timeline.view.goto(t)
        if context is not None:
            self.context = context
        self._changed()

    # ---- NVTX --------------------------------------------------------------------------------------
    def nvtx_names(self):
        if self.loaded is None:
            return []
        memo = self.loaded.trace.derived.get("tui_nvtx_summary")
        if memo is None:
            from launchtui.analysis import nvtx
            memo = self.loaded.trace.derived["tui_nvtx_summary"] = nvtx.summary(self.loaded.trace)
        return memo

    def action_nvtx_picker(self) -> None:
        entries = self.nvtx_names()
        if not entries:
            self.notify("This trace has no NVTX ranges (or user annotations).", severity="warning")
            return
        from launchtui.analysis.lanes import fmt_duration
        from launchtui.tui.screens import NvtxPicker

        def done(entry) -> None:
            if entry is not None:
                self.jump_to_range_name(entry)
        self.push_screen(NvtxPicker(entries, fmt_duration), done)

    def jump_to_range_name(self, entry) -> None:
        from launchtui.analysis import nvtx
        occ = nvtx.occurrences(self.loaded.trace, entry.text_id)
        if not len(occ):
            return
        self.nvtx_occ = (entry.text_id, occ, 0)
        self._select_occurrence()

    def _select_occurrence(self) -> None:
        from launchtui.analysis import nvtx
        text_id, occ, pos = self.nvtx_occ
        r = int(occ[pos])
        name = nvtx.range_name(self.loaded.trace, r)
        if self.nvtx_all:
            label = f"{name} (all {len(occ)})"
            spec = ("nvtx", [int(x) for x in occ.tolist()], label)
            what = f"table pools all {len(occ)} occurrences (a: this one only)"
        else:
            label = f"{name} ({pos + 1}/{len(occ)})"
            spec = ("nvtx", [r], label)
            what = "table restricted to its launches" + (" (a: pool all occurrences)" if len(occ) > 1 else "")
        self.timeline.sel_range = None
        self.timeline.pending_mark = None
        self._zoom_to_range(r)
        self.context = f"range {name} {pos + 1}/{len(occ)}: {what}; [ / ] step, Esc clears"
        if spec != self.sel_spec:
            self.sel_spec = spec
            self.refresh_selection()
        self._changed()
        self.refresh_bindings()

    def action_all_occurrences(self) -> None:
        if self.nvtx_occ is None:
            self.notify("Pick a range first: o (names) or O (optimizer).")
            return
        self.nvtx_all = not self.nvtx_all
        self._select_occurrence()

    def _zoom_to_range(self, r: int) -> None:
        rg = self.loaded.trace.ranges
        s, e = int(rg.start[r]), int(rg.end[r])
        self.timeline.view.fit(s, e, margin=0.05)
        # put the cursor inside the range, on the NVTX row of its thread if shown
        self.timeline.view.goto(s + (e - s) // 2)
        for i, row in enumerate(self.timeline.rows):
            if row.kind == "nvtx" and row.lane.thread == int(rg.thread[r]) and row.lane.depth == int(rg.depth[r]):
                self.timeline.select_row(i)
                break

    def action_occurrence(self, step: int) -> None:
        if self.nvtx_occ is None:
            self.notify("Pick a range first: o (names) or O (optimizer).")
            return
        text_id, occ, pos = self.nvtx_occ
        self.nvtx_occ = (text_id, occ, (pos + step) % len(occ))
        self._select_occurrence()

    def action_optimizer(self) -> None:
        from launchtui.analysis import nvtx
        tr = self.loaded.trace
        r, note = self.loaded.optimizer
        if r < 0:
            what = "no NVTX ranges at all" if not len(tr.ranges) else f"{len(self.nvtx_names())} range names"
            self.notify(f"No optimizer phase: no range name contains 'optim' ({what}).", severity="warning")
            self.context = "no optimizer range (no range name contains 'optim')"
            self.update_details()
            return
        text_id = int(tr.ranges.text[r])
        occ = nvtx.occurrences(tr, text_id)
        pos = int((occ == r).nonzero()[0][0]) if (occ == r).any() else 0
        self.nvtx_occ = (text_id, occ, pos)
        self._select_occurrence()
        if note:
            self.context += note
            self.update_details()

    # ---- backpressure ------------------------------------------------------------------------------
    def visible_marks(self) -> list:
        if self.loaded is None:
            return []
        return [e for e in self.loaded.marks if self.device is None or e.device == self.device]

    def action_mark(self, step: int) -> None:
        from launchtui.tui import details as dt
        marks = self.visible_marks()
        if not marks:
            self.notify("No backpressure: no stream reached the threshold and no launch spiked.",
                        severity="information")
            self.context = "no backpressure episodes or launch spikes"
            self.update_details()
            return
        cur = int(self.timeline.view.cursor)
        # the next mark at least one column away: zoomed out, one press skips the spikes that share
        # a cell (an episode holds hundreds); zoomed in, every spike is a stop
        col = max(1, int(self.timeline.view.ns_per_col))
        starts = [e.start for e in marks]
        import bisect
        if step > 0:
            i = bisect.bisect_left(starts, cur + col)
            if i >= len(marks):
                i = 0
        else:
            i = bisect.bisect_right(starts, cur - col) - 1
            if i < 0:
                i = len(marks) - 1
        e = marks[i]
        tl = self.timeline
        if e.kind == "queue":
            j = tl.row_index("queue", e.device, ("queue", e.device, e.stream))
        else:
            th = int(self.loaded.trace.api.thread[e.worst_api]) if e.worst_api >= 0 else -1
            j = tl.row_index("api", e.device, ("api", e.device, th))
            if j < 0:   # a spike whose op is not in the trace: the thread's API row on any device
                j = next((i for i, r in enumerate(tl.rows) if r.kind == "api" and r.lane.thread == th), -1)
        if j >= 0:
            tl.select_row(j)
        self.current_mark = e
        self.jump(e.start, dt.describe_mark(self.loaded.trace, e, i + 1, len(marks), self.origin()))

    # ---- kernel instances ---------------------------------------------------------------------------
    def on_kernel_chosen(self, m: KernelChosen) -> None:
        from launchtui.analysis import lanes as ln
        from launchtui.analysis.launches import name_ids
        tr = self.loaded.trace
        r = m.row
        nid = tr.strings.lookup(r["kernel_name"])
        inst = ln.kernel_instances(tr, name_ids(tr, self.names), nid, r["device_id"])
        self.timeline.set_highlight(inst)
        self.refresh_bindings()
        if not len(inst):
            self.notify(f"No instances of {r['kernel_name']} on the timeline.")
            return
        sel = self.selection
        i = 0
        if sel is not None and sel.t0 is not None:
            import numpy as np
            i = int(np.searchsorted(inst.start, sel.t0))
            i = 0 if i >= len(inst) else i
        self._goto_instance(i)

    def _goto_instance(self, i: int) -> None:
        tl = self.timeline
        inst = tl.highlight
        k = int(inst.ops[i])
        ops = self.loaded.trace.ops
        j = tl.row_index("hw", int(ops.device[k]), ("hw", int(ops.device[k]), int(ops.stream[k])))
        if j >= 0:
            tl.select_row(j)
        name = self.loaded.trace.strings[int(ops.name[k])]
        self.instance_pos = i
        self.jump(int(ops.start[k]), f"{name}: instance {i + 1}/{len(inst)} (n / N step)")

    def action_instance(self, step: int) -> None:
        inst = self.timeline.highlight
        if inst is None or not len(inst):
            self.notify("Choose a kernel first: Enter on a table row.")
            return
        cur = int(self.timeline.view.cursor)
        if step > 0:
            i = inst.next_after(cur)
            i = 0 if i < 0 else i
        else:
            i = inst.prev_before(cur)
            i = len(inst) - 1 if i < 0 else i
        self._goto_instance(i)

    # ---- range & export ----------------------------------------------------------------------------
    def action_mark_range(self) -> None:
        tl = self.timeline
        t = int(tl.view.cursor)
        if tl.pending_mark is None:
            tl.pending_mark = t
            tl.sel_range = None
            self.context = "range start marked; move and press v again for the end (Esc clears)"
            self._changed()
            return
        a, b = sorted((tl.pending_mark, t))
        if b == a:
            b = a + max(1, int(tl.view.ns_per_col))
        tl.pending_mark = None
        tl.sel_range = (a, b)
        from launchtui.analysis.lanes import fmt_duration
        label = f"{a / 1e9:.6f}–{b / 1e9:.6f} s"
        self.sel_spec = ("range", a, b, label)
        self.nvtx_occ = None
        self.context = f"range {fmt_duration(b - a)} selected: table restricted to it; e exports, Esc clears"
        self.refresh_selection()
        self._changed()
        self.refresh_bindings()

    def action_clear(self) -> None:
        tl = self.timeline
        if self.query_one("#filter", Input).has_class("visible"):
            self._close_filter(clear=True)
            return
        if tl.pending_mark is not None or tl.sel_range is not None:
            tl.pending_mark = None
            tl.sel_range = None
            if self.sel_spec[0] == "range":
                self.sel_spec = ("whole",)
                self.refresh_selection()
            self.context = "range cleared"
        elif tl.highlight is not None:
            tl.set_highlight(None)
            self.context = "highlight cleared"
        elif self.sel_spec[0] != "whole":
            self.sel_spec = ("whole",)
            self.nvtx_occ = None
            self.context = "selection cleared: whole trace"
            self.refresh_selection()
        self._changed()
        self.refresh_bindings()

    def export_window(self) -> tuple[int, int]:
        tl = self.timeline
        if tl.sel_range is not None:
            return tl.sel_range
        return int(tl.view.start), int(tl.view.end)

    def export_selection(self):
        """(selection, a_s, b_s): the same Selection `launchtui export --trim a_s b_s` builds."""
        from launchtui.analysis.select import device_selection, trim_selection
        t0, t1 = self.export_window()
        a_s, b_s = t0 / 1e9, t1 / 1e9
        tr = self.loaded.trace
        base = device_selection(tr, "all" if self.device is None else self.device)
        return trim_selection(tr, a_s, b_s, base), a_s, b_s

    def export_command(self, a_s: float, b_s: float, out: str) -> str:
        dev = f" --device {self.device}" if self.device is not None else ""
        names = " --names full" if self.names == "full" else ""
        return (f"launchtui export {self.loaded.trace.source.path} --trim {a_s!r} {b_s!r}{dev}{names} "
                f"-o {out}")

    def action_export(self) -> None:
        from launchtui.analysis.export import default_export_name
        from launchtui.errors import TraceError
        from launchtui.tui.screens import ExportDialog
        try:
            sel, a_s, b_s = self.export_selection()
        except TraceError as e:
            self.notify(str(e.problem), title="Nothing to export", severity="error", timeout=8)
            return
        name = default_export_name(self.loaded.trace, sel)
        which = "selected range" if self.timeline.sel_range is not None else "visible window"
        from launchtui.analysis.lanes import fmt_duration
        text = f"{which}: {a_s:.6f} s – {b_s:.6f} s ({fmt_duration((b_s - a_s) * 1e9)})"

        def done(path) -> None:
            if path:
                self._export_to(path, sel, a_s, b_s, force=False)
        self.push_screen(ExportDialog(name, text, self.export_command(a_s, b_s, name)), done)

    def _export_to(self, path: str, sel, a_s, b_s, force: bool) -> None:
        if Path(path).exists() and not force:
            from launchtui.tui.screens import ConfirmScreen

            def answer(yes) -> None:
                if yes:
                    self._export_to(path, sel, a_s, b_s, force=True)
                else:
                    self.notify("Export cancelled; nothing written.")
            self.push_screen(ConfirmScreen(f"{path} exists. Overwrite it?"), answer)
            return
        self.notify(f"Exporting to {path}…", timeout=3)
        self._write_export(path, sel, force, self.names)

    @work(thread=True, group="export")
    def _write_export(self, path: str, sel, force: bool, names: str) -> None:
        from launchtui.analysis.export import export_document
        from launchtui.analysis.report import ReportOptions
        from launchtui.errors import TraceError
        from launchtui.output import dumps, write_atomic
        try:
            doc = export_document(self.loaded.trace, sel, ReportOptions(names=names))
            out = write_atomic(path, dumps(doc), force=force)
        except TraceError as e:
            self.call_from_thread(self.notify, str(e), title="Export failed", severity="error", timeout=10)
            return
        except OSError as e:
            self.call_from_thread(self.notify, f"{path}: {e}", title="Export failed", severity="error", timeout=10)
            return
        self.export_paths.append(str(out))
        self.call_from_thread(self.notify, f"wrote {Path(out).resolve()}", title="Exported", timeout=10)

    # ---- modes ------------------------------------------------------------------------------------
    def action_cycle_device(self) -> None:
        devs = [None] + list(self.loaded.lanes.devices)
        i = devs.index(self.device) if self.device in devs else 0
        self.device = devs[(i + 1) % len(devs)]
        self.timeline.set_device(self.device)
        self.context = "showing all devices" if self.device is None else f"showing GPU {self.device}"
        self.refresh_selection()
        self._changed()

    def action_toggle_time(self) -> None:
        self.timeline.relative = not self.timeline.relative
        self.context = "relative time (from the first kernel)" if self.timeline.relative else "absolute time"
        self._changed()

    def action_toggle_names(self) -> None:
        self.names = "full" if self.names == "short" else "short"
        self.timeline.set_highlight(None)
        self.context = ("distinguishing kernel names (elementwise_kernel<AddcmulFunctor>)" if self.names == "full"
                        else "short kernel names (Nsight-compatible)")
        self.refresh_selection()
        self._changed()
        self.refresh_bindings()

    def action_toggle_nccl(self) -> None:
        self.table.toggle_nccl()
        self.update_stats()

    def action_filter(self) -> None:
        inp = self.query_one("#filter", Input)
        inp.add_class("visible")
        inp.value = self.table.filter_text
        inp.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.table.set_filter(event.value)
            self.update_stats()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self._close_filter(clear=False)

    def _close_filter(self, clear: bool) -> None:
        inp = self.query_one("#filter", Input)
        if clear:
            inp.value = ""
            self.table.set_filter("")
        inp.remove_class("visible")
        self.table.focus()
        self.update_stats()

    def action_info(self) -> None:
        from launchtui.analysis.info import render_info, trace_info
        from launchtui.tui.screens import InfoScreen
        self.push_screen(InfoScreen(render_info(trace_info(self.loaded.trace))))

    def action_help(self) -> None:
        from launchtui.tui.screens import HelpScreen
        self.push_screen(HelpScreen(help_sections(self), HELP_NOTES))


def _escape(text: str) -> str:
    from rich.markup import escape
    return escape(text)


def help_sections(app: App | None = None) -> list[tuple[str, list[tuple[str, str]]]]:
    from launchtui.tui.widgets.kernel_table import KernelTable
    from launchtui.tui.widgets.timeline import Timeline
    keymap = dict(getattr(app, "_keymap", {}) or {})

    def keys(b: Binding) -> str:
        k = keymap.get(b.id, b.key) if b.id else b.key
        return ", ".join(_pretty_key(x) for x in k.split(","))
    out = [("Everywhere", [(keys(b), b.description) for b in BINDINGS]),
           ("Timeline (when focused)", [(keys(b), b.description) for b in Timeline.BINDINGS]),
           ("Table (when focused)", [(keys(b), b.description) for b in KernelTable.BINDINGS]),
           ("Textual", [("tab / shift+tab", "Move focus between timeline and table"),
                        ("ctrl+p", "Command palette: NVTX jump, export, sort, NCCL toggle, info"),
                        ("ctrl+q", "Quit")])]
    return out


_PRETTY = {"question_mark": "?", "plus": "+", "minus": "-", "equals_sign": "=", "slash": "/",
           "left_square_bracket": "[", "right_square_bracket": "]", "comma": ",", "full_stop": "."}


def _pretty_key(k: str) -> str:
    return _PRETTY.get(k, k)


def load_keymap() -> dict:
    """User key overrides: LAUNCHTUI_KEYS='id=key;id=key' and/or keys.conf lines 'id = key'."""
    km: dict[str, str] = {}
    cfg = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "launchtui" / "keys.conf"
    try:
        for line in cfg.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if "=" in line:
                k, v = (x.strip() for x in line.split("=", 1))
                km[k] = v
    except OSError:
        pass
    env = os.environ.get("LAUNCHTUI_KEYS", "")
    for part in env.split(";"):
        if "=" in part:
            k, v = (x.strip() for x in part.split("=", 1))
            km[k] = v
    return km


def run_app(args) -> int:
    """Entry point used by `launchtui TRACE`: returns the exit status (2 on a loading error)."""
    app = LaunchApp(args)
    rc = app.run()
    if app.error_message:
        print(f"launchtui: {app.error_message}", file=sys.stderr)
        return 2
    return app.return_code if app.return_code is not None else (rc if isinstance(rc, int) else 0)
