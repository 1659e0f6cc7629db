"""Per-op CUDA graph ids (definitions.md §12.2, §12.3): read from Nsight node mode (`graphId` on
kernel rows) and Kineto (`graph id` args), replays keyed by them, and under-recorded replays
flagged, against the generator's own records (fixtures/simulate.py `graph_replays`,
`graph_dropped`; fixtures/truth.py `graph`)."""
from __future__ import annotations

import numpy as np
import pytest

from fixtures import synth
from launchtui.analysis import graphs as gr
from launchtui.analysis.graphs_report import graphs_facts
from launchtui.analysis.record import build_record
from launchtui.analysis.select import Selection
from launchtui.trace.graph_ids import match_rows
from launchtui.trace.load import open_trace
from launchtui.trace.sqlite_columns import Packed

REPLAYS, DROPPED = 4, 3


def _write(tmp_path, fmt, **cfg):
    w = synth.simulate(synth.SynthConfig(**cfg))
    if fmt == "nsys":
        p = synth.write_nsys_sqlite(w, tmp_path / "t.sqlite", variant="modern")
    else:
        p = synth.write_kineto_json(w, tmp_path / "t.json", variant="modern")
    return w, p


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_replays_keyed_by_graph_id_and_short_one_flagged(tmp_path, fmt):
    """Four replays of graph 1, the second missing its last 3 nodes: one graph row (by id, though
    the short replay's op sequence differs), the short replay flagged, the gate closed over it."""
    w, p = _write(tmp_path, fmt, graph_replays=REPLAYS, graph_dropped=DROPPED)
    truth = synth.ground_truth(w)["graph"]
    assert [g["ops"] for g in truth] == [20, 20 - DROPPED, 20, 20]   # the generator's own records
    trace = open_trace(p, use_cache=False)
    g = np.asarray(w.ops["graph_id"])
    assert (trace.op_graph >= 0).sum() == (g >= 0).sum() and set(trace.op_graph[trace.op_graph >= 0].tolist()) == {1}
    rp = gr.replays(trace, Selection())
    assert rp.n_ops.tolist() == [g["ops"] for g in truth]
    assert rp.under.tolist() == [False, True, False, False]
    doc = build_record(trace)["graphs"]
    (row,) = doc["replays"]["graphs"]
    assert doc["replays"]["grouped_by"] == "graph id"
    assert (row["graph_id"], row["replays"], row["under_recorded"]) == (1, REPLAYS, 1)
    assert row["ops_per_replay"] == {"median": 20.0, "min": 20 - DROPPED, "max": 20}
    it = doc["integrity"]
    assert (it["flagged_replays"], it["unrecorded_replays"], it["under_recorded_replays"]) == (1, 0, 1)
    second = int(rp.call[1])   # the generator's second replay (replays in start order)
    assert it["under_recorded_ns"] == [int(trace.api.start[second])]
    # the replays follow the judged steps: flagged and said, the steps still judged (§12.3)
    assert "under-recorded" in it["reason"] and (it["in_iterations"], it["ok"]) == (0, True)
    _, flagged = graphs_facts(trace, Selection())   # what the record's gate scopes
    assert flagged.tolist() == [second]


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_whole_replays_are_not_flagged(tmp_path, fmt):
    w, p = _write(tmp_path, fmt, graph_replays=REPLAYS)
    doc = build_record(open_trace(p, use_cache=False))["graphs"]
    (row,) = doc["replays"]["graphs"]
    assert (row["graph_id"], row["replays"], row["under_recorded"]) == (1, REPLAYS, 0)
    assert doc["integrity"]["ok"] and doc["integrity"]["under_recorded_replays"] == 0


def test_graph_ids_survive_the_model_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _, p = _write(tmp_path, "nsys", graph_replays=2)
    fresh = open_trace(p, use_cache=True).op_graph.copy()
    cached = open_trace(p, use_cache=True).op_graph
    assert (fresh >= 0).sum() == 40 and np.array_equal(fresh, cached)


def test_without_graph_launch_nothing_is_read(tmp_path):
    """A trace with no graph launch holds no graph ids (the query is never run)."""
    from fixtures import idle_cases
    p, _ = idle_cases.write(next(iter(idle_cases.SCENARIOS)), tmp_path / "i.pt.trace.json")
    assert len(open_trace(p, use_cache=False).op_graph) == 0


