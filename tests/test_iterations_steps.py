"""Iterations (docs/definitions.md §V1): a step-like range wins over a repeating launch period even
when it occurs once, and a single one covers the GPU work launched inside it; names that only
contain a step word inside an identifier (`FSDP::pre_forward`) are not steps; a launch period
shorter than a range enclosing it is said to be likely a layer. Ground truth from the hand-scheduled
idle cases (fixtures/idle_cases.py) and from the real serving traces read with json + Decimal."""
from __future__ import annotations

import gzip
import json
from decimal import Decimal

import pytest

from conftest import sample, sample_model
from fixtures import idle_cases as ic
from fixtures.idle_model import Range, view, write_kineto
from launchtui.analysis import iterations as itr
from launchtui.analysis.record import build_record
from launchtui.trace.load import open_trace

LIKELY_LAYER = "likely a layer, not a step"


@pytest.mark.parametrize("shuffle", [None, 7])
@pytest.mark.parametrize("name", ["layer_period", "layer_period_train_step"])
def test_one_step_like_range_holding_twelve_layers_is_the_iteration(tmp_path, name, shuffle):
    path, truth = ic.write(name, tmp_path / f"{name}.pt.trace.json", shuffle)
    doc = build_record(open_trace(path, use_cache=False))
    it = doc["iterations"]
    assert (it["source"], it["count"], it["name"], it["heuristic"]) == (
        itr.SOURCE_STEP_LIKE, 1, truth["range_name"], False)
    assert [[s, e] for s, e in zip(it["starts_ns"], it["ends_ns"])] == truth["iterations"]
    assert "occurs once" in it["note"] and LIKELY_LAYER not in it["note"]
    p = truth["params"]
    launches = p["embed"] + truth["layers"] * truth["launches_per_layer"] + p["head"]
    assert doc["per_iteration"]["launches"]["median"] == launches


def _layers(tmp_path, range_name: str, extra=lambda sim, starts, period: []):
    """The layer_period workload with its one range renamed, plus `extra` ranges; (path, range,
    layer period ns)."""
    sim, p, facts = ic.layer_period(range_name)
    sim.ranges += extra(sim, facts["layer_starts_ns"], facts["layer_period_ns"])
    v = view(sim)
    path = write_kineto(v, tmp_path / "layers.pt.trace.json")
    (r,) = [r for r in v.ranges if r.name == range_name]
    return path, r, facts["layer_period_ns"]


@pytest.mark.parametrize("range_name", ["FSDP::pre_forward (blocks.0._checkpoint_wrapped_module)",
                                        "flash_attn::_flash_attn_forward", "layer_0_forward", "decoder"])
def test_a_period_inside_a_range_that_is_no_step_is_likely_a_layer(tmp_path, range_name):
    path, r, period = _layers(tmp_path, range_name)
    it = build_record(open_trace(path, use_cache=False))["iterations"]
    assert it["source"] == itr.SOURCE_PERIODIC and it["heuristic"] is True
    assert it["median_ns"] == period == 283_000 and it["count"] >= 10
    from launchtui.analysis.phases import normalise
    assert it["note"].endswith(f"; the launch period (283.0 µs) is shorter than the enclosing range {normalise(range_name)} "
                               f"({(r.end - r.start) / 1e6:,.3f} ms): {LIKELY_LAYER}")


@pytest.mark.parametrize("range_name", ["forward", "Model.forward", "## forward ##", "execute_model",
                                        "execute_context_1(888_788544)_generation_0(0)", "train_step"])
def test_a_forward_or_serving_step_range_is_the_iteration(tmp_path, range_name):
    path, r, _ = _layers(tmp_path, range_name)
    it = build_record(open_trace(path, use_cache=False))["iterations"]
    assert (it["source"], it["count"], it["starts_ns"]) == (itr.SOURCE_STEP_LIKE, 1, [r.start])
    assert it["ends_ns"][0] > r.end     # the head's last op runs after the range


def test_forward_is_a_phase_where_there_is_a_backward(tmp_path):
    """In training `forward` is part of the step, not the step: with a backward range it marks
    nothing, and the period is said to be shorter than the enclosing forward."""
    path, r, _ = _layers(tmp_path, "## forward ##",
                         lambda sim, starts, period: [Range("## backward ##", sim.t + 1_000, sim.t + 2_000)])
    it = build_record(open_trace(path, use_cache=False))["iterations"]
    assert it["source"] == itr.SOURCE_PERIODIC
    assert f"enclosing range ## forward ## ({(r.end - r.start) / 1e6:,.3f} ms): {LIKELY_LAYER}" in it["note"]


