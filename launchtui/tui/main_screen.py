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
from pathlib import Path

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from launchtui.analysis.config import CONFIG
from launchtui.analysis.select import SelectionSpec
from launchtui.tui.export_flow import ExportFlow
from launchtui.tui.format import fmt_duration
from launchtui.tui.keys import MAIN_BINDINGS
from launchtui.tui.idle_view import IdleView
from launchtui.tui.messages import (CursorMoved, IdleReady, KernelChosen, SiteChosen, SourcesReady, TableReady,
                                    TableRowMoved)
from launchtui.tui.sources_view import SourcesPane
from launchtui.tui.widgets.kernel_table import KernelTable
from launchtui.tui.widgets.source_table import SourceTable
from launchtui.tui.widgets.panel import TextPanel
from launchtui.tui.verdict import VerdictReady
from launchtui.tui.verdict_panel import VerdictView
from launchtui.tui.widgets.timeline import LEGEND, Timeline, legend
from launchtui.errors import printable

CSS = """
MainScreen { layout: vertical; }
MainScreen #header { height: 2; background: $boost; color: $text; text-wrap: nowrap; text-overflow: ellipsis; }
MainScreen #details { height: 4; background: $boost; }
MainScreen #stats { height: 1; color: $text-muted; }
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


def _rows(t) -> str:
    """'1 row', '6 rows', with a filter '2 of 6 rows'."""
    n = len(t.order)
    of = f" of {len(t.rows)}" if t.filter_text else ""
    return f"{n}{of} row{'' if n == 1 and not of else 's'}"


def _escape(text: str) -> str:
    from rich.markup import escape
    return escape(text)


class MainScreen(Screen):
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
        yield Vertical(id="verdict")
        self.table = KernelTable(id="table")
        self.source_table = SourceTable(id="sources")
        yield Horizontal(self.table, self.source_table, id="tables")
        yield Input(placeholder="filter kernels by name (Enter keeps, Esc clears)", id="filter")
        yield Footer()

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

    def lanes_ready(self, lanes, first: bool) -> None:
        """Draw from `lanes`: the same ones mapped from the cache, or (`first`) the lanes built
        after the view (the timeline showed a pending note until now)."""
        self.timeline.use_lanes(lanes, first=first)
        if first:
            self.table.multi_device = self.device is None and len(lanes.devices) > 1
            self.update_details()

    # ---- header / details / stats ---------------------------------------------------------------
    def origin(self):
        return self.timeline.origin_ns if self.timeline.relative else None

    def update_header(self) -> None:
        tr = self.loaded.trace
        src = tr.source
        w = self.loaded.windows()[0]
        win = f"{w[0] / 1e9:.6f}–{w[1] / 1e9:.6f} s ({fmt_duration(w[1] - w[0])})" if w else "no GPU ops"
        devs = ", ".join(f"{d}: {n}" if n and n != f"GPU {d}" else str(d)
                         for d, n in sorted(tr.devices.items())) or "none"
        shown = "all" if self.device is None else str(self.device)
        ver = f" {src.version}" if src.version else ""
        l1 = f"{self.header_prefix()} {printable(Path(src.path).name)} │ {src.producer}{ver} │ GPUs {devs}"
        l2 = (f" selected: {self._spec_label()} │ device shown: {shown} │ GPU-op window {win} │ "
              f"names: {self.name_mode}")
        self.query_one("#header", Static).update(_escape(l1) + "\n" + _escape(l2))

    def header_prefix(self) -> str:
        """What leads the header's first line (a rank's view names the rank)."""
        return ""

    def _spec_label(self) -> str:
        if self.spec.label:
            return self.spec.label
        if self.selection is not None:
            return self.selection.label
        return "whole trace"

    def on_cursor_moved(self, m: CursorMoved) -> None:
        self.update_details()

    def update_details(self) -> None:
        from launchtui.analysis import lanes
        from launchtui.tui import details
        tl = self.timeline
        tr = self.loaded.trace
        if self.focused is self.source_table:
            self._site_details()
            return
        trow = self.table.selected_row() if self.focused is self.table else None
        if trow is not None:
            label = self.selection.label if self.selection is not None else "whole trace"
            head = f"table row {self.table.cursor + 1}/{len(self.table.order)}"
            if self.context:
                head += f" │ {self.context}"
            self.details.set_lines([head] + details.describe_row(trow, label))
            return
        row = tl.current_row
        t0, t1 = tl.cursor_cell()
        origin = self.origin()
        if row.kind == "hw":
            k = lanes.interval_at(row.lane, t0, t1)
            if k >= 0:
                lines = details.describe_op(tr, k, origin)
                from launchtui.tui.search import op_details
                extra = op_details(self, k)
                if extra:   # grid / block / input shapes: on the kernel's own line
                    lines[0] += f"  · {extra}"
            else:   # idle: with what is pending on the stream then (its queue row's series)
                q = tl.row_index("queue", row.device, ("queue", row.lane.device, row.lane.stream))
                pending = int(tl.rows[q].lane.value_at([t0])[0]) if q >= 0 else None
                lines = details.describe_idle(tr, row.lane, t0, origin, pending)
        elif row.kind == "api":
            a = lanes.interval_at(row.lane, t0, t1)
            lines = details.describe_api(tr, a, row.lane, origin) if a >= 0 else \
                [f"no launch call on thread {details.thread_label(tr, row.lane.thread)} at the cursor", "", ""]
        elif row.kind == "idle":
            lines = self.idle.describe_at(t0, t1, origin)
        elif row.kind == "queue":
            lines = details.describe_queue(tr, row.lane, t0, t1, self.loaded.marks, origin, tl.threshold)
        elif row.kind == "nvtx":
            r = lanes.range_at(row.lane, t0, t1)
            lines = details.describe_range(tr, r, origin) if r >= 0 else ["no range at the cursor on this row", "", ""]
        else:
            lines = [row.label, "", ""]
        head = f"cursor {details.fmt_time(t0, origin)} │ {fmt_duration(tl.view.ns_per_col)}/col"
        if self.context:
            head += f" │ {self.context}"
        self.details.set_lines([head] + lines[:3])
        self._update_legend(row.kind)

    def _update_legend(self, kind: str) -> None:
        """The legend with the idle row's entry once it is drawn, first while the cursor is on that row
        (the line is cut at the width); set only when that changes (Static.update relayouts)."""
        key = (self.idle.lane is not None, "idle" if kind == "idle" else None)
        if key != self._legend_key:
            self._legend_key = key
            self.query_one("#legend", Static).update(legend(idle=key[0], first=key[1]))

    def _site_details(self) -> None:
        from launchtui.tui.sources_view import describe_site
        st = self.source_table
        row = st.selected_row()
        head = f"call site {st.cursor + 1}/{len(st.order)}" if row is not None else "call sites"
        if self.context:
            head += f" │ {self.context}"
        label = self.selection.label if self.selection is not None else "whole trace"
        self.details.set_lines([head] + (describe_site(row, label, st.doc["per"]) if row is not None else
                                         [st.coverage(), "", ""]))

    def update_stats(self) -> None:
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
        t = self.table
        filt = f" │ filter '{t.filter_text}'" if t.filter_text else ""
        nccl = " │ NCCL hidden" if t.hide_nccl else ""
        self.stats_line.set_lines([
            f" Small & frequent ({self.verdict.settings.label()}) in {label}: {_rows(t)} │ {s['launches']:,} "
            f"launches, API {s['launch_api_ms']:.3f} ms{q} │ {self.verdict.mark_counts(self.visible_marks())}"
            f"{filt}{nccl}"])

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
        from launchtui.analysis.select import build_selection
        from launchtui.tui.loader import selection_stats
        from launchtui.tui.verdict import table_rows
        from launchtui.result_cache import memo
        self.idle.wait_stopped()      # an interrupted idle-row build first lets go of its memory
        tr = self.loaded.trace
        sel = build_selection(tr, spec)

        def compute():
            from launchtui import result_cache as rc
            from launchtui.analysis.backpressure import Options
            stats = rc.lookup(rc.SELECTION_STATS, (sel, Options()), self.loaded.results_entry)   # `report`'s
            if stats is rc.MISS:
                stats = selection_stats(tr, sel)
            # the rows as soon as they are known (from the groups `report` stored, else once
            # grouped); their phase column follows
            shown = lambda rows: self.post_message(TableReady(gen, rows, stats, sel, final=False))  # noqa: E731
            totals = rc.lookup(rc.KERNEL_GROUPS, (sel, names), self.loaded.results_entry)
            return table_rows(tr, sel, names, settings, base, spans, shown,
                              None if totals is rc.MISS else totals), stats
        # stored beside the model: a warm open fills the table without recomputing it
        rows, stats = memo("tui-table", (spec, names, settings, base, list(spans)), self.loaded.results_entry,
                           compute)
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
        if m.final:
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

    # ---- timeline navigation -------------------------------------------------------------------
    def _changed(self) -> None:
        """The view state changed: repaint the timeline and the details panel in the same frame."""
        self.timeline.refresh()
        self.update_details()

    def action_pan(self, cols: int) -> None:
        self.timeline.pan(cols)

    def action_page(self, direction: int) -> None:
        self.timeline.page(direction)

    def action_zoom(self, factor: float) -> None:
        v = self.timeline.view
        before = v.ns_per_col
        self.timeline.zoom(factor)
        if factor < 1 and v.ns_per_col == before:
            self.notify(f"Zoomed in as far as this trace's clock resolves ({fmt_duration(v.min_ns_per_col)}).")

    def action_fit(self) -> None:
        self.timeline.fit()

    def action_goto_start(self) -> None:
        self.timeline.goto(self.timeline.extent[0])

    def action_goto_end(self) -> None:
        self.timeline.goto(self.timeline.extent[1])

    def jump(self, t: int, context: str | None = None) -> None:
        if context is not None:
            self.context = context
        self.timeline.goto(t)

    # ---- NVTX --------------------------------------------------------------------------------------
    def nvtx_names(self) -> list:
        return self.loaded.nvtx_summary()

    def action_nvtx_picker(self) -> None:
        entries = self.nvtx_names()
        if not entries:
            self.notify("This trace has no NVTX ranges (or user annotations).", severity="warning")
            return
        from launchtui.tui.screens import NvtxPicker

        def done(entry) -> None:
            if entry is not None:
                self.jump_to_range_name(entry)
        self.app.push_screen(NvtxPicker(entries, fmt_duration), done)

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
            spec = SelectionSpec(device=self.device, ranges=tuple(int(x) for x in occ.tolist()), label=label)
            what = f"table pools all {len(occ)} occurrences (a: this one only)"
        else:
            label = f"{name} ({pos + 1}/{len(occ)})"
            spec = SelectionSpec(device=self.device, ranges=(r,), label=label)
            what = "table restricted to its launches" + (" (a: pool all occurrences)" if len(occ) > 1 else "")
        self.timeline.sel_range = None
        self.timeline.pending_mark = None
        self.context = f"range {name} {pos + 1}/{len(occ)}: {what}; [ / ] step, Esc clears"
        self._zoom_to_range(r)
        if spec != self.spec:
            self.spec = spec
            self.refresh_selection()
        self._changed()

    def action_all_occurrences(self) -> None:
        if self.nvtx_occ is None:
            self.notify("Pick a range first: o (names) or O (optimizer); a then pools its occurrences.")
            return
        self.nvtx_all = not self.nvtx_all
        self._select_occurrence()

    def _zoom_to_range(self, r: int) -> None:
        rg = self.loaded.trace.ranges
        s, e = int(rg.start[r]), int(rg.end[r])
        tl = self.timeline
        tl.view.fit(s, e, margin=0.05)
        # put the cursor inside the range, on the NVTX row of its thread if shown
        tl.view.goto(s + (e - s) // 2)
        for i, row in enumerate(tl.rows):
            if row.kind == "nvtx" and row.lane.thread == int(rg.thread[r]) and row.lane.depth == int(rg.depth[r]):
                tl.select_row(i)
                break
        from launchtui.tui.search import keep_hw_in_view
        keep_hw_in_view(self)

    def action_occurrence(self, step: int) -> None:
        if self.nvtx_occ is None:
            self.notify("Pick a range first: o (names) or O (optimizer); [ / ] then step through its "
                        "occurrences.")
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
        return [e for e in self.loaded.marks if self.device is None or e.device == self.device]

    def action_mark(self, step: int) -> None:
        import bisect

        from launchtui.tui import details
        marks = self.visible_marks()
        if not marks:
            self.notify("No backpressure: no stream reached the threshold and no launch spiked.",
                        severity="information")
            self.context = "no backpressure episodes or launch spikes"
            self.update_details()
            return
        tl = self.timeline
        cur = int(tl.view.cursor)
        # the next mark at least one column away: zoomed out, one press skips the spikes that share
        # a cell (an episode holds hundreds); zoomed in, every spike is a stop
        col = max(1, int(tl.view.ns_per_col))
        starts = [e.start for e in marks]
        wrapped = ""
        if step > 0:
            i = bisect.bisect_left(starts, cur + col)
            if i >= len(marks):
                i, wrapped = 0, "past the last mark: back to the first. "
        else:
            i = bisect.bisect_right(starts, cur - col) - 1
            if i < 0:
                i, wrapped = len(marks) - 1, "before the first mark: on to the last. "
        e = marks[i]
        if e.kind == "queue":
            j = tl.row_index("queue", e.device, ("queue", e.device, e.stream))
        else:
            th = int(self.loaded.trace.api.thread[e.worst_api]) if e.worst_api >= 0 else -1
            j = tl.row_index("api", e.device, ("api", e.device, th))
            if j < 0:   # a spike whose op is not in the trace: the thread's API row on any device
                j = next((i for i, r in enumerate(tl.rows) if r.kind == "api" and r.lane.thread == th), -1)
        self.current_mark = e
        self.context = details.describe_mark(self.loaded.trace, e, i + 1, len(marks), self.origin())
        if e.kind == "spike" and e.worst_api in tl.stall_apis:
            words = tl.stall_apis.get(e.worst_api) if isinstance(tl.stall_apis, dict) else None
            self.context = f"{words or 'slow launch, not a blocked call'}: " + self.context
        if wrapped:
            self.notify(wrapped.strip())
            self.context = wrapped + self.context
        if j >= 0:
            tl.select_row(j)
        self.jump(e.start)

    # ---- kernel instances ---------------------------------------------------------------------------
    def on_kernel_chosen(self, m: KernelChosen) -> None:
        import numpy as np

        from launchtui.analysis import lanes
        from launchtui.analysis.launches import launched_kernels, name_ids
        tr = self.loaded.trace
        r = m.row
        nid = tr.strings.lookup(r["kernel_name"])
        # the kernels this row counts: launched inside the current selection (so n / N step through
        # exactly `launch_count` instances; definitions.md §T3)
        ids = name_ids(tr, self.name_mode)
        counted = np.full(len(ids), -1, ids.dtype)
        sel = self.selection
        k = launched_kernels(tr, sel) if sel is not None else launched_kernels(tr)
        counted[k] = ids[k]
        inst = lanes.kernel_instances(tr, counted, nid, r["device_id"])
        self.highlight_label = None
        self.timeline.highlight = inst
        if not len(inst):
            self.notify(f"No instances of {r['kernel_name']} on the timeline.")
            return
        self._goto_instance(0)

    def _goto_instance(self, i: int) -> None:
        tl = self.timeline
        inst = tl.highlight
        k = int(inst.ops[i])
        ops = self.loaded.trace.ops
        j = tl.row_index("hw", int(ops.device[k]), ("hw", int(ops.device[k]), int(ops.stream[k])))
        name = self.loaded.trace.strings[int(ops.name[k])]
        self.instance_pos = i
        if self.highlight_label:   # a call site's launches
            self.context = (f"{self.highlight_label}: {len(inst):,} launches highlighted; launch {i + 1} "
                            f"({name}) (n / N step, Esc clears)")
        else:
            self.context = f"{name}: instance {i + 1}/{len(inst)} in {self._spec_label()} (n / N step)"
        if j >= 0:
            tl.select_row(j)
        self.jump(int(ops.start[k]))

    def action_instance(self, step: int) -> None:
        inst = self.timeline.highlight
        if inst is None or not len(inst):
            self.notify("Choose a kernel first: Tab to the table, then Enter on a row; n / N step through "
                        "its launches.")
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
            self.idle.request(m.result.doc)     # after the table worker, when one was just started

    # ---- GPU idle by cause (definitions.md §T7) ----------------------------------------------------
    def on_idle_ready(self, m: IdleReady) -> None:
        if self.idle.ready(m):
            self.update_details()

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

    def action_iteration(self, direction: int) -> None:
        tl = self.timeline
        hit = self.verdict.iteration_target(int(tl.view.cursor), direction)
        if hit is None:
            n = len(self.verdict.result.iteration_spans) if self.verdict.result else 0
            self.notify("No iterations found in this trace (the record uses the whole window)." if n < 2 else
                        ("Already at the last iteration." if direction > 0 else "Already at the first iteration."))
            return
        k, a, b = hit
        tl.view.fit(a, b, margin=0.02)
        tl.view.goto(a + (b - a) // 2)
        self.context = f"iteration {k + 1}/{len(self.verdict.result.iteration_spans)} ({(b - a) / 1e6:,.3f} ms); {{ / }} step"
        self._changed()

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
        from launchtui.analysis import lanes
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
        from launchtui.tui.sources_view import SitePicker, site_entries
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

    def action_info(self) -> None:
        from launchtui.analysis.info import render_info, trace_info
        from launchtui.tui.screens import InfoScreen
        self.app.push_screen(InfoScreen(render_info(trace_info(self.loaded.trace))))
