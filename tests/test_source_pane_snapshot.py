"""SVG snapshot of the call-site pane beside the kernel table at 160×50 (pytest-textual-snapshot), on the
generator's Kineto trace with python_function stacks, a call site chosen (Enter): its launches marked on
the API and HW rows. Update with `pytest tests/test_source_pane_snapshot.py --snapshot-update` after
reviewing the SVG in tests/__snapshots__/."""
from __future__ import annotations

import pytest

from fixtures import stacks_synth
from tui_helpers import make_app, settle, wait_ready

pytestmark = pytest.mark.tui

pytest.importorskip("pytest_textual_snapshot", reason="pytest-textual-snapshot is in the `test` extra")


def test_pane_beside_the_table_160x50(snap_compare, tmp_path):
    from launchtui.trace.load import open_trace
    path = tmp_path / "stacks.json"
    stacks_synth.write(path, steps=3)
    trace = open_trace(path, use_cache=False)
    app = make_app(path.name, trace=trace)   # a relative name: no temporary path on screen

    async def ready(pilot) -> None:
        await wait_ready(app, pilot)
        await pilot.press("tab", "tab", "enter")
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=(160, 50), run_before=ready)
