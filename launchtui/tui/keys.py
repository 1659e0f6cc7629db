"""Every key of the TUI: bindings (each with an id, so users can remap it), keymap loading, help text.

Remap with LAUNCHTUI_KEYS="id=key;id=key" or ~/.config/launchtui/keys.conf ("id = key" lines); Textual
applies the map to the bindings of every screen and widget by id (`App.set_keymap`).
"""
from __future__ import annotations

import os
from pathlib import Path

from textual.binding import Binding

# App-level keys: work on every screen, including while the trace loads.
APP_BINDINGS = [
    Binding("q", "quit", "Quit", id="quit"),
    Binding("question_mark", "help", "Help", id="help"),
]

# Keys of the main view (MainScreen): work whatever widget of it has focus. Quit and help come first
# again, with the same ids (one remap moves both), so the footer lists them first.
MAIN_BINDINGS = [
    Binding("q", "app.quit", "Quit", id="quit"),
    Binding("question_mark", "app.help", "Help", id="help"),
    Binding("h,left", "pan(-4)", "Pan left", id="pan_left", show=False),
    Binding("l,right", "pan(4)", "Pan right", id="pan_right", show=False),
    Binding("comma", "pan(-1)", "Cursor 1 column left", id="nudge_left", show=False),
    Binding("full_stop", "pan(1)", "Cursor 1 column right", id="nudge_right", show=False),
    Binding("H,pageup", "page(-1)", "Page left", id="page_left", show=False),
    Binding("L,pagedown", "page(1)", "Page right", id="page_right", show=False),
    Binding("plus,equals_sign", "zoom(0.5)", "Zoom in", id="zoom_in", key_display="+"),
    Binding("minus", "zoom(2)", "Zoom out", id="zoom_out", key_display="-"),
    Binding("0", "fit", "Fit GPU activity", id="fit", show=False),
    Binding("g,home", "goto_start", "Start", id="goto_start", show=False),
    Binding("G,end", "goto_end", "End", id="goto_end", show=False),
    Binding("o", "nvtx_picker", "NVTX", id="nvtx_picker"),
    Binding("O", "optimizer", "Optimizer", id="optimizer"),
    Binding("left_square_bracket", "occurrence(-1)", "Prev occurrence", id="occurrence_prev", key_display="["),
    Binding("right_square_bracket", "occurrence(1)", "Next occurrence", id="occurrence_next", key_display="]"),
    Binding("a", "all_occurrences", "All occurrences", id="all_occurrences", show=False),
    Binding("b", "mark(1)", "Backpressure", id="backpressure_next"),
    Binding("B", "mark(-1)", "Prev backpressure", id="backpressure_prev", show=False),
    Binding("x", "idle_cause(1)", "Idle cause", id="idle_cause_next"),
    Binding("X", "idle_cause(-1)", "Prev idle cause", id="idle_cause_prev", show=False),
    Binding("greater_than_sign", "idle_gap(1)", "Next smaller idle gap", id="idle_gap_next", key_display=">",
            show=False),
    Binding("less_than_sign", "idle_gap(-1)", "Next larger idle gap", id="idle_gap_prev", key_display="<",
            show=False),
    Binding("n", "instance(1)", "Next instance", id="instance_next"),
    Binding("N", "instance(-1)", "Prev instance", id="instance_prev", show=False),
    Binding("v", "mark_range", "Range", id="mark_range"),
    Binding("escape", "clear", "Clear", id="clear", show=False),
    Binding("e", "export", "Export", id="export"),
    Binding("d", "cycle_device", "Device", id="cycle_device"),
    Binding("t", "toggle_time", "Abs/rel time", id="toggle_time", show=False),
    Binding("D", "toggle_names", "Short/full names", id="toggle_names", show=False),
    Binding("slash", "filter", "Filter", id="filter", key_display="/"),
    Binding("i", "info", "Info", id="info", show=False),
    Binding("c", "call_stack", "Call stack", id="call_stack", show=False),
    Binding("C", "call_sites", "Call sites", id="call_sites"),
    Binding("R", "graph_table", "Graph replays", id="graph_table", show=False),
    Binding("w", "source_pane", "Call-site pane: kernels / both / sites", id="source_pane", show=False),
    Binding("left_curly_bracket", "iteration(-1)", "Prev iteration", id="iteration_prev", key_display="{"),
    Binding("right_curly_bracket", "iteration(1)", "Next iteration", id="iteration_next", key_display="}"),
    Binding("m", "verdict_setting('min_launches', -1)", "Fewer min launches", id="min_launches_down", show=False),
    Binding("M", "verdict_setting('min_launches', 1)", "More min launches", id="min_launches_up", show=False),
    Binding("u", "verdict_setting('max_avg_us', -1)", "Lower max avg µs", id="max_avg_down", show=False),
    Binding("U", "verdict_setting('max_avg_us', 1)", "Higher max avg µs", id="max_avg_up", show=False),
    Binding("P", "verdict_setting('phase_level')", "Phase level", id="phase_level", show=False),
    Binding("V", "verdict_expand", "Verdict lines", id="verdict_expand", show=False),
]

