"""The TUI at every terminal size, and the hints it gives (issue 15, "The TUI at every size").

On the bundled 2-GPU demo trace (fixtures/demo, deterministic) and the synthetic generator."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from tui_helpers import make_app, record_notifications, run, screen_text, settle, wait_ready

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo" / "demo.sqlite"


@pytest.fixture(scope="module")
def demo_trace():
    from launchtui.trace.load import open_trace
    return open_trace(DEMO, use_cache=False)


def _app(trace, **kw):
    return make_app(DEMO, trace=trace, **kw)


def _lines(app) -> list[str]:
    return screen_text(app).splitlines()


@pytest.mark.slow
@pytest.mark.tui
def test_layout_follows_every_resize(demo_trace):
    async def go():
        app = _app(demo_trace)
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_ready(app, pilot)
            tl = app.main.timeline
            assert any(ln.startswith("HW █ kernel") for ln in _lines(app))      # legend at 50 lines
            last = len(tl.rows) - 1
            await pilot.press(*["j"] * last)
            assert tl.selected == last
            await pilot.resize_terminal(80, 24)
            await settle(app, pilot)
            lines = _lines(app)
            assert not any(ln.startswith("HW █ kernel") for ln in lines)  # the legend follows this resize
            assert sum(ln.startswith("▶") for ln in lines) == 1                # the cursor row is on screen
            assert any("rows above" in ln for ln in lines)                    # and says what is hidden
            await pilot.resize_terminal(220, 60)
            await settle(app, pilot)
            lines = _lines(app)
            assert any(ln.startswith("HW █ kernel") for ln in lines)
            assert tl.row_offset == 0 and lines[4].startswith("nvtx ")        # first row right below the axis
            body = lines[4:4 + len(tl.rows)]
            assert all(ln.strip() for ln in body), "no blank lines between rows"
            assert sum(ln.startswith("▶") for ln in lines) == 1
    run(go())


@pytest.mark.tui
def test_80_columns_keep_the_ranking_columns_and_the_device(demo_trace):
    async def go():
        app = _app(demo_trace)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_ready(app, pilot)
            table = app.main.table
            keys = [c.key for c, _ in table.columns(80)]
            assert keys[:5] == ["kernel_name", "launch_count", "avg_api_us", "avg_kernel_us", "total_api_ms"]
            assert "device_id" not in keys
            lines = _lines(app)
            head = next(ln for ln in lines if ln.startswith("Kernel"))
            for title in ("Launches", "API avg", "Kernel avg", "total API ms", "(GPUn=dev)", "→"):
                assert title in head, title
            # the device leads the name cell, so the two GPUs' rows differ
            rows = table.visible_rows()
            for r in rows[:3]:
                assert any(ln.startswith(f"GPU{r['device_id']} ") and f"{r['launch_count']:,}" in ln
                           for ln in lines), r["kernel_name"]
            # sideways: → shows the columns that did not fit, the pinned ones stay
            await pilot.press("tab", "right", "right", "right")
            keys2 = [c.key for c, _ in table.columns(80)]
            assert keys2[:5] == keys[:5] and set(keys2[5:]) - set(keys[5:])
            # a digit sorts by a shown column only
            notes = record_notifications(app)
            await pilot.press("9")
            assert table.sort_key is None and any("columns are shown" in n for n in notes)
            await pilot.press("5")
            assert table.sort_key == "total_api_ms"
            await pilot.pause()
            assert "total API ms▼" in screen_text(app)                          # the arrow is not cut off
            # one device shown: no device prefix needed
            await pilot.press("d")
            await settle(app, pilot)
            lines = _lines(app)
            assert not any("(GPUn=dev)" in ln or ln.startswith("GPU0 ") for ln in lines)
            assert any(ln.startswith(table.visible_rows()[0]["kernel_name"][:20]) for ln in lines)
    run(go())


@pytest.mark.tui
def test_160_columns_show_every_column_and_whole_names(demo_trace):
    async def go():
        app = _app(demo_trace)
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_ready(app, pilot)
            table = app.main.table
            keys = [c.key for c, _ in table.columns(160)]
            assert "device_id" in keys and "nvtx_range" in keys and table.hidden_cols == 0
            txt = screen_text(app)
            for r in table.visible_rows():
                assert r["kernel_name"] in txt and r["nvtx_range"] in txt     # nothing cut
            assert "━ GPU 0 · NVIDIA A100-SXM4-80GB ━" in txt                  # device names whole
            await pilot.press("tab", "p")
            assert table.sort_key == "nvtx_range"
            await pilot.pause()
            assert "Phase▲" in screen_text(app)
    run(go())


def test_elide_and_cut_words():
    from launchtui.tui.state import cut_words, elide
    assert elide("vectorized_elementwise_kernel", 29) == "vectorized_elementwise_kernel"
    e = elide("vectorized_elementwise_kernel", 15)
    assert len(e) == 15 and e.startswith("vectori") and e.endswith("kernel") and "…" in e
    c = cut_words("queue high: the GPU has a backlog (not idle because of these launches)", 60)
    assert c.endswith("…") and len(c) <= 60 and c[:-1].endswith(("these", "of", "because", "idle"))


def test_phase_wording_matches_the_share():
    from launchtui.tui.details import phase_text
    assert phase_text("fwd", 0.8).startswith("mostly launched inside fwd (80 %")
    t = phase_text("fwd", 0.25)
    assert "mostly" not in t and "25 %" in t
    assert "<1 %" in phase_text("aten::add, op_id = 3", 0.001)


@pytest.mark.tui
def test_initial_view_fits_gpu_activity_and_its_launches(demo_trace):
    from launchtui.tui.queries import gpu_activity_window
    tr = demo_trace
    ops, api = tr.ops, tr.api
    # independently: every op, and every API call that launched one
    lo = min(int(ops.start.min()), min(int(api.start[a]) for a in set(ops.api.tolist()) if a >= 0))
    hi = max(int(ops.end.max()), max(int(api.end[a]) for a in set(ops.api.tolist()) if a >= 0))
    assert gpu_activity_window(tr) == (lo, hi)

    async def go():
        app = _app(tr)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_ready(app, pilot)
            v = app.main.timeline.view
            assert v.start <= lo and v.end >= hi and v.end - v.start < 1.1 * (hi - lo)
            assert "GPU-op window" in screen_text(app) and "capture window" not in screen_text(app)
            await pilot.press("plus", "plus", "0")
            assert v.start <= lo and v.end >= hi and v.end - v.start < 1.1 * (hi - lo)
    run(go())


@pytest.mark.slow
@pytest.mark.tui
def test_zoom_stops_at_the_clock_resolution(tmp_path):
    from fixtures.synth import simulate, write_kineto_json
    from launchtui.trace.load import open_trace
    p = write_kineto_json(simulate(), tmp_path / "k.json.gz", variant="legacy2021")   # integer µs
    tr = open_trace(p, use_cache=False)

    async def go():
        app = make_app(p, trace=tr)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_ready(app, pilot)
            assert app.loaded.clock_ns == 1000.0          # Kineto JSON: µs timestamps
            notes = record_notifications(app)
            await pilot.press(*["plus"] * 40)
            assert app.main.timeline.view.ns_per_col == 1000.0
            assert any("clock resolves" in n for n in notes)
    run(go())


@pytest.mark.slow
@pytest.mark.tui
def test_export_of_a_window_without_a_complete_op_says_why(demo_trace):
    async def go():
        app = _app(demo_trace)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_ready(app, pilot)
            await pilot.press(*["plus"] * 40)            # ~100 ns: shorter than any op
            notes = record_notifications(app)
            await pilot.press("e")
            assert app.screen is app.main
            assert any("holds no complete GPU op" in n and "Zoom out" in n for n in notes)
            assert not any("selects no part of this profile" in n for n in notes)
    run(go())


@pytest.mark.tui
def test_keys_with_nothing_selected_give_a_hint(demo_trace):
    async def go():
        app = _app(demo_trace)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_ready(app, pilot)
            notes = record_notifications(app)
            for key, hint in (("right_square_bracket", "Pick a range first"), ("a", "Pick a range first"),
                              ("n", "Choose a kernel first")):
                n0 = len(notes)
                await pilot.press(key)
                assert any(hint in n for n in notes[n0:]), key
    run(go())


@pytest.mark.tui
def test_instances_agree_with_the_row(demo_trace):
    async def go():
        app = _app(demo_trace)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_ready(app, pilot)
            await pilot.press("O")                       # a selection smaller than the trace
            await settle(app, pilot)
            await pilot.press("tab", "enter")
            await settle(app, pilot)
            row = app.main.table.selected_row()
            inst = app.main.timeline.highlight
            assert len(inst) == row["launch_count"]
            assert f"instance 1/{row['launch_count']}" in app.main.context
            tr = demo_trace
            assert np.all(tr.ops.device[inst.ops] == row["device_id"])
    run(go())


@pytest.mark.tui
def test_keys_pressed_while_loading_are_answered(demo_trace, monkeypatch):
    import launchtui.tui.loader as loader
    gate = threading.Event()
    real = loader.load

    def slow(*a, **kw):
        gate.wait(10)
        return real(*a, **kw)
    monkeypatch.setattr(loader, "load", slow)

    async def go():
        app = _app(demo_trace)
        async with app.run_test(size=(100, 30)) as pilot:
            notes = record_notifications(app)
            await pilot.press("b")
            assert app.main is None and any("Still loading" in n for n in notes)
            gate.set()
            await wait_ready(app, pilot)
            assert app.main is not None
    run(go())
