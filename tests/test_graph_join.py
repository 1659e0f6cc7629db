"""The capture ↔ replay join (analysis/graphs_join.py; definitions.md §12.6, issue 21): every replayed
kernel labelled from the capture trace of the same run (fixtures/graph_join_cases.py, whose truth is
the node → capture mapping the simulation knows), the matched share, unmatched ops by reason, any
row order and id numbering; the CLI and the pandas API; the shared vLLM capture / execution pair."""
from __future__ import annotations

import json

import pytest

from fixtures import graph_join_cases as gjc
from launchtui.analysis import graphs_join as gj
from launchtui.analysis.graphs_join_report import join_document
from launchtui.cli import main
from launchtui.trace.load import open_trace
from tests.conftest import sample, sample_model

VLLM_EXEC = "kineto/vllm_graph_execution.json.gz"
VLLM_CAPTURE = "kineto/mi300x_vllm_piecewise_graph_capture.pt.trace.json.gz"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return gjc.memo_writer(gjc.write, tmp_path_factory.mktemp)


def _join(cap, ex):
    et = open_trace(ex, use_cache=False)
    j = gj.join(et, open_trace(cap, use_cache=False))
    j.capture_path = "capture.json"
    return et, j


def _labels(et, j) -> list:
    """Per replayed op in replay then node order: (kernel, op, range, site), "memset" or None."""
    cap = j.captured
    out = []
    for i in range(len(j.op)):
        s = int(j.source[i])
        if s < 0:
            out.append("memset" if j.reason[i] == gj.R_NOT_KERNEL else None)
        else:
            kernel = cap.kernel[s] if cap.kernel[s] is not None else et.strings[int(et.ops.full_name[j.op[i]])]
            out.append((kernel, cap.op[s], cap.range[s], cap.site[s]))
    return out


def _truth(truth) -> list:
    return [tuple(x) if isinstance(x, list) else x for x in gjc.expected_labels(truth)]


def test_full_match_labels_every_replayed_kernel(files):
    cap, ex, truth = files("full")
    et, j = _join(cap, ex)
    assert _labels(et, j) == _truth(truth)
    d = join_document(et, j)
    n = sum(len(r["nodes"]) for r in truth["replays"])
    assert (d["matched_ops"], d["replayed_ops"], d["matched_share"]) == (n, n, 1.0) == (75, 75, 1.0)
    assert (d["matched_replays"], d["replays"]) == (15, 15)
    assert (d["matched_graphs"], d["graphs"]) == (3, 3)      # head, the identical pieces, tail
    assert d["captures"] == 5 and d["captures_matched"] == 5 and d["captured_launches"] == sum(map(len, truth["captures"])) == 25
    assert d["unmatched"] == {} and d["matched_by"] == {gj.BY_SEQUENCE: 75}
    pieces = next(g for g in d["per_graph"] if g["first_op"] == "qkv_gemm")
    assert pieces["captures"] == [2, 3, 4] and pieces["replays"] == 9 and pieces["capture_label"] == \
        "capture_512_PIECEWISE"
    row = next(r for r in d["kernels"] if r["kernel"] == "attn_fwd" and r["range"] == "piece_2")
    assert (row["captured_op"], row["site"], row["replays"]) == ("vllm::unified_attention",
                                                                 "layers/attn.py:103 forward", 3)


def test_partial_match_counts_unmatched_ops_by_reason(files):
    cap, ex, truth = files("partial")
    et, j = _join(cap, ex)
    assert _labels(et, j) == _truth(truth)
    d = join_document(et, j)
    exp = _truth(truth)
    assert d["replayed_ops"] == len(exp) == 69
    assert d["matched_ops"] == sum(isinstance(x, tuple) for x in exp) == 62
    assert d["unmatched"] == {gj.REASONS[gj.R_NOT_KERNEL]: 1, gj.REASONS[gj.R_NO_CAPTURE]: 6}
    assert d["matched_ops"] + sum(d["unmatched"].values()) == d["replayed_ops"]   # none dropped
    assert (d["matched_replays"], d["replays"]) == (12, 15)
    assert d["matched_by"] == {gj.BY_SEQUENCE: 60, gj.BY_SUBSEQUENCE: 2}
    lost = next(g for g in d["per_graph"] if g["by"] == [gj.BY_SUBSEQUENCE])
    assert (lost["ops"], lost["captured_nodes"], lost["captures"]) == (2, 3, [1])   # the head, its last node lost
    other = next(g for g in d["per_graph"] if g["first_op"] == "sampler_topk")
    assert other["matched_ops"] == 0 and other["captures"] == [] and other["replays"] == 3
    assert d["matched_graphs"] == 3 and d["graphs"] == 5   # the head with a memset node matches in part


