"""`launchtui DIR` (or several traces, or a glob): one row per rank; Enter opens that rank, Esc comes back.

The job runs in a thread worker through `launchtui.ranks.job.run_job` (the process pool or a Dask
scheduler, as on the command line) while the loading view shows ranks done / total. The table's
columns sort on a header click or `s` (next column) / `r` (reverse). Enter loads the rank through the
normal loader and cache (the job's workers filled it, so this is quick) into a `MainScreen`; Esc on
that screen first clears what `MainScreen`'s Esc clears, then comes back here.
"""
from __future__ import annotations

import argparse

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Input, ProgressBar, Static

from launchtui.tui.app import LaunchApp
from launchtui.tui.main_screen import CSS as MAIN_CSS
from launchtui.tui.main_screen import MainScreen
from launchtui.tui.messages import LoadFailed, TraceLoaded
from launchtui.tui.widgets.key_bar import KeyBar

CSS = """
RanksScreen { layout: vertical; }
RanksScreen #ranks-header { height: 3; background: $boost; color: $text; }
RanksScreen DataTable { height: 1fr; }
"""

# (key, title, row field or None for a computed cell)
COLUMNS = (("rank", "Rank"), ("status", "Status"), ("launch_bound_level", "Level"),
           ("host_bound_share", "Host-bound"), ("step_entry_ms", "Entry +ms"), ("launches_per_iter", "Launch/iter"),
           ("launch_api_ms_per_iter", "API ms/iter"), ("exposed_overhead_ms", "Exposed ms"),
           ("exposed_share", "Share"), ("queue_class", "Queue"), ("max_depth", "Max depth"),
           ("iteration_median_ms", "Iter ms"), ("straggler", "Straggler"), ("file", "File"))


class RankDone(Message):
    def __init__(self, done: int, total: int, failed: int) -> None:
        super().__init__()
        self.done, self.total, self.failed = done, total, failed


def _cell(key: str, row: dict, reasons: dict) -> str:
    if key == "straggler":
        return reasons.get(row["rank"], "") if row["status"] == "ok" else row["error"] or ""
    v = row.get(key)
    if v is None:
        return "–"
    if key in ("exposed_share", "host_bound_share"):
        return f"{v * 100:.0f}%"
    if isinstance(v, float):
        return f"{v:,.3f}" if key.endswith("_ms") or "_ms_" in key else f"{v:,.1f}"
    return str(v)


def _sort_key(v):
    """Numbers before text, missing last."""
    if v is None:
        return (2, 0, "")
    if isinstance(v, (int, float)):
        return (0, v, "")
    return (1, 0, str(v))


class RanksScreen(Screen):
    BINDINGS = [
        Binding("q", "app.quit", "Quit", id="quit"),
        Binding("s", "sort_next", "Sort by next column", id="ranks.sort"),
        Binding("r", "sort_reverse", "Reverse", id="ranks.reverse"),
    ]

    def __init__(self, doc: dict) -> None:
        super().__init__()
        self.doc = doc
        self.rows = {str(r["rank"]): r for r in doc["ranks"]}
        self.reasons = {s["rank"]: s.get("headline", s["reason"]) for s in doc["stragglers"]}
        self.sort_col, self.reverse = 0, False
        self.table_busy = False

    def compose(self) -> ComposeResult:
        yield Static(id="ranks-header")
        yield DataTable(cursor_type="row", zebra_stripes=True, id="ranks")
        yield KeyBar()

    def on_mount(self) -> None:
        t = self.query_one(DataTable)
        for key, title in COLUMNS:
            t.add_column(title, key=key)
        for r in self.doc["ranks"]:
            t.add_row(*(_cell(k, r, self.reasons) for k, _ in COLUMNS), key=str(r["rank"]))
        self._header()
        t.focus()

    def _header(self) -> None:
        from rich.markup import escape
        key, title = COLUMNS[self.sort_col]
        self.query_one("#ranks-header", Static).update(
            escape(self.doc["verdict"]) + "\n"
            f"sorted by {title}{' (descending)' if self.reverse else ''}  ·  Enter opens a rank  ·  "
            "Esc comes back  ·  s/r or a header click sorts")

    def sort(self, col: int, reverse: bool) -> None:
        self.sort_col, self.reverse = col, reverse
        key = COLUMNS[col][0]
        if key == "straggler":
            def value(k):
                return self.reasons.get(int(k), "") or None
        else:
            def value(k):
                return self.rows[k].get(key)
        t = self.query_one(DataTable)
        order = sorted(self.rows, key=lambda k: _sort_key(value(k)), reverse=reverse)
        # DataTable.sort compares cell text; sort by the row values instead, through the row keys
        pos = {k: i for i, k in enumerate(order)}
        t.sort("rank", key=lambda cell: pos[cell])
        self._header()

    def on_data_table_header_selected(self, e: DataTable.HeaderSelected) -> None:
        col = [k for k, _ in COLUMNS].index(e.column_key.value)
        self.sort(col, not self.reverse if col == self.sort_col else False)

    def action_sort_next(self) -> None:
        self.sort((self.sort_col + 1) % len(COLUMNS), False)

    def action_sort_reverse(self) -> None:
        self.sort(self.sort_col, not self.reverse)

    def on_data_table_row_selected(self, e: DataTable.RowSelected) -> None:
        row = self.rows[e.row_key.value]
        if row["status"] != "ok":
            self.notify(f"rank {row['rank']}: {row['error']}", severity="error", timeout=6)
            return
        self.app.open_rank(row)


