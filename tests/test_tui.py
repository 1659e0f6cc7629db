"""Pilot tests of the Textual app on the synthetic fixture: state and rendered content, not just 'no crash'.
The export key and odd inputs: test_tui_inputs.py."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tui_helpers import make_app, run, screen_text, settle, small_synth, wait_ready

pytestmark = pytest.mark.tui

SIZE = (120, 40)


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    return small_synth(tmp_path_factory)


def _app(synth, **kw):
    return make_app(synth["nsys"], trace=synth["trace"], **kw)


# ---------------------------------------------------------------------------------------------
def test_every_binding_has_an_id_and_an_existing_action():
    from launchtui.tui import screens
    from launchtui.tui.app import LaunchApp
    from launchtui.tui.main_screen import MainScreen
    from launchtui.tui.widgets.kernel_table import KernelTable
    from launchtui.tui.widgets.timeline import Timeline
    owners = [LaunchApp, MainScreen, Timeline, KernelTable, screens.HelpScreen, screens.NvtxPicker,
              screens.ExportDialog, screens.ConfirmScreen, screens.InfoScreen]
    ids = {}
    for cls in owners:
        for b in cls.BINDINGS:
            assert b.id, f"{cls.__name__}: binding {b.key} has no id"
            action = b.action.split("(")[0]
            # one id, one meaning: the view repeats the app's quit/help so they lead its footer
            assert ids.setdefault(b.id, (b.key, action.removeprefix("app."))) == (b.key, action.removeprefix("app.")), \
                f"binding id {b.id} is used for two different keys or actions"
            owner, name = (LaunchApp, action[4:]) if action.startswith("app.") else (cls, action)
            assert hasattr(owner, f"action_{name}"), f"{cls.__name__}: {b.key} -> missing action_{name}"
    keys = {k for b in LaunchApp.BINDINGS + MainScreen.BINDINGS for k in b.key.split(",")}
    for k in ("q", "question_mark", "h", "l", "H", "L", "plus", "minus", "0", "g", "G", "o", "O",
              "left_square_bracket", "right_square_bracket", "b", "B", "v", "escape", "e", "d", "t", "D",
              "slash", "n", "N", "left", "right", "pageup", "pagedown"):
        assert k in keys, k


def test_first_frame_shows_rows_table_and_footer(synth):
    async def go():
        app = _app(synth)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            txt = screen_text(app)
            tl = app.main.timeline
            kinds = [r.kind for r in tl.rows]
            # NVTX rows first, then per device an API row directly above the stream's HW and queue rows
            assert kinds[0] == "nvtx"
            i = kinds.index("api")
            assert kinds[i + 1] == "hw" and kinds[i + 2] == "queue"
            assert "API  4242" in txt and "HW   s7" in txt and "q s7" in txt and "1022!" in txt
            assert "Kernel" in txt and "Launches" in txt and "vectorized_elementwise_kernel" in txt
            assert "q Quit" in txt and "? Help" in txt
            assert "Nsight Systems" in txt and "GPU-op window 1.500061" in txt
            # the saturated queue is drawn with the full glyph, the episode on the axis
            qrow = [ln for ln in txt.splitlines() if ln.startswith("q s7")][0]
            assert "█" in qrow
            axis = txt.splitlines()[3]
            assert "━" in axis and "▼" in axis
    run(go())


def test_sorting_changes_the_row_order(synth):
    async def go():
        app = _app(synth)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            await pilot.press("tab")
            assert app.focused is app.main.table
            before = [(r["kernel_name"], r["device_id"]) for r in app.main.table.visible_rows()]
            engine = [(r["kernel_name"], r["device_id"]) for r in app.main.table.rows]
            assert before == engine                               # the engine's ranking first
            await pilot.press("4")                                # Kernel avg (4th shown), descending
            rows = app.main.table.visible_rows()
            vals = [r["avg_kernel_us"] for r in rows]
            assert vals == sorted(vals, reverse=True)
            assert [(r["kernel_name"], r["device_id"]) for r in rows] != before
            await pilot.press("4")                                # again: ascending
            vals = [r["avg_kernel_us"] for r in app.main.table.visible_rows()]
            assert vals == sorted(vals)
            await pilot.press("1")                                # Kernel name, ascending
            names = [r["kernel_name"] for r in app.main.table.visible_rows()]
            assert names == sorted(names)
            await pilot.pause()
            assert "Kernel▲" in screen_text(app)
            # clicking a header sorts by that column
            x = sum(w + 1 for c, w in app.main.table.columns(app.main.table.size.width)[:2]) + 2   # API avg
            await pilot.click("#table", offset=(x, 0))
            assert app.main.table.sort_key == "avg_api_us"
            vals = [r["avg_api_us"] for r in app.main.table.visible_rows()]
            assert vals == sorted(vals, reverse=True)
    run(go())


def test_O_puts_the_cursor_in_the_optimizer_range_and_restricts_the_table(synth):
    from launchtui.analysis import nvtx
    from launchtui.analysis.launches import launched_kernels, small_kernel_table
    from launchtui.analysis.select import range_selection
    tr = synth["trace"]

    async def go():
        app = _app(synth)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            whole = app.main.stats["launches"]
            await pilot.press("O")
            await settle(app, pilot)
            sel = app.main.selection
            assert sel.ranges is not None and len(sel.ranges) == 1
            r = sel.ranges[0]
            name = nvtx.range_name(tr, r)
            assert "optim" in name.lower()
            cur = app.main.timeline.view.cursor
            assert tr.ranges.start[r] <= cur < tr.ranges.end[r]
            # the table and stats count only the kernels launched inside that range
            rsel = range_selection(tr, [r], "x")
            n_in = len(launched_kernels(tr, rsel))
            assert 0 < n_in < whole
            assert app.main.stats["launches"] == n_in
            expect = small_kernel_table(tr, rsel, limit=0)
            got = app.main.table.rows
            assert [(x["kernel_name"], x["device_id"], x["launch_count"]) for x in got] == \
                [(x["kernel_name"], x["device_id"], x["launch_count"]) for x in expect]
            assert name in screen_text(app)
            # a: pool every occurrence of the name; ] steps the view to the next one
            await pilot.press("a")
            await settle(app, pilot)
            occ = nvtx.occurrences(tr, int(tr.ranges.text[r]))
            assert len(app.main.selection.ranges) == len(occ) > 1
            expect = small_kernel_table(tr, range_selection(tr, occ, "x"), limit=0)
            assert [(x["kernel_name"], x["launch_count"]) for x in app.main.table.rows] == \
                [(x["kernel_name"], x["launch_count"]) for x in expect] and expect
            await pilot.press("right_square_bracket")
            await settle(app, pilot)
            r2 = int(occ[1])
            assert tr.ranges.start[r2] <= app.main.timeline.view.cursor < tr.ranges.end[r2]
            await pilot.press("escape")
            await settle(app, pilot)
            assert app.main.stats["launches"] == whole
    run(go())


def test_b_lands_on_the_synthetic_backpressure_episode(synth):
    gt = synth["gt"]["backpressure"]
    (iv,) = [x for x in gt["intervals_ge_1000"] if x["device_id"] == 0 and x["stream_id"] == 7]
    g0, g1 = iv["intervals"][0]

    async def go():
        app = _app(synth)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            await pilot.press("g")
            seen = []
            for _ in range(60):
                await pilot.press("b")
                m = app.main.current_mark
                seen.append(m)
                if m.kind == "queue":
                    break
            assert m.kind == "queue" and m.level == "saturated"
            assert (m.device, m.stream) == (0, 7)
            assert int(app.main.timeline.view.cursor) == m.start
            assert abs(m.start - g0) <= 1000 and m.max_depth == gt["queue_limit"]
            assert g0 - 1000 <= m.start <= g1
            row = app.main.timeline.current_row
            assert row.kind == "queue" and (row.lane.device, row.lane.stream) == (0, 7)
            assert int(row.lane.value_at(np.array([m.start + 1]))[0]) >= 1000
            txt = screen_text(app)
            assert "queue saturated on GPU 0 stream 7" in txt and "max depth 1022" in txt
            # spikes passed on the way are real launch spikes from the ground truth
            truth = {(s["start_ns"], s["end_ns"]) for s in gt["spikes"]}
            for s in seen[:-1]:
                assert s.kind == "spike" and (s.start, s.end) in truth
            # B goes back to the previous mark (the fixture spikes before its episode)
            assert len(seen) > 1 and seen[-2].kind == "spike"
            await pilot.press("B")
            assert app.main.current_mark.start == seen[-2].start
    run(go())


def test_enter_highlights_a_kernel_and_n_steps_through_instances(synth):
    from launchtui.analysis.launches import name_ids
    tr = synth["trace"]

    async def go():
        app = _app(synth)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            await pilot.press("tab", "j", "enter")
            await settle(app, pilot)
            row = app.main.table.selected_row()
            inst = app.main.timeline.highlight
            nid = tr.strings.lookup(row["kernel_name"])
            expect = np.nonzero((name_ids(tr, "short") == nid) & (tr.ops.device == row["device_id"]))[0]
            assert len(inst) == row["launch_count"]           # n / N step through what the row counts
            assert set(inst.ops.tolist()) <= set(expect.tolist())
            k0, k1 = int(inst.ops[0]), int(inst.ops[1])
            assert int(app.main.timeline.view.cursor) == tr.ops.start[k0]
            assert app.main.timeline.current_row.kind == "hw"
            assert "◆" in screen_text(app)
            assert row["kernel_name"] in screen_text(app)      # details: the kernel under the cursor
            await pilot.press("n")
            assert int(app.main.timeline.view.cursor) == tr.ops.start[k1]
            await pilot.press("N")
            assert int(app.main.timeline.view.cursor) == tr.ops.start[k0]
            await pilot.press("escape")                  # clears the highlight
            assert app.main.timeline.highlight is None
    run(go())


@pytest.mark.slow
def test_navigation_keys_change_the_view(synth):
    async def go():
        app = _app(synth)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            v = app.main.timeline.view
            c0, npc0 = v.cursor, v.ns_per_col
            await pilot.press("plus")
            assert v.ns_per_col == pytest.approx(npc0 / 2) and v.cursor == c0
            await pilot.press("minus", "minus")
            assert v.ns_per_col == pytest.approx(npc0 * 2)
            await pilot.press("0")
            assert v.ns_per_col == pytest.approx(npc0)
            await pilot.press("l")
            assert v.cursor == pytest.approx(c0 + 4 * npc0, abs=1)
            await pilot.press("h", "L")
            assert v.cursor == pytest.approx(c0 + 0.75 * v.width * npc0, abs=1)
            await pilot.press("g")
            assert v.cursor == app.main.timeline.extent[0]
            await pilot.press("G")
            assert v.cursor == app.main.timeline.extent[1]
            sel0 = app.main.timeline.selected
            await pilot.press("j")
            assert app.main.timeline.selected == sel0 + 1
            await pilot.press("k")
            assert app.main.timeline.selected == sel0
            await pilot.press("t")
            await pilot.pause()
            assert "time (rel)" in screen_text(app) and re.search(r"\+\d", screen_text(app).splitlines()[2])
            await pilot.press("d")
            await settle(app, pilot)
            assert app.main.device == 0
            assert {r.device for r in app.main.timeline.rows if r.kind in ("api", "hw")} == {0}
            assert {r["device_id"] for r in app.main.table.rows} == {0}
            await pilot.press("D")
            await settle(app, pilot)
            assert app.main.name_mode == "full"
            assert any("<" in r["kernel_name"] for r in app.main.table.rows)
    run(go())


@pytest.mark.slow
def test_filter_nvtx_picker_help_and_palette(synth):
    async def go():
        app = _app(synth)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            await pilot.press("tab", "slash", *"triton")     # / on the table filters it (on the timeline: search)
            await pilot.pause()
            names = [r["kernel_name"] for r in app.main.table.visible_rows()]
            assert names and all("triton" in n for n in names)
            await pilot.press("enter")
            assert app.main.table.filter_text == "triton"
            await pilot.press("escape")
            # o: fuzzy picker; Enter jumps to the first occurrence of the best match
            await pilot.press("o")
            await pilot.pause()
            await pilot.press(*"optstep", "enter")
            await settle(app, pilot)
            assert "Optimizer.step" in app.main.selection.label
            # ? lists every key
            await pilot.press("question_mark")
            await pilot.pause()
            help_text = str(app.screen.query_one("#help-text").render())
            for b in app.main.BINDINGS:
                assert b.description in help_text
            await pilot.press("escape")
            # palette: sort the table by a column
            await pilot.press("ctrl+p")
            await pilot.pause()
            await pilot.press(*"Sort table by Launches")
            from textual.command import CommandList
            for _ in range(500):                      # the palette searches in a task: until it lists hits
                await pilot.pause()
                lists = app.screen.query(CommandList)
                if lists and lists.first().option_count:
                    break
            await pilot.press("enter")
            await settle(app, pilot)
            assert app.main.table.sort_key == "launch_count"
            # info screen
            await pilot.press("i")
            await pilot.pause()
            assert "A100" in str(app.screen.query_one("#info-text").render())
    run(go())














