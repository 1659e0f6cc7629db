"""The timeline's idle row (definitions.md §T7, issue 26): the record's device's idle gaps drawn by
cause under its API rows, checked cell by cell against `GapCauses.pieces()` on the hand-scheduled
idle scenarios (fixtures/idle_cases.py); x / X and > / < stepping through the largest gaps of a
cause; symbols that survive NO_COLOR; the legend; the verdict panel leading with the same split in
every form; the row stored beside the model for a warm reopen."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fixtures import idle_cases as ic
from launchtui.analysis import backpressure as bp
from launchtui.analysis import cold_start as cs
from launchtui.analysis import exposed as ex
from launchtui.analysis.idle_causes import CAUSES, gap_causes
from launchtui.trace.load import open_trace
from tui_helpers import make_app, run, screen_text, settle, wait_ready

pytestmark = pytest.mark.tui

SIZE = (120, 40)
DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo" / "demo.sqlite"


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    d = tmp_path_factory.mktemp("tui_idle")
    out = {}

    def get(name):
        if name not in out:
            path, truth = ic.write(name, d / f"{name}.pt.trace.json")
            out[name] = (path, truth, open_trace(path, use_cache=False))
        return out[name]
    return get


async def _ready(app, pilot):
    await wait_ready(app, pilot)
    await settle(app, pilot)
    scr = app.screen
    assert not scr.idle.busy and scr.idle.lane is not None
    return scr


def _pieces(t, doc):
    """(gaps, pieces) for the record's device and iterations, found as record.py finds them."""
    d = doc["device_id"]
    on = ex.device_ops(t, d)
    calls = ex.device_launch_calls(t, d, on)
    it = doc["iterations"]
    g = ex.device_gaps(t, d, min(min(it["starts_ns"]), int(t.ops.start[on].min())), max(it["ends_ns"]), calls)
    return g, gap_causes(t, on, calls, g.start, g.end, cold_calls=cs.cold_start(t, bp.spikes(t)).calls).pieces()


def _expected_row(s, e, c, edges) -> str:
    """The row's text from the pieces, bin by bin (a loop): the symbol of the cause with most idle ns."""
    from launchtui.tui.widgets.idle_row import GLYPHS
    out = []
    for a, b in zip(edges[:-1].tolist(), edges[1:].tolist()):
        per = [0] * len(CAUSES)
        for ps, pe, pc in zip(s.tolist(), e.tolist(), c.tolist()):
            per[pc] += max(0, min(b, pe) - max(a, ps))
        out.append(GLYPHS[CAUSES[per.index(max(per))]] if max(per) else " ")
    return "".join(out)


def _row_on_screen(app, label="idle by cause") -> str:
    from launchtui.tui.widgets.timeline import GUTTER
    line = next(x for x in screen_text(app).splitlines() if x.lstrip("▶").startswith(label))
    return line[GUTTER:GUTTER + app.screen.timeline.view.width]


@pytest.mark.parametrize("name", ["sync", "host_bound", "dependency", "cold_start"])
def test_the_row_draws_each_cells_cause_from_the_pieces(case, name):
    path, truth, trace = case(name)

    async def go():
        app = make_app(path, trace=trace)
        async with app.run_test(size=SIZE) as pilot:
            scr = await _ready(app, pilot)
            tl = scr.timeline
            doc = scr.verdict.result.doc
            _, (s, e, c) = _pieces(trace, doc)
            j = tl.row_index("idle")
            kinds = [r.kind for r in tl.rows]
            assert j > 0 and kinds[j - 1] == "dev" and kinds[j + 1] == "api"    # under the device's title
            assert tl.rows[j].lane.device == doc["device_id"] == truth["device"]
            for zoom in ("", "plus", "plus"):           # fit, then twice closer around the cursor
                if zoom:
                    await pilot.press(zoom)
                    await settle(app, pilot)
                want = _expected_row(s, e, c, tl.edges())
                assert want.strip() and _row_on_screen(app) == want
            # the scenario's own cause is drawn, and the row names it at the cursor
            assert GLYPH_OF[truth["dominant"]] in _row_on_screen(app)
    run(go())


