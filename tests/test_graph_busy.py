"""Nsight graph-level replays count as GPU busy (docs/definitions.md §12.2, §12.3; analysis/graph_busy.py).

One simulated run (fixtures.synth: 12 replays of a 20-kernel graph under the NVTX range
`cuda_graph_replay`, judged as the iteration) written twice: node mode (a kernel row per node) and
graph-level mode (one GRAPH_TRACE row per replay, no node rows). The truth is computed here from
the simulation's own op table, never through launchtui: busy = the union of the device's ops (node
mode), or of its non-graph ops and each replay's span [first node start, last node end) (graph-level
mode), inside the iteration (the range, through the last end of the device's ops it launched).
"""
from __future__ import annotations

import json
import shutil
import sqlite3

import numpy as np
import pytest

from fixtures import synth
from fixtures.model import KIND_KERNEL, file_view
from launchtui.analysis.graph_busy import SPAN_OP, busy_trace
from launchtui.analysis.record import build_record
from launchtui.analysis.record_options import RecordOptions
from launchtui.trace.load import open_trace
from launchtui.trace.model import GraphSpans

RANGE = "cuda_graph_replay"
REPLAYS = 12
OPT = RecordOptions(iter_name=RANGE)


def _config(back_to_back: bool):
    return synth.SynthConfig(graph_replays=REPLAYS, iterations=2, params=8, layers=2, graph_back_to_back=back_to_back)


@pytest.fixture(scope="module", params=[False, True], ids=["node_gaps", "back_to_back"])
def run(request, tmp_path_factory):
    """(truth, node-mode path, graph-level path) of one run."""
    w = synth.simulate(_config(request.param))
    d = tmp_path_factory.mktemp("gbusy")
    node = synth.write_nsys_sqlite(w, d / "node.sqlite", variant="modern")
    level = synth.write_nsys_sqlite(w, d / "level.sqlite", variant="modern", graph_level=True)
    return _truth(file_view(w, "nsys", "modern")), node, level


def _union_ns(s: np.ndarray, e: np.ndarray, lo: int, hi: int) -> int:
    """Measure of the union of [s, e) inside [lo, hi), by a sweep over the sorted intervals."""
    s, e = np.clip(s, lo, hi), np.clip(e, lo, hi)
    o = np.argsort(s, kind="stable")
    total, cur_s, cur_e = 0, None, None
    for a, b in zip(s[o].tolist(), e[o].tolist()):   # a few hundred intervals
        if cur_e is None or a > cur_e:
            total += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    return total + (0 if cur_e is None else cur_e - cur_s)


def _truth(v) -> dict:
    O, A, R = v.ops, v.api, v.ranges
    graph = (O["kind"] == KIND_KERNEL) & (O["graph_id"] >= 0)
    dev = int(O["device"][graph][0])
    r = v.range_names.index(RANGE)
    k = int(np.flatnonzero(R["name"] == r)[0])
    lo, hi = int(R["start"][k]), int(R["end"][k])
    on = O["device"] == dev
    launched = on & (O["api"] >= 0)
    call_start = A["start"][O["api"][launched]]
    inside = (call_start >= lo) & (call_start < hi)
    hi = max(hi, int(O["end"][launched][inside].max()))
    calls = np.unique(O["api"][graph])
    span_s = np.array([O["start"][graph & (O["api"] == a)].min() for a in calls.tolist()])
    span_e = np.array([O["end"][graph & (O["api"] == a)].max() for a in calls.tolist()])
    plain = on & ~graph
    node_busy = _union_ns(O["start"][on], O["end"][on], lo, hi)
    level_busy = _union_ns(np.r_[O["start"][plain], span_s], np.r_[O["end"][plain], span_e], lo, hi)
    nodes_in_spans = _union_ns(O["start"][graph], O["end"][graph], int(span_s.min()), int(span_e.max()))
    return {"device": dev, "window": (lo, hi), "node_busy_ns": node_busy, "level_busy_ns": level_busy,
            "node_gaps_ns": int((span_e - span_s).sum()) - nodes_in_spans}


