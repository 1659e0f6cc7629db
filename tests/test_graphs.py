"""CUDA / HIP graphs (analysis/graphs.py, graphs_report.py; definitions.md §12, issue 21): captures
counted per graph, a capture trace's own page, the replay table against the generator's truth
(fixtures/graph_cases.py), the integrity gate, and the shared vLLM capture / execution pair."""
from __future__ import annotations

import pytest

from fixtures import graph_cases as gc
from launchtui.analysis.record import build_record
from launchtui.analysis.record_markdown import render_markdown
from launchtui.trace.load import open_trace
from tests.conftest import sample, sample_model


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("graph_cases")
    out = {}

    def get(name, shuffle=None):
        if (name, shuffle) not in out:
            out[name, shuffle] = gc.write(name, d / f"{name}.{shuffle}.pt.trace.json", shuffle)
        return out[name, shuffle]
    return get


def _record(path):
    return build_record(open_trace(path, use_cache=False))


def test_capture_trace_gets_the_capture_page(files):
    path, truth = files("capture_trace")
    doc = _record(path)
    c = doc["graphs"]["capture"]
    assert c["graphs"] == truth["graphs"] == 6
    assert c["captured_launches"] == truth["captured"] == 60
    assert c["launch_calls"] == truth["captured"] + truth["eager_launches"]
    assert c["capture_trace"] is True and c["instantiated"] == 6 and c["eager_in_capture"] == 0
    assert {b["batch_size"]: (b["graphs"], b["captured_launches"]) for b in c["by_batch"]} == {
        bs: (v["graphs"], v["captured"]) for bs, v in truth["by_batch"].items()}
    assert [r["captured_launches"] for r in c["captures"]] == [10, 8, 12, 10, 8, 12]
    # three nodes of the fifth capture are launched by a second thread of the process
    assert [r["other_thread"] for r in c["captures"]] == [0, 0, 0, 0, 3, 0]
    # no steady-state verdict, no iterations
    assert doc["launch_bound_level"] is None and doc["launch_bound"] is None and doc["iterations"] is None
    assert doc["conclusion"] == ("graph-capture trace: 60 launches captured into 6 graphs (batch size 256: 30 "
                                 "launches in 3 graphs, batch size 512: 30 launches in 3 graphs); runtime launch "
                                 "overhead cannot be judged here; profile the replay")
    md = render_markdown(doc)
    assert md.splitlines()[2] == f"**Verdict:** {doc['conclusion']}"
    assert "| 1 | 4243 | 10 | 0 | capture_512_PIECEWISE | 512 |" in md
    assert "What the GPU waited for" not in md


def test_replay_table_matches_the_generator(files):
    path, truth = files("replays")
    doc = _record(path)
    g = doc["graphs"]
    rows = g["replays"]["graphs"]
    assert [r["first_op"] for r in rows] == ["gemm_a", "ln_b0"]
    for row, key in zip(rows, ("A", "B")):
        t = gc.graph_truth(truth["replays"][key])
        assert row["replays"] == t["replays"] == 6
        assert row["ops_per_replay"] == {"median": t["ops"], "min": t["ops"], "max": t["ops"]}
        assert row["nodes_per_call"] == t["ops"]
        for k in ("span_us", "busy_us", "node_gaps_us", "launch_api_us"):
            assert row[k] == t[k], k
        assert row["max_node_gap_us"] == gc.NODE_GAP_NS / 1e3
    assert g["replays"]["graph_launches"] == 12 and g["replays"]["replayed_ops"] == 6 * (20 + 8)
    assert g["eager"]["eager_launch_calls"] == 24 + truth["eager_in_steps"]
    assert g["integrity"] == {"flagged_replays": 0, "unrecorded_replays": 0, "unrecorded_ns": [],
                              "in_iterations": None, "ok": True, "reason": None}
    assert g["capture"]["graphs"] == 0 and g["capture_line"] is None
    assert doc["launch_bound_level"] is not None   # a replay trace is judged as usual
    e = g["eager_per_iteration"]
    assert e["iterations"] == 6 and e["eager_launches"] == {"median": 5.0, "min": 5, "max": 5}
    assert e["graph_launches"]["median"] == 2 and e["replayed_ops"] == {"median": 28.0, "min": 28, "max": 28}
    assert e["graphed_share"] == round(28 / 33, 4)
    assert [(k["kernel_name"], k["launches_per_iteration"]) for k in e["eager_kernels"]] == [
        ("embed_kernel", 3.0), ("sampler_kernel", 2.0)]
    assert "| 1 | `gemm_a` | 6 | 20 (20–20) |" in render_markdown(doc)


