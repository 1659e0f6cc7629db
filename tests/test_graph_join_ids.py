"""The capture ↔ replay join by graph node id (definitions.md §12.6, issue 21): Nsight node-mode
recordings from fixtures/graph_node_cases.py, whose truth is the captured call the simulation made
each replayed kernel from; the node lineage reader (trace/graph_nodes.py) and its counts by reason."""
from __future__ import annotations

import json

import numpy as np
import pytest

from fixtures import graph_join_cases as gjc
from fixtures import graph_node_cases as gnc
from launchtui.analysis import graphs_join as gj
from launchtui.analysis.graphs_join_report import join_document
from launchtui.cli import main
from launchtui.trace import graph_nodes as gn
from launchtui.trace.load import open_trace


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return gjc.memo_writer(gnc.write, tmp_path_factory.mktemp)


def _join(cap, ex):
    et = open_trace(ex, use_cache=False)
    ct = et if cap == ex else open_trace(cap, use_cache=False)
    j = gj.join(et, ct)
    j.capture_path = "capture.sqlite"
    return et, j


def _sources(j) -> list:
    """Per replayed op, in replay then node order: (capture, node position, range) or None."""
    cap = j.captured
    out = []
    for s in j.source.tolist():
        if s < 0:
            out.append(None)
        else:
            c = int(cap.capture[s])
            out.append((c, s - int(cap.bounds[c]), cap.range[s]))
    return out


def test_one_recording_matches_every_replayed_kernel_by_node_id(files):
    path, _, truth = files("nodes")
    et, j = _join(path, path)
    assert _sources(j) == gnc.expected_sources(truth)
    d = join_document(et, j)
    assert (d["matched_ops"], d["replayed_ops"], d["matched_share"]) == (75, 75, 1.0)
    assert d["matched_by"] == {gj.BY_NODE_ID: 75} and d["unmatched"] == {}
    assert d["node_ids"] == {"used": True, "why": "", "replayed_ops_with_id": 75, "captured_calls_with_id": 25,
                             "matched_ops": 75, "unresolved": {}}
    # the three identical pieces are three graphs, each from its own capture
    pieces = [g for g in d["per_graph"] if g["first_op"] == "qkv_gemm"]
    assert sorted(g["captures"] for g in pieces) == [[2], [3], [4]]
    # lineage: 25 creations; 25 clones at instantiation plus the tail's 4 intermediate ones
    assert et.source.extra["graph_nodes"] == {"creation_rows": 25, "repeated_creation_rows": 0, "clone_rows": 29,
                                              "calls_with_node": 25,
                                              "replayed_ops_with_node": 75, "unresolved": {}}


@pytest.mark.parametrize("shuffle, renumber", [(7, False), (None, True), (3, True)])
def test_any_row_order_and_id_numbering_give_the_same_join(files, shuffle, renumber):
    base, _, truth = files("nodes")
    ref = join_document(*_join(base, base))
    path, _, _ = files("nodes", shuffle, renumber)
    et, j = _join(path, path)
    assert _sources(j) == gnc.expected_sources(truth)
    assert join_document(et, j) == ref


def test_identical_kernel_sequences_are_told_apart_only_by_ids(files):
    """The pieces replay in another order each step; without ids (another recording), the
    kernel-based rule pairs them in capture order: every piece replay of steps 2 and 3 is wrong."""
    cap, ex, truth = files("split")
    exp = gnc.expected_sources(truth)
    _, by_ids = _join(ex, ex)
    et, fallback = _join(cap, ex)
    assert _sources(by_ids) == exp
    got = _sources(fallback)
    wrong = [i for i, (a, b) in enumerate(zip(got, exp)) if a != b]
    assert len(wrong) == 2 * 3 * len(gjc.PIECE) == 36
    assert {exp[i][2] for i in wrong} == {"piece_1", "piece_2", "piece_3"}
    d = join_document(et, fallback)
    assert d["matched_by"] == {gj.BY_COUNT: 75}   # Nsight's captured calls name no kernel