def test_graph_level_busy_matches_the_truth_and_node_mode(run):
    truth, node, level = run
    dn, dl = build_record(open_trace(node, use_cache=False), opt=OPT), build_record(open_trace(level, use_cache=False), opt=OPT)
    for d in (dn, dl):
        assert d["device_id"] == truth["device"]
        assert (d["iterations"]["starts_ns"], d["iterations"]["ends_ns"]) == ([truth["window"][0]], [truth["window"][1]])
    assert dn["per_iteration"]["gpu_busy_ms"]["median"] == round(truth["node_busy_ns"] / 1e6, 6)
    assert dl["per_iteration"]["gpu_busy_ms"]["median"] == round(truth["level_busy_ns"] / 1e6, 6)
    # the span covers its nodes and the idle between them: node-mode busy + node gaps
    assert truth["level_busy_ns"] == truth["node_busy_ns"] + truth["node_gaps_ns"]
    width = truth["window"][1] - truth["window"][0]
    idle_n, idle_l = (d["idle_by_cause"]["idle_share"] for d in (dn, dl))
    assert idle_l == round(1 - truth["level_busy_ns"] / width, 4) and idle_l <= idle_n
    it = dl["graphs"]["integrity"]
    assert (it["ok"], it["flagged_replays"], it["graph_level_replays"], it["untimed_replays"]) == (True, 0, REPLAYS, 0)
    assert dl["limits"]["graph_level"]["replays"] == REPLAYS and "graph_level" not in dn["limits"]
    assert not dl["conclusion"].startswith("cannot judge")
    if truth["node_gaps_ns"] == 0:   # nodes back to back: the two modes read the same idle, by cause
        assert dl["idle_by_cause"]["share"] == dn["idle_by_cause"]["share"]
        assert dl["idle_by_cause"]["idle_share"] == dn["idle_by_cause"]["idle_share"]
        assert dl["launch_bound"] == dn["launch_bound"] and dl["launch_bound_level"] == dn["launch_bound_level"]
    else:
        assert truth["node_gaps_ns"] > 0 and idle_l < idle_n


def test_the_spans_fill_what_would_read_as_idle(run):
    """Without its spans the same graph-level trace reads the replays' time as GPU idle (and the
    launches as unrecorded); with them that time is busy."""
    truth, _, level = run
    blind = open_trace(level, use_cache=False)
    blind.graph_spans = GraphSpans.empty()
    d0 = build_record(blind, opt=OPT)
    d1 = build_record(open_trace(level, use_cache=False), opt=OPT)
    assert d0["per_iteration"]["gpu_busy_ms"]["median"] == 0 and d0["idle_by_cause"]["idle_share"] == 1.0
    assert d0["graphs"]["integrity"]["unrecorded_replays"] == REPLAYS and d0["conclusion"].startswith("cannot judge")
    assert d1["idle_by_cause"]["idle_share"] < 0.1
    assert d1["per_iteration"]["gpu_busy_ms"]["median"] == round(truth["level_busy_ns"] / 1e6, 6)


def _rewrite(src, dst, sql: str):
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    con.execute(sql)
    con.commit()
    con.close()
    return dst


FIRST_ROW = "(SELECT rowid FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE ORDER BY start LIMIT 1)"


