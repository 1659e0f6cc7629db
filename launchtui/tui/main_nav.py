"""MainScreen's moves over the timeline (a mixin of tui/main_screen.py, which holds the state): pan,
page, zoom and jumps; NVTX ranges and their occurrences (o, [ ], a, O); backpressure marks (b B);
the chosen kernel's launches (n N); iterations ({ })."""
from __future__ import annotations

from launchtui.analysis.select import SelectionSpec
from launchtui.tui.format import fmt_duration
from launchtui.tui.messages import KernelChosen


class Navigation:
    """The screen's keys that move the cursor or the view; `self` is the MainScreen."""

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

        from launchtui.tui import lane_view as lanes
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

