"""pandas API (`launchtui.open`): frames equal the CLI's JSON, row for row."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import launchtui
from conftest import sample
from fixtures import stacks_synth, synth
from launchtui.cli import main


def _cli(capsys, *args) -> dict:
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def nsys_path(tmp_path_factory):
    return synth.make_trace_files(tmp_path_factory.mktemp("api"), variants=[("nsys", "modern")])[("nsys", "modern")]


def _records(df: pd.DataFrame) -> list[dict]:
    return json.loads(df.to_json(orient="records"))


def test_small_kernels_equal_report_json(capsys, nsys_path):
    for kw, cli in (({}, []), ({"trim": (1.51, 1.6), "device": 0}, ["--trim", "1.51", "1.6", "--device", "0"]),
                    ({"nvtx": "optim"}, ["--nvtx", "optim"])):
        t = launchtui.open(nsys_path, **kw)
        doc = _cli(capsys, "report", str(nsys_path), "--json", "--limit", "0", "--min-launches", "20", *cli)
        df = t.small_kernels(min_launches=20)
        rows = doc["small_kernels"] + doc["small_kernels_nccl"]
        assert len(rows) > 3
        assert _records(df) == rows
        assert isinstance(df["kernel_name"].dtype, pd.CategoricalDtype)


def test_kernels_launches_nvtx_equal_export(capsys, nsys_path, tmp_path):
    t = launchtui.open(nsys_path)
    out = tmp_path / "x.json"
    assert main(["export", str(nsys_path), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    ops = doc["gpu_ops"]
    k = t.kernels()
    kern = [o for o in ops if o["kind"] == "kernel"]
    assert len(k) == len(kern) > 1000
    assert k["start_ns"].tolist() == [o["start_ns"] for o in kern]
    assert k["name"].astype(str).tolist() == [o["name"] for o in kern]
    assert k["stream"].tolist() == [o["stream_id"] for o in kern]
    assert (k["duration"] == pd.to_timedelta(k["end_ns"] - k["start_ns"], unit="ns")).all()
    assert k["start_ns"].dtype == np.int64 and isinstance(k["name"].dtype, pd.CategoricalDtype)
    la = t.launches()
    matched = [o for o in ops if o["api_index"] is not None]
    assert len(la) == len(matched)
    assert (la["queue"].to_numpy().view(np.int64).tolist() == [o["queue_ns"] for o in matched])
    calls = doc["api_calls"]
    assert la["api_start_ns"].tolist() == [calls[o["api_index"]]["start_ns"] for o in matched]
    assert la["api_name"].astype(str).tolist() == [calls[o["api_index"]]["name"] for o in matched]
    nv = t.nvtx()
    assert nv["start_ns"].tolist() == [r["start_ns"] for r in doc["nvtx_ranges"]]
    assert nv["depth"].tolist() == [r["depth"] for r in doc["nvtx_ranges"]]


def test_iterations_and_queue_depth(nsys_path):
    t = launchtui.open(nsys_path)
    it = t.iterations()
    truth = synth.ground_truth(synth.simulate(), "nsys", "modern")
    assert len(it) == synth.simulate().cfg.iterations and it.attrs["source"]  # the record's ProfilerSteps
    assert (it["launches"] > 0).all()
    q = t.queue_depth(0, 7)
    want = next(x for x in truth["queue_depth"] if (x["device_id"], x["stream_id"]) == (0, 7))
    assert q["depth"].max() == want["max"] == 1022
    assert len(q) == want["change_points"]
    assert (np.diff(q["t_ns"].to_numpy()) > 0).all()
    with pytest.raises(KeyError):
        t.queue_depth(9, 9)


def test_sources_equal_report_by_source(capsys, tmp_path):
    path = tmp_path / "k.json.gz"
    stacks_synth.write(path)
    t = launchtui.open(path)
    doc = _cli(capsys, "report", str(path), "--by", "source", "--json", "--limit", "0")
    df = t.sources()
    assert _records(df) == doc["sources"]["sites"]
    assert df.attrs["coverage"] == doc["sources"]["coverage"]
    ls = t.launch_sources()
    assert ls["site"].value_counts().to_dict() == {s["site"]: s["launches"] for s in doc["sources"]["sites"]}


@pytest.mark.samples
def test_b200_sources_frame():
    t = launchtui.open(sample("kineto/b200__eager_trace.json.gz"))
    df = t.sources()
    assert df["launches"].sum() == 768 and df.attrs["coverage"]["attributed_fraction"] == 1.0
    assert df.iloc[0]["site"] == "flashinfer/fused_moe/core.py:1633 trtllm_fp4_block_scale_moe_op"


@pytest.mark.serial
def test_open_ranks_equals_report_dir_json(capsys, tmp_path):
    from fixtures.ranks import make_ranks
    d = tmp_path / "job"
    make_ranks(d, 3, "launches", nsys=1)
    df = launchtui.open_ranks(d, workers=1)
    doc = _cli(capsys, "report", str(d), "--json", "--workers", "1")
    assert _records(df) == doc["ranks"] and len(df) == 3
    assert df.attrs["verdict"] == doc["verdict"] and df.attrs["stragglers"] == doc["stragglers"]


def test_record_equals_record_json(capsys, nsys_path):
    t = launchtui.open(nsys_path)
    rec = t.record()
    doc = _cli(capsys, "record", str(nsys_path), "--json")
    assert len(rec["top"]) == 3
    for key in ("top", "nccl", "near_misses", "streams"):
        assert isinstance(rec[key], pd.DataFrame)
        assert _records(rec[key]) == doc[key]
    its = t.iterations()
    assert its["start_ns"].tolist() == doc["iterations"]["starts_ns"]
    assert its["end_ns"].tolist() == doc["iterations"]["ends_ns"]
    assert {k: v for k, v in rec.items() if k not in ("top", "nccl", "near_misses", "streams")} == \
        {k: v for k, v in doc.items() if k not in ("top", "nccl", "near_misses", "streams")}


def test_record_and_iterations_read_what_report_stored(capsys, tmp_path, monkeypatch):
    """After `report --json` the notebook's record() and iterations() find its record beside the
    model and compute none; another option set is computed once, however often it is asked."""
    import launchtui.analysis.record as record_mod
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = synth.make_trace_files(tmp_path, variants=[("nsys", "modern")])[("nsys", "modern")]
    reported = _cli(capsys, "report", str(path), "--json")["record"]
    computed = []
    real = record_mod.record_with_streams
    monkeypatch.setattr(record_mod, "record_with_streams",
                        lambda trace, sel, opt, shared=None: computed.append(opt) or real(trace, sel, opt, shared))
    t = launchtui.open(path)
    rec = t.record()
    assert computed == [] and rec["conclusion"] == reported["conclusion"]
    assert _records(rec["top"]) == reported["top"]
    assert t.iterations()["start_ns"].tolist() == reported["iterations"]["starts_ns"] and computed == []
    assert isinstance(t.record()["top"], pd.DataFrame)       # the stored document is not changed
    t.record(phase_level=2)
    t.record(phase_level=2)
    assert [o.phase_level for o in computed] == [2]
