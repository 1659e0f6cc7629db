"""Helpers for the Pilot tests of the TUI (imported by tests/test_tui*.py)."""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def tui_args(path, **kw) -> SimpleNamespace:
    a = dict(trace=str(path), trim=None, device="all", nvtx=None, no_cache=True)
    a.update(kw)
    return SimpleNamespace(**a)


def make_app(path, trace=None, **kw):
    from launchtui.tui.app import LaunchApp
    return LaunchApp(tui_args(path, **kw), trace=trace)


async def wait_ready(app, pilot, timeout: float = 20.0) -> None:
    """Until the trace is loaded and the table worker for the current selection has finished."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        if app.loaded is not None and not app.table_busy and getattr(app, "table", None) is not None:
            await pilot.pause()
            return
        if app.error_message:
            return
        await pilot.pause(0.02)
    raise AssertionError("the app did not finish loading in time")


async def settle(app, pilot) -> None:
    """Let workers (table, export) finish and the screen repaint."""
    await pilot.pause()
    for _ in range(500):
        busy = [w for w in app.workers if not w.is_finished]
        if not busy and not app.table_busy:
            break
        await pilot.pause(0.02)
    await pilot.pause()


def run(coro):
    return asyncio.run(coro)


def screen_text(app) -> str:
    """The current screen as plain text, rendered like App.export_screenshot does."""
    import io

    from rich.console import Console
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text(styles=False)
