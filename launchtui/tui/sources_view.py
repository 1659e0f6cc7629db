"""Call sites in the TUI (definitions.md §S): the whole stack of the launch under the cursor (`c`),
a picker of the selection's call sites (`C`), and the call-site pane beside the kernel table (`w`
cycles kernels / both / call sites). Enter on a site highlights its launches on the timeline, stepped
with n / N like a kernel's instances. The picker's screen (tui.site_picker) is imported when first
opened, as every pane not shown at start."""
from __future__ import annotations

from dataclasses import dataclass

from launchtui.analysis.config import CONFIG


@dataclass
class SiteEntry:
    """One call site as the picker lists it (the fields NvtxPicker shows)."""
    name: str          # "file:line function"
    count: int         # launches
    total_ns: int      # launch-API time
    frame_id: int      # string id of the frame, the key of `sources.op_sites`


def site_entries(trace, sel) -> tuple[list[SiteEntry], str, str]:
    """(entries, coverage line, hint when there are none) for the selection."""
    from launchtui.analysis import sources
    doc = sources.source_table(trace, sel, limit=0)
    c = doc["coverage"]
    cover = f"{c['attributed']} of {c['launches']} launches attributed"
    entries = [SiteEntry(s["site"], s["launches"], int(round(s["launch_api_ms"] * 1e6)),
                         trace.strings.lookup(s["frame"])) for s in doc["sites"]]
    return entries, cover, doc["hint"]


def stack_text(trace, api_row: int) -> str:
    """The whole call stack of one API call, innermost first, the call site marked."""
    from launchtui.analysis import sources
    st = sources.launch_stack(trace, api_row)
    if st is None:
        return ("No call stack for this call."
                + ("" if len(trace.stacks) else "\n" + sources.RECORD_HINT))
    how = " (backward: the forward op's stack)" if st["via_backward"] else ""
    lines = [f"call site: {st['site'] or '(no user frame)'}{how}", ""]
    site = st["site"]
    for f in st["frames"]:
        mark = "▶ " if site and sources.site_label(f) == site else "  "
        lines.append(mark + f)
    return "\n".join(lines)


def describe_site(row: dict, label: str, per: str) -> list[str]:
    """The details panel for the call-site row under the pane's cursor (three lines); `per`: the
    document's "iteration" or "window"."""
    tops = ", ".join(f"{k['kernel_name']} ×{k['launches']:,}" for k in row["top_kernels"])
    each = f", {row['launches_per_iteration']:,} per iteration" if per == "iteration" else ""
    return [row["frame"],
            f"{row['launches']:,} launches in {label}{each} ({row['small_launches']:,} of them ran < "
            f"{CONFIG.small_kernel_ns / 1000:g} µs), launch API {row['launch_api_ms']:,.3f} ms; Enter highlights them",
            f"top kernels: {tops}" if tops else ""]


WIDE = 120      # from this width the pane sits beside the kernel table; below, it takes the whole width
MODES = ("kernels", "both", "sources")


class SourcesPane:
    """The call-site pane's state on the MainScreen: which of the two tables show (`w` cycles), the
    call-site worker, and highlighting a site's launches (Enter in the pane, or the `C` picker)."""

    def __init__(self, screen):
        self.screen = screen
        self.table = None            # the SourceTable, once composed
        self.mode = "kernels"
        self.gen = 0
        self.stale = True            # the selection changed while the pane was hidden

    def mount(self, table, box) -> None:
        self.table, self.box = table, box
        tr = self.screen.loaded.trace
        wide = self.screen.app.size.width >= WIDE
        self.set_mode("both" if wide and len(tr.stacks) else "kernels", focus=False)

    @property
    def visible(self) -> bool:
        return self.mode != "kernels"

    def set_mode(self, mode: str, focus: bool = True) -> None:
        if mode == "both" and self.screen.app.size.width < WIDE:
            mode = "sources"
        self.mode = mode
        for m in MODES:
            self.box.set_class(m == mode, f"-{m}")
        scr = self.screen
        if focus:
            if mode == "kernels" and scr.focused is self.table:
                scr.table.focus()
            elif mode != "kernels":
                self.table.focus()
        elif mode == "sources" and scr.focused is scr.table:
            self.table.focus()
        if self.visible and self.stale:
            self.refresh()

    def cycle(self) -> str:
        """Kernels → both (wide terminals) → call sites → kernels; returns what now shows."""
        order = [m for m in MODES if m != "both" or self.screen.app.size.width >= WIDE]
        i = order.index(self.mode) if self.mode in order else 0
        self.set_mode(order[(i + 1) % len(order)])
        return {"kernels": "kernel table", "both": "kernel table and call sites side by side",
                "sources": "call sites (full width)"}[self.mode]

    def resized(self) -> None:
        """Below WIDE columns the two tables do not share the width: show the focused one."""
        if self.mode == "both" and self.screen.app.size.width < WIDE:
            self.set_mode("sources" if self.screen.focused is self.table else "kernels", focus=False)

    def selection_changed(self) -> None:
        self.stale = True
        if self.visible:
            self.refresh()

    def refresh(self) -> None:
        """Recompute the call sites of the current selection in a worker (O(launches), per distinct
        stack; the timeline keeps repainting meanwhile)."""
        from launchtui.analysis import sources
        from launchtui.analysis.select import WHOLE
        from launchtui.tui.messages import SourcesReady
        scr = self.screen
        self.gen += 1
        self.stale = False
        gen, tr = self.gen, scr.loaded.trace
        sel = scr.selection if scr.selection is not None else WHOLE
        names = scr.name_mode

        def work() -> None:
            scr.post_message(SourcesReady(gen, sources.source_table(tr, sel, limit=0, names=names)))
        scr.run_worker(work, thread=True, exclusive=True, group="sources")

    def ready(self, gen: int, doc: dict) -> None:
        if gen == self.gen:
            self.table.set_doc(doc, self.screen.loaded.trace.strings)

    def highlight(self, frame_id: int, label: str) -> int:
        """Highlight the selection's launches from one call site: their launch calls on the API rows
        and the ops they launched on the HW rows; the cursor goes to the first. Returns how many."""
        import numpy as np

        from launchtui.analysis import sources
        from launchtui.tui import lane_view
        from launchtui.analysis.select import WHOLE
        scr = self.screen
        tr = scr.loaded.trace
        sel = scr.selection if scr.selection is not None else WHOLE
        idx = np.nonzero(sources.op_sites(tr, sel) == frame_id)[0]
        if scr.device is not None:
            idx = idx[tr.ops.device[idx] == scr.device]
        scr.highlight_label = label
        scr.timeline.highlight = lane_view.op_instances(tr, idx, with_api=True)
        if not len(idx):
            scr.notify(f"No launches from {label} on the timeline.")
            return 0
        scr._goto_instance(0)
        return len(idx)
