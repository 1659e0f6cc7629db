"""The record's shared and shortcut computations give what the direct ones give: kernel groups cut
from the report's (analysis/shared.py), the report and record with and without a `Shared`, and the
sort-free paths of the gaps, the queue class and the phases against the general ones."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from fixtures import record_cases as rc
from fixtures import synth
from launchtui.analysis import exposed as ex
from launchtui.analysis import phases as ph
from launchtui.analysis import queue_class as qc
from launchtui.analysis.stream_calls import first_of_runs
from launchtui.analysis.launches import groups_on_devices, kernel_groups
from launchtui.analysis.record import build_record
from launchtui.analysis.report import build_report
from launchtui.analysis.select import WHOLE, Selection
from launchtui.analysis.shared import Shared
from launchtui.session import Session
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.load import open_trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    sc = rc.SCENARIOS["profiler_step"]
    p = synth.write_nsys_sqlite(rc.workload(sc), tmp_path_factory.mktemp("shared") / "t.sqlite")
    return open_trace(p, use_cache=False)


def _same_groups(a, b):
    for f in ("device", "name", "count", "sum_api", "max_api", "min_api", "queue_count", "sum_queue",
              "sum_kernel", "span_start", "span_end", "op_idx", "op_group"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)


def test_groups_cut_per_device_equal_the_devices_own(trace):
    devices = sorted(trace.device_ids())
    assert len(devices) >= 2     # the cut has something to drop
    sel = Selection(t0=int(trace.ops.start.min()) + 1)
    whole = kernel_groups(trace, sel)
    for d in devices:
        cut = groups_on_devices(whole, [d])
        assert len(cut) and set(cut.device.tolist()) == {d}
        _same_groups(cut, kernel_groups(trace, sel.with_devices([d])))
    _same_groups(groups_on_devices(whole, devices), whole)


def test_report_and_record_same_with_or_without_shared(trace):
    sh = Shared(trace)
    rep = build_report(trace, WHOLE, shared=sh)
    assert sh.held() == {"groups", "spikes", "graphs"}   # the report filled the memo ...
    rec = build_record(trace, WHOLE, shared=sh)
    assert sh.held() == {"spikes", "graphs"}          # ... and the record dropped the per-launch arrays
    assert rep == build_report(trace, WHOLE)
    assert rec == build_record(trace, WHOLE)
    assert rec["top"] and rec["streams"]


def test_gap_ending_order_equals_the_lexsort():
    rng = np.random.default_rng(3)
    n = 2000
    start = np.sort(rng.integers(0, 300, n))          # start order with many ties
    api_start = rng.integers(0, 50, n)                # ties inside ties keep index order
    trace = SimpleNamespace(ops=SimpleNamespace(start=start, api=np.arange(n)), api=SimpleNamespace(start=api_start))
    lk = np.sort(rng.choice(n, 1500, replace=False))
    want = lk[np.lexsort((api_start[lk], start[lk]))]
    np.testing.assert_array_equal(ex._by_start_then_launch(trace, lk), want)
    trace.ops.start = rng.permutation(start)          # not in start order: the general sort
    want = lk[np.lexsort((api_start[lk], trace.ops.start[lk]))]
    np.testing.assert_array_equal(ex._by_start_then_launch(trace, lk), want)


@pytest.mark.parametrize("overlap", [False, True])
def test_in_windows_equals_the_search_per_time(overlap):
    rng = np.random.default_rng(5)
    t = np.cumsum(rng.integers(0, 20, 5000))                # in order, with ties
    edges = np.sort(rng.choice(int(t[-1]) + 50, 40, replace=False))
    starts, ends = edges[0::2], edges[1::2]
    if overlap:                                              # the search's rule holds for any ends
        ends = ends + rng.integers(0, 3000, len(ends))
    k = np.searchsorted(starts, t, side="right") - 1
    want = np.where((k >= 0) & (t < ends[np.maximum(k, 0)]), k, -1)
    got = qc.in_windows(t, starts, ends)
    np.testing.assert_array_equal(got, want)
    assert (got >= 0).any() and (got < 0).any()
    p = rng.permutation(len(t))                              # out of order: the search itself
    np.testing.assert_array_equal(qc.in_windows(t[p], starts, ends), want[p])


@pytest.mark.parametrize("sort", [True, False])
def test_first_of_runs_equals_unique(sort):
    a = np.random.default_rng(7).integers(0, 500, 3000)
    a = np.sort(a) if sort else a
    u, first = first_of_runs(a)
    wu, wf = unique_sorted(a, return_index=True)
    np.testing.assert_array_equal(u, wu)
    np.testing.assert_array_equal(first, wf)


def _phase_keys_per_op(trace, ops, base, level, main):
    """The per-op computation `attributed_phase_keys` replaced: one path row per op, unique rows."""
    from launchtui.analysis import nvtx
    from launchtui.trace.grouping import unique_rows
    base = np.broadcast_to(np.asarray(base, np.int64), ops.shape)
    a = trace.ops.api[ops]
    mat = ph._path_matrix(trace, nvtx.op_ranges(trace)[ops], base, level)
    other = (mat[:, 0] < 0) & (a >= 0) & (trace.api.thread[np.maximum(a, 0)] != main)
    if main >= 0 and other.any():
        at = nvtx.innermost_at(trace, np.full(int(other.sum()), main), trace.api.start[a[other]])
        sub = ph._path_matrix(trace, at, base[other], level)
        idx = np.nonzero(other)[0][sub[:, 0] >= 0]
        mat[idx] = sub[sub[:, 0] >= 0]
    keys = np.full(len(ops), -1, np.int64)
    has = mat[:, 0] >= 0
    uniq, inv = unique_rows(mat[has], return_inverse=True)
    parts = [[trace.strings[int(t)] for t in r if t >= 0] for r in uniq.tolist()]
    # keys number the paths in the order of their texts, then their length (definitions.md §9)
    by_text = sorted(range(len(parts)), key=lambda i: (" > ".join(parts[i]), len(parts[i])))
    rank = np.argsort(by_text)
    keys[has] = rank[inv.reshape(-1)]
    return keys, [" > ".join(parts[i]) for i in by_text]


@pytest.mark.parametrize("scenario,level", [("autograd", 1), ("emit_nvtx", 2), ("profiler_step", 3)])
def test_phase_keys_by_range_equal_the_per_op_paths(tmp_path, scenario, level):
    sc = rc.SCENARIOS[scenario]
    trace = open_trace(synth.write_nsys_sqlite(rc.workload(sc), tmp_path / "t.sqlite"), use_cache=False)
    ops = kernel_groups(trace).op_idx
    main = ph.main_thread(trace, ops, 1)
    for base in (1, np.where(np.arange(len(ops)) % 3 == 0, 0, 1)):    # one depth; per-op depths (the TUI)
        keys, texts, rule = ph.attributed_phase_keys(trace, ops, base, level, main)
        want_keys, want_texts = _phase_keys_per_op(trace, ops, base, level, main)
        assert texts == want_texts and len(texts) > 1
        np.testing.assert_array_equal(keys, want_keys)
    if scenario == "autograd":
        assert (rule == ph.RULE_MAIN_THREAD).any()


def test_cause_measures_equal_their_pieces_and_cover_the_gaps():
    """GapCauses.measure_in (prefix sums per part, the heads' launch calls by measure_both_in) equals
    the pieces() cut by the windows, cause by cause, and the pieces tile the gaps exactly."""
    from launchtui.analysis import intervals as iv
    from launchtui.analysis.idle_causes import CAUSES, GapCauses, Latency
    rng = np.random.default_rng(11)
    for _ in range(20):
        edges = np.sort(rng.choice(10**6, 2 * 300, replace=False)).astype(np.int64)
        g0, g1 = edges[0::2], edges[1::2]
        n = len(g0)
        call = np.where(rng.random(n) < 0.9, np.arange(n), -1)
        ct = g0 + (rng.random(n) * (g1 - g0)).astype(np.int64)
        cd = ct + (rng.random(n) * (g1 - ct)).astype(np.int64)
        calls_s = np.sort(rng.integers(0, 10**6, 2000)).astype(np.int64)
        flight = iv.union(calls_s, calls_s + rng.integers(1, 400, len(calls_s)))
        gc = GapCauses(g0, g1, call.copy(), call, ct, cd, rng.random(n) < 0.1,
                       rng.choice([CAUSES.index(c) for c in ("launch", "sync", "cold_start")], n).astype(np.int8),
                       (ct - g0) >= 100_000, (call < 0) & (rng.random(n) < 0.5), flight, Latency(5_000, 30, True))
        w = np.sort(rng.choice(10**6, 8, replace=False)).astype(np.int64)
        starts, ends = w[0::2], w[1::2]
        got = gc.measure_in(starts, ends)
        s, e, c = gc.pieces()
        assert (s[1:] >= e[:-1]).all(), "disjoint, in order"
        assert int((e - s).sum()) == int((g1 - g0).sum()), "the pieces tile the gaps"
        for k, cause in enumerate(CAUSES):
            m = c == k
            np.testing.assert_array_equal(got[cause], iv.measure_in(s[m], e[m], starts, ends), err_msg=cause)
        hb = gc.host_bound_per_gap()
        pk = np.searchsorted(g0, s, side="right") - 1
        want = np.bincount(pk, weights=(e - s) * np.isin(c, [CAUSES.index("launch"), CAUSES.index("host")]),
                           minlength=n)
        np.testing.assert_array_equal(hb, want.astype(np.int64))


def test_max_in_windows_by_slices_equals_the_labelled_changes():
    """The queue class's max pending inside the iterations: a max per iteration's slice of the
    series equals the max over every change labelled inside a window, plus the depth at each start."""
    from launchtui.analysis.queue_series import StreamSeries
    from launchtui.analysis.queue_class import _max_in_windows
    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        t = np.cumsum(rng.integers(1, 20, n)).astype(np.int64)
        v = rng.integers(0, 50, n).astype(np.int64)
        s = StreamSeries(0, 7, t, v, 0.0, n, 0, 0)
        k = int(rng.integers(1, 6))
        edges = np.sort(rng.choice(np.arange(0, int(t[-1]) + 30), 2 * k, replace=False)).astype(np.int64)
        starts, ends = edges[0::2], edges[1::2]
        inside = [int(x) for tt, x in zip(t.tolist(), v.tolist())
                  if any(a <= tt < b for a, b in zip(starts.tolist(), ends.tolist()))]
        expect = max([0] + inside + s.value_at(starts).tolist())
        assert _max_in_windows(s, starts, ends) == expect


def test_the_record_adds_its_graph_keys_to_its_own_copy_only(tmp_path, monkeypatch):
    """One graph-facts computation serves both documents; the record's scope and eager remainder
    (added once its iterations are known) never show in the report's `graphs`."""
    from fixtures import pairs
    from launchtui.trace.load import open_trace
    _, after = pairs.write_pair(tmp_path, "graphs")
    t = open_trace(after, use_cache=False)
    sh = Shared(t)
    rep = build_report(t, WHOLE, shared=sh)
    rec = build_record(t, WHOLE, shared=sh)
    assert "eager_per_iteration" in rec["graphs"] and "eager_per_iteration" not in rep["graphs"]
    assert rep == build_report(t, WHOLE) and rec == build_record(t, WHOLE)
    import launchtui.analysis.shared as shared_mod
    calls, real = [], shared_mod.graphs_facts
    monkeypatch.setattr(shared_mod, "graphs_facts", lambda *a: calls.append(a) or real(*a))
    sh2 = Shared(t)
    build_report(t, WHOLE, shared=sh2)
    build_record(t, WHOLE, shared=sh2)
    assert len(calls) == 1


# ---- report --json: the record beside the report (analysis/shared.py side_by_side) -------------
def _report_json(path, monkeypatch, capsys, at_once: bool) -> tuple[str, list[str]]:
    """`report --json --no-cache` with the record computed beside the report or after it; the
    JSON and the names of the threads the record computed in."""
    import threading
    import launchtui.analysis.record as record_mod
    import launchtui.analysis.shared as shared_mod
    from launchtui.cli import main
    threads, real = [], record_mod.record_and_stalls
    with monkeypatch.context() as m:
        m.setattr(shared_mod, "side_by_side", lambda: at_once)
        m.setattr(record_mod, "record_and_stalls",
                  lambda *a: threads.append(threading.current_thread().name) or real(*a))
        assert main(["report", str(path), "--json", "--no-cache"]) == 0
    return capsys.readouterr().out, threads


@pytest.mark.parametrize("scenario", ["profiler_step", "limit_700", "graphs"])
def test_report_json_same_with_the_record_beside_the_report(tmp_path, monkeypatch, capsys, scenario):
    """The record computed on its own thread beside the report gives the JSON the one computed after
    the report gives, byte for byte (definitions.md §9), and it did run on another thread."""
    if scenario == "graphs":
        from fixtures import pairs
        path = pairs.write_pair(tmp_path, "graphs")[1]
    else:
        path = synth.write_nsys_sqlite(rc.workload(rc.SCENARIOS[scenario]), tmp_path / "t.sqlite")
    after, after_threads = _report_json(path, monkeypatch, capsys, at_once=False)
    beside, beside_threads = _report_json(path, monkeypatch, capsys, at_once=True)
    assert after_threads == ["MainThread"] and beside_threads == ["launchtui-Record"]
    assert '"record"' in beside and '"top"' in beside
    assert beside == after


def test_held_groups_are_computed_once_and_dropped_at_the_last_release(trace, monkeypatch):
    """Under hold_groups the record's per-device cut waits for the one computation of the
    selection's groups; the record's release keeps them for the report, and the report's, the
    last, drops them."""
    import launchtui.analysis.shared as shared_mod
    calls = []
    monkeypatch.setattr(shared_mod, "kernel_groups", lambda *a: calls.append(a) or kernel_groups(*a))
    sh = Shared(trace)
    sh.hold_groups(2)
    rec = build_record(trace, WHOLE, shared=sh)          # the record first: it computes the groups
    assert "groups" in sh.held()                          # ... and its release kept them
    rep = build_report(trace, WHOLE, shared=sh)
    assert len(calls) == 1 and calls[0][1] == WHOLE       # one computation, of the whole selection
    assert "groups" in sh.held()
    sh.release_groups()                                   # the report's release, the last
    assert "groups" not in sh.held()
    assert rep == build_report(trace, WHOLE) and rec == build_record(trace, WHOLE)


def test_held_groups_go_at_the_last_of_their_releases(trace):
    """Three stages holding: two releases keep the groups, the third drops them; after that a
    release drops at once again (not held)."""
    sh = Shared(trace)
    sh.hold_groups(3)
    sh.kernel_groups(WHOLE)
    for _ in range(2):
        sh.release_groups()
        assert "groups" in sh.held()
    sh.release_groups()
    assert "groups" not in sh.held()
    sh.kernel_groups(WHOLE)
    sh.release_groups()
    assert "groups" not in sh.held()


def test_report_json_beside_releases_the_groups_before_the_record_gaps(tmp_path, monkeypatch, capsys):
    """`report --json` with the record beside it: the record has released its hold on the groups
    before its gaps (its peak), so they go as soon as the report is done with them too, and none
    are held once both are done."""
    import launchtui.analysis.record as record_mod
    import launchtui.analysis.shared as shared_mod
    from launchtui.cli import main
    path = synth.write_nsys_sqlite(rc.workload(rc.SCENARIOS["profiler_step"]), tmp_path / "t.sqlite")
    monkeypatch.setattr(shared_mod, "side_by_side", lambda: True)
    monkeypatch.setattr(shared_mod, "lane_fits", lambda trace: False)
    claims_at_gaps, used = [], []
    real = record_mod._gpu_figures

    def at_gaps(trace, it, devs, doc, cold, opt, shared, whatif_of):
        claims_at_gaps.append(shared._group_claims)   # 1: the report's hold left; None: none
        used.append(shared)
        return real(trace, it, devs, doc, cold, opt, shared, whatif_of)
    monkeypatch.setattr(record_mod, "_gpu_figures", at_gaps)
    assert main(["report", str(path), "--json", "--no-cache"]) == 0
    assert '"record"' in capsys.readouterr().out
    assert len(claims_at_gaps) == 1 and claims_at_gaps[0] in (1, None)
    assert "groups" not in used[0].held()


def test_side_by_side_needs_two_cpus(monkeypatch):
    import os
    import launchtui.analysis.shared as shared_mod
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert shared_mod.side_by_side()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    assert not shared_mod.side_by_side()             # one CPU: nothing to gain


def _main_within(args, seconds=60) -> int:
    """`main(args)` in a thread, failing the test (not hanging it) when it does not return."""
    import threading
    from launchtui.cli import main
    result = []
    runner = threading.Thread(target=lambda: result.append(main(args)), daemon=True)
    runner.start()
    runner.join(seconds)
    assert result, f"main({args}) still waiting after {seconds} s"
    return result[0]


def test_an_error_in_the_report_beside_its_record_is_one_line(tmp_path, monkeypatch, capsys):
    """The report fails while its record computes beside it: one line, exit status 2, and the
    command returns without waiting for the record."""
    import launchtui.analysis.report as report_mod
    import launchtui.analysis.shared as shared_mod
    from launchtui.errors import TraceError
    path = synth.write_nsys_sqlite(rc.workload(rc.SCENARIOS["profiler_step"]), tmp_path / "t.sqlite")
    monkeypatch.setattr(shared_mod, "side_by_side", lambda: True)
    started = []
    real_start = Session.start
    monkeypatch.setattr(Session, "start", lambda self, q: started.append(q) or real_start(self, q))

    def fail(*a, **k):
        raise TraceError(path, "the report failed here")
    monkeypatch.setattr(report_mod, "build_report", fail)
    assert _main_within(["report", str(path), "--json", "--no-cache"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip().splitlines() == [f"launchtui: {path}: the report failed here"]
    assert [type(q).__name__ for q in started] == ["Record"]


def test_an_error_in_the_record_beside_the_report_is_one_line(tmp_path, monkeypatch, capsys):
    """What the record's thread raises reaches the command's guard: one line, exit status 2."""
    import launchtui.analysis.record as record_mod
    import launchtui.analysis.shared as shared_mod
    from launchtui.errors import TraceError
    path = synth.write_nsys_sqlite(rc.workload(rc.SCENARIOS["profiler_step"]), tmp_path / "t.sqlite")
    monkeypatch.setattr(shared_mod, "side_by_side", lambda: True)

    def fail(*a):
        raise TraceError(path, "the record failed here")
    monkeypatch.setattr(record_mod, "record_and_stalls", fail)
    assert _main_within(["report", str(path), "--json", "--no-cache"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip().splitlines() == [f"launchtui: {path}: the record failed here"]
