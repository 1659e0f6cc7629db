"""The case record on the real shared samples (skipped without ../shared) and the `record` CLI."""
from __future__ import annotations

import json

import pytest

from conftest import sample, snapshot, sample_model
from launchtui.analysis.record import RecordOptions, build_record, record_with_streams
from launchtui.analysis.record_markdown import render_markdown
from launchtui.cli import main

pytestmark = pytest.mark.samples


def _rec(rel: str, **kw):
    return build_record(sample_model(rel), opt=RecordOptions(**kw))


def _stream(doc, dev, stream):
    return next(s for s in doc["streams"] if (s["device_id"], s["stream_id"]) == (dev, stream))


def test_v100_saturates_at_observed_limit_1022():
    doc = _rec("kineto/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", top=20)
    it = doc["iterations"]
    assert (it["source"], it["count"]) == ("ProfilerStep", 5)
    s = _stream(doc, 0, 7)
    assert s["queue_class"] == "saturated" and s["max_depth"] == 1022
    assert s["iteration_classes"] == {"saturated": 4, "dry": 0, "backlogged": 0, "normal": 1}
    assert s["observed_limit"] == 1022          # definitions.md §5-§6: launches at 1021 block
    assert s["blocked_launches"] >= 500 and s["cpu_stalls"] == 0
    assert doc["backpressure"] is True
    # GPU busy nearly all the time: launch overhead is not what limits this trace
    assert doc["overhead_share"] < 0.02
    phases = {r["kernel_name"]: (r["phase"], r["phase_share"]) for r in doc["top"]}
    assert phases["computeOffsetsKernel"][0] == "## forward ##"
    # launched mostly from the autograd thread, which has no annotations: the main thread's range at
    # the launch time (definitions.md §V5)
    assert phases["computeBOffsetsKernel"][0] == "## backward ##" and phases["computeBOffsetsKernel"][1] > 0.9


def test_b200_eager_is_dry():
    doc = _rec("kineto/b200__eager_trace.json.gz")
    s = _stream(doc, 0, 7)
    assert s["queue_class"] == "dry" and s["max_depth"] == 2 and s["blocked_launches"] == 0
    assert doc["backpressure"] is False
    # one serving step, `execute_context_1(...)`, marks the iteration (§V1), not the repeating
    # per-layer launch period inside it
    it = doc["iterations"]
    assert (it["source"], it["count"], it["heuristic"]) == ("step-like range", 1, False)
    assert s["iteration_classes"] == {"saturated": 0, "dry": 1, "backlogged": 0, "normal": 0}
    # the one 141 µs launch at depth 0 is its kernel's first launch: a cold start, never backpressure
    assert s["cpu_stalls"] == 0 and doc["cold_start"]["calls"] == 1 and doc["cold_start"]["first_launches"] == 1
    _, streams = record_with_streams(sample_model("kineto/b200__eager_trace.json.gz"))
    v = next(x for x in streams if (x.device_id, x.stream_id) == (0, 7))
    assert v.outside_stalls == [] and not v.blocked_calls


