"""The queue class by absolute evidence (docs/definitions.md §V3, issue 26): the blocking depth from
where slow calls cluster (the pre-capture backlog counted), slow calls at a shallow queue as CPU stalls
or cold starts, the dry test from whether the GPU waited for the call. Generator scenarios with truth
from the schedule (fixtures/queue_cases.py), then the real samples (skipped without ../shared)."""
from __future__ import annotations

import pytest

from conftest import sample_model
from fixtures import queue_cases as qcs
from launchtui.analysis.cold_start import cold_start
from launchtui.analysis.backpressure import spikes
from launchtui.analysis.record import build_record, record_with_streams
from launchtui.analysis.report import build_report, render_text
from launchtui.trace.load import open_trace


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    d = tmp_path_factory.mktemp("queue_cases")
    out = {}

    def get(name):
        if name not in out:
            path, truth = qcs.write(name, d / f"{name}.json")
            trace = open_trace(path, use_cache=False)
            doc, streams = record_with_streams(trace)
            out[name] = trace, truth, doc, streams[0]
        return out[name]
    return get


def _corr(trace, api_ids):
    return sorted(int(trace.api.corr[a]) for a in api_ids)


def _expected_classes(truth, blocked_per_step):
    """Per step, by §V3's rule applied to the schedule's own facts."""
    out = []
    for st, n_blocked in zip(truth["steps"], blocked_per_step):
        if n_blocked >= 3:
            out.append("saturated")
        elif st["launches"] >= 10 and (st["dry_launches"] >= 0.5 * st["launches"]
                                       or st["empty_ns"] >= 0.4 * (st["end"] - st["start"])):
            out.append("dry")
        elif (st["launches"] >= 10 and st["empty_ns"] < 0.05 * (st["end"] - st["start"])
              and st["median_depth"] >= 32):
            out.append("backlogged")
        else:
            out.append("normal")
    return out


def test_blocking_below_1024_with_ops_pending_from_before_the_capture(case):
    """Queue limit 960 with 200 pre-capture ops pending: the blocked calls cluster at 960 once the
    backlog is counted, although the file's own depth never passes 800 (definitions.md §5, §V3)."""
    trace, truth, doc, v = case("ceiling_960")
    assert [list(x) for x in zip(doc["iterations"]["starts_ns"], doc["iterations"]["ends_ns"])] == truth["iterations"]
    s = doc["streams"][0]
    assert truth["blocked_depth"] == [truth["queue_limit"]] == [960]
    assert s["observed_limit"] == 960 and s["band"][0] <= 960 <= s["band"][1]
    assert _corr(trace, v.blocked_calls) == truth["blocked_corr"] and len(truth["blocked_corr"]) >= 20
    assert s["blocked_launches"] == len(truth["blocked_corr"])
    assert s["max_depth"] == truth["max_depth_in_file"] < 960       # §5's series leaves the backlog out
    c = s["ceiling"]
    assert c["backlog_ops"] == truth["pre_capture_ops"] == 200
    assert c["in_band"] == c["slow_deep_calls"] == len(truth["blocked_corr"]) and c["returns_on_op_start"] == 1.0
    assert c["baseline_returns_on_op_start"] < 0.5 * c["returns_on_op_start"]
    steps = truth["steps"]
    per_step = [sum(1 for a in v.blocked_calls if st["start"] <= int(trace.api.start[a]) < st["end"]) for st in steps]
    want = _expected_classes(truth, per_step)
    assert want == ["saturated", "dry"]
    assert s["iteration_classes"] == {k: want.count(k) for k in ("saturated", "dry", "backlogged", "normal")}
    assert s["queue_class"] == "saturated" and doc["backpressure"] is True
    assert s["cpu_stalls"] == s["cold_starts"] == s["slow_no_pattern"] == 0
    assert "the depth counts 200 ops launched before the capture" in s["reason"]
    # the report: fixed thresholds read nothing; the time at the stream's own band does
    rep = build_report(trace)
    q = rep["queues"][0]
    assert q["time_at_or_above_ns"]["1000"] == 0 and q["ceiling"]["depth"] == 960
    assert q["ceiling"]["time_at_or_above_band_ns"] > 0 and q["ceiling"]["backlog_ops"] == 200
    assert "launch calls block at depth 960 (band 951-969" in render_text(rep)


def test_slow_calls_by_depth_cold_starts_cpu_stalls_and_no_pattern(case):
    """Cold first launches and host stalls at an empty queue are not backpressure; six host stalls at
    depth ~290 cluster but no op starts while they wait: slow calls without a pattern (§V3)."""
    trace, truth, doc, v = case("stalls")
    s = doc["streams"][0]
    assert s["blocked_launches"] == 0 and s["observed_limit"] is None and doc["backpressure"] is False
    assert _corr(trace, [e.worst_api for e in v.stalls]) == truth["cpu_stall_corr"] and s["cpu_stalls"] == 3
    assert s["cold_starts"] == len(truth["cold_corr"]) == 3
    assert _corr(trace, cold_start(trace, spikes(trace)).calls) == truth["cold_corr"]
    assert s["slow_no_pattern"] == len(truth["no_pattern_corr"]) == 6 and not truth["other_slow_corr"]
    c = s["ceiling"]
    assert (c["blocked"], c["slow_deep_calls"], c["returns_on_op_start"]) == (False, 6, 0.0)
    assert "return as a pending op starts" in c["why_not"]
    want = _expected_classes(truth, [0] * len(truth["steps"]))
    # step 4 queues 300 launches behind a 30 ms kernel: never near empty, backlogged
    assert want == ["dry", "dry", "backlogged", "dry"]
    assert s["iteration_classes"] == {"saturated": 0, "dry": 3, "backlogged": 1, "normal": 0}
    assert s["queue_class"] == "dry"
    dry = [st for st, k in zip(truth["steps"], want) if k == "dry"]     # pooled over the class's steps
    assert s["dry_launch_share"] == round(sum(x["dry_launches"] for x in dry) / sum(x["launches"] for x in dry), 4)
    assert s["empty_time_share"] == round(sum(x["empty_ns"] for x in dry) / sum(x["end"] - x["start"] for x in dry), 4)
    assert s["dry_within_us"] == (truth["latency_ns"] + 10_000) / 1e3