def test_unrecorded_replay_is_flagged_and_idle_not_measurable(files):
    path, truth = files("unrecorded_replay")
    doc = _record(path)
    it = doc["graphs"]["integrity"]
    assert it["unrecorded_replays"] == 1 and not it["ok"]
    a = [r for r in truth["replays"]["A"] if not r["recorded"]]
    assert it["unrecorded_ns"] == [a[0]["start_ns"]] and it["in_iterations"] == 1
    assert doc["graphs"]["replays"]["graphs"][0]["replays"] == 5
    assert doc["launch_bound_level"] is None
    assert doc["conclusion"].startswith("cannot judge: GPU idle not measurable here: 1 of 12 graph launches "
                                        "recorded no GPU op")


@pytest.mark.parametrize("name", ["capture_trace", "replays", "unrecorded_replay"])
def test_same_answer_in_any_event_order(files, name):
    a = _record(files(name)[0])["graphs"]
    b = _record(files(name, shuffle=7)[0])["graphs"]
    assert a == b


def test_trace_without_graphs_has_no_graphs_key(tmp_path):
    from fixtures import idle_cases as ic
    path, _ = ic.write("host_bound", tmp_path / "h.pt.trace.json")
    assert "graphs" not in _record(path)


@pytest.mark.samples
def test_vllm_capture_trace():
    doc = _record(sample("kineto/mi300x_vllm_piecewise_graph_capture.pt.trace.json.gz"))
    c = doc["graphs"]["capture"]
    assert (c["graphs"], c["captured_launches"], c["launch_calls"], c["instantiated"]) == (25, 361, 460, 25)
    assert [r["captured_launches"] for r in c["captures"]] == [4] + [15] * 23 + [12]
    assert c["by_batch"] == [{"batch_size": 8192, "label": "capture_8192_PIECEWISE", "graphs": 25,
                              "captured_launches": 361}]
    assert doc["launch_bound_level"] is None and doc["iterations"] is None
    assert doc["conclusion"].startswith("graph-capture trace: 361 launches captured into 25 graphs (batch size "
                                        "8192: 361 launches in 25 graphs)")


@pytest.mark.samples
def test_vllm_execution_replays():
    doc = _record(sample("kineto/vllm_graph_execution.json.gz"))
    r = doc["graphs"]["replays"]
    assert (r["graph_launches"], r["replayed_ops"]) == (25, 361)
    assert [(x["replays"], x["ops_per_replay"]["median"]) for x in r["graphs"]] == [(1, 4), (23, 15), (1, 12)]
    assert doc["graphs"]["eager"]["eager_launch_calls"] == 52
    assert doc["graphs"]["integrity"]["ok"]
    assert doc["launch_bound_level"] == "not launch-bound"   # the expert's reading stands
    e = doc["graphs"]["eager_per_iteration"]
    assert (e["eager_launches"]["median"], e["graph_launches"]["median"], e["replayed_ops"]["median"]) == (52, 25, 361)
    top = {k["kernel_name"]: (k["launches"], k["site"]) for k in e["eager_kernels"][:2]}
    assert top == {"kernel_unified_attention_2d": (24, "aiter/ops/triton/attention/unified_attention.py:103 "
                                                       "unified_attention"),
                   "reshape_and_cache_flash_kernel": (24, "vllm/_custom_ops.py:2519 reshape_and_cache_flash")}


@pytest.mark.samples
@pytest.mark.parametrize("name,captured,ops", [("xdit_flux1__baseline__rank0.json.gz", 994, 993),
                                               ("xdit_flux1__aiter_sage__rank0.json.gz", 1567, 1566)])
def test_xdit_capture_and_replay(name, captured, ops):
    """Eager warm-up steps, one capture, one replay: most launched work ran, so the eager steps are
    judged, and their periods lie before the capture."""
    doc = _record(sample(f"kineto/{name}"))
    g = doc["graphs"]
    assert g["capture"]["captured_launches"] == captured and g["capture"]["graphs"] == 1
    assert not g["capture"]["capture_trace"] and g["capture"]["captured_share"] < 0.35
    assert g["replays"]["graph_launches"] == 1 and g["replays"]["replayed_ops"] == ops
    assert doc["iterations"]["ends_ns"][-1] <= g["capture"]["captures"][0]["start_ns"]
    assert doc["launch_bound_level"] is not None