def _glyphs():
    from launchtui.tui.widgets.idle_row import GLYPHS
    return GLYPHS


GLYPH_OF = _glyphs()


def _per_gap(g, s, e, c, cause: int) -> list[tuple[int, int]]:
    """(ns of the cause, gap index) per gap holding it, largest first, then the earlier gap."""
    per: dict[int, int] = {}
    for ps, pe, pc in zip(s.tolist(), e.tolist(), c.tolist()):
        if pc == cause:
            k = int(np.searchsorted(g.start, ps, side="right")) - 1
            per[k] = per.get(k, 0) + pe - ps
    return sorted(((ns, k) for k, ns in per.items()), key=lambda x: (-x[0], x[1]))


def test_x_and_steps_walk_the_largest_gaps_of_a_cause(case):
    path, truth, trace = case("dependency")

    async def go():
        app = make_app(path, trace=trace)
        async with app.run_test(size=SIZE) as pilot:
            scr = await _ready(app, pilot)
            tl = scr.timeline
            doc = scr.verdict.result.doc
            g, (s, e, c) = _pieces(trace, doc)
            dep = CAUSES.index("dependency")
            ranked = _per_gap(g, s, e, c, dep)
            await pilot.press("x")                       # the panel's largest cause first
            await settle(app, pilot)
            assert scr.idle.cause == dep == CAUSES.index(truth["dominant"])
            seen = []
            for i in range(6):
                k = int(scr.idle.lane.top[dep][scr.idle.pos])
                assert tl.current_row.kind == "idle"
                assert g.start[k] <= tl.view.cursor < g.end[k]       # the cursor in the gap
                assert scr.context.startswith(f"dependency {_dur(ranked[i][0])} in gap {i + 1} of {len(ranked):,}")
                lines = scr.details.lines
                op = int(trace.ops.api[scr.idle.lane.op[k]])
                name = trace.strings[int(trace.api.name[op])]
                assert lines[1].startswith(f"GPU 0 idle {_dur(int(g.end[k] - g.start[k]))} at ")
                assert "dependency" in lines[1] and f": its {name} (" in lines[2] and "before it started" in lines[2]
                assert lines[3].startswith("phase ") and "mostly dependencies" in lines[3]
                seen.append((int(scr.idle.lane.top_ns[dep][scr.idle.pos]), k))
                await pilot.press("greater_than_sign")
                await settle(app, pilot)
            assert seen == ranked[:6]                    # largest first, ties by time
            await pilot.press("less_than_sign", "less_than_sign")
            await settle(app, pilot)
            assert scr.idle.pos == 4
            # x cycles the causes with gaps in the panel's order (its shares, largest first)
            share = doc["idle_by_cause"]["share"]
            order = [scr.idle.cause]
            for _ in range(len(scr.idle.order()) - 1):
                await pilot.press("x")
                await settle(app, pilot)
                order.append(scr.idle.cause)
            assert order == scr.idle.order() and len(set(order)) == len(order)
            assert [share[CAUSES[k]] for k in order] == sorted((share[CAUSES[k]] for k in order), reverse=True)
            assert all(scr.idle.lane.n_gaps[k] > 0 for k in order)
            await pilot.press("x")
            await settle(app, pilot)
            assert scr.idle.cause == order[0]
            await pilot.press("X")
            await settle(app, pilot)
            assert scr.idle.cause == order[-1] and scr.idle.pos == 0
    run(go())


def _dur(ns: int) -> str:
    from launchtui.tui.format import fmt_duration
    return fmt_duration(ns)


