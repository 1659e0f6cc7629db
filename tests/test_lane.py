"""The helper lane (analysis/shared.py `Shared.lend_lane`, `Deferred`): a deferred computation runs
once, on the lane or in the caller, whichever reaches it first; its error reaches the caller; an
idle lane holds no thread; and the record and report computed with the lane give the JSON they give
without it, byte for byte (definitions.md §9)."""
from __future__ import annotations

import json
import threading

import pytest

from fixtures import record_cases as rc
from fixtures import synth
from launchtui.analysis import shared as shared_mod
from launchtui.analysis.shared import Deferred, Shared
from launchtui.trace.load import open_trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    p = synth.write_nsys_sqlite(rc.workload(rc.SCENARIOS["profiler_step"]), tmp_path_factory.mktemp("lane") / "t.sqlite")
    return open_trace(p, use_cache=False)


def _lane_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "launchtui-Help"]


def _wait_lane_idle(timeout: float = 5.0) -> None:
    for t in _lane_threads():
        t.join(timeout)
    assert not _lane_threads(), "the lane's thread should end once nothing is left to run"


def test_without_a_lane_defer_computes_now_in_the_caller(trace):
    sh = Shared(trace)
    ran = []
    d = sh.defer(lambda: ran.append(threading.current_thread().name) or 7)
    assert ran == ["MainThread"]          # in program order, before `defer` returned
    assert d.result() == 7 and d.result() == 7 and len(ran) == 1


def test_the_lane_computes_once_and_the_caller_waits_for_it(trace):
    sh = Shared(trace)
    sh.lend_lane()
    began, release, ran = threading.Event(), threading.Event(), []

    def slow():
        ran.append(threading.current_thread().name)
        began.set()
        assert release.wait(5)
        return "value"
    d = sh.defer(slow)
    assert began.wait(5)                      # the lane claimed it ...
    threading.Timer(0.05, release.set).start()
    assert d.result() == "value"              # ... so the caller waited instead of computing again
    assert ran == ["launchtui-Help"]
    _wait_lane_idle()


def test_the_caller_computes_what_a_busy_lane_has_not_begun(trace):
    sh = Shared(trace)
    sh.lend_lane()
    began, release, ran = threading.Event(), threading.Event(), []
    def first_compute():
        began.set()
        assert release.wait(5)
        return "first"
    first = sh.defer(first_compute)
    second = sh.defer(lambda: ran.append(threading.current_thread().name) or "second")
    assert began.wait(5)
    assert second.result() == "second"        # not queued behind the first: computed here
    assert ran == ["MainThread"]
    release.set()
    assert first.result() == "first"
    _wait_lane_idle()
    assert ran == ["MainThread"]              # the lane skipped what the caller had claimed


@pytest.mark.parametrize("lend", [False, True])
def test_an_error_in_a_deferred_computation_is_raised_in_the_caller(trace, lend):
    sh = Shared(trace)
    if lend:
        sh.lend_lane()

    def fail():
        raise ValueError("bad input here")
    d = sh.defer(fail)
    with pytest.raises(ValueError, match="bad input here"):
        d.result()
    with pytest.raises(ValueError):
        d.result()                            # kept, not computed again
    _wait_lane_idle()


def test_a_deferred_computation_drops_its_inputs_once_run():
    d = Deferred(lambda: 1)
    d.run()
    d.run()                                   # a second run is a no-op
    assert d._compute is None and d.result() == 1


def test_lane_fits_needs_two_cpus_and_a_trace_under_the_bound(trace, monkeypatch):
    import os
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert shared_mod.lane_fits(trace)
    monkeypatch.setattr(shared_mod, "LANE_MAX_OPS", len(trace.ops) - 1)
    assert not shared_mod.lane_fits(trace)    # past the bound: the record's parts one after another
    monkeypatch.setattr(shared_mod, "LANE_MAX_OPS", len(trace.ops))
    assert shared_mod.lane_fits(trace)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    assert not shared_mod.lane_fits(trace)    # one CPU: nothing to gain


