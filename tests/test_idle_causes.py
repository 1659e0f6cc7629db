"""GPU idle by cause (analysis/idle_causes.py, issue 26) on hand-scheduled traces whose ground truth
is known by construction (fixtures/idle_cases.py): every cause to the ns per iteration, the
invariants (the causes add up to the idle time, the pieces are disjoint and cover the gaps, shuffled
events give the same answer), and, for the scenarios whose analyses come later (blocking below
1024, a sampled trace, a layer period inside one step), the truth checked against the written file
by a small independent reader (json + Decimal)."""
from __future__ import annotations

import json
from decimal import Decimal

import numpy as np
import pytest

from fixtures import idle_cases as ic
from fixtures.idle_model import LOAD_TAIL_NS, RETURN_NS, SYNC_RETURN_NS
from launchtui.analysis import backpressure as bp
from launchtui.analysis import cold_start as cs
from launchtui.analysis import exposed as ex
from launchtui.analysis import intervals as iv
from launchtui.analysis.idle_causes import CAUSES, gap_causes
from launchtui.trace.load import open_trace

MEASURED = ("host_bound", "launch_bound", "sync", "dependency", "trimmed", "cold_start", "copy_bound")
DISAGREE = ("warm_up", "async_copies")     # settled by the tests below; the invariants hold there too
DOMINANT = {"host_bound": "host", "launch_bound": "launch", "sync": "sync", "dependency": "dependency",
            "cold_start": "cold_start", "warm_up": "cold_start", "copy_bound": "sync", "sampled": "launch",
            "layer_period": "host", "below_1024": "host", "async_copies": "host"}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """(name, shuffle seed) -> (path, truth), written once per module."""
    d = tmp_path_factory.mktemp("idle_cases")
    out = {}

    def get(name, shuffle=None):
        if (name, shuffle) not in out:
            out[name, shuffle] = ic.write(name, d / f"{name}.{shuffle}.pt.trace.json", shuffle)
        return out[name, shuffle]
    return get


def _measure(path, truth, whole: bool = True):
    """(GapCauses, gaps, ns per cause per iteration, (starts, ends)). `whole`: the gaps are found from
    the device's first op on, so the first iteration's leading gap is judged from where the GPU went
    idle; else they are cut at the first iteration's start (tests below)."""
    t = open_trace(path, use_cache=False)
    devs = ex.launch_devices(t)
    d = next(iter(devs))
    assert d == truth["device"]
    on = ex.device_ops(t, d)
    it = np.array(truth["iterations"], np.int64)
    s, e = it[:, 0], it[:, 1]
    lo, hi = int(s[0]), int(e[-1])
    if whole:
        lo = min(lo, int(t.ops.start[on].min()))
    g = ex.device_gaps(t, d, lo, hi, devs[d])
    cold = cs.cold_start(t, bp.spikes(t))
    gc = gap_causes(t, on, devs[d], g.start, g.end, cold_calls=cold.calls)
    return gc, g, gc.measure_in(s, e), (s, e), t


def test_the_fixture_names_the_same_causes():
    assert ic.CAUSES == CAUSES


@pytest.mark.parametrize("name", MEASURED)
def test_idle_by_cause_to_the_ns(files, name):
    path, truth = files(name)
    gc, _, per, _, _ = _measure(path, truth)
    assert (gc.latency.ns, gc.latency.measured) == (truth["latency_ns"], True)
    assert {c: per[c].tolist() for c in CAUSES} == truth["idle_by_cause"]


@pytest.mark.parametrize("name", MEASURED + DISAGREE)
def test_causes_add_up_to_the_idle_time(files, name):
    path, truth = files(name)
    _, _, per, (s, e), t = _measure(path, truth)
    busy = iv.union(t.ops.start, t.ops.end)
    idle = (e - s) - iv.measure_in(*busy, s, e)
    assert sum(per[c] for c in CAUSES).tolist() == idle.tolist() == truth["idle_ns"]


