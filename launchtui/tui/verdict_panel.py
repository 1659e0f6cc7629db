"""The verdict panel widget and its state on a MainScreen (definitions.md §T6): the richest form
whose lines leave the timeline its rows, then the kernel table's blank rows for more lines and for
wrapping them instead of eliding; `V` shows every line in full."""
from __future__ import annotations

from rich.style import Style

from launchtui.tui.verdict import (COMPACT, FULL, MAX_AVG_US_STEPS, MIN_LAUNCHES_STEPS, ONE, PHASE_LEVELS, VerdictReady,
                                   VerdictResult, VerdictSettings, compute, panel_lines, step)
from launchtui.tui.widgets.panel import TextPanel


def wrap_lines(lines: list[str], styles: list[Style], width: int, budget: int) -> tuple[list[str], list[Style]]:
    """Each line that is wider than `width` continued on the next rows (at word boundaries,
    indented two), first lines first, while the total stays within `budget` rows; a line that
    cannot wrap whole keeps what fits and is elided on its last row."""
    out, out_styles = [], []
    left = budget - len(lines)          # rows beyond one per line
    for text, style in zip(lines, styles):
        parts = []
        rest = text
        while len(rest) > width and left > 0:
            cut = _break_at(rest, width)
            parts.append(rest[:cut].rstrip())
            rest = "   " + rest[cut:].lstrip()
            left -= 1
        parts.append(rest)
        out += parts
        out_styles += [style] * len(parts)
    return out, out_styles


def _break_at(text: str, width: int) -> int:
    """Where to break `text` to fit `width`: after the last " · ", "; " or ", " in the line's
    right half (a part stays whole: `| sync 0.2`), else the last space, else at the width."""
    for sep in (" · ", "; ", ", "):
        pos = text.rfind(sep, 0, width - len(sep) + 2)
        if pos > width // 2:
            return pos + (1 if sep == " · " else len(sep) - 1)
    sp = text.rfind(" ", 0, width + 1)
    return sp if sp > width // 2 else width


class VerdictPanel(TextPanel):
    """The verdict lines. Height rule: the richest form (FULL, COMPACT, ONE) whose lines leave the
    timeline MIN_TIMELINE_ROWS rows of lanes below its axis; `V` expands to FULL whatever the room."""

    DEFAULT_CSS = """
    VerdictPanel { height: auto; background: $panel; }
    """
    MAX_LINES = 10
    MIN_TIMELINE_ROWS = 6

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.doc: dict | None = None
        self.settings = VerdictSettings()
        self.expanded = False
        self.form = FULL

    def room(self) -> int | None:
        """Lines the panel may take: its own height plus what the timeline has beyond its axis, the
        minimum rows and the "more rows" hint (None before the screen is laid out)."""
        from launchtui.tui.widgets.timeline import AXIS_ROWS
        tl = getattr(self.screen, "timeline", None) if self.is_attached else None
        if tl is None or not tl.size.height:
            return None
        return self.size.height + tl.size.height - (AXIS_ROWS + self.MIN_TIMELINE_ROWS + 1)

    def spare_table_rows(self) -> int:
        """Rows the kernel table's area holds beyond its header and rows (0 while the call-site
        pane shows, or before layout): the panel may take them to wrap its lines (§T6)."""
        if not self.is_attached:
            return 0
        scr = self.screen
        table = getattr(scr, "table", None)
        try:
            area = scr.query_one("#tables")
        except Exception:   # not a MainScreen
            return 0
        if table is None or not scr.size.height or area.has_class("-sources") or area.has_class("-both"):
            return 0
        n = len(table.order)
        if not n:      # rows not there yet (or none: the table's one-line message)
            return 0
        return max(0, self._natural(area) - (1 + n))

    def _natural(self, area) -> int:
        """The table area's height by its CSS (30 %), before the panel took rows from it."""
        size = self.screen.size
        if not getattr(self, "_shrunk", False):
            self._natural_h, self._natural_for = area.size.height, size
        elif getattr(self, "_natural_for", None) != size:   # resized while shrunk: the CSS rule
            self._natural_h, self._natural_for = min(16, max(4, int((size.height - 1) * 0.3))), size
        return self._natural_h

    def show(self, doc: dict | None, settings: VerdictSettings) -> None:
        self.doc, self.settings = doc, settings
        room = self.room()
        width = self.size.width or None
        for form in ((FULL,) if self.expanded else (FULL, COMPACT, ONE)):
            lines, styles = panel_lines(doc or {}, settings, form, width)
            if room is None or min(len(lines), self.MAX_LINES) <= room:
                break
        self.form = form
        # the rows the height rule gives, then the table area's blank rows: more lines, then the
        # lines wrapped instead of elided (the timeline never gives up rows for them)
        base = len(lines) if self.expanded else min(len(lines), self.MAX_LINES)
        spare = self.spare_table_rows() if room is not None and form != ONE else 0
        lines, styles = lines[:base + spare], styles[:base + spare]
        # V: every line in full, wrapped, leaving the header, the axis, the details and the table
        budget = max(base, self.screen.size.height - 16) if self.expanded and self.is_attached else base + spare
        if form != ONE and width:
            lines, styles = wrap_lines(lines, styles, width, budget)
        self.styles.height = len(lines)
        self._give_table(len(lines) - base, spare)
        self.set_lines(lines, styles)

    def _give_table(self, taken: int, spare: int) -> None:
        """Shrink the table's area by the spare rows the wrapped lines took (none: its CSS height)."""
        try:
            area = self.screen.query_one("#tables")
        except Exception:
            return
        taken = min(max(0, taken), spare)
        if taken:
            area.styles.height = self._natural(area) - taken
            self._shrunk = True
        elif getattr(self, "_shrunk", False):
            area.styles.height = "30%"
            self._shrunk = False

    def relayout(self) -> None:
        self.show(self.doc, self.settings)

    def on_resize(self) -> None:
        self.relayout()