# ---- the record with a lane: the same JSON, whoever computes its deferred parts ----------------
def _json(command: str, path, monkeypatch, capsys, lane: bool) -> tuple[str, int, int]:
    """`COMMAND --json --no-cache` with the lane lent or not; the JSON, how many computations
    were offered to the lane (which thread then runs each is the scheduler's choice) and how many
    blocks of gaps the record's gap figures took."""
    from launchtui.analysis import record_idle as ri
    from launchtui.cli import main
    offered, blocks = [], []
    with monkeypatch.context() as m:
        m.setattr(shared_mod, "lane_fits", lambda trace: lane)
        real = shared_mod._Lane.offer
        m.setattr(shared_mod._Lane, "offer", lambda self, d: offered.append(d) or real(self, d))
        block = ri._gap_block
        m.setattr(ri, "_gap_block", lambda *a: blocks.append(len(a[2])) or block(*a))
        assert main([command, str(path), "--json", "--no-cache"]) == 0
    _wait_lane_idle()
    return capsys.readouterr().out, len(offered), len(blocks)


@pytest.mark.parametrize("scenario", ["profiler_step", "limit_700", "graphs"])
@pytest.mark.parametrize("command", ["report", "record"])
def test_json_same_with_and_without_the_lane(tmp_path, monkeypatch, capsys, scenario, command):
    if scenario == "graphs":
        from fixtures import pairs
        path = pairs.write_pair(tmp_path, "graphs")[1]
    else:
        path = synth.write_nsys_sqlite(rc.workload(rc.SCENARIOS[scenario]), tmp_path / "t.sqlite")
    monkeypatch.setattr(shared_mod, "side_by_side", lambda: True)   # the report's record beside it
    alone, alone_offers, alone_blocks = _json(command, path, monkeypatch, capsys, lane=False)
    helped, helped_offers, helped_blocks = _json(command, path, monkeypatch, capsys, lane=True)
    doc = json.loads(alone)
    record = doc if command == "record" else doc["record"]
    # cold starts, top kernels, the gapless figures in three parts, by_phase's keys, the what-if's
    # inputs, the graphs' part when any, the gaps in up to LANE_PIECES blocks (one block without the
    # lane) and each phase the what-if re-times
    from launchtui.analysis.record_idle import LANE_PIECES
    assert (alone_offers, alone_blocks) == (0, 1) and 1 < helped_blocks <= LANE_PIECES
    retimed = [r for r in (record["graph_whatif"] or {}).get("phases", []) if r["status"] in ("estimate", "no_stretch")]
    assert helped_offers == 7 + ("graphs" in record) + helped_blocks + len(retimed)
    assert '"top"' in helped and '"streams"' in helped
    assert helped == alone
    for _ in range(3):                        # whoever computes each part, the same bytes
        assert _json(command, path, monkeypatch, capsys, lane=True)[0] == alone


def test_a_waiting_thread_runs_offered_work_until_its_stage_is_done(trace):
    """wait_helping: the thread that waits for a stage runs the lane's offered work meanwhile, and
    returns the stage's value once it is done."""
    from concurrent.futures import Future
    sh = Shared(trace)
    sh.lend_lane()
    hold, began, ran = threading.Event(), threading.Event(), []

    def busy():                               # keeps the lane's own thread occupied
        began.set()
        assert hold.wait(5)
    sh.defer(busy)
    assert began.wait(5)
    pending: Future = Future()
    second_ran = threading.Event()
    sh.defer(lambda: ran.append(threading.current_thread().name) or second_ran.set())

    def stage():                              # the awaited stage ends once the offered work ran
        assert second_ran.wait(5)
        pending.set_result("stage value")
    threading.Thread(target=stage).start()
    assert sh.wait_helping(pending) == "stage value"
    hold.set()
    _wait_lane_idle()
    assert ran == ["MainThread"]              # the lane's thread was busy: the waiting thread ran it


def test_an_error_on_the_lane_is_one_line(tmp_path, monkeypatch, capsys):
    """What a deferred part raises on the lane reaches the command's guard: one line, exit 2."""
    import launchtui.analysis.record as record_mod
    from launchtui.cli import main
    from launchtui.errors import TraceError
    path = synth.write_nsys_sqlite(rc.workload(rc.SCENARIOS["profiler_step"]), tmp_path / "t.sqlite")
    monkeypatch.setattr(shared_mod, "lane_fits", lambda trace: True)

    def fail(*a, **k):
        raise TraceError(path, "the top kernels failed here")
    monkeypatch.setattr(record_mod, "top_kernels", fail)
    assert main(["record", str(path), "--json", "--no-cache"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip().splitlines() == [f"launchtui: {path}: the top kernels failed here"]
    _wait_lane_idle()