def test_unrecorded_replay_outside_the_steps_does_not_stop_the_verdict(tmp_path):
    """The generator's scenario keeps its graph launch (after the steps) with no kernels: flagged
    and said, but the steps are still judged."""
    from fixtures import record_cases as rc
    from fixtures import synth
    p = synth.write_nsys_sqlite(rc.workload(rc.SCENARIOS["burst_in_step"]), tmp_path / "b.sqlite", variant="modern")
    doc = _record(p)
    it = doc["graphs"]["integrity"]
    assert (it["unrecorded_replays"], it["in_iterations"], it["ok"]) == (1, 0, True)
    assert it["reason"].endswith("none lies inside the judged iterations")
    assert doc["launch_bound_level"] == "launch-bound"


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_generator_graph_replay_in_node_mode(tmp_path, fmt):
    """The default workload replays one 20-kernel graph (Nsight node mode: every node a kernel row
    with the launch's correlation id); the replay's figures come from the workload's own ops."""
    import numpy as np
    from fixtures import synth
    w = synth.simulate()
    o, a = w.ops, w.api
    g = np.asarray(o["graph_id"]) >= 0
    start, end = np.asarray(o["start"])[g], np.asarray(o["end"])[g]
    order = np.argsort(start)
    start, end = start[order], end[order]
    busy = int((end - start).sum())          # the nodes run one after another on one stream
    call = int(np.asarray(o["api"])[g][0])
    api_ns = int(a["end"][call] - a["start"][call])
    writer = synth.write_nsys_sqlite if fmt == "nsys" else synth.write_kineto_json
    p = writer(w, tmp_path / ("t.sqlite" if fmt == "nsys" else "t.json"), variant="modern")
    doc = _record(p)
    (row,) = doc["graphs"]["replays"]["graphs"]
    assert (row["replays"], row["ops_per_replay"]["median"]) == (1, int(g.sum()))
    assert row["span_us"]["median"] == round(int(end.max() - start.min()) / 1e3, 3)
    assert row["busy_us"]["median"] == round(busy / 1e3, 3)
    assert row["launch_api_us"]["median"] == round(api_ns / 1e3, 3)
    assert doc["graphs"]["integrity"]["ok"] and doc["graphs"]["capture"]["graphs"] == 0


def test_graphed_step_is_judged_not_too_little(tmp_path):
    """The generator's eager -> graphed pair: the after side launches 2 calls per step, one a graph
    launch replaying 481 ops; that is activity to judge (definitions §V2), and the GPU is busy."""
    from fixtures import pairs
    _, after = pairs.write_pair(tmp_path, "graphs")
    doc = _record(after)
    assert "too_little" not in doc and doc["launch_bound_level"] == "not launch-bound"
    assert doc["per_iteration"]["launches"]["median"] == 2
    (g, _) = doc["graphs"]["replays"]["graphs"][:2]
    assert (g["replays"], g["ops_per_replay"]["median"]) == (8, 481)
    assert doc["graphs"]["eager_per_iteration"]["graphed_share"] > 0.99


@pytest.mark.samples
def test_xdit_compiled_graph_range_is_a_capture_window():
    """`--nvtx '## Call CompiledFxGraph'` on xdit: one window holding the capture and one replay.
    Half the launched work is captured (994 of 1,989) and the capture covers 70 % of the window:
    its GPU idle is the host capturing, so it gets the capture page, not 'host stalls'."""
    import numpy as np
    from launchtui.analysis.select import range_selection
    t = sample_model("kineto/xdit_flux1__baseline__rank0.json.gz")
    idx = np.array([i for i, x in enumerate(t.ranges.text.tolist())
                    if x >= 0 and t.strings[x].startswith("## Call CompiledFxGraph")])
    doc = build_record(t, range_selection(t, idx, "compiled graph"))
    c = doc["graphs"]["capture"]
    assert c["captured_time_share"] == pytest.approx(0.70, abs=0.01) and c["captured_share"] < 0.5
    assert doc["launch_bound_level"] is None
    assert doc["conclusion"].startswith("graph-capture trace: 994 launches captured into 1 graph;")
    whole = _record(sample("kineto/xdit_flux1__baseline__rank0.json.gz"))
    assert whole["graphs"]["capture"]["captured_time_share"] == 0.0   # its periods precede the capture


@pytest.mark.samples
def test_rpd_autograd_graph_replays():
    """RPD's autograd sample: 20 hipGraphLaunch replaying 418 ops each (8,360), one op sequence."""
    doc = _record(sample("rocm/rpd_pytorch_autograd_callstack.rpd.gz"))
    r = doc["graphs"]["replays"]
    assert (r["graph_launches"], r["replayed_ops"], len(r["graphs"])) == (20, 8360, 1)
    assert r["graphs"][0]["ops_per_replay"] == {"median": 418.0, "min": 418, "max": 418}
    assert doc["graphs"]["eager"]["eager_launch_calls"] == 1228
    assert "1 graph (grouped by" in render_markdown(doc)


def test_a_graph_node_name_that_is_not_utf8_still_groups_the_replays(files):
    """Graph replays pair by their ops' name text (graphs._name_hash), never string ids. A name the
    reader kept as surrogate escapes (bytes that were not UTF-8) hashes too, and only its own
    replays' rows change name."""
    import dataclasses

    from launchtui.trace.model import StringTable
    path, _ = files("replays")
    tr = open_trace(path, use_cache=False)
    values = list(tr.strings.values)
    i = values.index("gemm_a")
    values[i] = "gemm_\udcff"
    bad = dataclasses.replace(tr, strings=StringTable.from_values(values))
    rows, ref = build_record(bad)["graphs"]["replays"]["graphs"], _record(path)["graphs"]["replays"]["graphs"]
    assert [r["first_op"] for r in rows] == ["gemm_\udcff", "ln_b0"]
    assert [{**r, "first_op": None} for r in rows] == [{**r, "first_op": None} for r in ref]