class VerdictView:
    """The verdict panel's state on a MainScreen: settings, the latest result, the iteration the
    cursor is in. The screen forwards its keys and the worker's message here."""

    def __init__(self, screen) -> None:
        self.screen = screen
        self.settings = VerdictSettings()
        self.result: VerdictResult | None = None
        self.gen = 0
        self.panel = VerdictPanel(id="verdict-panel")

    def mount(self, slot) -> None:
        slot.mount(self.panel)
        self.panel.show(None, self.settings)

    def toggle_expanded(self) -> str:
        """`V`: the whole panel whatever the room, or back to the form that fits."""
        self.panel.expanded = not self.panel.expanded
        self.panel.relayout()
        return "verdict: all lines (V: fit)" if self.panel.expanded else f"verdict: {self.panel.form} (V: all lines)"

    @property
    def base_depth(self) -> int:
        it = (self.result.doc.get("iterations") or {}) if self.result else {}
        return int(it.get("base_depth", 0))

    @property
    def spans(self) -> list:
        return list(self.result.iteration_spans) if self.result else []

    def refresh(self) -> None:
        """Recompute the record (and the table rows at the current settings) in a worker."""
        self.gen += 1
        scr = self.screen
        if getattr(scr, "idle", None) is not None:
            scr.idle.interrupt()
        gen, dev, settings, session = self.gen, scr.device, self.settings, scr.loaded.session

        def work() -> None:
            idle = getattr(scr, "idle", None)
            if idle is not None:
                idle.wait_stopped()      # an interrupted idle-row build first lets go of its memory
            result = compute(session, dev, settings, gen)
            if idle is not None:         # a warm reopen: the idle row lands with the verdict
                from launchtui.tui.idle_view import stored_for
                result.idle_lane = stored_for(session, result.doc)
            scr.post_message(VerdictReady(result))
        scr.run_worker(work, thread=True, exclusive=True, group="verdict")

    def ready(self, result: VerdictResult) -> bool:
        """Take a worker's result; False when a newer request superseded it."""
        if result.gen != self.gen:
            return False
        self.result = result
        self.panel.show(result.doc, self.settings)
        tl = self.screen.timeline
        tl.iteration_marks = result.iterations
        tl.stall_apis = result.stall_apis
        tl.forget_marks()
        tl.refresh()
        return True

    def mark_counts(self, marks) -> str:
        """'N backpressure marks · M slow calls not blocked (K CPU stalls)': spikes that are not
        blocked calls are not backpressure; CPU stalls are those at low depth (§V3)."""
        stalls = self.result.stall_apis if self.result else {}
        mine = [stalls.get(e.worst_api, "") for e in marks if e.kind == "spike" and e.worst_api in stalls]
        cpu = sum(1 for w in mine if w.startswith("CPU stall"))
        return f"{len(marks) - len(mine)} backpressure marks · {len(mine)} △ not blocked ({cpu} CPU stall{'s' if cpu != 1 else ''})"

    def change(self, what: str, direction: int = 1) -> str:
        s = self.settings
        if what == "min_launches":
            s = VerdictSettings(step(MIN_LAUNCHES_STEPS, s.min_launches, direction), s.max_avg_us, s.phase_level)
        elif what == "max_avg_us":
            s = VerdictSettings(s.min_launches, step(MAX_AVG_US_STEPS, s.max_avg_us, direction), s.phase_level)
        else:
            levels = [lv for lv in PHASE_LEVELS if lv <= self.deepest_level()] or [1]
            lv = levels[(levels.index(s.phase_level) + 1) % len(levels)] if s.phase_level in levels else 1
            wrapped = lv <= s.phase_level
            s = VerdictSettings(s.min_launches, s.max_avg_us, lv)
            if wrapped:   # never past the trace's deepest range: back to the first level, said
                self.settings = s
                return s.label() + (f" (the ranges go {levels[-1]} level{'s' if levels[-1] != 1 else ''} "
                                    "below the iteration: back to 1)")
        self.settings = s
        return s.label()

    def deepest_level(self) -> int:
        """The deepest phase level the trace's ranges reach below the iteration range (§V5)."""
        rg = self.screen.loaded.trace.ranges
        if not len(rg):
            return 1
        return max(1, int(rg.depth.max()) + 1 - self.base_depth)

    def iteration_target(self, cursor: int, direction: int):
        """(k, start, end) of the iteration after / before the one holding `cursor`; None at the ends."""
        spans = self.result.iteration_spans if self.result else []
        if len(spans) < 2:
            return None
        starts = [a for a, _ in spans]
        import bisect
        k = bisect.bisect_right(starts, cursor) - 1
        k = k + direction if k >= 0 or direction < 0 else 0
        if k < 0 or k >= len(spans):
            return None
        return k, spans[k][0], spans[k][1]
