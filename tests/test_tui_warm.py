"""A warm TUI open shows the verdict's record and the kernel table stored beside the model by the
previous open (the session's queries), equal to a fresh computation; other settings or a code change
recompute (issue 11: warm TUI interactive at 5M)."""
from __future__ import annotations

import pytest

from tui_helpers import make_app, run, settle, wait_ready

SIZE = (140, 48)


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    from fixtures.synth import simulate, write_nsys_sqlite
    return write_nsys_sqlite(simulate(), tmp_path_factory.mktemp("warm") / "synth.sqlite", variant="modern")


def _state(path, no_cache: bool, keys=()):
    async def go():
        app = make_app(path, no_cache=no_cache)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            await settle(app, pilot)
            for k in keys:
                await pilot.press(k)
                await settle(app, pilot)
            scr = app.screen
            r = scr.verdict.result
            return (r.doc, r.iterations.tolist(), r.iteration_spans, sorted(r.stall_apis),
                    scr.table.rows, scr.stats)
    return run(go())


def _boom(*a, **k):
    raise AssertionError("recomputed on a warm open")


def _forbid_compute(monkeypatch):
    import launchtui.analysis.record as record
    import launchtui.analysis.report as report
    import launchtui.tui.verdict as verdict
    monkeypatch.setattr(record, "record_and_stalls", _boom)
    monkeypatch.setattr(verdict, "table_rows", _boom)
    monkeypatch.setattr(report, "selection_stats", _boom)


@pytest.mark.tui
def test_warm_open_shows_the_stored_verdict_and_table_equal_to_a_fresh_one(synth, monkeypatch):
    fresh = _state(synth, no_cache=True)
    cold = _state(synth, no_cache=False)     # computes and stores them
    assert cold == fresh
    _forbid_compute(monkeypatch)
    assert _state(synth, no_cache=False) == fresh
    assert fresh[0]["streams"] and fresh[4]     # a real record and a filled table


@pytest.mark.slow
@pytest.mark.tui
def test_other_settings_and_new_code_recompute(synth, monkeypatch):
    import launchtui.analysis.record as record
    from launchtui import result_cache
    fresh_m = _state(synth, no_cache=True, keys=["M", "M", "M"])
    assert fresh_m[4] != _state(synth, no_cache=True)[4]     # the thresholds changed the table
    _state(synth, no_cache=False)            # stores the default settings only
    from launchtui.analysis.record import RecordOptions
    calls, orig = [], record.record_and_stalls
    monkeypatch.setattr(record, "record_and_stalls", lambda *a: calls.append(a[2]) or orig(*a))
    assert _state(synth, no_cache=False, keys=["M", "M", "M"]) == fresh_m
    assert calls and RecordOptions() not in calls   # only the new settings were computed
    calls.clear()
    monkeypatch.setattr(result_cache, "code_fingerprint", lambda: b"other code")
    _state(synth, no_cache=False)
    assert calls == [RecordOptions()]


@pytest.mark.tui
def test_first_open_after_report_reuses_its_record_and_backpressure(synth, monkeypatch, capsys):
    """`report --json` stores the record, the backpressure marks and the stats line's totals it
    computed beside the model: the TUI's first open after it shows them without computing any,
    equal to a fresh open."""
    import launchtui.analysis.backpressure as bp
    import launchtui.analysis.record as record
    import launchtui.analysis.report as report
    from launchtui.cli import main
    fresh = _state(synth, no_cache=True)
    assert main(["report", str(synth), "--json"]) == 0
    capsys.readouterr()
    monkeypatch.setattr(record, "record_and_stalls", _boom)
    monkeypatch.setattr(bp, "backpressure", _boom)
    monkeypatch.setattr(report, "selection_stats", _boom)    # the stats line: stored by `report` too
    import launchtui.tui.verdict as verdict
    totals, orig = [], verdict.table_rows
    monkeypatch.setattr(verdict, "table_rows", lambda *a, **k: totals.append(a[-1]) or orig(*a, **k))
    assert _state(synth, no_cache=False) == fresh
    assert totals and totals[0] is not None and len(totals[0])   # the report's kernel groups: rows at once