# --- real samples ------------------------------------------------------------------------------

def _stream(doc, dev, stream):
    return next(s for s in doc["streams"] if (s["device_id"], s["stream_id"]) == (dev, stream))


def _rec(rel):
    return build_record(sample_model(rel))


@pytest.mark.samples
def test_a100_negq_back_pressured_near_960_not_cpu_stalls():
    """The oracle's reading: 77 of 80 slow deep calls in 954-972, 94 % returning as a pending op
    starts against a 23 % baseline; the old plateau rule called them 80 CPU stalls."""
    doc = _rec("kineto/a100_negq.json.gz")
    s = _stream(doc, 0, 7)
    assert s["queue_class"] == "saturated" and s["observed_limit"] == 963 and s["band"] == [954, 972]
    c = s["ceiling"]
    assert (c["slow_deep_calls"], c["in_band"]) == (80, 77) and c["returns_on_op_start"] >= 0.9
    assert c["baseline_returns_on_op_start"] < 0.3 and c["backlog_ops"] == 867
    assert s["blocked_launches"] == 77 and s["cpu_stalls"] == 0 and s["slow_no_pattern"] == 3
    assert s["max_depth"] == 994                # §5's peak: graph replays pending, not the limit
    rep = build_report(sample_model("kineto/a100_negq.json.gz"))
    q = next(x for x in rep["queues"] if x["stream_id"] == 7)
    assert q["time_at_or_above_ns"]["1000"] == 0 and q["ceiling"]["time_at_or_above_band_ns"] > 50_000_000


@pytest.mark.samples
def test_v100_saturates_at_1022_by_the_cluster():
    s = _stream(_rec("kineto/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"), 0, 7)
    assert s["queue_class"] == "saturated" and s["observed_limit"] == 1022
    assert s["ceiling"]["slow_deep_calls"] == s["ceiling"]["in_band"] == 533 and s["cpu_stalls"] == 0


@pytest.mark.samples
def test_fuser_cold_start_is_not_backpressure():
    doc = _rec("nsys/NVIDIA__Fuser__report1.sqlite")
    s = _stream(doc, 0, 7)
    assert doc["backpressure"] is False and s["queue_class"] != "saturated" and s["blocked_launches"] == 0
    assert s["observed_limit"] is None and s["ceiling"] is None       # its slow calls sit at depth 1
    # cold-start calls, as the record counts its slow first launches: 10 calls in 8 spike episodes
    assert s["cold_starts"] == doc["cold_start"]["calls"] == 10 and s["cpu_stalls"] == 0


@pytest.mark.samples
@pytest.mark.parametrize("rel, dev, stream", [("kineto/mi300_resnet.json.gz", 2, 0),
                                              ("kineto/trace_diff__test__test.json.gz", 1, 7)])
def test_deep_queues_without_slow_deep_calls_have_no_ceiling(rel, dev, stream):
    """mi300_resnet reaches 1,840 pending with no slow call; trace_diff 1,338 from graph ops (§6)."""
    doc = _rec(rel)
    s = _stream(doc, dev, stream)
    assert s["max_depth"] >= 1338 and s["observed_limit"] is None and s["ceiling"] is None
    assert s["queue_class"] != "saturated" and doc["backpressure"] is False


@pytest.mark.samples
def test_b200_eager_is_dry_because_ops_start_as_calls_return():
    s = _stream(_rec("kineto/b200__eager_trace.json.gz"), 0, 7)
    assert s["queue_class"] == "dry" and s["dry_launch_share"] >= 0.9 and s["empty_time_share"] >= 0.7


@pytest.mark.parametrize("span", [3, 400, 2**60])   # a count per (iteration, depth); one sort; a lexsort
def test_median_depth_per_iteration_is_each_iterations_lower_median(span):
    """The backlogged test's median depth per iteration (§V3): the lower median of the depths of the
    calls inside it, 0 for an iteration without calls; calls outside (-1) never count; any order."""
    import numpy as np
    from launchtui.analysis.queue_class import _median_per_iteration
    from launchtui.analysis.stream_calls import Calls
    rng = np.random.default_rng(span)
    n_it = 7
    k = rng.integers(-1, n_it - 1, 120)          # the last iteration holds no call
    depth = rng.integers(1, 1 + span, 120)
    got = _median_per_iteration(Calls(None, None, depth, k, None, None), n_it)
    for i in range(n_it):
        mine = sorted(int(d) for d, ki in zip(depth, k) if ki == i)
        assert got[i] == (mine[(len(mine) - 1) // 2] if mine else 0)
    assert got[-1] == 0
