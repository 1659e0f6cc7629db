"""Pilot tests of the verdict panel (issue 8): visible on open, thresholds and phase level from the
keyboard with the table following, iteration marks and { / } jumps, CPU stalls apart from backpressure."""
from __future__ import annotations

import pytest

from conftest import sample
from tui_helpers import make_app, run, screen_text, settle, wait_ready

pytestmark = pytest.mark.tui

SIZE = (140, 48)


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    from fixtures.synth import simulate, write_nsys_sqlite
    from launchtui.trace.load import open_trace
    p = write_nsys_sqlite(simulate(), tmp_path_factory.mktemp("verdict") / "synth.sqlite", variant="modern")
    return p, open_trace(p, use_cache=False)


async def _ready(app, pilot):
    """The main screen once the trace, the table and the verdict are computed."""
    await wait_ready(app, pilot)
    await settle(app, pilot)
    return app.screen


def test_panel_on_open_and_thresholds_from_the_keyboard(synth):
    from launchtui.analysis.launches import small_kernel_table
    from launchtui.analysis.record import build_record
    path, trace = synth
    doc = build_record(trace)

    async def go():
        app = make_app(path, trace=trace)
        async with app.run_test(size=SIZE) as pilot:
            scr = await _ready(app, pilot)
            text = screen_text(app)
            assert "Verdict: " in text and f"{doc['per_iteration']['launches']['median']:,.0f} launches/iter" in text
            # the burst that fills the queue runs after the steps: judged per iteration, not saturated
            s = next(x for x in doc["streams"] if (x["device_id"], x["stream_id"]) == (0, 7))
            assert s["queue_class"] == "normal"
            assert f"GPU 0 stream 7: normal (max {s['max_depth']})" in text
            assert "1. elementwise_kernel" in text and "fused=True" in text
            assert scr.verdict.result.doc["streams"] == doc["streams"]
            n0 = len(scr.table.order)
            assert n0 == len(small_kernel_table(trace, limit=0))
            # M: min launches 100 -> 200; the table and the stats line follow
            await pilot.press("M")
            await settle(app, pilot)
            assert scr.verdict.settings.min_launches == 200
            assert len(scr.table.order) == len(small_kernel_table(trace, min_launches=200, limit=0)) < n0
            assert "≥200 launches" in screen_text(app)
            # u: max avg 10 -> 5 µs
            await pilot.press("m", "u")
            await settle(app, pilot)
            assert scr.verdict.settings.max_avg_us == 5.0
            assert len(scr.table.order) == len(small_kernel_table(trace, max_avg_us=5.0, limit=0))
            # the record's top follows the thresholds too: half its launches or more under 5 µs (§V4)
            top = scr.verdict.result.doc["top"]
            assert top and all(r["share_under_threshold"] >= 0.5 and r["median_kernel_us"] <= 5.0 for r in top)
            # P cycles the phase level
            await pilot.press("P")
            await settle(app, pilot)
            assert scr.verdict.settings.phase_level == 2 and "phase level 2" in screen_text(app)
    run(go())


def test_iteration_marks_jumps_and_cpu_stalls(synth):
    path, trace = synth

    async def go():
        app = make_app(path, trace=trace)
        async with app.run_test(size=SIZE) as pilot:
            scr = await _ready(app, pilot)
            tl = scr.timeline
            spans = scr.verdict.result.iteration_spans
            assert len(spans) == 4 and len(tl.iteration_marks) == 5
            tl.view.goto(spans[0][0] - 1_000_000)
            for k in range(4):
                await pilot.press("right_curly_bracket")
                await settle(app, pilot)
                assert spans[k][0] <= tl.view.cursor < spans[k][1]
                assert f"iteration {k + 1}/4" in scr.context
            await pilot.press("left_curly_bracket")
            await settle(app, pilot)
            assert spans[2][0] <= tl.view.cursor < spans[2][1]
            assert "╎" in screen_text(app)
            # CPU stalls (the lazy-loading launches at depth 0) are marked apart from backpressure; they
            # precede the steps, so the record does not count them (§V3)
            doc = scr.verdict.result.doc
            assert len(tl.stall_apis) >= 2 and doc["cpu_stalls"] == 0
            marks = scr.visible_marks()
            stalls = sum(1 for e in marks if e.kind == "spike" and e.worst_api in tl.stall_apis)
            cpu = sum(1 for w in tl.stall_apis.values() if w.startswith("CPU stall"))
            assert f"{len(marks) - stalls} backpressure marks · {stalls} △ not blocked ({cpu} CPU stall" in scr.stats_line.text
            assert sum(1 for w in tl.stall_apis.values() if w.startswith("cold start")) == 2
            # b lands on marks in time order; the lazy-loading launch comes first and reads as what
            # the record's depth rule calls it: a cold start at depth 1, outside the iterations
            tl.view.goto(0)
            await pilot.press("b")
            await settle(app, pilot)
            first = scr.current_mark
            assert first.kind == "spike" and first.worst_api in tl.stall_apis
            assert scr.context.startswith("cold start (first launch, depth 1) outside the iterations: ")
    run(go())


