"""`launchtui BEFORE --compare AFTER`: the two runs one above the other, aligned on an iteration.

Layout, top to bottom: a header naming both files and the iteration shown; the BEFORE timeline; the
AFTER timeline; the diff's verdict and per-iteration figures; a table of kernels with before / after
/ Δ columns (definitions.md §D). Both timelines show the same iteration index of their own run
(the first on open); `{` / `}` move both, pan and zoom keys move both. Both traces load in parallel
in one worker, through the cache, and the diff is computed there too (no engine work on the UI
thread).
"""
from __future__ import annotations

from types import SimpleNamespace

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from launchtui import heap
from launchtui.tui.app import LaunchApp
from launchtui.tui.messages import LoadFailed, TraceLoaded
from launchtui.tui.widgets.panel import TextPanel
from launchtui.tui.widgets.key_bar import KeyBar
from launchtui.tui.widgets.timeline import Timeline
from launchtui.errors import printable

CSS = """
CompareScreen { layout: vertical; }
CompareScreen #header { height: 2; background: $boost; color: $text; text-wrap: nowrap; text-overflow: ellipsis; }
CompareScreen .side { height: 1; background: $panel; color: $text; text-wrap: nowrap; text-overflow: ellipsis; }
CompareScreen Timeline { height: 1fr; min-height: 5; }
CompareScreen #verdict { height: 5; background: $boost; }
CompareScreen DataTable { height: 30%; min-height: 4; max-height: 14; }
"""

COMPARE_BINDINGS = [
    Binding("q", "app.quit", "Quit", id="quit"),
    Binding("question_mark", "app.help", "Help", id="help"),
    Binding("left_curly_bracket", "iteration(-1)", "Prev iteration", id="compare.iteration_prev", key_display="{"),
    Binding("right_curly_bracket", "iteration(1)", "Next iteration", id="compare.iteration_next", key_display="}"),
    Binding("h,left", "pan(-4)", "Pan left", id="pan_left", show=False),
    Binding("l,right", "pan(4)", "Pan right", id="pan_right", show=False),
    Binding("plus,equals_sign", "zoom(0.5)", "Zoom in", id="zoom_in", key_display="+"),
    Binding("minus", "zoom(2)", "Zoom out", id="zoom_out", key_display="-"),
    Binding("0", "fit_iteration", "Fit iteration", id="compare.fit", show=False),
]


def _spans(head: dict) -> list[tuple[int, int]]:
    it = head.get("iterations") or {}
    return list(zip(it.get("starts_ns") or [], it.get("ends_ns") or []))


def _fmt(x, unit: str = "") -> str:
    if x is None:
        return "–"
    return f"{x:,.3f}" if unit == "ms" else f"{x:,.1f}"


def _delta(c: dict, unit: str = "") -> str:
    d = c.get("delta")
    if d is None:
        return "–"
    mag = _fmt(abs(d), unit)
    return ("±" if float(mag.replace(",", "")) == 0 else "+" if d > 0 else "−") + mag


NAME_WIDTH = 50    # the table keeps its figures on screen; the JSON and the page have whole names


def _short(name: str) -> str:
    return name if len(name) <= NAME_WIDTH else name[:NAME_WIDTH - 1] + "…"


def kernel_rows(doc: dict) -> list[tuple]:
    """Table rows: kernel, status, launches/iter before, after, Δ, avg kernel µs before, after, Δ."""
    k = doc["kernels"]
    rows = []
    for r in k["gone"]:
        n = (r["launches_per_iteration"] or 0) + (r["graph_ops_per_iteration"] or 0)
        rows.append((_short(r["kernel_name"]), "gone", _fmt(n), "–", _delta({"delta": -n}), _fmt(r["avg_kernel_us"]), "–", "–"))
    for r in k["new"]:
        n = (r["launches_per_iteration"] or 0) + (r["graph_ops_per_iteration"] or 0)
        rows.append((_short(r["kernel_name"]), "new", "–", _fmt(n), _delta({"delta": n}), "–", _fmt(r["avg_kernel_us"]), "–"))
    # kernels that came or went outside the iterations: the whole window's, as totals ("57 in all")
    w = doc.get("kernels_window") or {"gone": [], "new": []}
    seen = {r["kernel_name"] for r in k["gone"] + k["new"]}
    for tag, rws in (("gone (window)", w["gone"]), ("new (window)", w["new"])):
        for r in rws:
            if r["kernel_name"] in seen:
                continue
            n = f"{(r['launches'] or 0) + (r['graph_ops'] or 0):,.0f} in all"
            before, after = (n, "–") if tag.startswith("gone") else ("–", n)
            kt = _fmt(r["avg_kernel_us"])
            rows.append((_short(r["kernel_name"]), tag, before, after, "–",
                         kt if tag.startswith("gone") else "–", "–" if tag.startswith("gone") else kt, "–"))
    for r in k["changed"]:
        ln, gr, kt = r["launches_per_iteration"], r["graph_ops_per_iteration"], r["avg_kernel_us"]
        tag = "→ graph" if not gr["before"] and gr["after"] else "changed"   # now run by graph launches
        rows.append((_short(r["kernel_name"]), tag, _fmt(ln["before"]), _fmt(ln["after"]), _delta(ln),
                     _fmt(kt["before"]), _fmt(kt["after"]), _delta(kt)))
    return rows


