"""SVG snapshots of the main screen at 80×24, 120×40, 160×50 and 200×60, and after a resize from
small to large (pytest-textual-snapshot).

On the bundled deterministic 2-GPU demo trace: the header shows the file's name only, times are the
trace's own, and nothing random is drawn, so the snapshots are the same on every run and machine.
Update them after an intended change with `pytest tests/test_tui_snapshots.py --snapshot-update`
and review the SVGs in tests/__snapshots__/.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tui_helpers import make_app, settle, wait_ready

pytestmark = pytest.mark.tui

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo" / "demo.sqlite"

pytest.importorskip("pytest_textual_snapshot", reason="pytest-textual-snapshot is in the `test` extra")


@pytest.fixture(scope="module")
def demo_trace():
    from launchtui.trace.load import open_trace
    return open_trace(DEMO, use_cache=False)


SIZES = [(80, 24), (120, 40), (160, 50), (200, 60)]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_main_screen(snap_compare, demo_trace, size):
    app = make_app(DEMO.name, trace=demo_trace)   # a relative name: no absolute path on screen

    async def ready(pilot) -> None:
        await wait_ready(app, pilot)
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=size, run_before=ready)


def test_main_screen_resized_80x24_to_200x60(snap_compare, demo_trace):
    """Opened at 80×24, grown to 200×60: every row at the new width, the panel re-fitted."""
    app = make_app(DEMO.name, trace=demo_trace)

    async def ready(pilot) -> None:
        await wait_ready(app, pilot)
        await settle(app, pilot)
        await pilot.resize_terminal(200, 60)
        await settle(app, pilot)
        await pilot.pause(0.4)

    assert snap_compare(app, terminal_size=(80, 24), run_before=ready)


def test_main_screen_table_focused_80x24(snap_compare, demo_trace):
    """The table focused at 80 columns: the device in the name cell, the row's reading above."""
    app = make_app(DEMO.name, trace=demo_trace)

    async def ready(pilot) -> None:
        await wait_ready(app, pilot)
        await settle(app, pilot)       # the verdict and the table's phases too: the same frame every run
        await pilot.press("tab")
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=ready)


@pytest.mark.samples
@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)], ids=["80x24", "120x40", "200x60"])
def test_real_trace_a100_negq(snap_compare, size):
    """A real shared capture (the saturated a100_negq): the panel, the class lines and the timeline
    at each size."""
    from conftest import sample_model
    app = make_app("a100_negq.json.gz", trace=sample_model("kineto/a100_negq.json.gz"))

    async def ready(pilot) -> None:
        await wait_ready(app, pilot)
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=size, run_before=ready)