def test_reordered_nodes_match_by_kernel_set(files):
    cap, ex, truth = files("reordered")
    et, j = _join(cap, ex)
    assert _labels(et, j) == _truth(truth)
    d = join_document(et, j)
    assert d["matched_by"] == {gj.BY_SEQUENCE: 63, gj.BY_SET: 12} and d["matched_share"] == 1.0


def test_capture_without_kernel_names_matches_by_node_count(files):
    cap, ex, truth = files("unnamed")
    et, j = _join(cap, ex)
    assert _labels(et, j) == _truth(truth)
    d = join_document(et, j)
    assert d["captured_launches_named"] == 0 and d["matched_by"] == {gj.BY_COUNT: 75}


@pytest.mark.parametrize("name", ["full", "partial"])
def test_any_row_order_and_id_numbering_give_the_same_join(files, name):
    base = files(name)
    docs = []
    for shuffle, renumber in ((None, False), (7, False), (None, True), (3, True)):
        cap, ex, _ = files(name, shuffle, renumber)
        et, j = _join(cap, ex)
        docs.append(join_document(et, j))
        assert _labels(et, j) == _truth(base[2])
    assert all(d == docs[0] for d in docs[1:])


def _cli(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_report_capture_json_and_text(files, capsys):
    cap, ex, truth = files("partial")
    rc, out, err = _cli(["report", str(ex), "--capture", str(cap), "--json", "--no-cache"], capsys)
    assert rc == 0, err
    g = json.loads(out)["graph_join"]
    assert g["capture_trace"] == str(cap)
    assert (g["matched_ops"], g["replayed_ops"], g["matched_graphs"], g["graphs"]) == (62, 69, 3, 5)
    rc, out, err = _cli(["report", str(ex), "--capture", str(cap), "--no-cache"], capsys)
    assert rc == 0, err
    assert "-- Capture ↔ replay join (captured from) --" in out
    assert ("matched 62 of 69 replayed ops (89.9%), 3 of 5 graphs, 12 of 15 replays (60 by kernel sequence, 2 by "
            "kernel subsequence (nodes missing from the replay))") in out
    assert "unmatched: 6 ops: no capture holds this replay's kernel sequence" in out
    assert "g2 #1   qkv_gemm                             x3    aten::addmm · model.py:41 attention · piece_1" in out


def test_without_capture_nothing_changes(files, capsys):
    _, ex, _ = files("full")
    rc, out, _ = _cli(["report", str(ex), "--json", "--no-cache"], capsys)
    assert rc == 0 and "graph_join" not in json.loads(out)
    rc, out, _ = _cli(["report", str(ex), "--no-cache"], capsys)
    assert "Capture ↔ replay join" not in out


def test_bad_capture_is_one_line_exit_2(files, tmp_path, capsys):
    cap, ex, _ = files("full")
    missing = tmp_path / "nope.json"
    for cmd in (["report", str(ex)], [str(ex)]):
        rc, out, err = _cli(cmd + ["--capture", str(missing)], capsys)
        assert rc == 2 and out == "" and err == f"launchtui: {missing}: no such file\n"
    # a trace with no capture: the execution trace itself
    rc, out, err = _cli(["report", str(cap), "--capture", str(ex), "--no-cache"], capsys)
    assert rc == 2 and out == ""
    assert err.startswith(f"launchtui: {ex}: no graph capture in this trace") and err.count("\n") == 1


def test_api_captured_from_frame(files):
    import launchtui
    cap, ex, truth = files("partial")
    t = launchtui.open(ex, capture=cap, use_cache=False)
    df = t.captured_from()
    assert len(df) == 69 and int(df["matched"].sum()) == 62
    assert df.attrs["matched_share"] == round(62 / 69, 4)
    row = df[(df["kernel"] == "attn_fwd") & df["matched"]].iloc[0]
    assert (row["captured_op"], row["range"], row["site"], row["by"]) == (
        "vllm::unified_attention", "piece_1", "layers/attn.py:103 forward", gj.BY_SEQUENCE)
    assert set(df.loc[~df["matched"], "reason"]) == {gj.REASONS[gj.R_NOT_KERNEL], gj.REASONS[gj.R_NO_CAPTURE]}
    with pytest.raises(ValueError):
        launchtui.open(ex, use_cache=False).captured_from()


@pytest.mark.samples
def test_vllm_pair_matches_every_replayed_op(capsys):
    ex, cap = sample(VLLM_EXEC), sample(VLLM_CAPTURE)
    rc, out, err = _cli(["report", str(ex), "--capture", str(cap), "--json", "--no-cache"], capsys)
    assert rc == 0, err
    g = json.loads(out)["graph_join"]
    assert (g["matched_ops"], g["replayed_ops"], g["matched_share"]) == (361, 361, 1.0)
    assert (g["matched_graphs"], g["graphs"], g["matched_replays"], g["replays"]) == (3, 3, 25, 25)
    assert (g["captures"], g["captures_matched"], g["captured_launches"]) == (25, 25, 361)
    assert g["matched_by"] == {gj.BY_SEQUENCE: 361} and g["unmatched"] == {}
    assert [(x["replays"], x["ops"], x["captures"][0], x["captures"][-1]) for x in g["per_graph"]] == [
        (1, 4, 1, 1), (23, 345, 2, 24), (1, 12, 25, 25)]
    sites = {r["site"] for r in g["kernels"]}
    assert "vllm/model_executor/layers/utils.py:122 rocm_unquantized_gemm_impl" in sites
    assert "triton_kernels/matmul_ogs.py:352 matmul_ogs" in sites
    gemm = [r for r in g["kernels"] if r["graph"] == 2 and r["node"] == 1]
    assert len(gemm) == 1 and gemm[0]["replays"] == 23 and gemm[0]["captured_op"] == "aten::addmm"
    assert gemm[0]["range"].startswith("## Call CompiledFxGraph fb3en3pmdtsn")
    assert sum(r["replays"] for r in g["kernels"]) == 361


def test_record_capture_section_and_the_stored_record_unchanged(files, capsys):
    cap, ex, _ = files("full")
    rc, out, err = _cli(["record", str(ex), "--capture", str(cap)], capsys)
    assert rc == 0, err
    assert "## Captured from (`--capture`" in out
    assert ("| 2 | `qkv_gemm` | 9 | 54/54 | captures 2–4 (capture_512_PIECEWISE) | `layers/attn.py:103 forward` (9), "
            "`layers/norm.py:77 forward` (9), `model.py:41 attention` (9) |") in out
    rc, out, err = _cli(["record", str(ex), "--capture", str(cap), "--json"], capsys)
    assert json.loads(out)["graph_join"]["matched_share"] == 1.0
    rc, out, err = _cli(["record", str(ex), "--json"], capsys)   # the cached record, as computed
    assert rc == 0 and "graph_join" not in json.loads(out)
    rc, out, err = _cli(["record", str(ex)], capsys)
    assert "Captured from" not in out


@pytest.mark.samples
@pytest.mark.parametrize("name, ops", [("baseline", 993), ("aiter_sage", 1566)])
def test_xdit_replay_joins_its_own_capture_with_the_last_node_lost(name, ops):
    """xdit_flux1 captures one graph and replays it once in the same file; the replay recorded one
    node fewer than the capture holds (its last GEMM), so it matches as a subsequence."""
    t = sample_model(f"kineto/xdit_flux1__{name}__rank0.json.gz")
    d = join_document(t, gj.join(t, t))
    assert (d["matched_ops"], d["replayed_ops"], d["captured_launches"]) == (ops, ops, ops + 1)
    assert d["matched_by"] == {gj.BY_SUBSEQUENCE: ops} and d["per_graph"][0]["captured_nodes"] == ops + 1
    assert any("xDiT/xfuser/model_executor/models/transformers/transformer_flux.py" in (r["site"] or "")
               for r in d["kernels"])