@pytest.mark.parametrize("name", MEASURED + DISAGREE)
def test_pieces_are_disjoint_and_cover_the_gaps(files, name):
    path, truth = files(name)
    gc, g, _, _, _ = _measure(path, truth)
    s, e, c = gc.pieces()
    assert (e > s).all() and (s[1:] >= e[:-1]).all()
    k = np.searchsorted(g.start, s, side="right") - 1          # the gap holding each piece
    assert (k >= 0).all() and (e <= g.end[k]).all()
    assert int((e - s).sum()) == int((g.end - g.start).sum())
    assert set(np.unique(c).tolist()) <= set(range(len(CAUSES)))


@pytest.mark.parametrize("name", MEASURED + DISAGREE)
def test_shuffled_events_give_the_same_answer(files, name):
    path, truth = files(name)
    gc, _, per, _, _ = _measure(path, truth)
    gc2, _, per2, _, _ = _measure(files(name, shuffle=7)[0], truth)
    assert {c: per2[c].tolist() for c in CAUSES} == {c: per[c].tolist() for c in CAUSES}
    for a, b in zip(gc.pieces(), gc2.pieces()):
        assert a.tolist() == b.tolist()
    assert gc2.latency == gc.latency


# --- the truth itself: closed forms of the uniform scenarios ---------------------------------------

def _only(truth, **ns_per_iteration):
    n = len(truth["iterations"])
    want = {c: [ns_per_iteration.get(c, 0)] * n for c in CAUSES}
    assert truth["idle_by_cause"] == want


def test_truth_matches_the_closed_forms():
    L = ic.L
    for name in ("host_bound", "launch_bound"):
        _, t = ic.build(name)
        p = t["params"]    # per gap: the host outside the call, then the call and its latency
        _only(t, host=p["K"] * (p["H"] - L - p["D"]), launch=p["K"] * (p["C"] + L))
    _, t = ic.build("sync")
    p = t["params"]        # the sync returns, the host restarts, the first launch and its latency
    _only(t, sync=SYNC_RETURN_NS + p["after_sync"] + p["H0"] + p["C"] + L)
    _, t = ic.build("dependency")
    p = t["params"]        # one stalled op and the gaps between queued ops, per step
    _only(t, dependency=p["per_step"] * p["G"] + p["X"])
    _, t = ic.build("copy_bound")
    p = t["params"]        # a step's length less its copy and kernels: the GPU waits on the copy call
    step = p["H0"] + p["copy_call"] + p["K"] * (p["h"] + p["C"]) + p["tail"]
    _only(t, sync=step - p["copy_D"] - p["K"] * p["D"])
    _, t = ic.build("async_copies")
    p = t["params"]        # three host-bound gaps per round: before a memset, a pinned copy, a kernel
    _only(t, host=p["K"] * (3 * (p["H"] - L) - p["D_memset"] - p["D_copy"] - p["D"]),
          launch=p["K"] * (p["C_memset"] + p["C_copy"] + p["C"] + 3 * L))
    for name, want in DOMINANT.items():
        assert ic.build(name)[1]["dominant"] == want, name


def test_trimmed_and_cold_start_truth_by_hand():
    _, t = ic.build("trimmed")
    p, L = t["params"], ic.L
    first = t["idle_by_cause"]
    # step 1: the wait before the first pre-capture op and between them, then 2.4 ms of data loading
    assert first["unattributed"] == [p["pre_first"] - 10_000 + (p["pre"] - 1) * (p["pre_spacing"] - p["pre_D"]), 0, 0]
    g0 = p["pre_first"] + (p["pre"] - 1) * p["pre_spacing"] + p["pre_D"]
    assert first["host_stall"] == [10_000 + p["stall"] + p["H"] - g0, 0, 0]
    assert t["ops_without_launch"] == t["pending_before_capture"] == p["pre"]
    _, t = ic.build("cold_start")
    p = t["params"]
    cold = sum(p["loads"]) + p["K"] * (p["C"] + LOAD_TAIL_NS + L)
    # the last cold call returns as step 1 ends: its op's latency falls in step 2
    assert t["idle_by_cause"]["cold_start"] == [cold - L, L, 0, 0]
    host = p["K"] * (p["H"] - L - p["D"])      # step 1 follows a shorter prologue kernel
    assert t["idle_by_cause"]["host"] == [host + p["D"] - ic.PROLOGUE_D] + [host] * 3
    assert len(t["cold_calls_corr"]) == len(t["module_loads"]) == p["K"] and not t["warm_up"]


