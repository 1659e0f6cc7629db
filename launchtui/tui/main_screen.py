"""The main view of a loaded trace: header, timeline, legend, details, stats, verdict slot, table, filter.

`MainScreen` owns the view and its state (selection, device, names, NVTX occurrence, chosen kernel)
and every key of it (`keys.MAIN_BINDINGS`); the App only loads the trace and exits. Layout, top to
bottom:

    #header     two lines: the file, producer, GPUs; the GPU-op window and what is selected
    #timeline   NVTX, API, HW and queue rows on one time axis (1fr)
    #legend     glyph legend, the idle row's entry first while on it (hidden on short terminals: `-short`)
    #details    what lies under the cursor, or the table row under the table cursor
    #stats      totals of the selection
    #verdict    the verdict panel (tui/verdict.py): the case record's headline, iterations, one verdict
                per stream and the top kernels; on short terminals a compact form or one line, so
                the timeline keeps its rows (V shows every line)
    #tables     the small-and-frequent kernel table and, beside it or instead of it (`w`), the
                call-site pane (tui/sources_view.py)
    #filter     the table's name filter (shown by /)

Other views (compare, ranks) are screens beside this one; they reuse the widgets, not this class.
"""
from __future__ import annotations

from dataclasses import replace

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Input, Static

from launchtui.analysis.config import CONFIG
from launchtui.analysis.select import SelectionSpec
from launchtui.tui.export_flow import ExportFlow
from launchtui.tui.fill_progress import FillView
from launchtui.tui.format import fmt_duration
from launchtui.tui.keys import MAIN_BINDINGS
from launchtui.tui.idle_view import IdleView
from launchtui.tui.main_details import Details
from launchtui.tui.main_nav import Navigation
from launchtui.tui.messages import IdleReady, SiteChosen, SourcesReady, TableReady, TableRowMoved
from launchtui.tui.sources_view import SourcesPane
from launchtui.tui.widgets.kernel_table import KernelTable
from launchtui.tui.widgets.key_bar import KeyBar
from launchtui.tui.widgets.source_table import SourceTable
from launchtui.tui.widgets.panel import TextPanel
from launchtui.tui.verdict import VerdictReady
from launchtui.tui.verdict_panel import VerdictView
from launchtui.tui.widgets.timeline import LEGEND, Timeline

CSS = """
MainScreen { layout: vertical; }
MainScreen #header { height: 2; background: $boost; color: $text; text-wrap: nowrap; text-overflow: ellipsis; }
MainScreen #details { height: 4; background: $boost; }
MainScreen #stats { height: 1; color: $text-muted; }
MainScreen #fill { height: 1; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
MainScreen #fill.-done { display: none; }
MainScreen #legend { height: 1; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
MainScreen.-short #legend { display: none; }
MainScreen #verdict { height: auto; }
MainScreen #filter { dock: bottom; display: none; height: 3; }
MainScreen #filter.visible { display: block; }
MainScreen #tables { height: 30%; min-height: 4; max-height: 16; }
MainScreen #tables > KernelTable { height: 100%; width: 1fr; }
MainScreen #tables.-kernels > SourceTable { display: none; }
MainScreen #tables.-sources > #table { display: none; }
MainScreen #tables.-both > SourceTable { border-left: vkey $panel-lighten-2; }
"""


TABLE_COMPUTING = "(small-and-frequent kernels: computing…)"   # never "no data" while loading


