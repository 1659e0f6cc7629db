"""MainScreen's text panels (a mixin of tui/main_screen.py): the header, what lies under the cursor or
the table cursor (dispatched on the row's kind to tui/details.py), the legend and the stats line."""
from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from launchtui.errors import printable
from launchtui.tui.format import fmt_duration
from launchtui.tui.messages import CursorMoved
from launchtui.tui.widgets.timeline import legend


def _escape(text: str) -> str:
    from rich.markup import escape
    return escape(text)


def _rows(t) -> str:
    """'1 row', '6 rows', with a filter '2 of 6 rows'."""
    n = len(t.order)
    of = f" of {len(t.rows)}" if t.filter_text else ""
    return f"{n}{of} row{'' if n == 1 and not of else 's'}"


class Details:
    """The screen's header, details, legend and stats lines; `self` is the MainScreen."""

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
        from launchtui.tui import lane_view as lanes
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
                from launchtui.tui.capture_view import captured_line
                cap = captured_line(self, k)
                if cap:     # --capture: what the replayed kernel was captured from
                    lines[2] = f"{cap}   │ {lines[2]}"
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