# --- findings of the first run, settled in idle_causes / cold_start ---------------------------------

def test_warm_up_capture_tails_are_cold_start(files):
    """Most launch calls are cold: the slow first launches are judged against the thread's other
    launches, not a median that is itself a cold call."""
    path, truth = files("warm_up")
    assert truth["warm_up"] and truth["first_launches"] == 24
    _, _, per, _, t = _measure(path, truth)
    assert cs.cold_start(t, bp.spikes(t)).warm_up
    assert {c: per[c].tolist() for c in CAUSES} == truth["idle_by_cause"]


def test_async_memset_and_pinned_copy_tails_are_launch(files):
    """Only a copy or memset call that blocked the host is sync; a few-µs asynchronous one is a
    submission like a launch."""
    path, truth = files("async_copies")
    _, _, per, _, _ = _measure(path, truth)
    assert {c: per[c].tolist() for c in CAUSES} == truth["idle_by_cause"]


@pytest.mark.parametrize("name", ["sync", "host_bound", "cold_start", "copy_bound"])
def test_the_record_judges_the_leading_gap_from_where_the_gpu_went_idle(files, name):
    """The record finds gaps from the device's first op, so the gap an iteration starts in keeps its
    cause (a sync that drained the queue before the iteration began), and reports the truth."""
    from launchtui.analysis.record import build_record
    path, truth = files(name)
    doc = build_record(open_trace(path, use_cache=False))
    it = doc["iterations"]
    assert [list(x) for x in zip(it["starts_ns"], it["ends_ns"])] == [list(x) for x in truth["iterations"]]
    total = sum(e - s for s, e in truth["iterations"])
    want = {c: round(sum(truth["idle_by_cause"][c]) / total, 4) for c in CAUSES}
    assert doc["idle_by_cause"]["share"] == want


# --- scenarios for the analyses to come: the truth against the file -------------------------------

def _ns(x) -> int:
    v = Decimal(str(x)) * 1000
    assert v == v.to_integral_value()
    return int(v)


def _read(path):
    """(runtime/driver calls, GPU ops, ranges) from the file, as dicts with ns times."""
    doc = json.loads(path.read_text(), parse_float=Decimal)
    calls, ops, ranges = [], [], []
    for ev in doc["traceEvents"]:
        row = {"name": ev["name"], "start": _ns(ev["ts"]), "end": _ns(ev["ts"]) + _ns(ev["dur"]),
               "corr": ev["args"].get("correlation")}
        {"cuda_runtime": calls, "cuda_driver": calls, "kernel": ops, "gpu_memcpy": ops,
         "user_annotation": ranges}[ev["cat"]].append(row)
    return calls, ops, ranges


def _depth_before(calls, ops, at, with_rowless: bool) -> int:
    launched = {c["corr"]: c["start"] for c in calls}
    return sum(1 for o in ops if o["start"] > at and
               (launched[o["corr"]] < at if o["corr"] in launched else with_rowless))


@pytest.mark.parametrize("name", ["below_1024", "dependency"])
def test_blocked_calls_sit_at_the_ceiling(files, name):
    path, truth = files(name)
    calls, ops, _ = _read(path)
    q = truth["params"]["Q"]
    assert truth["queue_ceiling"] == q
    blocked = truth["blocked_calls"]
    assert blocked and truth["long_blocked_corr"]
    by_corr = {c["corr"]: c for c in calls}
    starts = sorted(o["start"] for o in ops)
    for b in blocked:
        c = by_corr[b["corr"]]
        assert (c["start"], c["end"]) == (b["start_ns"], b["end_ns"])
        # every pending op counted (those launched before the capture too): one under the ceiling
        assert b["depth"] == _depth_before(calls, ops, c["start"], True) == q - 1
        assert b["visible_depth"] == _depth_before(calls, ops, c["start"], False)
        # the call returns as a pending op starts
        freed = starts[np.searchsorted(starts, c["end"]) - 1]
        assert freed < c["end"] <= freed + RETURN_NS
    for corr in truth["long_blocked_corr"]:
        assert by_corr[corr]["end"] - by_corr[corr]["start"] >= 1_000_000
    unblocked = [c for c in calls if c["corr"] not in {b["corr"] for b in blocked} and c["name"] == "cudaLaunchKernel"]
    assert all(_depth_before(calls, ops, c["start"], True) < q - 1 for c in unblocked[::25])
    if name == "below_1024":
        # the file's own depth never reaches the ceiling: 200 ops were pending before the capture
        assert truth["ops_without_launch"] == truth["pending_before_capture"] == 200
        assert max(b["visible_depth"] for b in blocked) < q - 1
        assert truth["max_visible_depth"] < q
        assert len(truth["long_blocked_corr"]) >= 10
    else:
        assert {b["visible_depth"] for b in blocked} == {q - 1}
        assert len(truth["stall_ops_corr"]) == len(truth["iterations"])


