"""The timeline's idle row model (analysis/idle_lane.py, definitions.md §T7) on the hand-scheduled
idle scenarios (fixtures/idle_cases.py): it measures exactly the record's causes per iteration and
the fixtures' ground truth, each bin shows the cause with most idle time in it (against a piece-by-
piece reference), and the largest gaps of each cause are ranked as a per-gap sum says."""
from __future__ import annotations

import numpy as np
import pytest

from fixtures import idle_cases as ic
from launchtui.analysis import backpressure as bp
from launchtui.analysis import cold_start as cs
from launchtui.analysis import exposed as ex
from launchtui.analysis import idle_lane as il
from launchtui.analysis.idle_causes import CAUSES, gap_causes
from launchtui.analysis.record import build_record
from launchtui.trace.load import open_trace

SCENARIOS = ("sync", "host_bound", "dependency", "trimmed", "cold_start", "copy_bound", "launch_bound")


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    d = tmp_path_factory.mktemp("idle_lane")
    out = {}

    def get(name):
        if name not in out:
            path, truth = ic.write(name, d / f"{name}.pt.trace.json")
            t = open_trace(path, use_cache=False)
            doc = build_record(t)
            it = doc["iterations"]
            lane = il.build_idle_lane(t, doc["device_id"], it["starts_ns"], it["ends_ns"], it["base_depth"])
            out[name] = (t, truth, doc, lane)
        return out[name]
    return get


def _pieces(t, doc):
    """GapCauses.pieces() for the record's device and gaps, found here as record.py finds them."""
    d = doc["device_id"]
    on = ex.device_ops(t, d)
    calls = ex.device_launch_calls(t, d, on)
    it = doc["iterations"]
    lo = min(min(it["starts_ns"]), int(t.ops.start[on].min()))
    g = ex.device_gaps(t, d, lo, max(it["ends_ns"]), calls)
    cold = cs.cold_start(t, bp.spikes(t))
    return g, gap_causes(t, on, calls, g.start, g.end, cold_calls=cold.calls).pieces()


def _per_iteration(lane, starts, ends):
    s, e = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    return {c: (lane.sets[k].covered_before(e) - lane.sets[k].covered_before(s)).tolist() for k, c in enumerate(CAUSES)}


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_row_measures_the_ground_truth_and_the_record(case, name):
    t, truth, doc, lane = case(name)
    assert lane.device == truth["device"] == doc["device_id"]
    it = doc["iterations"]
    assert [list(x) for x in zip(it["starts_ns"], it["ends_ns"])] == truth["iterations"]
    per = _per_iteration(lane, it["starts_ns"], it["ends_ns"])
    assert per == truth["idle_by_cause"]
    steady = [k for k in range(len(it["starts_ns"]))
              if k not in {x["iteration"] for x in doc["idle_by_cause"]["excluded_iterations"]}]
    for c in CAUSES:
        mean = round(float(np.mean([per[c][k] for k in steady])) / 1e6, 6)
        assert mean == doc["idle_by_cause"]["mean_per_iteration_ms"][c]


@pytest.mark.parametrize("name", SCENARIOS)
def test_sets_hold_the_pieces_and_gaps_those_the_record_finds(case, name):
    t, truth, doc, lane = case(name)
    g, (s, e, c) = _pieces(t, doc)
    assert lane.g0.tolist() == g.start.tolist() and lane.g1.tolist() == g.end.tolist()
    for k in range(len(CAUSES)):
        m = c == k
        cs_ = lane.sets[k]
        assert cs_.s.tolist() == s[m].tolist()
        assert np.diff(cs_.cum).tolist() == (e[m] - s[m]).tolist()
        assert int(lane.total_ns[k]) == int((e[m] - s[m]).sum())


def _reference_cells(s, e, c, edges):
    """Per bin: the cause with most idle ns in it (ties: the first in CAUSES), -1 with none; a loop."""
    out = []
    for a, b in zip(edges[:-1].tolist(), edges[1:].tolist()):
        per = [0] * len(CAUSES)
        for ps, pe, pc in zip(s.tolist(), e.tolist(), c.tolist()):
            per[pc] += max(0, min(b, pe) - max(a, ps))
        out.append(per.index(max(per)) if max(per) > 0 else -1)
    return out


@pytest.mark.parametrize("name", ("sync", "host_bound", "dependency", "cold_start"))
@pytest.mark.parametrize("width", (7, 60, 333))
def test_each_bin_shows_the_cause_with_most_idle_time(case, name, width):
    t, truth, doc, lane = case(name)
    _, (s, e, c) = _pieces(t, doc)
    lo, hi = int(lane.g0[0]) - 5_000, int(lane.g1[-1]) + 5_000
    edges = np.linspace(lo, hi, width + 1).astype(np.int64)
    cells = il.idle_cells(lane, edges)
    assert cells.cause.tolist() == _reference_cells(s, e, c, edges)
    assert int(cells.idle.sum()) == int((e - s).sum())