@pytest.mark.samples
def test_v100_verdict_panel_and_phase_levels():
    p = sample("kineto/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")

    async def go():
        app = make_app(p)
        async with app.run_test(size=SIZE) as pilot:
            await _ready(app, pilot)
            text = screen_text(app)
            assert "5 iterations from ProfilerStep" in text
            assert "GPU 0 stream 7: saturated (4 of 5 iterations; 1 normal) (max 1022, limit 1022)" in text
            rows = {r["kernel_name"]: r["nvtx_range"] for r in app.screen.table.rows}
            assert rows["computeOffsetsKernel"] == "## forward ##"
            await pilot.press("P")
            await settle(app, pilot)
            rows = {r["kernel_name"]: r["nvtx_range"] for r in app.screen.table.rows}
            assert rows["computeOffsetsKernel"] == "## forward ## > DistributedDataParallel.forward"
    run(go())


def test_panel_fits_small_terminals_and_V_shows_every_line(synth):
    """80×24: the panel takes one line so the timeline keeps 6 rows of lanes; V shows every line
    (squeezing the timeline), V again fits it back. 90×28: the level and idle split, the conclusion
    and one line per class. Every form leads with the level and what the GPU waited for."""
    from launchtui.tui.verdict import COMPACT, FULL, ONE, _conclusion_rest, level_word, one_line, split
    path, trace = synth

    async def go():
        app = make_app(path, trace=trace)
        async with app.run_test(size=(80, 24)) as pilot:
            scr = await _ready(app, pilot)
            panel, tl = scr.verdict.panel, scr.timeline
            doc = scr.verdict.result.doc
            assert panel.form == ONE and len(panel.lines) == 1 and tl.content_height >= 6
            # the level and the largest idle cause, fitted to 80 columns with the V hint kept
            assert panel.lines[0] == one_line(doc, 80)[0]
            # the burst after the steps fills s7 on the timeline: the note outlives the idle split
            # at 80 columns the phase gives way first, the outside note stays
            level = doc["launch_bound_level"]
            assert panel.lines[0] == f"Verdict: {level} · s7 1022 outside the iterations · V: details"
            assert one_line({**doc, "streams": [{**s, "outside": None} for s in doc["streams"]]}, 80)[0].startswith(
                f"Verdict: {level} · {split(doc, 1)}")
            assert panel.lines[0].endswith(" · V: details") and len(panel.lines[0]) <= 80
            assert panel.lines[0] in screen_text(app)
            await pilot.press("V")
            await settle(app, pilot)
            assert panel.expanded and panel.form == FULL
            text = screen_text(app)
            assert panel.lines[0] == f"Verdict: {level_word(doc)} · {split(doc)}"
            assert f"Verdict: {level_word(doc)} · idle" in text and "GPU 0 stream 7: normal" in text
            await pilot.press("V")
            await settle(app, pilot)
            assert not panel.expanded and panel.form == ONE and tl.content_height >= 6
            await pilot.resize_terminal(90, 28)
            await settle(app, pilot)
            assert panel.form == COMPACT and tl.content_height >= 6
            head = f"Verdict: {level_word(doc)} · {split(doc)}"
            assert panel.lines[0] == head or (head.startswith(panel.lines[0])
                                              and panel.lines[1].startswith("   · "))
            panel_lines = [x for x in panel.lines if not x.startswith("   · ")]
            # the conclusion (wrapped into the table's blank rows where there are some), one line
            # per class, naming what the timeline shows outside the iterations on its stream
            joined = " ".join(x.strip() for x in panel_lines[1:-1])
            assert _conclusion_rest(doc).startswith(joined.rstrip("…")) and len(joined) > 40
            assert panel_lines[-1] == " normal: GPU 0 s7 (1022 outside the iterations in `inference_burst`), " + ", ".join(
                f"GPU {s['device_id']} s{s['stream_id']}" for s in doc["streams"][1:])
            await pilot.resize_terminal(140, 48)
            await settle(app, pilot)
            assert panel.form == FULL and tl.content_height >= 6
    run(go())