def _scans(monkeypatch) -> list:
    """(table, {output: expression}) of every column fetch the Nsight reader runs from now on."""
    from launchtui.trace import nsys_sqlite, sqlite_columns
    seen, fetch = [], sqlite_columns.fetch_int_columns

    def counting(con, table, exprs, *args, **kw):
        seen.append((table, dict(exprs)))
        return fetch(con, table, exprs, *args, **kw)
    for module in (nsys_sqlite, sqlite_columns):   # sqlite_columns: the GPU-op tables, in halves or not
        monkeypatch.setattr(module, "fetch_int_columns", counting)
    return seen


@pytest.mark.parametrize("native", ["1", "0"])
def test_graph_and_node_ids_come_from_the_one_gpu_scan(tmp_path, monkeypatch, native):
    """Node mode: graphId (and graphNodeId, read only with a node table) are read by the GPU-op
    tables' own scan (each table scanned once), with either column reader, and every replayed
    kernel gets its graph."""
    monkeypatch.setenv("LAUNCHTUI_NATIVE_READER", native)
    w, p = _write(tmp_path, "nsys", graph_replays=REPLAYS)
    seen = _scans(monkeypatch)
    trace = open_trace(p, use_cache=False)
    gpu = [t for t, _ in seen if t.startswith(("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEM"))]
    assert sorted(gpu) == sorted(set(gpu)) and "CUPTI_ACTIVITY_KIND_KERNEL" in gpu
    kernel = next(e for t, e in seen if t == "CUPTI_ACTIVITY_KIND_KERNEL")
    # graphId rides in the high half of the kernels' correlation-id column, no column of its own
    assert kernel["corr"] == Packed("ifnull(graphId, 0)", "correlationId") and "graph" not in kernel
    assert all(e["corr"] == "correlationId" for t, e in seen if t in gpu and t != "CUPTI_ACTIVITY_KIND_KERNEL")
    # no node table in this export: graphNodeId, which only it resolves, is not read, and no
    # `node` output is scanned at all (not even as NULL: a column of -1 per op)
    assert not any(t.startswith("CUDA_GRAPH") for t, _ in seen)
    assert all("node" not in e for t, e in seen if t in gpu)
    g = np.asarray(w.ops["graph_id"])
    assert (trace.op_graph >= 0).sum() == (g >= 0).sum() == 20 * REPLAYS
    assert set(trace.op_graph[trace.op_graph >= 0].tolist()) == {1} and trace.op_graph.dtype == np.int32
    assert sorted(trace.ops.corr.tolist()) == sorted(w.ops["corr"])   # split back to the ids alone


def test_graph_ids_are_int32_when_they_fit_else_int64_unchanged():
    """op_graph holds 4 bytes per op when every id fits int32; an id past it keeps the column int64
    with every id as read."""
    from launchtui.trace.graph_ids import narrow
    small = np.array([-1, 1, 2**31 - 1, -1], np.int64)
    assert narrow(small).dtype == np.int32 and narrow(small).tolist() == small.tolist()
    big = np.array([-1, 2**31, 5], np.int64)
    assert narrow(big).dtype == np.int64 and narrow(big).tolist() == [-1, 2**31, 5]


@pytest.mark.parametrize("native", ["1", "0"])
def test_graph_ids_past_the_packed_half_are_read_apart(tmp_path, monkeypatch, native):
    """A graphId past 2^31 does not fit the correlation-id column's high half: the kernel table is
    read again with the two apart, every replayed op keeps its id (as int64) and every op its
    correlation id."""
    import sqlite3
    monkeypatch.setenv("LAUNCHTUI_NATIVE_READER", native)
    w, p = _write(tmp_path, "nsys", graph_replays=REPLAYS)
    big = 2**31 + 5
    with sqlite3.connect(p) as con:
        assert con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET graphId = ? WHERE graphId = 1",
                           (big,)).rowcount == 20 * REPLAYS
    con.close()
    trace = open_trace(p, use_cache=False)
    assert trace.op_graph.dtype == np.int64 and (trace.op_graph >= 0).sum() == 20 * REPLAYS
    assert set(trace.op_graph[trace.op_graph >= 0].tolist()) == {big}
    assert sorted(trace.ops.corr.tolist()) == sorted(w.ops["corr"])


