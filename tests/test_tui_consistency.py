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


def test_export_writes_the_thresholds_phase_level_and_names_the_screen_shows(tmp_path, monkeypatch):
    """After `m m U` (and `P`, `D`) the table shows other rows: `e` writes those rows, the record at
    the panel's phase level and the name mode, and its "same as" hint repeats every one of them."""
    import json
    import shlex

    from launchtui.cli import main
    monkeypatch.chdir(tmp_path)

    async def go():
        app = make_app(DEMO)
        async with app.run_test(size=(120, 40)) as pilot:
            scr = await _ready(app, pilot)
            await pilot.press("m", "m", "U", "P", "D")
            await settle(app, pilot)
            st = scr.verdict.settings
            assert (st.min_launches, st.max_avg_us, st.phase_level, scr.name_mode) != (100, 10.0, 1, "short")
            shown = [(r["kernel_name"], r["device_id"], r["launch_count"]) for r in scr.table.visible_rows()]
            await pilot.press("0")       # the whole GPU-op window
            await settle(app, pilot)
            await pilot.press("e")
            await pilot.pause()
            dlg = app.screen
            hint = dlg.commands["launchtui"]
            for opt in (f"--min-launches {st.min_launches}", f"--max-avg-us {st.max_avg_us:g}", "--limit 0",
                        f"--names {scr.name_mode}", f"--phase-level {st.phase_level}"):
                assert opt in hint
            dlg.query_one("#export-path").value = str(tmp_path / "tui.json")
            await pilot.press("enter")
            await settle(app, pilot)
            return shown, hint, st
    shown, hint, st = run(go())
    doc = json.loads((tmp_path / "tui.json").read_text())
    a = doc["analysis"]
    assert a["options"]["min_launches"] == st.min_launches and a["options"]["max_avg_us"] == st.max_avg_us
    assert a["options"]["names"] == "full" and a["record"]["options"]["phase_level"] == st.phase_level
    rows = [(r["kernel_name"], r["device_id"], r["launch_count"]) for r in a["small_kernels"] + a["small_kernels_nccl"]]
    assert sorted(rows) == sorted(shown) and len(rows) == len(shown)
    # the hint's command writes the same bytes
    words = shlex.split(hint)
    words[words.index("-o") + 1] = str(tmp_path / "cli.json")
    assert main(words[1:]) == 0
    assert (tmp_path / "cli.json").read_bytes() == (tmp_path / "tui.json").read_bytes()


def test_help_lists_every_subcommand_one_line_each(capsys):
    from launchtui.cli import SUBCOMMANDS, main
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    tail = out.split("subcommands (launchtui COMMAND --help for each):\n")[1].splitlines()
    assert [x.split()[0] for x in tail] == [c for c in SUBCOMMANDS if c != "tui"]
    assert all(len(x) <= 100 for x in tail)


def test_filter_status_esc_rows_wording_and_key_feedback():
    """/soft: the stats line and details say "0 of 6 rows" at once; Esc after Enter clears the
    filter; "1 row" in the singular; P stops at the trace's deepest range level and says it went
    back; b past the last mark says it wrapped."""
    from tui_helpers import record_notifications

    async def go():
        app = make_app(DEMO)
        async with app.run_test(size=(160, 48)) as pilot:
            scr = await _ready(app, pilot)
            notes = record_notifications(app)
            await pilot.press("tab", "slash", *"soft")
            await settle(app, pilot)
            assert ": 0 of 6 rows │" in scr.stats_line.text and "filter 'soft'" in scr.stats_line.text
            assert scr.context == "filter 'soft': 0 of 6 rows (Esc clears)"
            await pilot.press("enter", "escape")
            await settle(app, pilot)
            assert scr.table.filter_text == "" and ": 6 rows │" in scr.stats_line.text
            await pilot.press("slash", *"triton_poi_fused_mul_add_0", "enter")
            await settle(app, pilot)
            assert ": 2 of 6 rows │" in scr.stats_line.text
            await pilot.press("escape")
            await settle(app, pilot)
            # P: the demo's ranges reach 2 levels below ProfilerStep; a third press would go past them
            assert scr.verdict.deepest_level() == 2
            await pilot.press("P")
            await settle(app, pilot)
            assert scr.verdict.settings.phase_level == 2
            await pilot.press("P")
            await settle(app, pilot)
            assert scr.verdict.settings.phase_level == 1
            assert "below the iteration: back to 1" in scr.context
            # b from past the last mark wraps, and says so
            scr.timeline.view.goto(scr.loaded.trace.extent()[1])
            await pilot.press("b")
            await settle(app, pilot)
            assert scr.context.startswith("past the last mark: back to the first. ")
            assert "past the last mark: back to the first." in notes
    run(go())


