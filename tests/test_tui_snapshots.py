"""SVG snapshots of the main screen at 80×24 and 160×50 (pytest-textual-snapshot).

On the bundled deterministic 2-GPU demo trace: the header shows the file's name only, times are the
trace's own, and nothing random is drawn, so the snapshots are the same on every run and machine.
Update them after an intended change with `pytest tests/test_tui_snapshots.py --snapshot-update`
and review the SVGs in tests/__snapshots__/.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tui_helpers import make_app, wait_ready

pytestmark = pytest.mark.tui

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo" / "demo.sqlite"

pytest.importorskip("pytest_textual_snapshot", reason="pytest-textual-snapshot is in the `test` extra")


@pytest.fixture(scope="module")
def demo_trace():
    from launchtui.trace.load import open_trace
    return open_trace(DEMO, use_cache=False)


@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
def test_main_screen(snap_compare, demo_trace, size):
    app = make_app(DEMO.name, trace=demo_trace)   # a relative name: no absolute path on screen

    async def ready(pilot) -> None:
        await wait_ready(app, pilot)

    assert snap_compare(app, terminal_size=size, run_before=ready)


def test_main_screen_table_focused_80x24(snap_compare, demo_trace):
    """The table focused at 80 columns: the device in the name cell, the row's reading above."""
    app = make_app(DEMO.name, trace=demo_trace)

    async def ready(pilot) -> None:
        await wait_ready(app, pilot)
        await pilot.press("tab")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=ready)
