"""The progress line of the main view's first fill (docs/definitions.md §T10).

A cold open shows the timeline as soon as the model and its lanes exist; the case record (verdict,
idle by cause, graphs), the kernel table's rows, their phase column and the idle row then land one
by one from their workers. This line names what is still being computed and the share of the
stages done, and hides itself once every stage landed, so the complete screen is the same as
one filled at once. The line shows only once the fill outlasts a short delay (LINE_DELAY), so a
warm reopen, filled at once, never shows it.
"""
from __future__ import annotations

import time

from textual.widgets import Static

from launchtui import heap

LINE_DELAY = 0.3   # s: a fill that completes sooner (a warm reopen) never shows its progress line

# (key, what the line calls it), in the order they usually land
STAGES = (
    ("lanes", "timeline lanes"),
    ("record", "case record (verdict, idle by cause, graphs)"),
    ("rows", "kernel table rows"),
    ("phases", "phase column"),
    ("idle", "idle row"),
)
LABEL = dict(STAGES)


class FillProgress:
    """Which stages of the first fill landed; `text()` is the progress line, "" once complete."""

    def __init__(self) -> None:
        self.landed: list[str] = []
        self.times: dict[str, float] = {}    # stage -> time.perf_counter() when it landed

    def land(self, stage: str) -> bool:
        """Record `stage` as landed; True when that changed the line."""
        if stage not in LABEL or stage in self.landed:
            return False
        self.landed.append(stage)
        self.times[stage] = time.perf_counter()
        return True

    @property
    def complete(self) -> bool:
        return len(self.landed) == len(STAGES)

    @property
    def share(self) -> float:
        return len(self.landed) / len(STAGES)

    def pending(self) -> list[str]:
        return [key for key, _ in STAGES if key not in self.landed]

    def text(self) -> str:
        if self.complete:
            return ""
        waiting = self.pending()
        return (f" filling {len(self.landed)}/{len(STAGES)} ({self.share:.0%}): computing "
                + LABEL[waiting[0]] + (f"; then {', '.join(LABEL[k] for k in waiting[1:])}" if waiting[1:] else "")
                + " · keys work meanwhile")


class FillView(FillProgress):
    """The first fill on a MainScreen: its stages, the progress line (`line`, shown once the fill
    outlasts LINE_DELAY) and the table preview worker. The screen reports each stage landing."""

    def __init__(self, screen) -> None:
        super().__init__()
        self.screen = screen
        self.shown = False
        self.line = Static("", id="fill", classes="-done")

    def start(self) -> None:
        """The view is mounted (its verdict worker started): the rows beside the record on a trace
        read afresh (stored ones come with the verdict), and the line after its delay."""
        scr = self.screen
        if len(scr.loaded.trace.ops) and scr.loaded.read_cold:
            scr.run_worker(self._preview_table, thread=True, group="table-preview")
        self.landed_now(None if scr.loaded.lanes.pending else "lanes")
        scr.set_timer(LINE_DELAY, self._show)

    def landed_now(self, stage: str | None) -> None:
        """`stage` landed (None: just redraw): the line follows, hidden once complete. The stage
        that completes the fill gives the heap's free memory back (its temporaries are done) and
        redraws the details, whose Kineto launch details wait for it (search.op_details)."""
        if stage is not None and not self.land(stage):
            return
        if stage is not None and self.complete:
            heap.release_free()
            self.screen.update_details()
        if self.complete or self.shown:
            self.line.update(self.text())
            self.line.set_class(self.complete, "-done")

    def idle_check(self) -> None:
        """The idle row is done once the record landed and its worker is not running (a record
        that judges no device starts none)."""
        if self.screen.verdict.result is not None and not self.screen.idle.busy:
            self.landed_now("idle")

    def _show(self) -> None:
        if not self.complete:
            self.shown = True
            self.landed_now(None)

    def _preview_table(self) -> None:
        """The first table's rows from the kernel groups, while the record computes (its phase
        column needs the record's iterations: the table worker fills it after the verdict). The
        groups and stats it leaves in the session are what that worker then reads."""
        from launchtui.analysis.backpressure import Options
        from launchtui.session import KernelGroups, SelectionStats
        from launchtui.tui.messages import TableReady
        from launchtui.tui.verdict import preview_rows
        scr = self.screen
        session, names, sel = scr.loaded.session, scr.name_mode, scr.selection
        stats = session.get(SelectionStats(sel, Options()))
        rows = preview_rows(session.trace, sel, names, scr.verdict.settings, session.get(KernelGroups(sel, names)))
        scr.post_message(TableReady(0, rows, stats, sel, final=False))