def test_verdict_lines_on_v100_saturated_and_b200_dry():
    """definitions.md §V9: the V100 is GPU-bound and back-pressured at 1022; B200 eager is host-bound:
    the GPU waits on the host 73 % of its one step, and its stream runs dry."""
    v = _rec("kineto/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    s = _stream(v, 0, 7)
    busy = 1 - v["idle_by_cause"]["idle_share"]
    assert v["launch_bound"] is False and v["launch_bound_level"] == "not launch-bound" and busy >= 0.95
    assert v["conclusion"] == (
        f"not launch-bound: GPU-bound (busy {busy * 100:.1f} %); host-bound time "
        f"{v['idle_by_cause']['host_bound']['share'] * 100:.1f} %; the CPU is ahead and back-pressured: "
        f"{s['blocked_launches']} launch calls blocked at depth 1022 — fewer launches free CPU time, not GPU time; "
        "the GPU's own work sets the pace: fewer or cheaper launches would not shorten the step")
    assert s["blocked_launches"] >= 500
    assert render_markdown(v).splitlines()[2] == f"**Verdict:** {v['conclusion']}"
    b = _rec("kineto/b200__eager_trace.json.gz")
    s = _stream(b, 0, 7)
    hb = b["idle_by_cause"]["host_bound"]
    assert b["launch_bound"] is True and b["launch_bound_level"] == "host-bound" and 0.70 <= hb["share"] <= 0.76
    assert s["queue_class"] == "dry" and s["dry_launch_share"] > 0.5 and "back-pressured" not in b["conclusion"]
    assert b["conclusion"].startswith(f"host-bound: the GPU waits on the host {hb['share'] * 100:.1f} % of the "
                                      "iteration")
    assert f"{b['gain']['realistic'][0]:.2f}–{b['gain']['realistic'][1]:.2f}× faster" in b["conclusion"]


def test_mi300_deep_queue_without_blocking_is_not_saturated():
    doc = _rec("kineto/mi300__timesformer-k400.json.gz")
    assert all(s["queue_class"] != "saturated" for s in doc["streams"])
    assert doc["backpressure"] is False


def test_graph_replays_deepen_the_queue_without_blocking():
    doc = _rec("kineto/trace_diff__test__test.json.gz")
    s = _stream(doc, 1, 7)
    assert s["max_depth"] == 1338 and s["queue_class"] != "saturated"


def test_h100_slice_saturated_at_1139_counting_the_pre_capture_backlog():
    """definitions.md §V3: 1,138 ops per device were launched before the slice and are still
    pending when its first calls block; counted, the blocked calls cluster at 1139 (the oracle's
    ceiling), and Nsight flagged them too. Without them the depth would read 1-82: no CPU stalls."""
    doc = _rec("nsys/nsys-ai__h100_2gpu_1s.sqlite")
    for dev, stream in ((0, 7), (1, 15)):
        s = _stream(doc, dev, stream)
        assert s["queue_class"] == "saturated" and s["command_buffer_full"] > 0
        n_it = doc["iterations"]["count"]
        assert s["iteration_classes"] == {"saturated": n_it, "dry": 0, "backlogged": 0, "normal": 0}
        assert s["observed_limit"] == 1139 and s["band"] == [1128, 1150]
        c = s["ceiling"]
        assert c["backlog_ops"] == 1138 and c["in_band"] == c["slow_deep_calls"] >= 50
        assert c["returns_on_op_start"] >= 0.85 and c["baseline_returns_on_op_start"] < 0.1
        assert s["cpu_stalls"] == 0 and s["slow_no_pattern"] == 0
    assert ("118 launch calls blocked at depth 1139 — fewer launches free CPU time, not GPU time"
            in doc["conclusion"])
    # emit_nvtx names (`aten::add, op_id = N`) group into phases without the suffix
    assert doc["top"] and all(r["phase"] and "op_id" not in r["phase"] for r in doc["top"])
    assert {r["phase"] for r in doc["top"]} <= {"aten::add", "aten::mul", "aten::gt", "aten::copy_", "aten::fill_"}


def test_dlprof_emit_nvtx_phases_without_seq():
    trace = sample_model("nsys/MohanadOdema__DLProf__nsys_profile.sqlite")
    doc = build_record(trace)
    page = render_markdown(doc)
    assert "seq =" not in page
    assert doc["top"] == [] and doc["empty_reason"] and len(doc["near_misses"]) == 3


def test_docs_before_after_fix_say_too_little_to_judge():
    for name in ("kineto/docs__traces__before_fix_trace.json", "kineto/docs__traces__after_fix_trace.json"):
        doc = _rec(name)
        assert doc["per_iteration"]["launches"]["median"] == 1
        assert "too_little" in doc and "Too little activity" in render_markdown(doc)
        assert doc["streams"][0]["queue_class"] == "normal"


def test_llama_single_row_table_is_eager_elementwise_and_dry():
    doc = _rec("nsys/Sh1mwww__llama3-inference__real_inference_simulation.sqlite")
    assert [r["kernel_name"] for r in doc["top"]] == ["distribution_elementwise_grid_stride_kernel"]
    assert doc["top"][0]["fix_rule"] == "eager_elementwise"
    assert _stream(doc, 0, 7)["queue_class"] == "dry"
    assert doc["syncs"]["by_api"][0]["api_name"] == "cudaDeviceSynchronize"
    # the capture has CPU scheduling data: the launching thread's busy share (tests/test_cpu_busy.py)
    cpu = doc["launch_thread_cpu"]
    assert cpu["available"] is True and cpu["source"] == "SCHED_EVENTS" and cpu["busy_pct"] == 17.8


def test_record_cli_markdown_json_and_atomic_output(tmp_path, capsys):
    p = sample("kineto/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    before = snapshot(p)
    assert main(["record", str(p)]) == 0
    page = capsys.readouterr().out
    assert page.startswith("# Launch page: ") and "saturated" in page and "observed limit 1022" in page
    out = tmp_path / "page.json"
    assert main(["record", str(p), "--json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == "launchtui-record/1"
    assert main(["record", str(p), "--json", "-o", str(out)]) == 2      # no overwrite without --force
    assert "exists" in capsys.readouterr().err
    assert main(["record", str(p), "--json", "-o", str(out), "--force"]) == 0
    assert main(["report", str(p), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["record"]["schema"] == "launchtui-record/1"
    assert rep["record"]["streams"] == doc["streams"]
    assert snapshot(p) == before
    assert main(["record", str(p), "--phase-level", "0"]) == 2


def test_tiny_kernels_are_not_hidden_by_a_few_long_instances():
    """definitions.md §V4 on the expert's readings: a group qualifies by the share of its launches
    under the threshold, and a short name hiding several functors ranks them apart."""
    from launchtui.analysis.launches import kernel_groups
    trace = sample_model("kineto/v100_dfindex.json.gz")
    # by short name the eager elementwise kernel averages over 10 µs: the nsys-ai rule drops it
    gr = kernel_groups(trace)
    name = [trace.strings[int(n)] for n in gr.name]
    i = name.index("vectorized_elementwise_kernel")
    assert gr.sum_kernel[i] / gr.count[i] >= 10_000
    doc = build_record(trace)
    rows = {r["kernel_name"]: r for r in doc["top"]}
    fill = rows["vectorized_elementwise_kernel<FillFunctor>"]      # zero_grad's fills, 2,065 in 5 steps
    assert (fill["launches"], fill["launches_per_iteration"]) == (2065, 413.0)
    assert "zero_grad" in fill["phase"] and fill["fix_rule"] == "zero_grad"
    assert fill["median_kernel_us"] <= 3 and fill["share_under_threshold"] >= 0.5
    assert "splitKreduce_kernel" not in rows
    assert all(r["share_under_threshold"] >= 0.5 and r["median_kernel_us"] < 10 for r in doc["top"])
    assert any(r["avg_kernel_us"] >= 10 for r in doc["top"])      # a mean the long instances inflate
    # --names full ranks the same functor rows
    full = build_record(trace, opt=RecordOptions(names="full"))
    assert [r["kernel_name"] for r in full["top"]] == [r["kernel_name"] for r in doc["top"]]

    res = build_record(sample_model("kineto/resnet50_legacy_workers4.json.gz"))
    assert [r["kernel_name"].split("<")[0] for r in res["top"]] == ["vectorized_elementwise_kernel"] * 3
    assert all(r["median_kernel_us"] <= 1 for r in res["top"])
    # every vectorized_elementwise_kernel launch of a step, whatever the threshold: 990 per step
    every = build_record(sample_model("kineto/resnet50_legacy_workers4.json.gz"),
                         opt=RecordOptions(top=50, min_launches=1, max_avg_us=1e12))
    assert sum(r["launches_per_iteration"] for r in every["top"]
               if r["kernel_name"].startswith("vectorized_elementwise_kernel<")) == 990


@pytest.mark.parametrize("rel,dev,stream,at_least", [("kineto/mi300_resnet.json.gz", 2, 0, 1000),
                                                     ("kineto/trace_diff__test__test.json.gz", 1, 7, 900)])
def test_a_queue_that_never_drains_is_backlogged(rel, dev, stream, at_least):
    """A stream never near empty (nothing pending < 5 % of each iteration, median launch depth >= 32)
    is backlogged, not "normal": the GPU has work queued (§V3)."""
    doc = _rec(rel)
    s = _stream(doc, dev, stream)
    assert s["queue_class"] == "backlogged" and s["blocked_launches"] == 0 and doc["backpressure"] is False
    assert s["empty_time_share"] < 0.05 and s["max_depth"] >= at_least
    assert s["iteration_classes"]["backlogged"] == sum(s["iteration_classes"].values())
    assert s["reason"].startswith("never near empty: launch calls find a median ")
    assert "GPU-bound or waiting on a dependency" in s["reason"]


def test_spike_words_follow_the_depth_rule():
    """a100_negq's slow calls at depth ~930-994 that do not block are never called CPU stalls
    (those are at depth <= 4): the words the TUI's `b` shows come from the record's depth rule."""
    from launchtui.analysis.record import record_and_stalls
    from launchtui.analysis.select import WHOLE
    trace = sample_model("kineto/a100_negq.json.gz")
    doc, words = record_and_stalls(trace, WHOLE, RecordOptions())
    s = next(x for x in doc["streams"] if x["queue_class"] == "saturated")
    assert s["cpu_stalls"] == 0 and s["slow_no_pattern"] == len(words) == 3
    depths = sorted(int(w.split("at depth ")[1].split(",")[0]) for w in words.values())
    assert depths == [927, 931, 994]
    assert all(w.endswith("not a blocked call (no full-queue pattern: neither backpressure nor a CPU stall)")
               for w in words.values())
