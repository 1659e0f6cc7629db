"""The verdict panel (issue 8): the case record's lines on the main screen, its thresholds and phase
level, and the table rows that follow them (docs/definitions.md §V).

Everything heavy runs in `compute()`, called from a thread worker; the panel only sets lines.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from rich.style import Style
from textual.message import Message

from launchtui.analysis.config import CONFIG
from launchtui.tui.widgets.panel import TextPanel

# keyboard ladders for the table thresholds (m / M, u / U) and the phase level (P)
MIN_LAUNCHES_STEPS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
MAX_AVG_US_STEPS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 1000.0)
PHASE_LEVELS = (1, 2, 3)
FULL, COMPACT, ONE = "full", "compact", "one line"   # the panel's forms, richest first

CLASS_STYLE = {"saturated": Style(color="red", bold=True), "dry": Style(color="yellow", bold=True),
               "backlogged": Style(color="magenta"), "normal": Style(color="green")}
HEAD = Style(bold=True)


@dataclass(frozen=True)
class VerdictSettings:
    min_launches: int = CONFIG.min_launches
    max_avg_us: float = CONFIG.max_avg_us
    phase_level: int = 1

    def label(self) -> str:
        return f"≥{self.min_launches} launches, <{self.max_avg_us:g} µs, phase level {self.phase_level}"


def step(ladder, value, direction: int):
    """The next value of the ladder above (direction 1) or below (-1) `value`."""
    if direction > 0:
        bigger = [x for x in ladder if x > value]
        return bigger[0] if bigger else value
    smaller = [x for x in ladder if x < value]
    return smaller[-1] if smaller else value


@dataclass
class VerdictResult:
    """What the worker hands to the screen: the record and the marks it implies."""
    gen: int
    doc: dict
    iterations: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # boundaries (ns)
    iteration_spans: list = field(default_factory=list)    # [(start, end)] per iteration
    stall_apis: dict = field(default_factory=dict)          # spikes not blocked: API index -> words


class VerdictReady(Message):
    def __init__(self, result: VerdictResult) -> None:
        super().__init__()
        self.result = result


def compute(trace, device, settings: VerdictSettings, gen: int, entry=None) -> VerdictResult:
    """The record for the shown device (all: the one with most launches) at the current settings;
    stored beside the model entry (result_cache.RECORD), where `report --json` stores the same."""
    from launchtui import result_cache as rc
    from launchtui.analysis.record import RecordOptions
    from launchtui.analysis.select import WHOLE
    sel = WHOLE if device is None else WHOLE.with_devices((device,))
    opt = RecordOptions(min_launches=settings.min_launches, max_avg_us=settings.max_avg_us,
                        phase_level=settings.phase_level)
    doc, stalls = rc.memo(rc.RECORD, rc.record_inputs(trace, sel, opt), entry,
                          lambda: rc.record_and_stalls(trace, sel, opt))
    it = doc.get("iterations") or {}
    starts, ends = it.get("starts_ns", []), it.get("ends_ns", [])
    return VerdictResult(gen, doc, np.asarray(starts + ends[-1:], np.int64), list(zip(starts, ends)), stalls)


def table_rows(trace, sel, names: str, settings: VerdictSettings, base_depth: int = 0, spans=(),
               shown=None, totals=None) -> list[dict]:
    """Every qualifying small-kernel row (no limit) at the thresholds, with its most common phase
    at the chosen level (normalised names) as `nvtx_range` / `nvtx_share`. Launches inside an
    iteration span start their phase path at `base_depth`, the others at the outermost range.
    `shown(rows)` gets the rows before their phases (a second or more at 5M kernels), to show them;
    at once from `totals` (the same groups' result_cache.group_totals, as `report` stores them)."""
    from launchtui.analysis.launches import launches_of, ranked_groups, small_kernel_table
    from launchtui.analysis.phases import attributed_phase_keys, group_phases, main_thread
    if shown is not None and totals is not None and len(trace.ranges):
        early = small_kernel_table(trace, sel, min_launches=settings.min_launches, max_avg_us=settings.max_avg_us,
                                   limit=0, names=names, groups=totals)
        if early:
            shown([dict(r, nvtx_range=PHASE_PENDING, nvtx_share=0.0) for r in early])
            shown = None
    gr = _with_launches(trace, sel, names, totals)     # once: the rows, then their phases
    rows = small_kernel_table(trace, sel, min_launches=settings.min_launches, max_avg_us=settings.max_avg_us,
                              limit=0, names=names, groups=gr)
    ranked = ranked_groups(trace, gr, settings.min_launches, settings.max_avg_us, 0)   # the rows' groups
    for r in rows:
        r["nvtx_range"], r["nvtx_share"] = None, 0.0
    if not rows or not len(trace.ranges):
        return rows
    if shown is not None:
        shown([dict(r, nvtx_range=PHASE_PENDING) for r in rows])
    # the main thread is chosen over every launch; phases only for the rows' launches (a group's
    # phase depends on its own launches alone), a batch of whole groups at a time
    main = main_thread(trace, gr.op_idx, base_depth, [a for a, _ in spans])
    phase = {}
    for batch in phase_batches(gr.count[ranked], ranked):
        op_idx, op_group = launches_of(gr, batch)
        base = _base_depths(trace, op_idx, base_depth, spans)
        keys, texts, _ = attributed_phase_keys(trace, op_idx, base, settings.phase_level, main)
        del base, op_idx
        got = group_phases(keys, texts, op_group, int(batch.max()) + 1)
        phase.update((i, got[i]) for i in batch.tolist())
        del keys, op_group
    for r, i in zip(rows, ranked.tolist()):
        r["nvtx_range"], r["nvtx_share"] = phase[i][0], round(phase[i][1], 4)
    return rows


def _with_launches(trace, sel, names: str, totals):
    """kernel_groups(trace, sel, names): `totals` (its sums, as `report` stored them) with the
    launches' grouping when that gives the same groups, else computed whole."""
    from launchtui.analysis.launches import kernel_groups, launch_group_ids
    if totals is not None:
        k, device, name, g = launch_group_ids(trace, sel, names)
        if len(device) == len(totals) and (device == totals.device).all() and (name == totals.name).all():
            import dataclasses
            return dataclasses.replace(totals, op_idx=k, op_group=g)
        del k, g
    return kernel_groups(trace, sel, names)


PHASE_BATCH = 1 << 20   # launches per batch of the phase column (whole groups; a larger group alone)


def phase_batches(counts: np.ndarray, groups: np.ndarray, limit: int | None = None) -> list[np.ndarray]:
    """`groups` cut, in order, into runs of about `limit` launches (`counts` per group): the phase
    column's per-launch temporaries (~7 int64 arrays) for a million launches at a time instead of
    every launch (cold 5M TUI: the table worker's +436 MiB was the process's peak). A group's phase
    depends on its own launches only, and two phase keys compare the same in any batch (their
    paths' order), so ties break the same: the rows are those of one pass."""
    limit = PHASE_BATCH if limit is None else limit
    out, start, acc = [], 0, 0
    for i, c in enumerate(counts.tolist()):
        if acc and acc + c > limit:
            out.append(groups[start:i])
            start, acc = i, 0
        acc += c
    if start < len(groups):
        out.append(groups[start:])
    return out


def _base_depths(trace, op_idx: np.ndarray, base_depth: int, spans) -> np.ndarray:
    """Per launch: the depth its phase path starts at, `base_depth` inside an iteration span, else 0."""
    from launchtui.analysis.intervals import in_windows
    base = np.zeros(len(op_idx), np.int64)
    if base_depth and len(spans):
        t = trace.api.start[trace.ops.api[op_idx]]
        starts = np.array([a for a, _ in spans], np.int64)
        ends = np.array([b for _, b in spans], np.int64)
        base[in_windows(t, starts, ends) >= 0] = base_depth
    return base


PHASE_PENDING = "…"   # the phase column while the rows' phases are computed


OUTSIDE = Style(color="red")   # the outside-the-iterations note: the timeline's red marks

ORDER = {"saturated": 0, "dry": 1, "backlogged": 2, "normal": 3}   # queue_class.CLASSES


def _class_lines(doc: dict) -> tuple[list[str], list[Style]]:
    """One line per queue class present, most severe first: the streams in it (short terms)."""
    from launchtui.analysis.record_conclusion import class_mix
    lines, styles = [], []
    for cls in sorted({s["queue_class"] for s in doc["streams"]}, key=ORDER.get):
        lines.append(f" {cls}: " + ", ".join(
            f"GPU {s['device_id']} s{s['stream_id']}" + class_mix(s)
            + (f" limit {s['observed_limit']}" if s["observed_limit"] is not None else "")
            + (f" ({s['outside']['max_depth']} outside the iterations"
               + (f" in `{s['outside']['range']}`" if s["outside"].get("range") else "") + ")"
               if s.get("outside") else "")
            for s in doc["streams"] if s["queue_class"] == cls))
        styles.append(CLASS_STYLE.get(cls, Style()))
    return lines, styles


def _cpu_side_lines(doc: dict) -> list[str]:
    """A trace with launches but no GPU activity (definitions.md §V11): what cannot be judged and
    how to capture it, then the CPU-side facts the record does have, rather than only "empty"."""
    from launchtui.analysis.cpu_busy import cpu_line
    pi, it, sy = doc["per_iteration"], doc["iterations"], doc.get("syncs") or {}
    per = "iter" if it and it.get("source") != "none" else "window"
    lines = ["Verdict: cannot judge: GPU activity not recorded (capture with `nsys profile --trace=cuda`) — "
             "CPU side only"]
    facts = (f" {pi['launches']['median']:,.0f} launches/{per} · launch API {pi['launch_api_ms']['median']:,.3f} ms/{per}"
             f" of {pi['iteration_ms']['median']:,.3f} ms")
    if sy.get("per_iteration"):
        facts += f" · {sy['per_iteration']['median']:,.0f} host syncs/{per} ({sy['total_ms']:,.3f} ms in all)"
    lines.append(facts)
    if (lt := doc.get("launch_thread_cpu") or {}).get("available"):
        lines.append(f" {cpu_line(lt)}")
    return lines


def level_word(doc: dict) -> str:
    """The record's level (§V9) in the panel's first words."""
    if doc.get("launch_bound_level"):
        return doc["launch_bound_level"]
    return "too little activity to judge" if doc.get("too_little") else "cannot judge"


def split(doc: dict, limit: int = 4) -> str:
    """What the GPU waited for, largest first, with the idle row's symbol before each cause (the
    panel leads with it; the row draws the same causes in the same words)."""
    from launchtui.analysis.record_conclusion import cause_line
    from launchtui.tui.widgets.idle_row import GLYPHS
    return cause_line(doc, limit, GLYPHS)


def one_line(doc: dict, width: int | None = None) -> tuple[str, Style]:
    """The verdict in one line for the smallest terminals: the level, the largest idle causes, the
    queue classes; at `width`, fewer causes, then no queues, so "V: details" stays on screen."""
    if doc and doc.get("gpu_recorded") is False:
        return _cpu_side_lines(doc)[0], HEAD
    if not doc or doc.get("empty"):
        return "Verdict: " + (doc.get("empty", "computing…") if doc else "computing…"), HEAD
    from launchtui.analysis.record_conclusion import outside_notes
    n = {c: sum(1 for s in doc["streams"] if s["queue_class"] == c) for c in ORDER}
    queues = "queues: " + (", ".join(f"{k} {c}" for c, k in n.items() if k) or "none")
    out = ", ".join(outside_notes(doc, short=True))
    head = f"Verdict: {level_word(doc)}"
    has = bool(doc.get("idle_by_cause"))
    # what the timeline marks outside the iterations outlives the idle split and the queue counts
    tries = ([(2, queues, out), (1, queues, out), (1, "", out), (0, "", out), (1, "", "")] if has
             else [(0, queues, out), (0, "", out), (0, "", "")])
    for limit, q, o in tries:
        line = " · ".join(p for p in (head, split(doc, limit) if limit else "", q, o, "V: details") if p)
        if width is None or len(line) <= width:
            break
    return line, HEAD


def _conclusion_rest(doc: dict) -> str:
    """The record's conclusion without the level it starts with (the first line says it)."""
    text = doc.get("conclusion") or ""
    for lead in (f"{level_word(doc)}: ", "cannot judge: "):
        if text.startswith(lead):
            return text[len(lead):]
    return text


def panel_lines(doc: dict, settings: VerdictSettings, form: str = FULL,
                width: int | None = None) -> tuple[list[str], list[Style]]:
    """The record in a few lines, led by the level and what the GPU waited for. FULL: that, the
    conclusion, the figures, iterations, one verdict per stream, the top kernels. COMPACT: that, the
    conclusion and one line per queue class. ONE: a single line (`one_line`) fitted to `width`."""
    from launchtui.analysis.cpu_busy import cpu_line
    from launchtui.analysis.record_markdown import phase_label
    if form == ONE:
        line, style = one_line(doc, width)
        return [line], [style]
    if doc and doc.get("gpu_recorded") is False:
        lines = _cpu_side_lines(doc)[:2 if form == COMPACT else None]
        return lines, [HEAD] + [Style()] * (len(lines) - 1)
    if not doc or doc.get("empty"):
        return ["Verdict: " + (doc.get("empty", "computing…") if doc else "computing…")], [HEAD]
    pi, it = doc["per_iteration"], doc["iterations"]
    lines = [f"Verdict: {level_word(doc)}" + (f" · {split(doc)}" if doc.get("idle_by_cause") else "")]
    styles = [HEAD]
    rest = _conclusion_rest(doc)
    if not rest and doc.get("too_little"):
        rest = f"too little activity to judge ({doc['too_little']})"
    if rest:
        lines.append(f" {rest}")
        styles.append(Style())
    from launchtui.analysis.record_conclusion import outside_notes
    for note in outside_notes(doc) if form == FULL else ():   # compact: on its stream's class line
        lines.append(f" {note}")
        styles.append(OUTSIDE)
    if form == FULL and not doc.get("too_little"):
        hb = doc["idle_by_cause"]["host_bound"]
        lines.append(f" {pi['launches']['median']:,.0f} launches/iter · host-bound "
                     f"{hb['mean_per_iteration_ms']:,.3f} ms/iter = {hb['share']:.1%} of the iteration"
                     f" · backpressure {'yes' if doc['backpressure'] else 'no'}")
        styles.append(Style())
    if form == COMPACT:
        more, more_styles = _class_lines(doc)
        return lines + more, styles + more_styles
    src = it["source"] + (" (heuristic)" if it["heuristic"] else "")
    if it["source"] in ("none", "whole window"):   # no marks: the window is the one iteration (§V1)
        what = f"no iteration marks: the whole window, {it['median_ns'] / 1e6:,.3f} ms"
    else:
        what = (f"{it['count']} iteration{'s' if it['count'] != 1 else ''} from {src}, median "
                f"{it['median_ns'] / 1e6:,.3f} ms ({'{ / } jump' if it['count'] > 1 else 'one iteration'})")
    lines.append(f" GPU {doc['device_id']} · {what} · table {settings.label()} (m/M u/U P)")
    styles.append(Style())
    from launchtui.analysis.record_conclusion import class_mix
    for s in doc["streams"]:
        lim = f", limit {s['observed_limit']}" if s["observed_limit"] is not None else ""
        lines.append(f" GPU {s['device_id']} stream {s['stream_id']}: {s['queue_class']}{class_mix(s)} "
                     f"(max {s['max_depth']}{lim}) — {s['reason']}")
        styles.append(CLASS_STYLE.get(s["queue_class"], Style()))
    for i, r in enumerate(doc["top"], 1):
        lines.append(f" {i}. {r['kernel_name']} {r['launches_per_iteration']:,.1f}/iter · "
                     f"{phase_label(r)} · fix: {r['fix']}")
        styles.append(Style())
    if not doc["top"] and doc.get("empty_reason"):
        near = "; ".join(f"{r['kernel_name']} {r['launches']:,}× {r['avg_kernel_us']:.1f} µs" for r in doc["near_misses"])
        lines.append(f" Top: none — {doc['empty_reason']}" + (f". Nearest: {near}" if near else ""))
        styles.append(Style())
    if (lt := doc.get("launch_thread_cpu") or {}).get("available"):  # definitions.md §V10
        lines.append(f" {cpu_line(lt)}"), styles.append(Style())
    return lines, styles


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
        gen, dev, settings, trace = self.gen, scr.device, self.settings, scr.loaded.trace
        entry = scr.loaded.results_entry

        def work() -> None:
            if getattr(scr, "idle", None) is not None:
                scr.idle.wait_stopped()      # an interrupted idle-row build first lets go of its memory
            scr.post_message(VerdictReady(compute(trace, dev, settings, gen, entry)))
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
