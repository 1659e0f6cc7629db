"""The TUI's first screen imports only what it shows (definitions.md §T1b): the panes and
screens opened later (call-site picker, help and pickers, compare, ranks) and the headless paths
(api, cli) are imported when first used, so a warm reopen pays for none of them. Run in a
fresh interpreter: the test process has imported everything already."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo" / "demo.sqlite"
NOT_AT_START = ["launchtui.tui.site_picker", "launchtui.tui.screens", "launchtui.tui.compare",
                "launchtui.tui.ranks_view", "launchtui.ranks", "launchtui.api",
                "launchtui.cli", "textual.widgets._data_table"]
# a warm reopen shows the stored record: the modules that compute or print one stay out
NOT_WHEN_STORED = ["launchtui.analysis.record", "launchtui.analysis.record_markdown",
                   "launchtui.analysis.graphs_report"]
# np.unique without return_* flags, np.isin's sort path, np.percentile and np.median of floats
# import numpy.ma (14-19 ms, on the UI thread in the timeline's first render): launchtui calls
# trace.arrays' unique_sorted, isin_int, percentile_int and median_of instead, cold or warm
NOT_EVER = ["numpy.ma"]
# an Nsight trace (the demo), its cursor line's launch details included: no Kineto reader
NOT_FOR_NSIGHT = ["launchtui.trace.kineto", "launchtui.trace.kineto_details", "msgspec"]

SCRIPT = """
import asyncio, json, sys
from types import SimpleNamespace
from launchtui.tui.app import LaunchApp

async def main():
    app = LaunchApp(SimpleNamespace(trace=sys.argv[1], trim=None, device="all", nvtx=None, no_cache=False))
    async with app.run_test(size=(120, 40)) as pilot:
        while app.busy or any(not w.is_finished for w in app.workers):
            await asyncio.sleep(0.01)
        await pilot.pause(0.05)
        shown = bool(app.main is not None and app.main.table.rows)
        before = sorted(sys.modules)
        await pilot.press("question_mark")     # help: its screen module comes now
        await pilot.pause(0.05)
    print(json.dumps({"shown": shown, "modules": before, "after_help": "launchtui.tui.screens" in sys.modules}))

asyncio.run(main())
"""


@pytest.mark.tui
@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_first_screen_imports_no_pane_it_does_not_show(tmp_path, cache):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    runs = 2 if cache == "warm" else 1     # the second open is a warm reopen
    for _ in range(runs):
        p = subprocess.run([sys.executable, "-c", SCRIPT, str(DEMO)], capture_output=True, text=True,
                           env=env, timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert doc["shown"]                                    # the table is on screen
    assert "launchtui.tui.main_screen" in doc["modules"]
    assert [m for m in NOT_AT_START if m in doc["modules"]] == []
    assert [m for m in NOT_FOR_NSIGHT if m in doc["modules"]] == []
    assert [m for m in NOT_EVER if m in doc["modules"]] == []
    if cache == "warm":
        assert [m for m in NOT_WHEN_STORED if m in doc["modules"]] == []
    assert doc["after_help"]                               # and a pane opened later does import
