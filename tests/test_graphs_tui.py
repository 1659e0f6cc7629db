"""The TUI opens a graph-capture trace and shows its capture line as the verdict (definitions §12.1)."""
from __future__ import annotations

import pytest

from conftest import sample
from tui_helpers import make_app, record_notifications, run, screen_text, settle, wait_ready

pytestmark = [pytest.mark.samples, pytest.mark.tui]


def test_capture_trace_verdict_panel():
    path = sample("kineto/mi300x_vllm_piecewise_graph_capture.pt.trace.json.gz")

    async def go():
        app = make_app(path)
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_ready(app, pilot)
            for _ in range(60):
                await settle(app, pilot)
                if "graph-capture trace" in screen_text(app):
                    break
            txt = screen_text(app)
            assert "graph-capture trace: 361 launches captured into 25 graphs" in txt
    run(go())


def _screen_of(app, kind):
    return next(s for s in app.screen_stack if isinstance(s, kind))


def test_graph_table_on_generated_replays(tmp_path):
    """R lists the generator's two graphs with its truth; Enter marks graph B and shows its first replay."""
    from fixtures import graph_cases as gc
    from launchtui.tui.graphs_view import GraphTable
    from launchtui.tui.main_screen import MainScreen
    path, truth = gc.write("replays", tmp_path / "replays.pt.trace.json")
    a, b = (gc.graph_truth(truth["replays"][k]) for k in ("A", "B"))

    async def go():
        app = make_app(path)
        async with app.run_test(size=(170, 45)) as pilot:
            await wait_ready(app, pilot)
            await pilot.press("R")
            await settle(app, pilot)
            gt = _screen_of(app, GraphTable)
            rows = gt.data.rows
            assert [(r["first_op"], r["replays"], r["ops_per_replay"]["median"]) for r in rows] == [
                ("gemm_a", a["replays"], a["ops"]), ("ln_b0", b["replays"], b["ops"])]
            assert rows[0]["span_us"] == a["span_us"] and rows[1]["launch_api_us"] == b["launch_api_us"]
            assert gt.data.integrity == ["ok", "ok"] and gt.data.unrecorded == 0
            txt = screen_text(app)
            assert "CUDA graphs: 2 graphs, 12 replays" in txt and "ln_b0" in txt
            await pilot.press("down", "enter")
            await settle(app, pilot)
            scr = _screen_of(app, MainScreen)
            tr = scr.loaded.trace
            inst = scr.timeline.highlight
            assert len(inst) == b["ops"] * b["replays"]
            assert {tr.strings[int(n)] for n in tr.ops.name[inst.ops]} >= {"ln_b0"}
            first = tr.ops.start[inst.ops].min()
            lo, hi = scr.timeline.view.start, scr.timeline.view.start + scr.timeline.view.ns_per_col * scr.timeline.view.width
            assert lo <= first <= hi and hi - lo < 4 * b["span_us"]["max"] * 1e3
            assert "graph 2 (ln_b0)" in scr.context
    run(go())


def test_graph_table_vllm_execution():
    """The shared vLLM replay trace: 25 graph launches, 361 replayed ops, in 3 graphs."""
    from launchtui.tui.graphs_view import GraphTable
    path = sample("kineto/vllm_graph_execution.json.gz")

    async def go():
        app = make_app(path)
        async with app.run_test(size=(170, 45)) as pilot:
            await wait_ready(app, pilot)
            await pilot.press("R")
            await settle(app, pilot)
            gt = _screen_of(app, GraphTable)
            assert len(gt.data.rows) == 3
            assert sum(r["replays"] for r in gt.data.rows) == 25 and gt.data.ops == 361
            assert "CUDA graphs: 3 graphs, 25 replays, 361 replayed ops" in screen_text(app)
    run(go())


def test_graph_key_without_graphs(tmp_path):
    """A trace without graph replays says so in one line."""
    from fixtures import graph_cases as gc
    from launchtui.tui.graphs_view import NO_GRAPHS, GraphTable
    path, _ = gc.write("capture_trace", tmp_path / "capture.pt.trace.json")

    async def go():
        app = make_app(path)
        async with app.run_test(size=(170, 45)) as pilot:
            await wait_ready(app, pilot)
            seen = record_notifications(app)
            await pilot.press("R")
            await settle(app, pilot)
            assert not any(isinstance(s, GraphTable) for s in app.screen_stack)
            assert seen == [NO_GRAPHS] and "\n" not in NO_GRAPHS
    run(go())