def test_the_table_shows_its_rows_before_their_phases(synth):
    """table_rows hands the rows to `shown` before attributing phases (seconds at 5M kernels): the
    same rows, their phase column pending; then the phases."""
    from launchtui.analysis.select import WHOLE
    from launchtui.trace.load import open_trace
    from launchtui.tui.verdict import PHASE_PENDING, VerdictSettings, table_rows
    tr = open_trace(str(synth), use_cache=False)
    from launchtui.analysis.launches import kernel_groups
    from launchtui.analysis.launches import group_totals
    plain = lambda rs: [{k: v for k, v in r.items() if k not in ("nvtx_range", "nvtx_share")} for r in rs]  # noqa: E731
    for totals in (None, group_totals(kernel_groups(tr, WHOLE, "short"))):   # grouped here, or by `report`
        seen = []
        rows = table_rows(tr, WHOLE, "short", VerdictSettings(), shown=seen.append, totals=totals)
        assert len(seen) == 1 and plain(seen[0]) == plain(rows) and rows
        assert {r["nvtx_range"] for r in seen[0]} == {PHASE_PENDING}
        assert any(r["nvtx_range"] not in (None, PHASE_PENDING) for r in rows)


@pytest.mark.tui
def test_a_warm_reopen_reads_the_trace_window_and_extent_stored_not_scanned(synth, monkeypatch):
    """The header's GPU-op window and the timeline's origin and pan extent (trace.window(),
    trace.extent(): whole-column scans, ~0.2 s of a 5M reopen on the UI thread) are found once by
    the load worker and stored beside the model: a reopen asks the trace for neither, and draws
    the same screen as a fresh open."""
    from launchtui.trace.model import Trace
    from tui_helpers import screen_text

    def shown(no_cache):
        async def go():
            app = make_app(synth, no_cache=no_cache)
            async with app.run_test(size=SIZE) as pilot:
                await wait_ready(app, pilot)
                await settle(app, pilot)
                tl = app.main.timeline
                return screen_text(app), tl.extent, tl.origin_ns, tl.fit_window, app.loaded.windows()
        return run(go())
    from launchtui.trace.load import open_trace
    tr = open_trace(str(synth), use_cache=False)
    fresh = shown(True)
    assert fresh[4] == (tr.window(), tr.extent()) and fresh[1] == tr.extent()
    shown(False)                                    # stores them
    monkeypatch.setattr(Trace, "window", _boom)
    monkeypatch.setattr(Trace, "extent", _boom)
    assert shown(False) == fresh


@pytest.mark.parametrize("extra", [[], ["--thresholds", "3", "5"], ["--thresholds", "4"], ["--device", "0"],
                                   ["--nvtx", "a"]])
def test_report_stores_the_stats_line_equal_to_computing_it(synth, extra, monkeypatch, capsys):
    """What `report` stores for the TUI's stats line (from its launch totals and queue summary) is
    what report.selection_stats computes for the same selection and options."""
    from launchtui.analysis.report import selection_stats
    from launchtui.cli import main
    from launchtui.session import SelectionStats, Session
    from launchtui.trace.load import open_trace
    kept, orig = [], Session.put
    monkeypatch.setattr(Session, "put", lambda self, q, v, remap=False: kept.append((q, v)) or orig(self, q, v, remap))
    assert main(["report", str(synth), "--json", *extra]) == 0
    capsys.readouterr()
    stored = [(q, v) for q, v in kept if isinstance(q, SelectionStats)]
    assert len(stored) == 1
    query, value = stored[0]
    tr = open_trace(str(synth), use_cache=False)
    assert value == selection_stats(tr, query.sel, query.options)
    assert value["launches"] > 0 and value["queue_peak"] > 0
