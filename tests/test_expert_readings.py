"""The case record against an expert's reading of real traces recorded by others
(../shared/reference/verdicts/expert-readings.md, read from the raw files with independent scripts):
for each trace the level, what the GPU waited for, backpressure, the first fix family and the gain
within the expert's range. The first corpus keeps its checks (V100 saturated near 1022, B200
dry and host-bound, the H100 slice back-pressured)."""
from __future__ import annotations

import pytest

from conftest import sample, sample_model
from launchtui.analysis.record import build_record
from launchtui.trace.load import open_trace

pytestmark = pytest.mark.samples

NOT, HOST = "not launch-bound", "host-bound"
DLRM = "kineto/dlrm_8ranks/"

# sample: (level, what the GPU waited for most: an idle cause or "GPU", backpressure, first fix rule)
READINGS = {
    "kineto/a100_negq.json.gz": (NOT, "dependency", True, "dependency"),
    "kineto/v100_dfindex.json.gz": (HOST, "host", False, "host"),
    "nsys/nsys-ai__mfu_2gpu_before.sqlite": (NOT, "host", False, "sync"),
    "nsys/nsys-ai__mfu_2gpu_after.sqlite": (NOT, "host", False, "sync"),
    "kineto/resnet50_legacy_workers4.json.gz": (NOT, "host", False, None),
    "kineto/a100_tracediff_control.json.gz": (NOT, "host", False, None),
    "kineto/h100_owlv2.json.gz": (NOT, "host_stall", False, "host_stall"),
    "kineto/h100_qwen_chat.json.gz": (NOT, "dependency", False, None),
    "kineto/mi300_resnet.json.gz": (NOT, "GPU", False, None),
    "kineto/vllm_graph_execution.json.gz": (NOT, "dependency", False, "dependency"),
    "nsys/Sh1mwww__llama3-inference__demo.sqlite": (NOT, "host_stall", False, None),
    "nsys/RajaATAli__SC23__report3.sqlite": (NOT, "GPU", False, None),
    "nsys/mariamiiiiii__my_clue__report3.sqlite": (NOT, "migration", False, "migration"),
    # first corpus
    "kineto/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz": (NOT, "GPU", True, None),
    "kineto/b200__eager_trace.json.gz": (HOST, "host", False, "host"),
    "kineto/trace_diff__test__test.json.gz": (NOT, "GPU", False, None),
}
_docs: dict = {}


def record(rel: str) -> dict:
    if rel not in _docs:
        _docs[rel] = build_record(sample_model(rel))
    return _docs[rel]


def waited_for(doc: dict) -> str:
    ib = doc["idle_by_cause"]
    if ib["idle_share"] <= 0.05:
        return "GPU"
    return max(ib["share"], key=lambda c: (ib["share"][c], c))


@pytest.mark.parametrize("rel", sorted(READINGS))
def test_record_agrees_with_the_expert(rel):
    level, cause, bp, fix = READINGS[rel]
    doc = record(rel)
    assert doc["launch_bound_level"] == level, doc["conclusion"]
    assert doc["conclusion"].startswith(level)
    assert waited_for(doc) == cause, doc["idle_by_cause"]["share"]
    assert doc["backpressure"] is bp
    if fix is not None:
        assert doc["fixes"][0]["rule"] == fix, doc["fixes"][:3]
    assert all(c["ok"] for c in doc["checks"]), doc["checks"]
    if level == NOT:
        assert "faster" not in doc["conclusion"]


def test_a100_negq_waits_on_dependencies_behind_a_full_queue():
    """117 ms per step of idle whose op was queued long before; launch calls block at 960-963."""
    doc = record("kineto/a100_negq.json.gz")
    ib = doc["idle_by_cause"]
    assert ib["host_bound"]["share"] < 0.02 and ib["share"]["dependency"] > 0.5
    assert 110 <= ib["mean_per_iteration_ms"]["dependency"] <= 140
    s = next(s for s in doc["streams"] if s["queue_class"] == "saturated")
    assert 955 <= s["observed_limit"] <= 970
    assert "back-pressured" in doc["conclusion"]


def test_v100_host_bound_gain_and_fixes():
    """The GPU waits on the host 119-142 ms of a 346 ms step; a realistic gain of 1.3-1.6x; graphs
    or compile first, then zero_grad(set_to_none=True) and a fused/foreach SGD; the 413 FillFunctor
    launches per step are a top row."""
    doc = record("kineto/v100_dfindex.json.gz")
    hb = doc["idle_by_cause"]["host_bound"]
    assert 115 <= hb["per_iteration_ms"]["median"] <= 145
    lo, hi = doc["gain"]["realistic"]
    assert lo <= 1.3 and 1.5 <= hi <= 1.7, (lo, hi)
    rules = [f["rule"] for f in doc["fixes"]]
    assert rules[0] == "host" and "zero_grad" in rules and "optimizer" in rules
    assert any(r["kernel_name"] == "vectorized_elementwise_kernel<FillFunctor>" for r in doc["top"])