def test_without_a_graph_launch_name_the_scan_skips_graph_columns(tmp_path, monkeypatch):
    """No StringIds text names a graph launch: the GPU scan reads no graph column, no op has one."""
    import sqlite3
    _, p = _write(tmp_path, "nsys", graph_replays=0)
    with sqlite3.connect(p) as con:   # the generator writes every API name; Nsight only those used
        assert con.execute("UPDATE StringIds SET value = 'unused' WHERE value LIKE '%GraphLaunch%'").rowcount == 1
    con.close()
    seen = _scans(monkeypatch)
    trace = open_trace(p, use_cache=False)
    kernel = [names for t, names in seen if t == "CUPTI_ACTIVITY_KIND_KERNEL"]
    assert len(kernel) == 1 and "graph" not in kernel[0] and "node" not in kernel[0]
    assert len(trace.op_graph) == 0 and len(trace.op_node) == 0


def test_match_rows_pairs_equal_keys_only():
    a = (np.array([5, 1, 3, 3, 9]), np.array([1, 1, 2, 4, 0]))
    b = (np.array([3, 1, 3, 7]), np.array([4, 1, 2, 0]))
    assert match_rows(a, b).tolist() == [-1, 1, 2, 0, -1]


def test_graph_level_replays_are_read_as_spans(tmp_path):
    """Nsight graph-level mode (the generator's `graph_level` writer option): no node kernels, one
    GRAPH_TRACE row per launch. Each is a replay with its GPU span and no ops, joined to its call;
    its span is GPU busy (tests/test_graph_busy.py), so the gate does not flag it."""
    w = synth.simulate(synth.SynthConfig(graph_replays=3))
    p = synth.write_nsys_sqlite(w, tmp_path / "g.sqlite", variant="modern", graph_level=True)
    truth = synth.ground_truth(w)["graph"]
    trace = open_trace(p, use_cache=False)
    assert len(trace.op_graph) == 0 and len(trace.graph_spans) == 3
    assert trace.api.corr[trace.graph_spans.api].tolist() == [g["correlation_id"] for g in truth]
    doc = build_record(trace)["graphs"]
    (row,) = doc["replays"]["graphs"]
    assert (row["graph_id"], row["replays"], row["graph_level"], row["ops_per_replay"]["max"]) == (1, 3, True, 0)
    spans = sorted((g["last_op_end_ns"] - g["first_op_start_ns"]) / 1e3 for g in truth)
    assert row["span_us"] == {"median": round(spans[1], 3), "min": round(spans[0], 3), "max": round(spans[2], 3)}
    assert row["busy_us"] == row["span_us"] and row["first_replay_ns"] == truth[0]["api_start_ns"]
    it = doc["integrity"]
    assert (it["graph_level_replays"], it["untimed_replays"], it["unrecorded_replays"], it["flagged_replays"],
            it["ok"], it["reason"]) == (3, 0, 0, 0, True, None)


def test_graph_level_spans_survive_the_model_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    w = synth.simulate(synth.SynthConfig(graph_replays=2))
    p = synth.write_nsys_sqlite(w, tmp_path / "g.sqlite", variant="modern", graph_level=True)
    a = open_trace(p, use_cache=True).graph_spans
    a = {k: getattr(a, k).copy() for k in ("start", "end", "api", "graph")}
    b = open_trace(p, use_cache=True).graph_spans
    assert len(a["start"]) == 2 and all(np.array_equal(a[k], getattr(b, k)) for k in a)


def test_kineto_graph_id_zero_or_malformed_reads_as_none(tmp_path):
    """0 (what Kineto writes on a plain kernel) and a value that is no id read as -1; the op stays."""
    import json
    k = {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "dur": 5}
    ev = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
           "args": {"correlation": 7}}]
    for i, g in enumerate(([1, 2], 5, 0)):
        ev.append({**k, "name": f"k{i}", "ts": 20 + 10 * i, "args": {"correlation": 7, "device": 0, "stream": 7,
                                                                     "graph id": g}})
    p = tmp_path / "g.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    t = open_trace(p, use_cache=False)
    assert t.op_graph.tolist() == [-1, 5, -1] and not t.source.extra.get("skipped")