def test_sampled_trace_keeps_half_a_percent_of_correlation_ids(files):
    path, truth = files("sampled")
    calls, ops, ranges = _read(path)
    kept = truth["kept_corr"]
    assert truth["sampled"] and not truth["idle_measurable"]
    assert sorted(c["corr"] for c in calls) == sorted(o["corr"] for o in ops) == kept
    assert 0.003 < len(kept) / truth["corr_total"] < 0.008
    assert len(ranges) == len(truth["iterations"]) == truth["params"]["N"]
    # the workload before sampling: launch-bound, with most of its idle time in launch calls
    assert truth["dominant"] == "launch" and truth["launches"] == len(kept)


@pytest.mark.parametrize("name", ["layer_period", "layer_period_train_step"])
def test_one_long_step_holds_twelve_identical_layers(files, name):
    path, truth = files(name)
    calls, ops, ranges = _read(path)
    assert [r["name"] for r in ranges] == [truth["range_name"]]
    s, e = ranges[0]["start"], ranges[0]["end"]
    inside = sorted((c["start"], c["corr"]) for c in calls if s <= c["start"] < e)
    # the one iteration runs on to the end of the GPU work launched inside the range (§V1): the
    # head's last op ends after the range
    op_of = {o["corr"]: o for o in ops}
    last = max(op_of[c]["end"] for _, c in inside)
    assert last > e and truth["iterations"] == [[s, last]]
    p, n = truth["params"], truth["launches_per_layer"]
    assert len(inside) == p["embed"] + truth["layers"] * n + p["head"]
    starts = truth["layer_starts_ns"]
    assert len(starts) == truth["layers"] == 12
    assert np.diff(starts).tolist() == [truth["layer_period_ns"]] * 11
    # the layers launch the same kernels at the same offsets, on the CPU and on the GPU
    layer = [inside[p["embed"] + k * n:p["embed"] + (k + 1) * n] for k in range(12)]
    for k in range(1, 12):
        shift = starts[k] - starts[0]
        assert [a - shift for a, _ in layer[k]] == [a for a, _ in layer[0]]
        assert [op_of[c]["name"] for _, c in layer[k]] == [op_of[c]["name"] for _, c in layer[0]]
        assert [op_of[c]["start"] - shift for _, c in layer[k]] == [op_of[c]["start"] for _, c in layer[0]]
    assert truth["iteration_source"] == truth["range_name"]


def test_cold_calls_are_first_launches_with_a_module_load_inside(files):
    for name in ("cold_start", "warm_up"):
        path, truth = files(name)
        calls, ops, _ = _read(path)
        by_corr = {c["corr"]: c for c in calls}
        loads = [by_corr[corr] for _, corr in truth["module_loads"]]
        seen = set()
        first = {}
        for o in sorted(ops, key=lambda o: by_corr[o["corr"]]["start"]):
            if o["name"] not in seen:
                seen.add(o["name"])
                first[o["corr"]] = o
        for corr in truth["cold_calls_corr"]:
            c = by_corr[corr]
            assert corr in first and c["end"] - c["start"] > 1_000 * 100
            assert sum(1 for ld in loads if c["start"] < ld["start"] and ld["end"] < c["end"]) == 1
        assert truth["first_launches"] == len(first)