def verdict_lines(doc: dict, width: int = 120) -> list[str]:
    """The diff's verdict (wrapped to `width`) and one line of the headline figures."""
    import textwrap
    per = doc["per_iteration"]

    def fig(key, label, unit=""):
        c = per.get(key)
        return f"{label} {_fmt(c['before'], unit)} → {_fmt(c['after'], unit)}" if c else ""
    share = per.get("share") or {}
    sh = ("share " + " → ".join("–" if x is None else f"{x * 100:.1f} %" for x in (share.get("before"), share.get("after")))
          if share else "")
    return textwrap.wrap(f"Verdict: {doc['verdict']['line']}", max(width - 1, 20))[:4] + [
            " │ ".join(x for x in (fig("launches_per_iter", "launches/iter"),
                                   fig("exposed_overhead_ms", "exposed ms", "ms"), sh,
                                   fig("iteration_ms", "iteration ms", "ms")) if x)]


class CompareScreen(Screen):
    """Two loaded traces and their diff (see the module docstring)."""

    CSS = CSS
    BINDINGS = COMPARE_BINDINGS

    def __init__(self, before, after, doc: dict) -> None:
        super().__init__()
        self.before, self.after, self.doc = before, after, doc
        self.spans = (_spans(doc["before"]), _spans(doc["after"]))
        self.count = min(len(self.spans[0]), len(self.spans[1]))
        self.k = 0
        self.table_busy = False

    def compose(self) -> ComposeResult:
        yield Static("", id="header")
        self.timelines = []
        for name, ld in (("before", self.before), ("after", self.after)):
            src = ld.trace.source
            yield Static(f" {name.upper()}: {printable(src.path)} ({src.format})", classes="side", id=f"{name}-label")
            tl = Timeline(ld.trace, ld.lanes, ld.marks, fit_window=ld.fit_window, min_ns_per_col=ld.clock_ns,
                          windows=ld.windows(), id=f"{name}-timeline")
            self.timelines.append(tl)
            yield tl
        self.verdict = TextPanel(verdict_lines(self.doc), id="verdict")
        yield self.verdict
        table = DataTable(id="kernels", zebra_stripes=True, cursor_type="row")
        table.add_columns("kernel", "status", "launches/it", "→ after", "Δ", "kernel µs", "→ after", "Δ")
        table.add_rows(kernel_rows(self.doc))
        yield table
        yield KeyBar()

    def on_mount(self) -> None:
        self.timelines[0].focus()
        self.show_iteration()

    def on_resize(self, event) -> None:
        self.verdict.set_lines(verdict_lines(self.doc, self.size.width))

    def show_iteration(self) -> None:
        """Fit each timeline to its own run's iteration k."""
        for tl, spans in zip(self.timelines, self.spans):
            if self.k < len(spans):
                tl.fit(*spans[self.k])
        self.update_header()

    def update_header(self) -> None:
        from rich.markup import escape
        source = (self.doc["before"]["iterations"] or {}).get("source", "?")
        it = f"iteration {self.k + 1} of {self.count}" if self.count else "no iterations"
        durs = []
        for spans in self.spans:
            if self.k < len(spans):
                a, b = spans[self.k]
                durs.append(f"{(b - a) / 1e6:,.3f} ms")
        l1 = f" launchtui compare │ {it} (from {source}) │ " + " → ".join(durs)
        l2 = " { / } move both timelines by one iteration; h/l pan, +/- zoom both; 0 fits the iteration"
        self.query_one("#header", Static).update(escape(l1) + "\n" + escape(l2))

    def action_iteration(self, step: int) -> None:
        if not self.count:
            self.notify("No iterations to step through in these traces", timeout=4)
            return
        k = max(0, min(self.count - 1, self.k + step))
        if k == self.k:
            self.notify("first iteration" if step < 0 else "last iteration", timeout=2)
        self.k = k
        self.show_iteration()

    def action_fit_iteration(self) -> None:
        self.show_iteration()

    def action_pan(self, cols: float) -> None:
        for tl in self.timelines:
            tl.pan(cols)

    def action_zoom(self, factor: float) -> None:
        for tl in self.timelines:
            tl.zoom(factor)


class CompareApp(LaunchApp):
    """LaunchApp that loads two traces (in parallel) and shows the CompareScreen."""

    @work(thread=True, exclusive=True, group="load")
    def _load(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from launchtui.analysis.diff_inputs import diff_document
        from launchtui.errors import TraceError
        from launchtui.session import default_records
        from launchtui.tui.loader import load
        a = self.args
        sides = [SimpleNamespace(**{**vars(a), "trace": p}) for p in (a.trace, a.compare)]
        try:
            heap.take_policy()
            with ThreadPoolExecutor(2) as pool:
                before, after = pool.map(load, sides)
            heap.recycle_large_blocks()   # in the two readers it does nothing: set once both are read
            # each side's record as `report --json` stores it: found, not recomputed
            records = default_records((before.session, after.session), getattr(a, "iter", None))
            doc = diff_document(before.trace, after.trace, getattr(a, "iter", None), records=records)
        except TraceError as e:
            self.post_message(LoadFailed(str(e)))
            return
        except Exception as e:  # an engine bug: still exit cleanly with one line
            self.post_message(LoadFailed(f"{a.trace} vs {a.compare}: internal error while comparing: "
                                         f"{type(e).__name__}: {e}"))
            return
        self.post_message(TraceLoaded((before, after, doc)))

    def on_trace_loaded(self, m: TraceLoaded) -> None:
        m.prevent_default()          # LaunchApp's handler would push a MainScreen
        self.loaded = m.loaded
        self.main = CompareScreen(*m.loaded)
        self.push_screen(self.main)


def run_compare(args) -> int:
    """Entry point of `launchtui BEFORE --compare AFTER`: the exit status (2 on a loading error)."""
    from launchtui.tui.app import run_app
    return run_app(args, CompareApp)
