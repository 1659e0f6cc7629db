"""The verdict panel: the case record's lines on the main screen, its thresholds and phase
level, and the table rows that follow them (docs/definitions.md §V).

Everything heavy runs in `compute()`, called from a thread worker; the panel only sets lines.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from rich.style import Style
from textual.message import Message

from launchtui.analysis.config import CONFIG

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
    # the record's idle row as stored beside the model, mapped by the same worker (idle_view.
    # stored_for): the lane, idle_view.MISSING when not stored, None when not looked up
    idle_lane: object = None


class VerdictReady(Message):
    def __init__(self, result: VerdictResult) -> None:
        super().__init__()
        self.result = result


def compute(session, device, settings: VerdictSettings, gen: int) -> VerdictResult:
    """The record for the shown device (all: the one with most launches) at the current settings:
    the session's `Record` query, which `report --json` and `record` store under the same key."""
    from launchtui.analysis.record_options import RecordOptions
    from launchtui.analysis.select import WHOLE
    from launchtui.session import Record
    sel = WHOLE if device is None else WHOLE.with_devices((device,))
    opt = RecordOptions(min_launches=settings.min_launches, max_avg_us=settings.max_avg_us,
                        phase_level=settings.phase_level)
    doc, stalls = session.get(Record(sel, opt))
    it = doc.get("iterations") or {}
    starts, ends = it.get("starts_ns", []), it.get("ends_ns", [])
    return VerdictResult(gen, doc, np.asarray(starts + ends[-1:], np.int64), list(zip(starts, ends)), stalls)


def preview_rows(trace, sel, names: str, settings: VerdictSettings, totals) -> list[dict]:
    """The table's rows from kernel-group totals (launches.group_totals) before their phases: the
    phase column reads PHASE_PENDING where the trace has ranges to attribute."""
    from launchtui.analysis.launches import small_kernel_table
    rows = small_kernel_table(trace, sel, min_launches=settings.min_launches, max_avg_us=settings.max_avg_us,
                              limit=0, names=names, groups=totals)
    return [dict(r, nvtx_range=PHASE_PENDING, nvtx_share=0.0) for r in rows] if len(trace.ranges) else rows


def table_rows(trace, sel, names: str, settings: VerdictSettings, base_depth: int = 0, spans=(),
               shown=None, totals=None) -> list[dict]:
    """Every qualifying small-kernel row (no limit) at the thresholds, with its most common phase
    at the chosen level (normalised names) as `nvtx_range` / `nvtx_share`. Launches inside an
    iteration span start their phase path at `base_depth`, the others at the outermost range.
    `shown(rows)` gets the rows before their phases (which take seconds on a large trace), to show them;
    at once from `totals` (the same groups' launches.group_totals, as `report` stores them)."""
    from launchtui.analysis.launches import launches_of, ranked_groups, small_kernel_table
    from launchtui.analysis.phases import attributed_phase_keys, group_phases, main_thread
    if shown is not None and totals is not None and len(trace.ranges):
        early = preview_rows(trace, sel, names, settings, totals)
        if early:
            shown(early)
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
    column's per-launch temporaries (several int64 arrays) exist for a million launches at a time,
    not for every launch, which would make the table worker the process's peak. A group's phase
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
    """The record's level (§V9) in the panel's first words, with the phase the conclusion names
    ("launch-bound in `Optimizer.step`"): the conclusion's lead up to its first colon."""
    if level := doc.get("launch_bound_level"):
        lead = (doc.get("conclusion") or "").split(": ", 1)[0]
        return lead if lead.startswith(level) else level
    return "too little activity to judge" if doc.get("too_little") else "cannot judge"


def split(doc: dict, limit: int = 4) -> str:
    """What the GPU waited for, largest first, with the idle row's symbol before each cause (the
    panel leads with it; the row draws the same causes in the same words)."""
    from launchtui.analysis.record_conclusion import cause_line
    from launchtui.tui.widgets.idle_row import GLYPHS
    return cause_line(doc, limit, GLYPHS)


def one_line(doc: dict, width: int | None = None) -> tuple[str, Style]:
    """The verdict in one line for the smallest terminals: the level, the largest idle causes, the
    queue classes; at `width`, the level without its phase first, then fewer causes, no queues, so
    "V: details" stays on screen."""
    if doc and doc.get("gpu_recorded") is False:
        return _cpu_side_lines(doc)[0], HEAD
    if not doc or doc.get("empty"):
        return "Verdict: " + (doc.get("empty", "computing…") if doc else "computing…"), HEAD
    from launchtui.analysis.record_conclusion import outside_notes
    n = {c: sum(1 for s in doc["streams"] if s["queue_class"] == c) for c in ORDER}
    queues = "queues: " + (", ".join(f"{k} {c}" for c, k in n.items() if k) or "none")
    out = ", ".join(outside_notes(doc, short=True))
    heads = [f"Verdict: {level_word(doc)}", f"Verdict: {doc.get('launch_bound_level') or level_word(doc)}"]
    has = bool(doc.get("idle_by_cause"))
    # what the timeline marks outside the iterations outlives the idle split and the queue counts
    tries = ([(2, queues, out), (1, queues, out), (1, "", out), (0, "", out), (1, "", "")] if has
             else [(0, queues, out), (0, "", out), (0, "", "")])
    for limit, q, o in tries:       # the phase gives way before a cause or a note does
        for head in heads:
            line = " · ".join(p for p in (head, split(doc, limit) if limit else "", q, o, "V: details") if p)
            if width is None or len(line) <= width:
                return line, HEAD
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
    from launchtui.analysis.prose import phase_label
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
