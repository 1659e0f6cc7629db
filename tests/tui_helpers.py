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


async def _drain(app) -> None:
    """Wait for every running worker; one cancelled by a newer one (exclusive groups) is fine."""
    from textual.worker import WorkerCancelled, WorkerError
    for w in list(app.workers):
        try:
            await w.wait()
        except (WorkerCancelled, WorkerError):   # cancelled by a newer one, or not started yet
            pass


async def wait_ready(app, pilot, rounds: int = 2000) -> None:
    """Until the trace is loaded, the MainScreen mounted and its table worker finished (or loading failed).

    Each round waits for the running workers to complete and the message queues to drain: no fixed sleeps."""
    for _ in range(rounds):
        await _drain(app)
        await pilot.pause()
        if app.error_message or not app.busy:
            await pilot.pause()
            return
    raise AssertionError("the app did not finish loading")


async def settle(app, pilot) -> None:
    """Let workers (table, export) finish and the screen repaint."""
    for _ in range(200):
        await pilot.pause()
        await _drain(app)
        await pilot.pause()
        if not app.busy:
            break


def run(coro):
    return asyncio.run(coro)


def screen_text(app) -> str:
    """The current screen as plain text: App.export_screenshot with Rich's text export in place of SVG."""
    from unittest import mock

    from rich.console import Console
    with mock.patch.object(Console, "export_svg", lambda self, **kw: self.export_text(styles=False)):
        return app.export_screenshot()


def record_notifications(app) -> list[str]:
    """Every message passed to app.notify from now on (the public method, wrapped)."""
    seen: list[str] = []
    orig = app.notify

    def notify(message, *a, **kw):
        seen.append(str(message))
        return orig(message, *a, **kw)
    app.notify = notify
    return seen


def small_synth(tmp_path_factory) -> dict:
    """The default synthetic workload as Nsight and Kineto files (built once per run, conftest.built_once),
    its ground truth, and the Nsight trace opened without the cache: what test_tui*.py drive the app on."""
    from conftest import built_once
    from fixtures.synth import ground_truth, simulate, write_kineto_json, write_nsys_sqlite
    from launchtui.trace.load import open_trace
    w = simulate()

    def build(d):
        return {"nsys": write_nsys_sqlite(w, d / "synth.sqlite", variant="modern"),
                "kineto": write_kineto_json(w, d / "synth.json.gz", variant="modern")}
    files = built_once(tmp_path_factory, "tui-synth", build)
    return {"dir": files["nsys"].parent, **files, "w": w, "gt": ground_truth(w, "nsys", "modern"),
            "trace": open_trace(files["nsys"], use_cache=False)}