def test_an_untimed_replay_stays_gated_and_says_why(run, tmp_path):
    """A GRAPH_TRACE row with start = end = 0 (CUPTI collected no timing): its replay is not busy,
    it is counted, and inside the judged iteration it stops the verdict, naming the reason."""
    _, _, level = run
    p = _rewrite(level, tmp_path / "untimed.sqlite",
                 f"UPDATE CUPTI_ACTIVITY_KIND_GRAPH_TRACE SET start = 0, end = 0 WHERE rowid = {FIRST_ROW}")
    trace = open_trace(p, use_cache=False)
    assert len(trace.graph_spans) == REPLAYS and len(busy_trace(trace).ops) == len(trace.ops) + REPLAYS - 1
    d = build_record(trace, opt=OPT)
    it = d["graphs"]["integrity"]
    assert (it["ok"], it["untimed_replays"], it["unrecorded_replays"], it["graph_level_replays"], it["in_iterations"]) \
        == (False, 1, 1, REPLAYS - 1, 1)
    assert it["reason"] == (f"1 of {REPLAYS} graph launches have a graph-level record without timing (CUPTI did not "
                            "collect it): their GPU time is unknown: the GPU idle around them is not measurable")
    assert d["conclusion"] == f"cannot judge: GPU idle not measurable here: {it['reason']}"
    lim = d["limits"]["graph_level"]
    assert (lim["replays"], lim["untimed"]) == (REPLAYS - 1, 1) and "no timing" in lim["note"]


def test_a_launch_with_neither_ops_nor_span_stays_gated(run, tmp_path):
    _, _, level = run
    p = _rewrite(level, tmp_path / "lost.sqlite", f"DELETE FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE WHERE rowid = {FIRST_ROW}")
    it = build_record(open_trace(p, use_cache=False), opt=OPT)["graphs"]["integrity"]
    assert (it["ok"], it["untimed_replays"], it["unrecorded_replays"], it["graph_level_replays"]) == (False, 0, 1, REPLAYS - 1)
    assert it["reason"].startswith(f"1 of {REPLAYS} graph launches recorded no GPU op (Nsight traced the graphs at "
                                   "graph level (--cuda-graph-trace=graph) and the launch has no graph-level record")


def test_the_same_record_in_any_row_order(run, tmp_path):
    _, _, level = run
    p = tmp_path / "shuffled.sqlite"
    shutil.copyfile(level, p)
    synth.relayout_in_place(p, shuffle=11, permute_ids=5)
    a, b = (build_record(open_trace(x, use_cache=False), opt=OPT) for x in (level, p))
    for d in (a, b):
        d.pop("source")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_the_view_adds_one_op_per_timed_span_in_start_order(run):
    _, node, level = run
    plain = open_trace(node, use_cache=False)
    assert busy_trace(plain) is plain                      # no span: the trace itself, nothing built
    trace = open_trace(level, use_cache=False)
    view = busy_trace(trace)
    assert busy_trace(trace) is view and view.api is trace.api
    ops, gs = view.ops, trace.graph_spans
    span = ops.name == trace.strings.lookup(SPAN_OP)
    assert len(ops) == len(trace.ops) + len(gs) and int(span.sum()) == len(gs)
    assert (np.diff(ops.start) >= 0).all()
    assert ops.start[span].tolist() == gs.start.tolist() and ops.end[span].tolist() == gs.end.tolist()
    assert ops.api[span].tolist() == gs.api.tolist() and np.array_equal(ops.start[~span], trace.ops.start)


def test_the_idle_row_measures_what_the_record_does(run):
    """The timeline's idle row reads the same view: its idle inside the iteration is the record's,
    and a gap that ends where a replay starts names that replay's op and its graph-launch call."""
    from launchtui.analysis.idle_lane import build_idle_lane
    truth, _, level = run
    trace = open_trace(level, use_cache=False)
    d = build_record(trace, opt=OPT)
    st, en = (np.array(d["iterations"][k], np.int64) for k in ("starts_ns", "ends_ns"))
    lane = build_idle_lane(trace, truth["device"], st, en)
    idle = sum(int(s.busy(np.r_[st, en])[0]) for s in lane.sets)
    assert idle == int(en[0] - st[0]) - round(truth["level_busy_ns"])
    view = busy_trace(trace)
    ended = lane.op[lane.op >= 0]
    by_span = ended[view.ops.name[ended] == trace.strings.lookup(SPAN_OP)]
    assert len(by_span) and set(view.ops.api[by_span].tolist()) <= set(trace.graph_spans.api.tolist())