def test_no_color_keeps_a_symbol_per_cause_and_the_legend_names_them(case, monkeypatch):
    from launchtui.analysis.record_conclusion import SHORT_CAUSE
    from launchtui.tui.widgets.idle_row import legend_entry
    assert len(set(GLYPH_OF.values())) == len(CAUSES) and all(len(v) == 1 for v in GLYPH_OF.values())
    monkeypatch.setenv("NO_COLOR", "1")
    path, truth, trace = case("sync")

    async def go():
        app = make_app(path, trace=trace)
        async with app.run_test(size=SIZE) as pilot:
            scr = await _ready(app, pilot)
            assert app.no_color
            tl = scr.timeline
            _, (s, e, c) = _pieces(trace, scr.verdict.result.doc)
            row = _row_on_screen(app)
            assert row == _expected_row(s, e, c, tl.edges())
            assert {GLYPH_OF["sync"], GLYPH_OF["launch"]} <= set(row)       # told apart without colour
            text = screen_text(app)
            legend = next(x for x in text.splitlines() if x.startswith("HW █ kernel"))
            assert legend_entry()[:40] in legend
            assert all(f"{GLYPH_OF[k]} {SHORT_CAUSE[k]}" in legend_entry() for k in CAUSES)
            await pilot.press("x")                     # on the idle row the legend leads with it
            await settle(app, pilot)
            legend = next(x for x in screen_text(app).splitlines() if x.startswith("idle "))
            assert legend.startswith(legend_entry())
    run(go())


def test_the_panel_leads_with_the_cause_split_in_every_form(case):
    """80×24 one line, 90×28 compact, 120×40 and 200×60 full: each begins with the level and the
    largest causes, in the idle row's symbols and the legend's words; x starts at the first."""
    from launchtui.tui.verdict import COMPACT, FULL, ONE, level_word, split
    from launchtui.tui.widgets.idle_row import legend_entry
    path, truth, trace = case("host_bound")

    async def go():
        app = make_app(path, trace=trace)
        async with app.run_test(size=(80, 24)) as pilot:
            scr = await _ready(app, pilot)
            doc = scr.verdict.result.doc
            panel = scr.verdict.panel
            head = f"Verdict: {level_word(doc)} · {split(doc, 1)}"
            assert panel.form == ONE and panel.lines[0].startswith(head) and panel.lines[0].endswith("V: details")
            assert len(panel.lines[0]) <= 80 and panel.lines[0] in screen_text(app)
            for size, form in (((90, 28), COMPACT), ((120, 40), FULL), ((200, 60), FULL)):
                await pilot.resize_terminal(*size)
                await settle(app, pilot)
                assert panel.form == form, size
                assert panel.lines[0] == f"Verdict: {level_word(doc)} · {split(doc)}"
                assert panel.lines[0][:size[0]].rstrip() in screen_text(app)
                assert panel.lines[1] == " " + doc["conclusion"].split(": ", 1)[1]
            words = split(doc).split(": ", 1)[1].split(" · ")
            first = words[0].rsplit(" ", 1)[0]                    # "- host"
            assert first == f"{GLYPH_OF[truth['dominant']]} host" and all(w.rsplit(" ", 1)[0] in legend_entry()
                                                                       for w in words)
            await pilot.press("x")
            await settle(app, pilot)
            assert CAUSES[scr.idle.cause] == truth["dominant"] == "host"
    run(go())


def test_keys_have_ids_listed_by_help_and_remap(case, monkeypatch):
    from launchtui.tui.keys import MAIN_BINDINGS, help_sections
    from launchtui.tui.widgets.kernel_table import KernelTable
    from launchtui.tui.widgets.source_table import SourceTable
    from launchtui.tui.widgets.timeline import Timeline
    ids = {"idle_cause_next": "x", "idle_cause_prev": "X", "idle_gap_next": "greater_than_sign",
           "idle_gap_prev": "less_than_sign"}
    mine = {b.id: b.key for b in MAIN_BINDINGS if b.id in ids}
    assert mine == ids
    others = [k for b in MAIN_BINDINGS + Timeline.BINDINGS + KernelTable.BINDINGS + SourceTable.BINDINGS
              if b.id not in ids for k in b.key.split(",")]
    assert not set(ids.values()) & set(others)             # no other binding of any widget uses them
    shown = dict(help_sections()[0][1])
    assert shown["x"] == "Idle cause" and shown[">"] == "Next smaller idle gap" and shown["<"] == "Next larger idle gap"
    monkeypatch.setenv("LAUNCHTUI_KEYS", "idle_cause_next=z")
    path, truth, trace = case("sync")

    async def go():
        app = make_app(path, trace=trace)
        async with app.run_test(size=SIZE) as pilot:
            scr = await _ready(app, pilot)
            await pilot.press("z")
            await settle(app, pilot)
            assert CAUSES[scr.idle.cause] == "sync" == truth["dominant"]
    run(go())


