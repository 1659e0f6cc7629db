"""The TUI's lanes and marks stored beside the model entry (queries.TimelineLanes, tui/lanes_cache.py
their codec): a warm open maps them and they equal freshly built ones; the model cache's bound evicts
them with their entry (other options, new code or a rebuilt entry: tests/test_session.py)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from launchtui.trace import cache
from launchtui.result_cache import mapped_path
from launchtui.tui.loader import load, store_lanes
from tests.tui_helpers import tui_args


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    from fixtures.synth import simulate, write_nsys_sqlite
    return str(write_nsys_sqlite(simulate(), tmp_path_factory.mktemp("lanes") / "synth.sqlite", variant="modern"))


def _side(entry):
    return mapped_path(entry, "lanes")


def _plain(obj):
    """Every field, arrays as lists: equal iff the two structures hold the same values."""
    if isinstance(obj, np.ndarray):
        return (str(obj.dtype), obj.tolist())
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj):
        return (type(obj).__name__, {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)})
    if hasattr(obj, "__slots__"):
        return (type(obj).__name__, {k: _plain(getattr(obj, k)) for k in obj.__slots__})
    if hasattr(obj, "levels"):   # RangeMax
        return ("RangeMax", _plain(obj.v), obj.B, obj.empty, _plain(obj.levels))
    return obj


def test_a_warm_open_maps_the_stored_lanes_equal_to_fresh_ones(synth, monkeypatch):
    fresh = load(tui_args(synth))                        # --no-cache: built, nothing stored
    fresh_optimizer = fresh.optimizer                    # found on first use
    cold = load(tui_args(synth, no_cache=False))
    # read from the file: the lanes are stored at once and mapped back (the built arrays freed
    # before the verdict's and table's temporaries)
    assert cold.lanes_stored and cold.session.entry is not None
    assert _plain(cold.lanes) == _plain(fresh.lanes)
    assert not next(iter(cold.lanes.hw.values()))[0].ev.cum.flags.owndata   # a view of the mapped file
    assert store_lanes(cold) is None                     # stored once (and the optimizer range found)
    side = _side(cold.session.entry)
    side.unlink()                                        # the model cached, the lanes not (after `report`)
    again = load(tui_args(synth, no_cache=False))
    assert not again.lanes_stored
    mapped = store_lanes(again)                          # after the view; the app swaps these in
    assert mapped is not None and _plain(mapped) == _plain(fresh.lanes)
    assert not next(iter(mapped.hw.values()))[0].ev.cum.flags.owndata
    assert side.is_file()
    n, size = cache.usage()    # one entry, its lanes counted in its size
    assert n == 1 and size >= cold.session.entry.stat().st_size + side.stat().st_size

    import launchtui.analysis.lanes as lanes_mod
    import launchtui.analysis.backpressure as bp
    monkeypatch.setattr(lanes_mod, "build_lanes", lambda *a, **k: 1 / 0)
    monkeypatch.setattr(bp, "timeline_marks", lambda *a, **k: 1 / 0)
    import launchtui.tui.queries as queries
    monkeypatch.setattr(queries, "optimizer_range", lambda *a, **k: 1 / 0)   # stored by the cold load
    warm = load(tui_args(synth, no_cache=False))
    assert warm.lanes_stored
    assert _plain(warm.lanes) == _plain(fresh.lanes)
    assert _plain(warm.marks) == _plain(fresh.marks) and len(fresh.marks)
    assert warm.optimizer == fresh_optimizer
    assert sum(len(v) for v in fresh.lanes.hw.values()) and fresh.lanes.queue and fresh.lanes.api


def test_the_cache_bound_evicts_the_lanes_with_their_entry(synth, tmp_path, monkeypatch):
    first = load(tui_args(synth, no_cache=False))
    store_lanes(first)
    side = _side(first.session.entry)
    assert side.is_file()
    other = tmp_path / "other.sqlite"
    other.write_bytes(open(synth, "rb").read())
    monkeypatch.setenv("LAUNCHTUI_CACHE_MAX_MB", str(first.session.entry.stat().st_size * 1.5 / 1e6))
    load(tui_args(str(other), no_cache=False))          # its commit evicts the older entry
    assert not first.session.entry.exists() and not side.exists()


@pytest.mark.tui
def test_a_cold_open_swaps_in_the_mapped_lanes(synth, tmp_path):
    """After storing the lanes, the app draws from the mapped file (the built arrays freed), on the
    same rows."""
    from tui_helpers import make_app, run, settle, wait_ready

    async def go():
        app = make_app(synth, no_cache=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_ready(app, pilot)
            tl = app.main.timeline
            rows = [(r.kind, r.key) for r in tl.rows]
            await app.workers.wait_for_complete()
            await settle(app, pilot)
            hw = next(iter(tl.lanes.hw.values()))[0]
            return rows, [(r.kind, r.key) for r in tl.rows], tl.lanes is app.loaded.lanes, hw.ev.cum.flags.owndata
    import shutil
    from launchtui.result_cache import model_entry
    synth = shutil.copy(synth, tmp_path / "cold.sqlite")     # a trace not opened before: lanes built
    before, after, same, owned = run(go())                   # stored and mapped while loading
    assert before == after and same and not owned
    _side(model_entry(synth)).unlink()        # the model cached, the lanes not
    before, after, same, owned = run(go())                   # built, stored after the view, swapped
    assert before == after and same and not owned


@pytest.mark.tui
def test_lanes_are_stored_after_the_first_table_not_beside_the_workers(synth, tmp_path, monkeypatch):
    """After `report` (model cached, lanes not), the lanes and optimizer range are stored once the
    verdict and the first table are done, not while they compute (their temporaries would peak
    together: cold 5M TUI); then drawn from the mapped file. Once per app, not per table."""
    import shutil

    from launchtui.tui import loader
    from launchtui.result_cache import model_entry
    from tui_helpers import make_app, run, settle, wait_ready
    path = shutil.copy(synth, tmp_path / "after_report.sqlite")
    load(tui_args(path, no_cache=False))            # fills the model cache (what `report` does)
    _side(model_entry(path)).unlink()
    seen = []
    real = loader.store_lanes

    def spy(loaded):
        scr = app.main
        seen.append((scr.table_busy, scr.verdict.result is not None, bool(scr.table.rows)))
        return real(loaded)
    monkeypatch.setattr(loader, "store_lanes", spy)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_ready(app, pilot)
            await settle(app, pilot)
            await pilot.press("m")                   # another table: nothing stored again
            await settle(app, pilot)
            await app.workers.wait_for_complete()
            await settle(app, pilot)
            return app.main.timeline.lanes.hw[0][0].ev.cum.flags.owndata
    app = make_app(path, no_cache=False)
    owned = run(go())
    assert seen == [(False, True, True)] and not owned
    assert _side(model_entry(path)).exists()


def test_a_reopen_reads_the_stored_queue_tables_and_window_without_recomputing(synth, monkeypatch):
    """The queue rows' sparse tables and peaks and the first view's window come from beside the
    model on a warm open (each read whole columns: ~0.8 s of a 5M reopen), equal to fresh ones."""
    from launchtui.analysis import intervals, lanes
    from launchtui.tui import queries
    fresh = load(tui_args(synth))
    warm = load(tui_args(synth, no_cache=False))
    store_lanes(warm)
    monkeypatch.setattr(intervals.RangeMax, "__init__", lambda *a, **k: (_ for _ in ()).throw(AssertionError("rebuilt")))
    monkeypatch.setattr(queries, "gpu_activity_window", lambda tr: (_ for _ in ()).throw(AssertionError("recomputed")))
    again = load(tui_args(synth, no_cache=False))
    assert again.lanes_stored and again.fit_window == fresh.fit_window
    assert _plain(again.lanes.queue) == _plain(fresh.lanes.queue) and len(fresh.lanes.queue)


@pytest.mark.tui
def test_the_first_open_after_report_builds_the_lanes_after_the_view(synth, tmp_path, monkeypatch):
    """The model cached, its lanes not (the first open after `report`): the view shows at once with
    a pending note on the timeline, the lanes are built while the verdict and table compute, then
    drawn; the screen then equals an open that built them before the view, and the app stays busy
    until they are drawn."""
    import shutil
    import time as _time

    from launchtui.result_cache import model_entry
    from launchtui.tui import loader
    from tui_helpers import make_app, run, screen_text, settle, wait_ready
    path = shutil.copy(synth, tmp_path / "after_report2.sqlite")
    load(tui_args(path, no_cache=False))
    _side(model_entry(path)).unlink()
    seen = {}
    real = loader.build_pending_lanes

    def spy(loaded):
        for _ in range(500):        # build once the pending view is composed (deterministic order)
            if app.main is not None and hasattr(app.main, "timeline"):
                break
            _time.sleep(0.01)
        tl = app.main.timeline
        seen["before"] = [(r.kind, r.label) for r in tl.rows]
        seen["busy"] = app.busy
        return real(loaded)
    monkeypatch.setattr(loader, "build_pending_lanes", spy)

    async def go(a):
        async with a.run_test(size=(120, 40)) as pilot:
            await wait_ready(a, pilot)
            await settle(a, pilot)
            tl = a.main.timeline
            return [(r.kind, r.key) for r in tl.rows], tl.selected, screen_text(a)
    app = make_app(path, no_cache=False)
    deferred = run(go(app))
    assert seen["before"] == [("note", "(building the timeline lanes…)")] and seen["busy"]
    assert not app.loaded.lanes.pending
    monkeypatch.setattr(loader, "build_pending_lanes", real)
    fresh = run(go(make_app(path, no_cache=True)))
    assert deferred[:2] == fresh[:2] and any(k == "hw" for k, _ in deferred[0])
    assert deferred[2] == fresh[2]