@pytest.mark.parametrize("name", SCENARIOS)
def test_largest_gaps_of_each_cause_largest_first(case, name):
    t, truth, doc, lane = case(name)
    g, (s, e, c) = _pieces(t, doc)
    per = {}
    for ps, pe, pc in zip(s.tolist(), e.tolist(), c.tolist()):     # the gap each piece lies in
        k = int(np.searchsorted(g.start, ps, side="right")) - 1
        per[pc, k] = per.get((pc, k), 0) + pe - ps
    for cause in range(len(CAUSES)):
        ranked = sorted(((ns, k) for (pc, k), ns in per.items() if pc == cause), key=lambda x: (-x[0], x[1]))
        assert lane.top[cause].tolist() == [k for _, k in ranked][:il.TOP_GAPS]
        assert lane.top_ns[cause].tolist() == [ns for ns, _ in ranked][:il.TOP_GAPS]
        assert int(lane.n_gaps[cause]) == len(ranked)
        for k in lane.top[cause][:5].tolist():
            assert int(lane.gap_split(k)[cause]) == per[cause, k]
            a, b = lane.largest_piece(cause, k)
            assert lane.g0[k] <= a < b <= lane.g1[k]


@pytest.mark.parametrize("name", ("dependency", "sync", "trimmed"))
def test_blocks_of_gaps_give_the_same_row(monkeypatch, case, name):
    """Built a few gaps at a time (the 5M-op path), the row is the one built in one block."""
    t, truth, doc, lane = case(name)
    monkeypatch.setattr(il, "BLOCK_GAPS", 7)
    it = doc["iterations"]
    small = il.build_idle_lane(t, doc["device_id"], it["starts_ns"], it["ends_ns"], it["base_depth"])
    assert len(lane) > 3 * il.BLOCK_GAPS
    for k in range(len(CAUSES)):
        assert small.sets[k].s.tolist() == lane.sets[k].s.tolist()
        assert small.sets[k].cum.tolist() == lane.sets[k].cum.tolist()
        assert small.top[k].tolist() == lane.top[k].tolist() and small.top_ns[k].tolist() == lane.top_ns[k].tolist()
    assert small.n_gaps.tolist() == lane.n_gaps.tolist() and small.total_ns.tolist() == lane.total_ns.tolist()
    assert small.op.tolist() == lane.op.tolist() and small.main == lane.main
    calls = []

    def cancelled():
        calls.append(1)
        return len(calls) > 2
    with pytest.raises(il.Cancelled):
        il.build_idle_lane(t, doc["device_id"], it["starts_ns"], it["ends_ns"], cancelled=cancelled)
    assert len(calls) == 3                       # asked between stages and blocks; stopped at the third


def test_the_top_list_keeps_the_largest_when_there_are_more(monkeypatch, case):
    t, truth, doc, lane = case("dependency")
    monkeypatch.setattr(il, "TOP_GAPS", 5)
    it = doc["iterations"]
    small = il.build_idle_lane(t, doc["device_id"], it["starts_ns"], it["ends_ns"], it["base_depth"])
    dep = CAUSES.index("dependency")
    assert small.top[dep].tolist() == lane.top[dep][:5].tolist()
    monkeypatch.setattr(il, "BLOCK_GAPS", 11)     # each block keeps its own largest, ties included
    blocks = il.build_idle_lane(t, doc["device_id"], it["starts_ns"], it["ends_ns"], it["base_depth"])
    assert [x.tolist() for x in blocks.top] == [x[:5].tolist() for x in lane.top]
    assert int(small.n_gaps[dep]) == int(lane.n_gaps[dep]) > 5


def test_gap_lookup_and_the_phase_of_its_ending_op(case):
    t, truth, doc, lane = case("sync")
    k = len(lane) // 2
    g0, g1 = int(lane.g0[k]), int(lane.g1[k])
    assert lane.gap_at(g0, g0 + 1) == k and lane.gap_at(g1 - 1, g1) == k
    assert lane.gap_at(g1, g1 + 1) in (-1, k + 1) and lane.gap_at(g0 - 10, g0 + 10) == k
    assert sum(lane.gap_split(k).tolist()) == g1 - g0
    op = int(lane.op[k])
    assert int(t.ops.start[op]) == g1                      # the op that ends the gap starts at its end
    assert il.op_phase(t, lane, op) is None or isinstance(il.op_phase(t, lane, op), str)


def test_no_launched_ops_gives_an_empty_row(case):
    t, truth, doc, lane = case("sync")
    empty = il.build_idle_lane(t, 99, doc["iterations"]["starts_ns"], doc["iterations"]["ends_ns"])
    assert len(empty) == 0 and not empty.n_gaps.any()
    assert (il.idle_cells(empty, np.array([0, 10, 20], np.int64)).cause == -1).all()