# Every top-level key once (help, tests).
BINDINGS = MAIN_BINDINGS


def help_notes() -> str:
    """The reading of the timeline, with the thresholds of the analysis config."""
    from launchtui.analysis.config import CONFIG
    threshold, small_us = CONFIG.queue_threshold, CONFIG.small_kernel_ns / 1000
    return (
        "Timeline: the cursor is the middle column (▼); panning moves it, zooming keeps it.\n"
        "Rows: NVTX ranges, then per GPU the CUDA API row of each launching thread and, per stream, the CUDA HW\n"
        f"row (█ kernel ≥{small_us:g} µs, ⣿ small <{small_us:g} µs, ▓ NCCL, ═ memcpy/memset, ◆ chosen kernel) and "
        "its queue row\n"
        f"(pending launches; █ = at or above the backpressure threshold {threshold}, label = peak in view, "
        "! ≥ threshold).\n"
        "API row: █ height = share of time in launch calls; ! = a launch slower than the spike threshold.\n"
        "Idle row (under the title of the verdict's device): each cell is the cause holding most of its GPU\n"
        "idle time (> launch, - host, = host stalls, | sync, ~ dependency, * cold start, ? unattributed; dim: under\n"
        "half the cell idle); x / X cycle the cause (the panel's order) and jump to its largest gap, > / < the\n"
        "next smaller / larger gap of it.\n"
        "Axis: ━ backpressure episode (red saturated, orange approaching), ▲ launch spike, △ a spike that is\n"
        "not a blocked call (CPU stall at depth <= 4, cold start, or no full-queue pattern; b names which),\n"
        "╎ iteration boundary ({ / } jump), [ ] selected range.\n"
        "Verdict panel: the case record (launchtui record); m/M and u/U change the table's minimum launches and\n"
        "maximum average µs, P the phase level (ranges below the iteration); on short terminals it is compact\n"
        "(one line at 24 rows) so the timeline keeps 6 rows: V shows every line.\n"
        "Table: 1-9 sort by the shown column of that number, p by Phase; ← / → scroll the columns sideways.\n"
        "Call sites (definitions.md §S): w shows the call-site pane beside the kernel table (full width below\n"
        "120 columns); Enter on a site highlights its launch calls (API rows) and the ops they launched (HW rows),\n"
        "n / N step through them, Esc clears; c shows the whole stack at the cursor, C a picker of the sites.\n"
        "Graphs (definitions.md §12.2): R lists the CUDA / HIP graphs and their replays; Enter marks a graph's\n"
        "replayed ops (HW rows) and launch calls (API rows) and shows its first replay; n / N step, Esc clears.\n"
        "Remap keys: LAUNCHTUI_KEYS='pan_left=a;pan_right=d' or ~/.config/launchtui/keys.conf (id=key lines);\n"
        "ids: " + ", ".join(b.id for b in BINDINGS)
    )


def help_sections(keymap: dict | None = None) -> list[tuple[str, list[tuple[str, str]]]]:
    """Every key, grouped, as currently mapped (`keymap`: binding id -> keys)."""
    from launchtui.tui.widgets.kernel_table import KernelTable
    from launchtui.tui.widgets.source_table import SourceTable
    from launchtui.tui.widgets.timeline import Timeline
    keymap = dict(keymap or {})

    def keys(b: Binding) -> str:
        k = keymap.get(b.id, b.key) if b.id else b.key
        return ", ".join(pretty_key(x) for x in k.split(","))
    return [("Everywhere", [(keys(b), b.description) for b in BINDINGS]),
            ("Timeline (when focused)", [(keys(b), b.description) for b in Timeline.BINDINGS]),
            ("Table (when focused)", [(keys(b), b.description) for b in KernelTable.BINDINGS]),
            ("Call-site pane (when focused)", [(keys(b), b.description) for b in SourceTable.BINDINGS
                                               if b.id.startswith("sources.")]),
            ("Textual", [("tab / shift+tab", "Move focus between timeline and table"),
                         ("ctrl+p", "Command palette: NVTX jump, export, sort, NCCL toggle, info"),
                         ("ctrl+q", "Quit")])]


_PRETTY = {"question_mark": "?", "plus": "+", "minus": "-", "equals_sign": "=", "slash": "/",
           "left_square_bracket": "[", "right_square_bracket": "]", "left_curly_bracket": "{",
           "right_curly_bracket": "}", "comma": ",", "full_stop": ".", "greater_than_sign": ">",
           "less_than_sign": "<"}


def pretty_key(k: str) -> str:
    return _PRETTY.get(k, k)


def load_keymap() -> dict:
    """User key overrides: LAUNCHTUI_KEYS='id=key;id=key' and/or keys.conf lines 'id = key'."""
    km: dict[str, str] = {}
    cfg = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "launchtui" / "keys.conf"
    try:
        for line in cfg.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if "=" in line:
                k, v = (x.strip() for x in line.split("=", 1))
                km[k] = v
    except OSError:
        pass
    env = os.environ.get("LAUNCHTUI_KEYS", "")
    for part in env.split(";"):
        if "=" in part:
            k, v = (x.strip() for x in part.split("=", 1))
            km[k] = v
    return km
