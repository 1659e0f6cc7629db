"""The first fill of the main view is progressive (definitions.md §T10): the timeline works while
the case record is computed, a progress line names the stages still running, the table's rows
show before the record, and once everything landed the line is gone and the verdict and table are
those of a fill done at once. The record's worker is held on an event, so nothing here depends on
timing."""
from __future__ import annotations

import threading

import pytest

from tui_helpers import make_app, run, wait_ready


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    from fixtures.synth import simulate, write_nsys_sqlite
    return write_nsys_sqlite(simulate(), tmp_path_factory.mktemp("fill") / "synth.sqlite", variant="modern")


async def _until(pilot, cond, rounds: int = 4000) -> None:
    for _ in range(rounds):
        if cond():
            return
        await pilot.pause(0.005)
    raise AssertionError("condition not reached")


def _hold_record(monkeypatch) -> threading.Event:
    """The record's computation waits for the returned event (set it, also on failure)."""
    from launchtui.tui import verdict_panel
    release = threading.Event()
    real = verdict_panel.compute

    def held(*a, **kw):
        assert release.wait(30), "the test never released the record"
        return real(*a, **kw)
    monkeypatch.setattr(verdict_panel, "compute", held)
    return release


def test_fill_is_progressive_and_ends_as_a_whole_fill(monkeypatch, synth):
    from launchtui.analysis.select import WHOLE
    from launchtui.session import Session
    from launchtui.trace.load import open_trace
    from launchtui.tui import verdict
    trace = open_trace(synth, use_cache=False)
    settings = verdict.VerdictSettings()
    whole = verdict.compute(Session(trace), None, settings, 1)      # a fill done at once
    it = whole.doc.get("iterations") or {}
    rows = verdict.table_rows(trace, WHOLE, "short", settings, int(it.get("base_depth", 0)),
                              list(zip(it.get("starts_ns", []), it.get("ends_ns", []))))
    release = _hold_record(monkeypatch)
    from launchtui import heap
    released = []      # the stages landed each time the heap's free memory was given back
    monkeypatch.setattr(heap, "release_free", lambda: released.append(list(app.main.fill.landed)) or True)

    async def go():
        nonlocal app
        app = make_app(synth)       # read from the file, nothing cached (no_cache)
        async with app.run_test(size=(120, 40)) as pilot:
            await _until(pilot, lambda: app.main is not None and app.main.is_mounted
                         and len(app.main.table.rows) > 0)
            scr = app.main
            # the record is held: the rows came from the preview, their phases pending
            assert scr.verdict.result is None and app.busy
            assert {r["nvtx_range"] for r in scr.table.rows} == {verdict.PHASE_PENDING}
            bare = lambda rs: [{k: v for k, v in r.items() if k not in ("nvtx_range", "nvtx_share")} for r in rs]  # noqa: E731
            assert bare(scr.table.rows) == bare(rows)
            await _until(pilot, lambda: scr.fill.shown)      # shown once the fill outlasts its delay
            assert not scr.fill.line.has_class("-done")
            line = str(scr.fill.line.render())
            assert "filling 2/5 (40%)" in line and "case record (verdict, idle by cause, graphs)" in line \
                and "phase column" in line and "idle row" in line
            # keys work before the fill completes: the cursor moves, the view zooms
            tl = scr.timeline
            cursor, ns = tl.view.cursor, tl.view.ns_per_col
            await pilot.press("l")
            await pilot.press("plus")
            assert tl.view.cursor > cursor and tl.view.ns_per_col < ns
            assert scr.verdict.result is None and released == []
            release.set()
            await wait_ready(app, pilot)
            assert scr.fill.landed == ["lanes", "rows", "record", "phases", "idle"]
            assert scr.fill.complete and scr.fill.line.has_class("-done") and str(scr.fill.line.render()) == ""
            assert scr.verdict.result.doc == whole.doc
            assert scr.table.rows == rows
            # the fill's temporaries are done: the free memory went back once, as the last stage landed
            assert released == [["lanes", "rows", "record", "phases", "idle"]]
    app = None
    try:
        run(go())
    finally:
        release.set()


def test_progress_line_text():
    from launchtui.tui.fill_progress import STAGES, FillProgress
    f = FillProgress()
    assert f.text().startswith(" filling 0/5 (0%): computing timeline lanes; then case record")
    assert f.land("lanes") and not f.land("lanes") and not f.land("nonsense")
    for key, _ in STAGES[1:]:
        f.land(key)
    assert f.complete and f.share == 1.0 and f.text() == ""


def test_kineto_launch_details_wait_for_the_fill(monkeypatch, tmp_path):
    """A Kineto trace's launch details parse the whole file: asked for by the cursor's kernel at
    mount, they are read only once the fill completed (not beside its workers), then shown."""
    from fixtures.synth import simulate, write_kineto_json
    from launchtui.trace.op_details import OpDetails
    path = write_kineto_json(simulate(), tmp_path / "t.json")
    release = _hold_record(monkeypatch)
    loads = []             # whether the fill was complete as each load began
    real_load = OpDetails.load
    monkeypatch.setattr(OpDetails, "load", lambda self, k=None: loads.append(app.main.fill.complete)
                        or real_load(self, k))
    app = make_app(path)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await _until(pilot, lambda: app.main is not None and app.main.is_mounted
                         and len(app.main.table.rows) > 0)
            scr = app.main
            await pilot.pause(0.2)
            assert scr.launch_details.available() and not scr.launch_details.per_kernel
            assert loads == [] and not scr.launch_details.ready      # asked for, held back
            release.set()
            await wait_ready(app, pilot)
            await _until(pilot, lambda: scr.launch_details.ready and not app.busy)
            assert loads == [True]
            kernel_line = scr.details.lines[1]
            assert kernel_line.startswith("kernel ") and " · grid " in kernel_line and " regs · smem " in kernel_line
    try:
        run(go())
    finally:
        release.set()
