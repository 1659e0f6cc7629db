"""SVG snapshot of the graph table (key R, definitions.md §T9) at 160×45 (pytest-textual-snapshot), on the
generator's replay trace (fixtures/graph_cases.py: graphs A and B, 6 replays each). Update with
`pytest tests/test_graph_table_snapshot.py --snapshot-update` after reviewing the SVG in
tests/__snapshots__/."""
from __future__ import annotations

import pytest

from fixtures import graph_cases as gc
from tui_helpers import make_app, settle, wait_ready

pytestmark = pytest.mark.tui

pytest.importorskip("pytest_textual_snapshot", reason="pytest-textual-snapshot is in the `test` extra")


def test_graph_table_160x45(snap_compare, tmp_path):
    from launchtui.trace.load import open_trace
    path, _ = gc.write("replays", tmp_path / "replays.pt.trace.json")
    trace = open_trace(path, use_cache=False)
    app = make_app(path.name, trace=trace)   # a relative name: no temporary path on screen

    async def ready(pilot) -> None:
        await wait_ready(app, pilot)
        await pilot.press("R")
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=(160, 45), run_before=ready)