def test_the_outer_step_wins_over_per_layer_forward_ranges(tmp_path):
    """Twelve `DecoderLayer.forward` ranges inside one `execute_model`: the enclosing step marks
    the iteration, not the layers, though they occur more often."""
    path, r, _ = _layers(tmp_path, "execute_model", lambda sim, starts, period: [
        Range("DecoderLayer.forward", s, s + period) for s in starts])
    it = build_record(open_trace(path, use_cache=False))["iterations"]
    assert (it["source"], it["name"], it["count"], it["starts_ns"]) == (
        itr.SOURCE_STEP_LIKE, "execute_model", 1, [r.start])
    # without the step, the layer ranges are the step-like ranges (twelve, from the same thread)
    path, r, period = _layers(tmp_path, "decoder", lambda sim, starts, period: [
        Range("DecoderLayer.forward", s, s + period) for s in starts])
    it = build_record(open_trace(path, use_cache=False))["iterations"]
    assert (it["source"], it["name"], it["count"]) == (itr.SOURCE_STEP_LIKE, "DecoderLayer.forward", 12)


def test_a_single_range_with_few_of_the_launches_is_no_step(tmp_path):
    """A step-like range occurring once marks the step only when it holds at least half the launch
    calls: a short `execute_kernel` around one launch does not."""
    path, r, _ = _layers(tmp_path, "decoder", lambda sim, starts, period: [
        Range("execute_kernel", starts[0], starts[0] + 30_000)])
    it = build_record(open_trace(path, use_cache=False))["iterations"]
    assert it["source"] == itr.SOURCE_PERIODIC and LIKELY_LAYER in it["note"]


# --- real serving traces ------------------------------------------------------------------------

def _ns(x) -> int:
    return int((Decimal(str(x)) * 1000).to_integral_value())


def _step_truth(rel: str):
    """(range name, start ns, end ns, iteration end ns) of the trace's one `execute...` range: the
    iteration ends at the later of the range's end and the last end of the GPU ops whose runtime
    call starts inside it."""
    ev = json.load(gzip.open(sample(rel)))["traceEvents"]
    (r,) = [e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("execute")]
    s, e = _ns(r["ts"]), _ns(r["ts"]) + _ns(r["dur"])
    corr = {c["args"]["correlation"] for c in ev if c.get("cat") == "cuda_runtime" and s <= _ns(c["ts"]) < e}
    ends = [_ns(o["ts"]) + _ns(o["dur"]) for o in ev if o.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
            and o.get("args", {}).get("correlation") in corr]
    assert ends
    return r["name"], s, e, max([e] + ends)


@pytest.mark.samples
def test_vllm_execute_range_covers_the_gpu_work_it_launched():
    """oracle rule D: `execute_8192_context_9(...)` lasts 26 ms on the CPU; the GPU work it queued
    runs until 308 ms after its start, and the iteration covers it."""
    rel = "kineto/vllm_graph_execution.json.gz"
    name, s, e, end = _step_truth(rel)
    assert name.startswith("execute_8192_context_9(") and round((e - s) / 1e6, 1) == 26.4
    doc = build_record(sample_model(rel))
    it = doc["iterations"]
    assert (it["source"], it["count"], it["starts_ns"], it["ends_ns"]) == (itr.SOURCE_STEP_LIKE, 1, [s], [end])
    assert round((end - s) / 1e6, 1) == 307.7
    assert "occurs once" in it["note"]
    # half of it busy; the long gap is queued work waiting (a dependency), not launch overhead
    busy = doc["per_iteration"]["gpu_busy_ms"]["median"] / doc["per_iteration"]["iteration_ms"]["median"]
    assert round(busy, 3) == 0.507
    assert doc["idle_by_cause"]["mean_per_iteration_ms"]["dependency"] > 148


@pytest.mark.samples
def test_b200_execute_range_is_the_iteration_not_the_layer_period():
    rel = "kineto/b200__eager_trace.json.gz"
    name, s, e, end = _step_truth(rel)
    assert name == "execute_context_1(888_788544)_generation_0(0)" and end == e     # its GPU work ends inside it
    doc = build_record(sample_model(rel))
    it = doc["iterations"]
    assert (it["source"], it["count"], it["starts_ns"], it["ends_ns"]) == (itr.SOURCE_STEP_LIKE, 1, [s], [e])
    assert doc["per_iteration"]["launches"]["median"] == 768


@pytest.mark.samples
def test_mfu_blocks_stay_periodic_and_fsdp_ranges_are_no_steps():
    """No ProfilerStep and no step-like name (`FSDP::pre_forward` is an identifier, not a forward
    pass): the 119-launch block found from the launch sequence, with no range enclosing it."""
    for rel, blocks in (("nsys/nsys-ai__mfu_2gpu_before.sqlite", 16), ("nsys/nsys-ai__mfu_2gpu_after.sqlite", 14)):
        it = build_record(sample_model(rel))["iterations"]
        assert (it["source"], it["count"], it["name"]) == (itr.SOURCE_PERIODIC, blocks,
                                                            "nvjet_tst_192x208_64x4_1x1_h_bz_coopB_bias_TNT")
        assert "repeats every 119 launches" in it["note"] and LIKELY_LAYER not in it["note"]
