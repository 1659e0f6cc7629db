"""Kineto samples against HTA's reference figures (reference/hta, full-definition mode)."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from conftest import sample, sample_model
from launchtui.analysis import nvtx
from launchtui.analysis.backpressure import backpressure
from launchtui.analysis.queue import queue_summary
from launchtui.trace.load import read_trace
from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, OP_KERNEL

pytestmark = pytest.mark.samples

V100 = "kineto/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
DIFF = "kineto/trace_diff__test__test.json.gz"
B200 = "kineto/b200__eager_trace.json.gz"
LEGACY = "kineto/tb_plugin__samples__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz"


def _queues(rel, thresholds=(1000, 1016, 1020, 1022, 1024)):
    trace = sample_model(rel)
    return trace, {q.stream_id: q for q in queue_summary(trace, thresholds=thresholds)}


def test_v100_saturated_stream_matches_reference():
    _, q = _queues(V100)
    s = q[7]
    assert s.max_depth == 1022
    assert s.span_ns == 479_815_300
    assert round(s.mean_depth, 4) == 873.0511
    assert round(s.point_mean_depth, 4) == 847.0496
    assert s.time_at_or_above_ns == {1000: 328_344_868, 1016: 317_369_745, 1020: 287_481_856,
                                     1022: 232_467_303, 1024: 0}


def test_trace_diff_graph_streams_match_reference():
    _, q = _queues(DIFF)
    assert {k: v.max_depth for k, v in q.items()} == {7: 1338, 14: 9, 15: 5, 16: 23}
    assert round(q[7].mean_depth, 4) == 791.4455
    assert round(q[7].point_mean_depth, 4) == 830.0505
    assert q[7].max_depth_graph_as_one == 1013, "each replay as one entry retired at its first op"


def test_b200_low_depth_and_cu_launch_kernel_ex():
    trace, q = _queues(B200)
    assert q[7].max_depth == 2
    names = [trace.strings[int(i)] for i in trace.api.name[trace.api.kind == API_LAUNCH]]
    assert names.count("cuLaunchKernelEx") == 220


def test_v100_backpressure_episodes_and_spikes():
    trace = sample_model(V100)
    bp = backpressure(trace)
    sat = [e for e in bp["episodes"] if e.level == "saturated"]
    assert len(sat) >= 4 and all(e.max_depth == 1022 and e.stream == 7 for e in sat)
    # launches made while the queue was full block: spikes sit at depth >= 1019
    deep = [e for e in bp["spikes"] if e.max_depth >= 1019]
    assert len(deep) > 0.8 * len(bp["spikes"]) and len(bp["spikes"]) > 100
    assert max(e.worst_api_ns for e in bp["spikes"]) == max(e.worst_api_ns for e in sat)


def test_v100_exact_ns_timestamps_survive():
    """Absolute-epoch µs with ns fractions: float64 would round them to 0.25 µs."""
    p = sample(V100)
    trace = read_trace(p)
    with gzip.open(p, "rt") as f:
        doc = json.load(f, parse_float=str)
    tokens = [e["ts"] for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    exact = sorted(int(t.replace(".", "")) for t in tokens)
    via_float = sorted(round(float(t) * 1000) for t in tokens)
    assert exact != via_float, "the sample really exercises the float64 trap"
    assert sorted(trace.ops.start[trace.ops.kind == OP_KERNEL].tolist()) == exact


def test_v100_optimizer_range_found():
    trace = sample_model(V100)
    i = int(nvtx.search(trace, nvtx.OPTIMIZER_PATTERN)[0])
    assert i >= 0 and "optim" in trace.strings[int(trace.ranges.text[i])].lower()
    names = {trace.strings[int(t)] for t in trace.ranges.text[nvtx.search(trace, "OPTIM")]}
    assert "Optimizer.step#SGD.step" in names


def test_graph_launch_joins_one_to_many():
    trace = sample_model(DIFF)
    m = trace.ops.api >= 0
    graph = m & (trace.api.kind[np.maximum(trace.ops.api, 0)] == API_GRAPH_LAUNCH)
    per_launch = np.bincount(trace.ops.api[graph])
    sizes = sorted(set(per_launch[per_launch > 0].tolist()))
    assert sizes == [339, 502]
    assert int((per_launch > 0).sum()) == 12


def test_legacy_2021_trace():
    trace = sample_model(LEGACY)
    k = trace.ops.kind == OP_KERNEL
    assert int((k & (trace.ops.end == trace.ops.start)).sum()) == 636, "dur-0 kernels kept"
    assert set(trace.ops.stream.tolist()) >= {7}
    assert (trace.ops.api >= 0).all()
    names = {trace.strings[int(t)] for t in trace.ranges.text}
    assert "Optimizer.step#SGD.step" in names and any(n.startswith("ProfilerStep#") for n in names)


def test_cpu_only_trace_says_what_is_missing():
    trace = sample_model("kineto/rank_non_gpu__rank_non_gpu.json.gz")
    assert len(trace.ops) == 0 and not trace.has_cuda_tables
    assert any("no GPU activity" in m for m in trace.missing)


def test_hip_trace_launches():
    trace = sample_model("kineto/torch_compile_triton__trace.json.gz")
    assert trace.device_ids() == [2]
    assert (trace.ops.api >= 0).all()
    assert set(trace.ops.stream.tolist()) == {0}


def test_out_of_order_events_are_sorted():
    trace = sample_model("kineto/docs__traces__before_fix_trace.json")
    assert np.all(np.diff(trace.api.start) >= 0)
    assert len(trace.ops) == 1 and trace.ops.api[0] >= 0


def test_kineto_short_names_match_rule():
    trace = sample_model(DIFF)
    short = {trace.strings[int(i)] for i in np.unique(trace.ops.name[trace.ops.kind == OP_KERNEL])}
    assert "vectorized_elementwise_kernel" in short
    assert all("(" not in s and "<" not in s for s in short)