@pytest.mark.parametrize("rank", range(8))
def test_dlrm_every_rank_is_host_bound(rank):
    from pathlib import Path
    d = sample(DLRM.rstrip("/"))
    path = sorted(Path(d).glob(f"worker{rank}_*.json"))[0]
    doc = build_record(open_trace(path, use_cache=False))
    hb = doc["idle_by_cause"]["host_bound"]
    assert doc["launch_bound_level"] == HOST and 0.25 <= hb["share"] <= 0.65
    assert doc["backpressure"] is False
    phases = [f["phase"] for f in doc["fixes"] if f["phase"]]
    assert phases[0] in ("## backward ##", "## forward ##"), phases
    assert doc["gain"]["realistic"][1] >= 1.3


def test_fuser_is_a_cold_start_capture_without_backpressure():
    doc = record("nsys/NVIDIA__Fuser__report1.sqlite")
    assert doc["launch_bound_level"] is None and doc["backpressure"] is False
    assert doc["conclusion"].startswith("cannot judge: cold start / warm-up capture")
    assert doc["cold_start"]["calls"] >= 8 and doc["cold_start"]["warm_up_capture"]
    assert all(s["blocked_launches"] == 0 for s in doc["streams"])


def test_fixes_of_a_trace_the_verdict_cannot_judge_say_so_on_the_page():
    """The Fuser capture's largest idle (459 ms of host work between bursts) is start-up: the page
    keeps the ranked fixes but says above them that they are not steady-state costs; a judged trace
    (b200, launch-bound) has no such line."""
    from launchtui.analysis.record_markdown import render_markdown
    note = "_The verdict cannot judge this trace: these are the times this capture shows"
    fuser = render_markdown(record("nsys/NVIDIA__Fuser__report1.sqlite"))
    head = fuser.index("## Fixes, ranked by the time they address")
    assert fuser.index(note) > head and fuser.index(note) < fuser.index("1. ", head)
    b200 = record("kineto/b200__eager_trace.json.gz")
    assert b200["launch_bound_level"] is not None and b200["fixes"]
    assert note not in render_markdown(b200)


@pytest.mark.parametrize("rel", ["nsys/nikitinvv__recon-stream__report3.sqlite",
                                 "nsys/p4arth__cuda-perf-sandbox__report1.sqlite"])
def test_too_little_activity(rel):
    doc = record(rel)
    assert "too little activity" in doc["conclusion"]


@pytest.mark.parametrize("rel", ["nsys/davidev886__tutorial_vqe__report1.sqlite",
                                 "nsys/frasertajima__WeatherBench2__report1.sqlite"])
def test_no_launches(rel):
    doc = record(rel)
    assert doc["launch_bound_level"] is None and doc["conclusion"].startswith("cannot judge: no launched GPU ops")


def test_h100_slice_is_back_pressured_and_gpu_bound():
    """Most of the slice's little idle ends at ops launched before it, but idle under the 10 % line
    cannot make it host-bound: the level is judged; the calls block at 1139."""
    doc = record("nsys/nsys-ai__h100_2gpu_1s.sqlite")
    assert doc["backpressure"] is True and doc["launch_bound_level"] == NOT
    assert doc["conclusion"].startswith("not launch-bound: GPU-bound") and "back-pressured" in doc["conclusion"]


def test_mfu_pair_one_sync_per_block_is_the_first_fix():
    """One ~10 ms cudaStreamSynchronize per transformer block (a pageable copy) caps the CPU's lead:
    moving it is the first fix on both sides; the 'after' side has more host bubbles."""
    before = record("nsys/nsys-ai__mfu_2gpu_before.sqlite")
    after = record("nsys/nsys-ai__mfu_2gpu_after.sqlite")
    for doc in (before, after):
        assert doc["iterations"]["count"] >= 14 and doc["fixes"][0]["rule"] == "sync"
        assert doc["idle_by_cause"]["sync_blocked_while_busy_ms"]["median"] >= 8
    assert (after["idle_by_cause"]["host_bound"]["per_iteration_ms"]["median"]
            > before["idle_by_cause"]["host_bound"]["per_iteration_ms"]["median"])
