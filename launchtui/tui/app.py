"""The launchtui Textual app: `launchtui TRACE` (see `run_app`).

The App loads the trace and exits; everything about the view lives in `MainScreen`
(`tui/main_screen.py`), the keys in `tui/keys.py`, the export flow in `tui/export_flow.py`.

The first frame (header, progress bar, footer) appears before numpy or the engine is imported; the
trace loads in a thread worker that posts batched progress, then the App pushes the MainScreen.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from textual import events, work
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.widgets import Label, ProgressBar, Static

from launchtui import heap
from launchtui.tui.commands import LaunchCommands
from launchtui.tui.keys import APP_BINDINGS, help_notes, help_sections, load_keymap
from launchtui.tui.messages import LanesMapped, LoadFailed, LoadProgress, TraceLoaded
from launchtui.tui.widgets.key_bar import KeyBar

CSS = """
#header { height: 2; background: $boost; color: $text; text-wrap: nowrap; text-overflow: ellipsis; }
#loading { height: 1fr; align: center middle; }
#loading Label { width: 100%; content-align: center middle; }
#loading ProgressBar { width: auto; }
"""


class LaunchApp(App):
    """launchtui's TUI. `trace=` injects an in-memory Trace (tests); otherwise args.trace is opened."""

    TITLE = "launchtui"
    CSS = CSS
    BINDINGS = APP_BINDINGS
    COMMANDS = App.COMMANDS | {LaunchCommands}
    ENABLE_COMMAND_PALETTE = True

    def __init__(self, args, trace=None, keymap: dict | None = None):
        super().__init__()
        self.args = args
        self._injected = trace
        self.loaded = None
        self.main = None                     # the MainScreen, once the trace is loaded
        self.error_message: str | None = None
        self._keymap_extra = keymap or {}
        self.timings: dict = {}
        self._told_loading = False
        self._stored = False                 # after_first_table ran
        self._store_when_built = False       # ... while the lanes were pending

    # ---- the loading view ----------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        path = getattr(self.args, "trace", "") or "(in memory)"
        yield Static(f" launchtui  {path}\n loading…", id="header")
        with Vertical(id="loading"):
            yield Label(f"Loading {Path(str(path)).name}", id="load-title")
            yield ProgressBar(total=None, show_eta=False, id="load-bar")
            yield Label("starting", id="load-stage")
        yield KeyBar()

    def on_mount(self) -> None:
        self.timings["mounted"] = time.perf_counter()
        km = load_keymap()
        km.update(self._keymap_extra)
        if km:
            self.set_keymap(km)
        self._load()

    @work(thread=True, exclusive=True, group="load")
    def _load(self) -> None:
        from launchtui.errors import TraceError
        from launchtui.tui.loader import Throttle, load
        progress = Throttle(lambda stage, rows: self.post_message(LoadProgress(stage, rows)))
        heap.take_policy()   # this worker reads: it recycles as a headless command's main thread does
        try:
            loaded = load(self.args, progress, trace=self._injected, defer_lanes=True)
            if getattr(self.args, "capture", None):
                from launchtui.tui.capture_view import attach_join
                attach_join(loaded, self.args)
        except TraceError as e:
            self.post_message(LoadFailed(str(e)))
            return
        except Exception as e:  # an engine bug: still exit cleanly with one line
            self.post_message(LoadFailed(f"{getattr(self.args, 'trace', '')}: internal error while loading: "
                                         f"{type(e).__name__}: {e}"))
            return
        self.post_message(TraceLoaded(loaded))
        if loaded.lanes.pending:   # the model came from the cache: the lanes while the workers compute
            from launchtui.tui.loader import build_pending_lanes
            self.post_message(LanesMapped(build_pending_lanes(loaded)))

    def after_first_table(self, loaded) -> None:
        """The first table of the trace this app loaded is final (the verdict before it): store what
        the next open maps instead of rebuilding (lanes, optimizer range). Not while the verdict and
        table compute: their temporaries and these never peak together, nor share the cores."""
        if loaded is self.loaded and not self._stored:
            self._stored = True
            if loaded.lanes.pending:
                self._store_when_built = True
            else:
                self._store_after_view()

    @work(thread=True, exclusive=True, group="store")
    def _store_after_view(self) -> None:
        from launchtui.tui.loader import store_lanes
        mapped = store_lanes(self.loaded)
        if mapped is not None:
            self.post_message(LanesMapped(mapped))

    def on_load_progress(self, m: LoadProgress) -> None:
        for w in self.query("#load-stage"):
            w.update(f"{m.stage}: {m.rows:,} rows")

    def on_load_failed(self, m: LoadFailed) -> None:
        self.error_message = m.message
        self.exit(return_code=2)

    def on_key(self, event: events.Key) -> None:
        """A key the loading view does not handle: say so once instead of dropping it silently."""
        if self.main is None and not self._told_loading and event.key not in ("q", "question_mark", "ctrl+q"):
            self._told_loading = True
            self.notify("Still loading the trace: keys work once the view appears.", timeout=4)

    def on_trace_loaded(self, m: TraceLoaded) -> None:
        from launchtui.tui.main_screen import MainScreen
        self.loaded = m.loaded
        self.main = MainScreen(m.loaded)
        self.push_screen(self.main)
        self.drop_loading_view()
        self.timings["loaded"] = time.perf_counter()
        self.call_after_refresh(self._mark_interactive)

    def drop_loading_view(self) -> None:
        """Once a view is pushed over it: the loading view would stay under it, its indeterminate
        bar redrawing 15 times a second for as long as the app runs."""
        for w in self.query("#loading"):
            w.remove()

    def on_lanes_mapped(self, m: LanesMapped) -> None:
        if self.main is None or self.loaded is None:
            return
        first = self.loaded.lanes.pending
        self.loaded.lanes = m.lanes
        if hasattr(self.main, "timeline"):   # composed (else it composes with these)
            self.main.lanes_ready(m.lanes, first)
        if first and self._store_when_built:
            self._store_when_built = False
            self._store_after_view()

    def _mark_interactive(self) -> None:
        self.timings["interactive"] = time.perf_counter()

    @property
    def busy(self) -> bool:
        """Loading, the main view's table, idle-row or launch-details worker running or its lanes
        pending (tests and the latency script wait on it)."""
        return self.error_message is None and (self.main is None or not self.main.is_mounted
                                               or self.main.table_busy
                                               or getattr(getattr(self.main, "idle", None), "busy", False)
                                               or getattr(getattr(self.main, "launch_details", None), "loading",
                                                          False)
                                               or getattr(getattr(self.loaded, "lanes", None), "pending", False))

    # ---- app-wide keys --------------------------------------------------------------------------
    def action_help(self) -> None:
        from launchtui.tui.screens import HelpScreen
        self.push_screen(HelpScreen(help_sections(self._keymap), help_notes()))


def run_app(args, app_cls=None) -> int:
    """Entry point used by `launchtui TRACE` (and, with `app_cls`, by `--compare`): returns the exit
    status (2 on a loading error)."""
    app = (app_cls or LaunchApp)(args)
    rc = app.run()
    if app.error_message:
        print(f"launchtui: {app.error_message}", file=sys.stderr)
        return 2
    return app.return_code if app.return_code is not None else (rc if isinstance(rc, int) else 0)
