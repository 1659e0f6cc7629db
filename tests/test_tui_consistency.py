"""Pilot tests of issue 22: the timeline, the verdict panel, the record and the export tell one
story at every size (the bundled demo and a generated trace)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tui_helpers import make_app, run, screen_text, settle, wait_ready

pytestmark = pytest.mark.tui

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo" / "demo.sqlite"


async def _ready(app, pilot):
    await wait_ready(app, pilot)
    await settle(app, pilot)
    return app.screen


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_demo_says_what_lies_outside_the_iterations(size):
    """The demo's burst after the ProfilerSteps fills stream 7 to 1022 on the timeline while the
    panel judges the steps only: the panel says so at both sizes, from the record's own facts."""
    async def go():
        app = make_app(DEMO)
        async with app.run_test(size=size) as pilot:
            scr = await _ready(app, pilot)
            doc = scr.verdict.result.doc
            s7 = next(s for s in doc["streams"] if (s["device_id"], s["stream_id"]) == (0, 7))
            assert s7["queue_class"] == "normal" and s7["max_depth"] == 107
            assert s7["outside"] == {"max_depth": 1022, "blocked": 30, "range": "inference_burst"}
            text = screen_text(app)
            assert "q s7      1022!" in text
            if size[0] == 80:
                assert "Verdict: launch-bound · s7 1022 outside the iterations · V: details" in text
            else:
                assert ("outside the iterations (not judged): GPU 0 stream 7 reaches 1022 in "
                        "`inference_burst`, 30 launch calls block") in text
    run(go())


def test_panel_wraps_into_the_tables_blank_rows_and_V_shows_more():
    """120×40: the table's 6 rows leave its area's last rows blank; the panel takes them (its lines
    continue instead of ending in "…"), the timeline keeps its rows, and V shows every line in full."""
    async def go():
        app = make_app(DEMO)
        async with app.run_test(size=(120, 40)) as pilot:
            scr = await _ready(app, pilot)
            panel, table = scr.verdict.panel, scr.table
            area = scr.query_one("#tables")
            assert area.size.height == len(table.order) + 1 == 7        # no blank row under the table
            assert len(panel.lines) == panel.size.height > panel.MAX_LINES
            assert any(x.startswith("   ") for x in panel.lines)          # a wrapped line
            text = screen_text(app)
            for i in (1, 2, 3):
                assert f" {i}. " in text                                  # the top kernels on screen
            tl_rows = scr.timeline.content_height
            before = list(panel.lines)
            await pilot.press("V")
            await settle(app, pilot)
            assert panel.expanded and len(panel.lines) > len(before)
            assert not any(x.endswith("…") for x in panel.lines)          # every line in full
            await pilot.press("V")
            await settle(app, pilot)
            assert not panel.expanded and panel.lines == before and scr.timeline.content_height == tl_rows
    run(go())