def test_an_empty_table_says_computing_while_its_rows_are_computed():
    """Before the table worker's rows come, the table never says "no data"."""
    from launchtui.tui.main_screen import TABLE_COMPUTING

    async def go():
        app = make_app(DEMO)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_ready(app, pilot)
            scr = app.screen
            scr.table.set_rows([])
            scr.refresh_selection()                 # rows gone, the worker running
            assert scr.table.empty_lines(100) == [TABLE_COMPUTING]
            await settle(app, pilot)
            assert len(scr.table.order) == 6
            await pilot.press("u", "u", "u", "u", "u", "u", "u", "u")   # down to < 1 µs: no row qualifies
            await settle(app, pilot)
            assert len(scr.table.order) == 0 and scr.table.empty_text.startswith("(No small-and-frequent")
    run(go())


@pytest.mark.parametrize("sizes", [((80, 24), (200, 60)), ((120, 40), (200, 60)), ((200, 60), (80, 24))])
def test_a_resize_repaints_every_line(sizes):
    """After a resize (either way) the axis, the ruler and the GPU header rows span the new width,
    and the screen repaints every line once the terminal settles."""
    async def go():
        app = make_app(DEMO)
        async with app.run_test(size=sizes[0]) as pilot:
            scr = await _ready(app, pilot)
            calls = []
            orig = scr._repaint_all
            scr._repaint_all = lambda: calls.append(1) or orig()
            await pilot.resize_terminal(*sizes[1])
            await settle(app, pilot)
            await pilot.pause(0.4)
            assert calls, "no full repaint after the resize"
            w = sizes[1][0]
            lines = screen_text(app).splitlines()
            ruler = next(x for x in lines if "/col" in x)
            assert len(ruler.rstrip()) >= w - 2
            for gpu in (x for x in lines if x.startswith("━ GPU ")):
                assert len(gpu.rstrip()) == w and gpu.rstrip().endswith("━━")
    run(go())


@pytest.mark.samples
def test_zoom_into_a_range_keeps_the_hw_row_and_an_idle_stream_names_its_backlog():
    """a100_negq at 120×40: `o ## backward ##` Enter zooms into the range; its NVTX rows no longer
    push the judged GPU's HW row off screen, and the idle stream at the cursor says the 565 launched
    ops pending on it (the GPU waits with work queued), never nothing."""
    from conftest import sample

    async def go():
        app = make_app(sample("kineto/a100_negq.json.gz"))
        async with app.run_test(size=(120, 40)) as pilot:
            scr = await _ready(app, pilot)
            entry = next(e for e in scr.nvtx_names() if e.name == "## backward ##")
            scr.jump_to_range_name(entry)
            await settle(app, pilot)
            tl = scr.timeline
            hw = tl.row_index("hw", 0)
            assert tl.row_offset <= hw < tl.row_offset + tl.content_height
            assert "HW   s7" in screen_text(app)
            assert tl.selected == hw      # the range's NVTX row lies far above: the cursor is on the HW row
            assert "565 launched ops pending on the stream while it is idle" in screen_text(app)
    run(go())


def test_cursor_line_shows_grid_block_and_slash_searches_the_timeline():
    """On the Nsight demo, the kernel at the cursor shows its grid, block, registers and shared
    memory (read once from the file); `/` on the timeline jumps to the next op named like the
    text, and again to the one after, wrapping with a word."""
    import numpy as np

    async def go():
        app = make_app(DEMO)
        async with app.run_test(size=(200, 50)) as pilot:
            scr = await _ready(app, pilot)
            scr.timeline.focus()
            scr.update_details()
            await settle(app, pilot)
            assert "kernel cunn_SoftMaxForward  30.0 ms  GPU 0 stream 7  at 1.525673804 s  · grid 65536×1×1 " \
                   "block 1024×1×1 · 38 regs · smem 0 B" in screen_text(app)
            tr = scr.loaded.trace
            name = "triton_poi_fused_mul_add_0"
            k = np.flatnonzero(tr.ops.name == tr.strings.lookup(name))
            starts = np.sort(tr.ops.start[k])
            scr.timeline.view.goto(int(starts[0]) - 1)
            await pilot.press("slash", *"TRITON_poi_fused_mul", "enter")
            await settle(app, pilot)
            t0 = scr.timeline.view.cursor
            row = scr.timeline.current_row
            assert row.kind == "hw" and f"kernel {name}" in screen_text(app)
            assert starts[0] <= t0 and scr.context.startswith("found 'TRITON_poi_fused_mul'")
            await pilot.press("slash", "enter")          # the same text again: the next one
            await settle(app, pilot)
            assert scr.timeline.view.cursor > t0 and f"kernel {name}" in screen_text(app)
            await pilot.press("slash", *"no_such_kernel_name", "enter")
            await settle(app, pilot)
            assert scr.context == "no GPU op named like 'no_such_kernel_name'"
            assert scr.table.filter_text == ""           # the table's filter was never touched
    run(go())
