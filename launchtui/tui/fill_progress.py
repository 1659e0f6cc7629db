"""The progress line of the main view's first fill (docs/definitions.md §T12).

A cold open shows the timeline as soon as the model and its lanes exist; the case record (verdict,
idle by cause, graphs), the kernel table's rows, their phase column and the idle row then land one
by one from their workers. This line names what is still being computed and the share of the
stages done, and hides itself once every stage landed, so the complete screen is the same as
one filled at once. The line shows only once the fill outlasts a short delay (main_screen), so a
warm reopen, filled at once, never shows it.
"""
from __future__ import annotations

import time

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
