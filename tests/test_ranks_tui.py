"""The TUI ranks view: one row per rank with the job's figures, sorting, Enter opens a rank, Esc back."""
from __future__ import annotations

import argparse

import pytest

from fixtures.ranks import make_ranks
from tui_helpers import run, screen_text, settle, wait_ready

pytestmark = [pytest.mark.tui, pytest.mark.serial]

SIZE = (160, 40)


@pytest.fixture(scope="module")
def job4(tmp_path_factory):
    d = tmp_path_factory.mktemp("tuijob") / "ranks4"
    make_ranks(d, 4, "launches", straggler_rank=2)
    return d


def _app(d):
    from launchtui.tui.ranks_view import RanksApp
    return RanksApp(argparse.Namespace(traces=[str(d)], no_cache=False, workers=2, scheduler=None))


def test_ranks_view_rows_sort_open_and_back(job4):
    from textual.widgets import DataTable

    from launchtui.tui.ranks_view import RankMainScreen, RanksScreen

    async def go():
        app = _app(job4)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            assert app.error_message is None
            scr = app.screen
            assert isinstance(scr, RanksScreen)
            # at rest, nothing redraws on a timer (tests/test_tui_at_rest.py)
            assert [w for s in app.screen_stack for w in s.walk_children() if w.auto_refresh] == []
            t = scr.query_one(DataTable)
            assert t.row_count == 4
            head = str(scr.query_one("#ranks-header").render())
            assert head.startswith("4 of 4 ranks read; ") and "; 1 straggler: rank 2" in head
            col = [c.key.value for c in t.ordered_columns]
            lpi = col.index("launches_per_iter")
            assert [t.get_row_at(i)[lpi] for i in range(4)] == ["482.0", "482.0", "674.0", "482.0"]
            assert "launches/iter 674" in t.get_row_at(2)[col.index("straggler")]
            # each rank's own record level and host-bound share, as `record DIR --json` has them
            for i, row in enumerate(scr.doc["ranks"]):
                cells = t.get_row_at(i)
                assert cells[col.index("launch_bound_level")] == row["launch_bound_level"]
                assert cells[col.index("host_bound_share")] == f"{row['host_bound_share'] * 100:.0f}%"
            assert scr.doc["job"]["level"] and f"{scr.doc['job']['level']} job" in head
            # sort by launches/iter, descending: the straggler first
            scr.sort(lpi, True)
            await pilot.pause()
            assert t.get_row_at(0)[0] == "2"
            assert "sorted by Launch/iter (descending)" in str(scr.query_one("#ranks-header").render())
            # Enter on the first row opens rank 2 in the normal view; Esc comes back
            t.move_cursor(row=0)
            await pilot.press("enter")
            await wait_ready(app, pilot)
            await settle(app, pilot)
            assert isinstance(app.screen, RankMainScreen) and app.screen.rank == 2
            assert app.screen.loaded.trace.source.path.endswith("rank2.pt.trace.json.gz")
            # the same layout as a single trace (the main view's CSS): a one-line legend, the filter
            # hidden; the header names the rank
            rk = app.screen
            assert rk.query_one("#legend").size.height == 1
            assert not rk.query_one("#filter").display or not rk.query_one("#filter").has_class("visible")
            assert rk.query_one("#filter").size.height == 0
            assert screen_text(app).splitlines()[0].startswith(" rank 2 │ rank2.pt.trace.json.gz │")
            await pilot.press("escape")
            await pilot.pause()
            assert app.screen is scr
    run(go())


def test_ranks_view_bad_input_exits_2(tmp_path):
    (tmp_path / "empty").mkdir()

    async def go():
        app = _app(tmp_path / "empty")
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
        return app
    app = run(go())
    assert app.error_message == f"{tmp_path / 'empty'}: empty directory: no traces to read"