class MainScreen(Navigation, Details, Screen):
    """The view of one loaded trace (see the module docstring for its layout)."""

    CSS = CSS
    BINDINGS = MAIN_BINDINGS
    # below 30 lines the legend gives its line to the timeline
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]

    def __init__(self, loaded) -> None:
        super().__init__()
        self.loaded = loaded
        self.name_mode = "short"      # kernel names: "short" (Nsight) or "full" (distinguishing)
        self.spec: SelectionSpec = loaded.spec or SelectionSpec(device=loaded.device)
        self.selection = loaded.selection
        self.sel_gen = 0
        self.table_busy = False
        self.table_waits = False     # the first table waits for the first verdict (on_mount)
        self.nvtx_occ = None         # (text_id, occurrences array, position)
        self.nvtx_all = False        # table over every occurrence of the name, not just the current one
        self.context = ""            # last jump / event, shown in the details panel
        self.stats: dict = {}
        self.current_mark = None
        self.instance_pos = -1
        self.export = ExportFlow(self)
        self.verdict = VerdictView(self)
        self.sources = SourcesPane(self)
        self.idle = IdleView(self)
        self._legend_key = (False, None)
        self.highlight_label: str | None = None   # the call site whose launches are highlighted
        self.fill = FillView(self)    # the first fill's stages and progress line (§T10)

    @property
    def device(self) -> int | None:
        """The device shown (None: all); part of the selection spec."""
        return self.spec.device

    def _whole(self) -> SelectionSpec:
        return SelectionSpec(device=self.device)

    # ---- layout ---------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        ld = self.loaded
        yield Static("", id="header")
        self.timeline = Timeline(ld.trace, ld.lanes, ld.marks, fit_window=ld.fit_window,
                                 min_ns_per_col=ld.clock_ns, windows=ld.windows(), id="timeline")
        yield self.timeline
        yield Static(LEGEND, id="legend")
        self.details = TextPanel(id="details")
        yield self.details
        self.stats_line = TextPanel(id="stats")
        yield self.stats_line
        yield self.fill.line
        yield Vertical(id="verdict")
        self.table = KernelTable(id="table")
        self.source_table = SourceTable(id="sources")
        yield Horizontal(self.table, self.source_table, id="tables")
        yield Input(placeholder="filter kernels by name (Enter keeps, Esc clears)", id="filter")
        yield KeyBar()

    def on_mount(self) -> None:
        ld = self.loaded
        tr = ld.trace
        tl = self.timeline
        tl.device = self.device
        tl.on_change = self.update_details
        self.table.multi_device = self.device is None and len(ld.lanes.devices) > 1
        tl.focus()
        sel = ld.selection
        if sel.t0 is not None and sel.t1 is not None and sel.ranges is None:
            tl.sel_range = (sel.t0, sel.t1)
        if ld.nvtx_hits is not None and len(ld.nvtx_hits):
            self._zoom_to_range(int(ld.nvtx_hits[0]))
        elif sel.t0 is not None and sel.t1 is not None:
            tl.view.fit(sel.t0, sel.t1)
        if tr.missing:
            self.context = "missing: " + "; ".join(tr.missing)
            for line in tr.missing:
                self.notify(line, title="Not in this trace", severity="warning", timeout=8)
        self.table.empty_text = ("(No small-and-frequent kernel launch data found: the trace has no GPU ops)"
                                 if not len(tr.ops) else TABLE_COMPUTING)
        self.verdict.mount(self.query_one("#verdict"))
        self.sources.mount(self.source_table, self.query_one("#tables"))
        self.update_header()
        self.update_details()
        # the verdict first, then the table at its phase level: computed once, and the two workers'
        # temporaries never peak together (a record stored by `report --json` makes it instant)
        self.table_busy = True
        self.table_waits = True
        self.verdict.refresh()
        self.fill.start()

    def lanes_ready(self, lanes, first: bool) -> None:
        """Draw from `lanes`: the same ones mapped from the cache, or (`first`) the lanes built
        after the view (the timeline showed a pending note until now)."""
        self.timeline.use_lanes(lanes, first=first)
        self.fill.landed_now("lanes")
        if first:
            self.table.multi_device = self.device is None and len(lanes.devices) > 1
            self.update_details()

    # ---- selection & table ------------------------------------------------------------------------
    def refresh_selection(self) -> None:
        """The selection spec changed: rebuild the Selection, table and stats in a worker (they are
        O(N) over the trace; the timeline keeps repainting meanwhile)."""
        self.sel_gen += 1
        self.table_busy = True
        self.table_waits = False
        if len(self.loaded.trace.ops):
            self.table.empty_text = TABLE_COMPUTING    # what an empty table says until the rows come
        self.idle.interrupt()
        self.update_header()
        gen, spec, names = self.sel_gen, self.spec, self.name_mode
        settings, base, spans = self.verdict.settings, self.verdict.base_depth, self.verdict.spans
        self.run_worker(lambda: self._compute_table(gen, spec, names, settings, base, spans), thread=True,
                        exclusive=True, group="table")

    def _compute_table(self, gen: int, spec: SelectionSpec, names: str, settings, base: int, spans) -> None:
        from launchtui.analysis.backpressure import Options
        from launchtui.analysis.select import build_selection
        from launchtui.session import MISS, KernelGroups, SelectionStats
        from launchtui.tui.queries import TableRows
        from launchtui.tui.verdict import table_rows
        self.idle.wait_stopped()      # an interrupted idle-row build first lets go of its memory
        session = self.loaded.session
        tr = session.trace
        sel = build_selection(tr, spec)

        def compute():
            stats = session.get(SelectionStats(sel, Options()))   # stored by `report` too
            # the rows as soon as they are known (from the groups `report` stored, else once
            # grouped); their phase column follows
            shown = lambda rows: self.post_message(TableReady(gen, rows, stats, sel, final=False))  # noqa: E731
            totals = session.peek(KernelGroups(sel, names))
            return table_rows(tr, sel, names, settings, base, spans, shown,
                              None if totals is MISS else totals), stats
        # stored beside the model: a warm open fills the table without recomputing it
        rows, stats = session.get(TableRows(spec, names, settings, base, tuple(spans)), compute)
        self.post_message(TableReady(gen, rows, stats, sel))

    def on_table_ready(self, m: TableReady) -> None:
        if m.gen != self.sel_gen:
            return
        self.selection = m.selection
        self.update_header()
        self.stats = m.stats
        if not m.rows:
            self.table.empty_text = self._empty_table_text() if m.final else TABLE_COMPUTING
        self.table.set_rows(m.rows)
        self.verdict.panel.relayout()   # it may wrap into the rows the table leaves blank
        self.update_stats()
        self.fill.landed_now("rows")
        if m.final:
            self.fill.landed_now("phases")
            self.table_busy = False
            self.sources.selection_changed()
            self.idle.kick()
            after = getattr(self.app, "after_first_table", None)
            if after is not None:
                after(self.loaded)

    def on_sources_ready(self, m: SourcesReady) -> None:
        self.sources.ready(m.gen, m.doc)
        if self.focused is self.source_table:
            self.update_details()

    def on_site_chosen(self, m: SiteChosen) -> None:
        self.sources.highlight(m.row["frame_id"], m.row["site"])

    def action_source_pane(self) -> None:
        self.context = "showing the " + self.sources.cycle()
        self.update_details()

    def on_resize(self, event) -> None:
        self.sources.resized()
        # the verdict panel's form follows the room left once the new layout is done
        self.call_after_refresh(self.verdict.panel.relayout)
        # and once the terminal has settled, every line again: a frame written while the terminal
        # was being resized can be cut short there, and an unchanged line is never resent
        self.set_timer(0.25, self._repaint_all)

    def _repaint_all(self) -> None:
        self.refresh(repaint=True)
        for w in (self.timeline, self.verdict.panel, self.stats_line, self.details):
            w.refresh()

    def _empty_table_text(self) -> str:
        tr = self.loaded.trace
        base = "(No small-and-frequent kernel launch data found"
        if not len(tr.ops):
            return base + ": the trace has no GPU ops)"
        if self.spec.ranges is not None and self.nvtx_occ is not None and not self.nvtx_all \
                and len(self.nvtx_occ[1]) > 1:
            return base + f" in this occurrence: no kernel reaches {CONFIG.min_launches} launches; press a to pool all " \
                          f"{len(self.nvtx_occ[1])} occurrences)"
        if self.spec != self._whole() and self.selection is not None and self.selection.t0 is not None:
            return base + " in this selection; Esc widens it)"
        return base + ")"

    def on_table_row_moved(self, m: TableRowMoved) -> None:
        if self.focused is self.table or self.focused is self.source_table:
            self.update_details()

    def on_descendant_focus(self, event) -> None:
        self.update_details()

    def sort_table(self, key) -> None:
        self.table.sort_by(key)

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
        self.spec = SelectionSpec(device=self.device, window_ns=(a, b), label=f"{a / 1e9:.6f}–{b / 1e9:.6f} s")
        self.nvtx_occ = None
        self.context = f"range {fmt_duration(b - a)} selected: table restricted to it; e exports, Esc clears"
        self.refresh_selection()
        self._changed()

    def action_clear(self) -> None:
        tl = self.timeline
        if self.query_one("#filter", Input).has_class("visible") or self.table.filter_text:
            self._close_filter(clear=True)     # the table's filter first: the last thing typed
            return
        if tl.pending_mark is not None or tl.sel_range is not None:
            tl.pending_mark = None
            tl.sel_range = None
            if self.spec.window_ns is not None or self.spec.trim_s is not None:
                self.spec = self._whole()
                self.refresh_selection()
            self.context = "range cleared"
        elif tl.highlight is not None:
            tl.highlight = None
            self.context = "highlight cleared"
        elif self.spec != self._whole():
            self.spec = self._whole()
            self.nvtx_occ = None
            self.context = "selection cleared: whole trace"
            self.refresh_selection()
        self._changed()

    def action_export(self) -> None:
        self.export.start()

    # ---- verdict: record thresholds, phase level, iterations ---------------------------------------
    def on_verdict_ready(self, m: VerdictReady) -> None:
        base = self.verdict.base_depth
        if self.verdict.ready(m.result):
            if self.table_waits or self.verdict.base_depth != base:   # the phase level starts below the iteration range
                self.table_waits = False
                self.refresh_selection()
            self.update_stats()
            # after the table worker, when one was just started; drawn now when stored
            if self.idle.request(m.result.doc, m.result.idle_lane):
                self.update_details()
            self.fill.landed_now("record")
            self.fill.idle_check()

    # ---- GPU idle by cause (definitions.md §T7) ----------------------------------------------------
    def on_idle_ready(self, m: IdleReady) -> None:
        if self.idle.ready(m):
            self.update_details()
        self.fill.idle_check()

    def action_idle_cause(self, direction: int) -> None:
        self._idle_said(self.idle.cycle(direction))

    def action_idle_gap(self, direction: int) -> None:
        self._idle_said(self.idle.step(direction))

    def _idle_said(self, why: str | None) -> None:
        if why:
            self.notify(why)
            self.context = why
            self.update_details()

    def action_verdict_setting(self, what: str, direction: int = 1) -> None:
        label = self.verdict.change(what, direction)
        self.context = f"table and verdict: {label}"
        self.refresh_selection()
        self.verdict.refresh()
        self.update_details()

    def action_verdict_expand(self) -> None:
        self.context = self.verdict.toggle_expanded()
        self.update_details()

    # ---- modes ------------------------------------------------------------------------------------
    def action_cycle_device(self) -> None:
        devs = [None] + list(self.loaded.lanes.devices)
        i = devs.index(self.device) if self.device in devs else 0
        self.spec = replace(self.spec, device=devs[(i + 1) % len(devs)])
        self.timeline.device = self.device
        self.table.multi_device = self.device is None and len(self.loaded.lanes.devices) > 1
        self.context = "showing all devices" if self.device is None else f"showing GPU {self.device}"
        self.refresh_selection()
        self.verdict.refresh()
        self._changed()

    def action_toggle_time(self) -> None:
        self.timeline.relative = not self.timeline.relative
        self.context = "relative time (from the first kernel)" if self.timeline.relative else "absolute time"
        self._changed()

    def action_toggle_names(self) -> None:
        self.name_mode = "full" if self.name_mode == "short" else "short"
        self.timeline.highlight = None
        self.context = ("distinguishing kernel names (elementwise_kernel<AddcmulFunctor>)" if self.name_mode == "full"
                        else "short kernel names (Nsight-compatible)")
        self.refresh_selection()
        self._changed()

    def action_toggle_nccl(self) -> None:
        self.table.toggle_nccl()
        self.update_stats()

    def action_filter(self) -> None:
        inp = self.query_one("#filter", Input)
        # from the timeline, / searches its ops by name; from the table, it filters the rows
        self.searching = self.focused is self.timeline
        inp.placeholder = ("find the next GPU op whose name contains… (Enter jumps; again: the next)"
                           if self.searching else "filter kernels by name (Enter keeps, Esc clears)")
        inp.add_class("visible")
        inp.value = getattr(self, "last_search", "") if self.searching else self.table.filter_text
        inp.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter" and not getattr(self, "searching", False):
            self.table.filter_text = event.value
            self._filter_said()

    def _filter_said(self) -> None:
        """The stats line and the details line say the filter and the rows it leaves, now."""
        t = self.table
        self.context = (f"filter '{t.filter_text}': {len(t.order)} of {len(t.rows)} rows (Esc clears)"
                        if t.filter_text else "filter cleared")
        self.update_stats()
        self.update_details()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter" and getattr(self, "searching", False):
            from launchtui.tui.search import search
            search(self, event.value.strip())
        elif event.input.id == "filter":
            self._close_filter(clear=False)

    def _close_filter(self, clear: bool) -> None:
        inp = self.query_one("#filter", Input)
        if getattr(self, "searching", False):   # Esc on a search: nothing to clear in the table
            self.searching = False
            inp.remove_class("visible")
            self.timeline.focus()
            return
        if clear:
            inp.value = ""
            self.table.filter_text = ""
        inp.remove_class("visible")
        self.table.focus()
        self._filter_said()

    # ---- call sites (definitions.md §S) -----------------------------------------------------------
    def _api_at_cursor(self) -> int:
        from launchtui.tui import lane_view as lanes
        row = self.timeline.current_row
        t0, t1 = self.timeline.cursor_cell()
        if row.kind == "hw":
            k = lanes.interval_at(row.lane, t0, t1)
            return int(self.loaded.trace.ops.api[k]) if k >= 0 else -1
        if row.kind == "api":
            return lanes.interval_at(row.lane, t0, t1)
        return -1

    def action_call_stack(self) -> None:
        from launchtui.tui.screens import InfoScreen
        from launchtui.tui.sources_view import stack_text
        a = self._api_at_cursor()
        if a < 0:
            self.notify("Put the cursor on a kernel (HW row) or a launch call (API row) first.")
            return
        self.app.push_screen(InfoScreen(stack_text(self.loaded.trace, a), title="Call stack of the launch"))

    def action_call_sites(self) -> None:
        from launchtui.analysis.select import WHOLE
        from launchtui.tui.site_picker import SitePicker
        from launchtui.tui.sources_view import site_entries
        tr = self.loaded.trace
        sel = self.selection if self.selection is not None else WHOLE
        entries, cover, hint = site_entries(tr, sel)
        if not entries:
            self.notify(hint or "No call sites in this selection.", severity="warning")
            return

        def done(entry) -> None:
            if entry is not None:
                self.sources.highlight(entry.frame_id, entry.name)
        self.app.push_screen(SitePicker(entries, fmt_duration, cover), done)

    def action_graph_table(self) -> None:
        from launchtui.tui.graphs_view import open_graph_table
        open_graph_table(self)

    def action_info(self) -> None:
        from launchtui.analysis.info import render_info, trace_info
        from launchtui.tui.screens import InfoScreen
        self.app.push_screen(InfoScreen(render_info(trace_info(self.loaded.trace))))