def test_the_row_follows_the_verdicts_device():
    """Two GPUs: with all shown, the row is the record's device's; d shows one GPU and its row."""
    trace = open_trace(DEMO, use_cache=False)

    async def go():
        app = make_app(DEMO, trace=trace)
        async with app.run_test(size=SIZE) as pilot:
            scr = await _ready(app, pilot)
            tl = scr.timeline
            devs = []
            for _ in range(3):
                doc = scr.verdict.result.doc
                idle = [r for r in tl.rows if r.kind == "idle"]
                assert len(idle) == 1 and idle[0].device == doc["device_id"] == scr.idle.lane.device
                devs.append((scr.device, doc["device_id"]))
                await pilot.press("d")
                await settle(app, pilot)
            assert devs == [(None, 0), (0, 0), (1, 1)]
    run(go())


def test_a_warm_reopen_maps_the_stored_row(case, monkeypatch):
    from launchtui.analysis import idle_lane
    path, truth, _ = case("dependency")
    apps = []

    def state():
        async def go():
            app = make_app(path, no_cache=False)
            apps.append(app)
            async with app.run_test(size=SIZE) as pilot:
                scr = await _ready(app, pilot)
                lane = scr.idle.lane
                return ([x.s.tolist() for x in lane.sets], lane.g0.tolist(), [t.tolist() for t in lane.top],
                        _row_on_screen(app), lane.g0.flags.owndata)
        return run(go())
    first = state()
    stored = sorted(p.name for p in Path(app_entry(path)).parent.glob("*.model.idle*"))   # queries.IdleRow
    assert len(stored) == 1

    def boom(*a, **k):
        raise AssertionError("rebuilt on a warm reopen")
    monkeypatch.setattr(idle_lane, "build_idle_lane", boom)
    from launchtui.tui import idle_view
    real, beside_table = idle_view.stored, []

    def spy(*a, **k):
        beside_table.append(apps[-1].main.table_busy)
        return real(*a, **k)
    monkeypatch.setattr(idle_view, "stored", spy)
    workers = []
    real_start = idle_view.IdleView._start
    monkeypatch.setattr(idle_view.IdleView, "_start", lambda self, build: workers.append(build) or real_start(self, build))
    again = state()
    assert again[:4] == first[:4] and not again[4]      # the same row, mapped from the file
    assert beside_table == [True]                       # mapped while the table worker ran
    # by the verdict's worker, right after the record: drawn with the verdict, no idle worker of its own
    assert workers == []
    assert apps[-1].main.fill.landed.index("idle") == apps[-1].main.fill.landed.index("record") + 1


def app_entry(path):
    from launchtui.result_cache import model_entry
    return model_entry(path)


def test_new_verdict_work_stops_a_running_build(monkeypatch):
    """A build still running when `d` starts the next verdict and table stops at its next block, and
    the lane of the new verdict follows (their temporaries never add up at 5M)."""
    import threading

    from launchtui.analysis.idle_lane import Cancelled
    from launchtui.tui import idle_view
    real = idle_view.compute
    seen = []

    def slow(session, inputs, cancelled=None):
        if not seen:
            seen.append("blocked")
            for _ in range(1000):            # stands for a long 5M build, block after block
                if cancelled():
                    seen.append("stopped")
                    raise Cancelled()
                threading.Event().wait(0.01)
            seen.append("not stopped")
        return real(session, inputs, cancelled)
    monkeypatch.setattr(idle_view, "compute", slow)
    trace = open_trace(DEMO, use_cache=False)

    async def go():
        app = make_app(DEMO, trace=trace)
        async with app.run_test(size=SIZE) as pilot:
            for _ in range(2000):
                await pilot.pause()
                scr = app.main
                if scr is not None and getattr(scr, "idle", None) is not None and scr.idle.running:
                    break
            await pilot.press("d")
            scr = await _ready(app, pilot)
            assert seen == ["blocked", "stopped"]
            assert scr.device == 0 and scr.idle.lane.device == scr.verdict.result.doc["device_id"] == 0
    run(go())