class RankMainScreen(MainScreen):
    """The normal view of one rank, in the same layout as a single trace, its header naming the rank;
    Esc with nothing left to clear goes back to the ranks."""

    # a screen's CSS applies to its own class: the main view's rules, for this class
    CSS = MAIN_CSS.replace("MainScreen", "RankMainScreen")
    BINDINGS = [Binding("escape", "clear_or_back", "Clear / back", id="ranks.back", show=False)]

    def __init__(self, loaded, rank: int) -> None:
        self.rank = rank
        super().__init__(loaded)

    def header_prefix(self) -> str:
        return f" rank {self.rank} │"

    def _clear_state(self):
        tl = self.timeline
        return (self.query_one("#filter", Input).has_class("visible"), tl.pending_mark, tl.sel_range,
                tl.highlight, self.spec)

    def action_clear_or_back(self) -> None:
        if self._clear_state() == (False, None, None, None, self._whole()):
            self.app.pop_screen()
        else:
            self.action_clear()


class RanksApp(LaunchApp):
    """LaunchApp whose loading runs the whole job, then shows the RanksScreen."""

    CSS = LaunchApp.CSS + CSS

    def __init__(self, args, **kw):
        args = type(args)(**{**vars(args), "trace": " ".join(args.traces)})  # named in the loading header
        super().__init__(args, **kw)
        self.opening = False

    @work(thread=True, exclusive=True, group="load")
    def _load(self) -> None:
        from launchtui.errors import TraceError
        from launchtui.ranks.job import run_job
        a = self.args
        done = [0, 0]

        def progress(i, result):
            done[0] += 1
            done[1] += result["status"] != "ok"
            self.post_message(RankDone(done[0], total[0], done[1]))
        total = [0]
        try:
            from launchtui.ranks.discover import find_traces
            total[0] = len(find_traces(a.traces))
            doc = run_job(a.traces, scheduler=getattr(a, "scheduler", None), workers=getattr(a, "workers", None),
                          use_cache=not getattr(a, "no_cache", False), progress=progress)
        except TraceError as e:
            self.post_message(LoadFailed(str(e)))
            return
        except Exception as e:  # an engine bug: still exit cleanly with one line
            self.post_message(LoadFailed(f"{' '.join(a.traces)}: internal error: {type(e).__name__}: {e}"))
            return
        self.post_message(TraceLoaded(doc))

    def on_rank_done(self, m: RankDone) -> None:
        for bar in self.query("#load-bar").results(ProgressBar):
            bar.update(total=m.total, progress=m.done)
        for w in self.query("#load-stage"):
            w.update(f"{m.done} / {m.total} ranks" + (f", {m.failed} failed" if m.failed else ""))

    def on_trace_loaded(self, m: TraceLoaded) -> None:
        m.prevent_default()          # LaunchApp's handler would push a MainScreen
        self.loaded = m.loaded
        self.main = RanksScreen(m.loaded)
        self.push_screen(self.main)
        self.drop_loading_view()

    def open_rank(self, row: dict) -> None:
        self.opening = True
        self.notify(f"opening rank {row['rank']}…", timeout=2)
        self._open(row)

    @work(thread=True, exclusive=True, group="open-rank")
    def _open(self, row: dict) -> None:
        from launchtui.tui.loader import load
        # the options `launchtui FILE` would give: whole trace, all devices (tui never imports cli)
        args = argparse.Namespace(trace=row["file"], trim=None, device="all", nvtx=None,
                                  no_cache=getattr(self.args, "no_cache", False))
        try:
            loaded = load(args)
        except Exception as e:
            self.call_from_thread(self._open_failed, f"rank {row['rank']}: {e}")
            return
        self.call_from_thread(self._opened, loaded, row["rank"])

    def _opened(self, loaded, rank: int) -> None:
        self.opening = False
        self.push_screen(RankMainScreen(loaded, rank))

    def _open_failed(self, message: str) -> None:
        self.opening = False
        self.notify(message, severity="error", timeout=6)

    @property
    def busy(self) -> bool:
        if self.error_message is not None:
            return False
        top = self.screen
        return self.main is None or self.opening or bool(getattr(top, "table_busy", False)) or not top.is_mounted


def run_ranks_app(args) -> int:
    """Entry point of `launchtui DIR`: the exit status (2 when the job cannot run)."""
    from launchtui.tui.app import run_app
    return run_app(args, RanksApp)