def test_another_recording_never_uses_ids_and_says_why(files, capsys):
    cap, ex, _ = files("split")
    rc = main(["report", str(ex), "--capture", str(cap), "--json", "--no-cache"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    ids = json.loads(out)["graph_join"]["node_ids"]
    assert ids["used"] is False and ids["matched_ops"] == 0
    assert ids["why"].startswith("the capture trace is another recording")
    assert (ids["replayed_ops_with_id"], ids["captured_calls_with_id"]) == (75, 25)   # present, yet not trusted
    rc = main(["report", str(ex), "--capture", str(cap), "--no-cache"])
    out, _ = capsys.readouterr()
    assert "node ids not used: the capture trace is another recording" in out


def test_missing_lineage_rows_are_counted_by_reason(files, capsys):
    path, _, truth = files("lost")
    et, j = _join(path, path)
    d = join_document(et, j)
    lost = truth["lost"]
    assert (lost["no_creation_ops"], lost["outside_call_ops"]) == (12, 3)
    assert d["node_ids"]["unresolved"] == {gn.U_NO_CREATION: 12, gn.U_OUTSIDE: 3}
    # the head's replays pair by the ids they have; its node created outside a call stays unmatched
    assert d["unmatched"] == {gj.REASONS[gj.R_NODE_UNRESOLVED]: 3}
    # the tail has no creation row at all: the kernel rules pair it, correctly (a unique node count)
    assert d["matched_by"] == {gj.BY_NODE_ID: 60, gj.BY_COUNT: 12}
    exp = gnc.expected_sources(truth)
    got = _sources(j)
    assert [g for g, e in zip(got, exp) if g != e] == [None] * 3
    assert d["matched_ops"] + sum(d["unmatched"].values()) == d["replayed_ops"] == 75
    rc = main(["report", str(path), "--capture", str(path), "--no-cache"])
    out, _ = capsys.readouterr()
    assert rc == 0 and f"node ids unresolved: 12 {gn.U_NO_CREATION}" in out
    assert "matched 72 of 75 replayed ops (96.0%), 4 of 5 graphs, 15 of 15 replays (60 by graph node id, 12 by " \
           "node count)" in out


def test_node_ids_survive_the_model_cache(files, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path, _, _ = files("nodes")
    fresh = open_trace(path, use_cache=True)
    a, b = fresh.op_node.copy(), fresh.api_node.copy()
    cached = open_trace(path, use_cache=True)
    assert (a >= 0).sum() == 75 and (b >= 0).sum() == 25
    assert np.array_equal(a, cached.op_node) and np.array_equal(b, cached.api_node)


def test_kineto_capture_has_no_ids_and_nothing_changes(tmp_path):
    """CUDA Kineto may put `graph node id` on replayed kernels; its capture side records none, so the
    kernel rules alone run, as before."""
    cap, ex, _ = gjc.write("full", tmp_path)
    et = open_trace(ex, use_cache=False)
    d = join_document(et, gj.join(et, open_trace(cap, use_cache=False)))
    assert d["matched_by"] == {gj.BY_SEQUENCE: 75}
    assert d["node_ids"]["used"] is False and d["node_ids"]["replayed_ops_with_id"] == 0
    assert d["method"].startswith("kernel sequence: node ids not used")


def test_nested_calls_and_looping_chains_are_counted_not_guessed(files):
    path, _, truth = files("tangled")
    et, j = _join(path, path)
    d = join_document(et, j)
    assert (truth["lost"]["several_calls_ops"], truth["lost"]["cycle_ops"]) == (3, 3)
    assert d["node_ids"]["unresolved"] == {gn.U_SEVERAL: 3, gn.U_CYCLE: 3}
    assert d["matched_by"] == {gj.BY_NODE_ID: 69} and d["unmatched"] == {gj.REASONS[gj.R_NODE_UNRESOLVED]: 6}
    exp = gnc.expected_sources(truth)
    assert [g for g, e in zip(_sources(j), exp) if g != e] == [None] * 6   # never a wrong label


def test_two_exports_of_one_session_share_ids(files, tmp_path):
    """Another path, the same session start to the ns: one recording, ids trusted."""
    path, _, truth = files("nodes")
    copy = tmp_path / "again.sqlite"
    copy.write_bytes(path.read_bytes())
    et, j = _join(copy, path)
    assert j.node_ids["used"] is True and _sources(j) == gnc.expected_sources(truth)


def test_node_rows_in_the_old_graph_events_table_are_read(files, tmp_path):
    """Up to Nsight 2022.4 the node rows were in CUDA_GRAPH_EVENTS, with the same columns."""
    import sqlite3
    path, _, truth = files("nodes")
    old = tmp_path / "old.sqlite"
    old.write_bytes(path.read_bytes())
    con = sqlite3.connect(old)
    con.executescript("DROP TABLE CUDA_GRAPH_EVENTS; ALTER TABLE CUDA_GRAPH_NODE_EVENTS RENAME TO CUDA_GRAPH_EVENTS;")
    con.close()
    et, j = _join(old, old)
    assert j.node_ids["matched_ops"] == 75 and _sources(j) == gnc.expected_sources(truth)


def test_record_and_api_say_how_many_matched_by_id(files, capsys):
    import launchtui
    path, _, _ = files("nodes")
    rc = main(["record", str(path), "--capture", str(path)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert ("15 of 15 replays (75 by graph node id); node ids: 75 of 75 replayed ops carry one, 75 matched by it "
            "(25 captured calls created a node).") in out
    df = launchtui.open(path, capture=path, use_cache=False).captured_from()
    assert len(df) == 75 and set(df["by"]) == {gj.BY_NODE_ID} and df.attrs["matched_share"] == 1.0


def test_a_repeated_creation_row_never_moves_a_node(files, tmp_path):
    """A later row with a captured node's id and no original (e.g. a lifecycle row of another kind)
    inside another call: the earliest creation stands, the repeat is counted."""
    import sqlite3
    path, _, truth = files("nodes")
    again = tmp_path / "again.sqlite"
    again.write_bytes(path.read_bytes())
    con = sqlite3.connect(again)
    node, gtid = con.execute("SELECT graphNodeId, globalTid FROM CUDA_GRAPH_NODE_EVENTS WHERE originalGraphNodeId "
                             "IS NULL ORDER BY start LIMIT 1").fetchone()
    start, end = con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY start DESC LIMIT 1").fetchone()
    con.execute("INSERT INTO CUDA_GRAPH_NODE_EVENTS (start, end, eventClass, globalTid, nameId, graphNodeId) "
                "VALUES (?, ?, 0, ?, 1, ?)", ((start + end) // 2, (start + end) // 2, gtid, node))
    con.commit()
    con.close()
    et, j = _join(again, again)
    assert et.source.extra["graph_nodes"]["repeated_creation_rows"] == 1
    assert _sources(j) == gnc.expected_sources(truth)
