"""The case record on synthetic ground truth (fixtures/record_cases.py): iterations by every source,
exposed overhead to the ns, queue classes, a queue limit other than 1024, CPU stalls, emit_nvtx
names, fix rules."""
from __future__ import annotations

import json

import numpy as np
import pytest

from fixtures import record_cases as rc
from fixtures import synth
from launchtui.analysis import cpu_busy
from launchtui.analysis import exposed as ex
from launchtui.analysis import idle_causes as ic
from launchtui.analysis import iterations as itr
from launchtui.analysis.fixes import rule_for
from launchtui.analysis.phases import normalise
from launchtui.analysis.record import SCHEMA, RecordOptions, build_record
from launchtui.analysis.record_markdown import render_markdown
from launchtui.trace.load import open_trace


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """Scenario name -> (trace, workload as the file holds it, variant); written once per module."""
    d = tmp_path_factory.mktemp("record")
    out = {}

    def get(name, variant="modern"):
        key = (name, variant)
        if key not in out:
            sc = rc.SCENARIOS[name]
            p = synth.write_nsys_sqlite(rc.workload(sc), d / f"{name}.{variant}.sqlite", variant=variant)
            out[key] = (open_trace(p, use_cache=False), rc.nsys_view(sc, variant), variant)
        return out[key]
    return get


def _record(trace, name=None, **kw):
    return build_record(trace, opt=RecordOptions(iter_name=name, **kw))


def test_profiler_step_iterations_and_figures_to_the_ns(traces):
    trace, w, _ = traces("profiler_step")
    dev = rc.primary_device(w)
    steps = rc.step_ranges(w, dev)
    doc = _record(trace)
    it = doc["iterations"]
    assert (it["source"], it["count"], it["heuristic"]) == ("ProfilerStep", len(steps), False)
    assert list(zip(it["starts_ns"], it["ends_ns"])) == steps
    truth = rc.per_iteration_truth(w, dev, steps, _cold_calls(trace))
    starts, ends = np.array([s for s, _ in steps]), np.array([e for _, e in steps])
    on = ex.device_ops(trace, dev)
    gaps = ex.device_gaps(trace, dev, min(int(starts.min()), int(trace.ops.start[on].min())), int(ends.max()))
    causes = ic.gap_causes(trace, ex.device_ops(trace, dev), ex.device_launch_calls(trace, dev), gaps.start, gaps.end,
                           cold_calls=np.array(sorted(_cold_calls(trace)), np.int64))
    per = causes.measure_in(starts, ends)
    for c in ic.CAUSES:
        assert per[c].tolist() == [t["causes"][c] for t in truth], c
    got = ex.per_iteration(trace, dev, starts, ends, per["launch"])
    for key, arr in (("launches", got.launches), ("launch_api_ns", got.launch_api_ns), ("busy_ns", got.busy_ns),
                     ("idle_ns", got.idle_ns), ("exposed_ns", got.exposed_ns), ("iteration_ns", got.iteration_ns)):
        assert arr.tolist() == [t[key] for t in truth], key
    assert all(sum(t["causes"].values()) == t["idle_ns"] for t in truth)
    exp = [t["exposed_ns"] for t in truth]
    assert doc["per_iteration"]["exposed_overhead_ms"]["median"] == round(float(np.median(exp)) / 1e6, 6)
    total = sum(t["iteration_ns"] for t in truth)
    assert doc["overhead_share"] == round(sum(exp) / total, 4)
    hb = sum(t["causes"]["launch"] + t["causes"]["host"] for t in truth) / total
    assert doc["idle_by_cause"]["host_bound"]["share"] == round(hb, 4)
    assert doc["amdahl_bound"] == round(1 / (1 - hb), 3)
    assert 0 < hb < 1 and all(0 < t["exposed_ns"] <= t["idle_ns"] for t in truth)


def _cold_calls(trace) -> set:
    from launchtui.analysis import backpressure as bp
    from launchtui.analysis.cold_start import cold_start
    return set(cold_start(trace, bp.spikes(trace)).calls.tolist())


def test_step_like_and_user_named_iterations(traces):
    for name, iter_name, source, prefix in (("step_like", None, itr.SOURCE_STEP_LIKE, "train_step_"),
                                             ("user_named", "MY_LOOP", itr.SOURCE_NAMED, "my_loop ")):
        trace, w, _ = traces(name)
        steps = rc.step_ranges(w, rc.primary_device(w), prefix)
        it = _record(trace, iter_name)["iterations"]
        assert it["source"] == source
        assert list(zip(it["starts_ns"], it["ends_ns"])) == steps
    # a name that matches nothing falls through to the next source and says so
    trace, w, _ = traces("profiler_step")
    it = _record(trace, "no-such-range")["iterations"]
    assert it["source"] == "ProfilerStep" and "no range name contains 'no-such-range'" in it["note"]


def test_periodic_iterations_without_ranges(traces):
    trace, w, _ = traces("periodic")
    doc = _record(trace)
    it = doc["iterations"]
    sc = rc.SCENARIOS["periodic"]
    assert it["source"] == itr.SOURCE_PERIODIC and it["heuristic"] is True
    assert it["count"] == sc.cfg.iterations - 1          # boundaries at an anchor's launches
    # each period launches what one ProfilerStep of the same simulation launches
    ref = synth.simulate(sc.cfg)
    steps = rc.step_ranges(ref, 0)
    per_step = [t["launches"] for t in rc.per_iteration_truth(ref, 0, steps)]
    assert doc["per_iteration"]["launches"]["median"] == per_step[1]
    med_step = float(np.median([e - s for s, e in steps]))
    assert abs(it["median_ns"] - med_step) / med_step < 0.05
    assert "heuristic" in render_markdown(doc)


def test_whole_window_when_nothing_repeats(traces):
    trace, w, _ = traces("whole")
    doc = _record(trace)
    it = doc["iterations"]
    assert it["source"] == "none" and it["count"] == 1
    calls = rc.device_launch_calls(w, 0)
    lo = min(int(w.api["start"][calls[0]]), int(w.ops["start"][w.ops["device"] == 0].min()))
    assert (it["starts_ns"][0], it["ends_ns"][0]) == (lo, int(w.ops["end"][w.ops["device"] == 0].max()))
    assert "whole window" in render_markdown(doc)


def _iters(doc):
    return list(zip(doc["iterations"]["starts_ns"], doc["iterations"]["ends_ns"]))


def test_queue_class_ignores_a_burst_outside_the_iterations(traces):
    # the burst that fills device 0's queue runs after the last ProfilerStep: not judged (§V3)
    trace, w, variant = traces("profiler_step")
    doc = _record(trace)
    whole = rc.stream_truth(w, variant)
    assert whole[(0, 7)]["blocked"] >= 3            # a whole-trace judgement would call it saturated
    truth = rc.stream_truth(w, variant, _iters(doc))
    by = {(s["device_id"], s["stream_id"]): s for s in doc["streams"]}
    assert all(s["queue_class"] != "saturated" for s in doc["streams"]) and doc["backpressure"] is False
    for k, t in truth.items():
        assert by[k]["blocked_launches"] == t["blocked"] == 0, k
        assert by[k]["cpu_stalls"] == t["cpu_stalls"], k   # the lazy-loading stalls are in the warm-up
        assert sum(by[k]["iteration_classes"].values()) == len(_iters(doc))
    assert by[(0, 7)]["max_depth"] < w.cfg.queue_limit
    # ... but said: the full queue the timeline shows after the steps is not silently dropped
    assert by[(0, 7)]["outside_blocked"] == whole[(0, 7)]["blocked"]
    assert by[(0, 7)]["outside_max_depth"] + 1 >= w.cfg.queue_limit > by[(0, 7)]["max_depth"]
    assert f"outside the iterations (not judged) pending reaches {by[(0, 7)]['outside_max_depth']}" in by[(0, 7)]["reason"]
    assert all(s["outside_blocked"] == 0 for k, s in by.items() if k != (0, 7))
    page = render_markdown(doc)
    assert ("Backpressure: no inside the iterations" in page
            and f"device 0 stream 7 reaches {by[(0, 7)]['outside_max_depth']} pending in `inference_burst` "
                f"({whole[(0, 7)]['blocked']} launch calls blocked)" in page)


def test_queue_class_per_iteration_burst_in_one_step(traces):
    """Dry steps, one of which runs an optimizer burst that blocks at the queue limit: the stream
    is dry in 3 of 4 iterations and saturated in 1, said so, and not called saturated."""
    trace, w, variant = traces("burst_in_step")
    doc = _record(trace)
    steps = _iters(doc)
    assert steps == rc.step_ranges(w, 0)
    truth = rc.stream_truth(w, variant, steps)[(0, 7)]
    # ground truth: which step holds the simulation's blocked calls
    hit = {i for i, (a, b) in enumerate(steps) for t in truth["blocked_at"] if a <= t < b}
    assert hit == {w.cfg.burst_in_step - 1} and truth["blocked"] >= 3
    s = {(x["device_id"], x["stream_id"]): x for x in doc["streams"]}[(0, 7)]
    assert s["iteration_classes"] == {"saturated": 1, "dry": 3, "backlogged": 0, "normal": 0}
    assert s["queue_class"] == "dry" and doc["backpressure"] is False
    assert s["blocked_launches"] == truth["blocked"] and s["observed_limit"] == w.cfg.queue_limit
    assert s["max_depth"] == w.cfg.queue_limit
    assert s["dry_launch_share"] > 0.5    # pooled over the dry steps: the GPU waited for the calls
    assert "device 0 stream 7: dry (3 of 4 iterations; 1 saturated)" in doc["verdict"]
    assert "device 0 stream 7 is back-pressured in 1 of 4 iterations" in doc["conclusion"]
    assert "the CPU is ahead and back-pressured" not in doc["conclusion"]
    assert "iterations: 1 saturated, 3 dry" in s["reason"]


def test_queue_classes_stalls_and_command_buffer_full(traces):
    trace, w, variant = traces("limit_700")
    doc = _record(trace)
    truth = rc.stream_truth(w, variant, _iters(doc))
    by = {(s["device_id"], s["stream_id"]): s for s in doc["streams"]}
    sat = [k for k, s in by.items() if s["queue_class"] == "saturated"]
    assert sat == [k for k, t in truth.items() if t["blocked"]] == [(0, 7)]
    assert by[(0, 7)]["command_buffer_full"] > 0 and by[(0, 7)]["observed_limit"] == 700
    for k, t in truth.items():
        assert by[k]["blocked_launches"] == t["blocked"], k
        assert by[k]["cpu_stalls"] == t["cpu_stalls"] - t.get("lazy", 0), k   # lazy loads: cold starts
        assert by[k]["cold_starts"] == t.get("lazy", 0), k
    assert doc["backpressure"] is True
    # no iteration marks: the whole window holds the warm-up's lazy-loading first launches at depth
    # 0: cold starts, counted apart from CPU stalls and backpressure (§V3)
    trace, w, variant = traces("whole")
    doc = _record(trace)
    truth = rc.stream_truth(w, variant, _iters(doc))
    assert sum(s["cold_starts"] for s in doc["streams"]) == sum(t["cpu_stalls"] for t in truth.values()) == sum(
        t.get("lazy", 0) for t in truth.values()) >= 1
    assert doc["cpu_stalls"] == 0 and doc["backpressure"] is False


def test_blocking_at_a_limit_other_than_1024_without_nsight_evidence(traces):
    # meta2022 exports have no OVERHEAD table: saturation must come from the launch times alone
    trace, w, variant = traces("limit_700", "meta2022")
    assert not len(trace.overheads)
    doc = _record(trace)
    truth = rc.stream_truth(w, variant, _iters(doc))
    s = {(x["device_id"], x["stream_id"]): x for x in doc["streams"]}[(0, 7)]
    assert s["queue_class"] == "saturated" and s["max_depth"] == 700
    assert s["observed_limit"] == 700
    assert s["blocked_launches"] == truth[(0, 7)]["blocked"] >= 3
    assert s["cpu_stalls"] + s["cold_starts"] == truth[(0, 7)]["cpu_stalls"]
    assert s["cold_starts"] == truth[(0, 7)].get("lazy", 0)


def test_dry_stream(traces):
    trace, w, _ = traces("dry")
    s = {(x["device_id"], x["stream_id"]): x for x in _record(trace)["streams"]}[(0, 7)]
    assert s["queue_class"] == "dry" and s["blocked_launches"] == 0
    assert s["dry_launch_share"] > 0.5


def test_emit_nvtx_names_group_into_phases(traces):
    plain, _, _ = traces("step_like")
    named, w, _ = traces("emit_nvtx")
    assert any(", seq = " in n for n in w.range_names)
    a, b = _record(plain, "train_step"), _record(named)
    assert b["iterations"]["source"] == "ProfilerStep"
    phases = [r["phase"] for r in b["top"]]
    assert phases and not any("seq =" in p or "op_id" in p for p in phases)
    assert [(r["kernel_name"], r["phase"]) for r in b["top"]] == [(r["kernel_name"], r["phase"]) for r in a["top"]]
    assert b["top"][0]["phase"] == "Optimizer.step#AdamW.step"
    # level 2 goes one range deeper where there is one, never past the innermost
    deeper = _record(named, phase_level=2)
    assert all(r["phase"].startswith(p) for r, p in zip(deeper["top"], phases))


def test_normalise_strips_emit_nvtx_suffixes():
    assert normalise("aten::mul, seq = 3, op_id = 7, sizes = [[2, 3], []]") == "aten::mul"
    assert normalise("aten::add, op_id = 314339") == "aten::add"
    assert normalise("CheckpointFunctionBackward, stashed seq = 12") == "CheckpointFunctionBackward"
    assert normalise("## forward ##") == "## forward ##"


def test_fix_rules_each():
    assert rule_for("ncclDevKernel_AllReduce_Sum_f32_RING_LL")[0] == "nccl"
    assert rule_for("elementwise_kernel", "Optimizer.step#AdamW.step")[0] == "optimizer"
    assert rule_for("multi_tensor_apply_kernel")[0] == "optimizer"
    assert rule_for("triton_poi_fused_mul_add_0", "forward") == ("compiled", rule_for("triton_red_fused_sum_1")[1])
    assert 'mode="reduce-overhead"' in rule_for("triton_poi_fused_mul_add_0")[1]
    for k in ("vectorized_elementwise_kernel", "elementwise_kernel", "unrolled_elementwise_kernel", "reduce_kernel",
              "distribution_elementwise_grid_stride_kernel"):
        assert rule_for(k, "forward")[0] == "eager_elementwise", k
    assert rule_for("splitKreduce_kernel")[0] == "other"


def test_top_rows_carry_rule_fixes_and_syncs(traces):
    trace, w, _ = traces("profiler_step")
    doc = _record(trace)
    rules = {r["kernel_name"]: r["fix_rule"] for r in doc["top"]}
    # the optimizer's elementwise_kernel functors, one row each (definitions.md §V4)
    optim = [n for n in rules if n.startswith("elementwise_kernel<")]
    assert optim and all(rules[n] == "optimizer" for n in optim)
    assert rules.get("triton_poi_fused_mul_add_0", "compiled") == "compiled"
    # top ranks by launch cost per iteration
    cost = [r["launch_cost_per_iteration_ms"] for r in doc["top"]]
    assert cost == sorted(cost, reverse=True) and len(doc["top"]) == 3
    # the per-step cudaStreamSynchronize of device 0's thread
    sy = doc["syncs"]
    assert sy["per_iteration"]["median"] == 1 and sy["fix"]
    assert [b["api_name"] for b in sy["by_api"]] == ["cudaStreamSynchronize"]
    # NCCL rows are set apart
    assert all("nccl" not in r["kernel_name"].lower() for r in doc["top"])


def test_empty_table_says_why_with_near_misses(traces):
    trace, _, _ = traces("profiler_step")
    doc = _record(trace, min_launches=100_000)
    assert doc["top"] == [] and "fewer launches" in doc["empty_reason"]
    assert len(doc["near_misses"]) == 3
    assert all("launches <" in r["misses"] for r in doc["near_misses"])
    assert "Nearest misses" in render_markdown(doc)


def test_cross_checks_and_json_schema(traces):
    trace, w, _ = traces("profiler_step")
    doc = _record(trace)
    assert doc["schema"] == SCHEMA == "launchtui-record/1"
    for k in ("iterations", "per_iteration", "overhead_share", "amdahl_bound", "streams", "backpressure", "top",
              "near_misses", "cross_checks", "launch_thread_cpu"):
        assert k in doc
    for k in ("launches", "launch_api_ms", "gpu_busy_ms", "gpu_idle_ms", "exposed_overhead_ms", "iteration_ms"):
        assert set(doc["per_iteration"][k]) == {"median", "min", "max"}
    for k in ("source", "count", "median_ns", "min_ns", "max_ns"):
        assert k in doc["iterations"]
    for s in doc["streams"]:
        assert {"device_id", "stream_id", "queue_class", "max_depth", "observed_limit", "blocked_launches",
                "cpu_stalls"} <= set(s)
    for r in doc["top"]:
        assert {"kernel_name", "device_id", "launches_per_iteration", "avg_api_us", "avg_kernel_us", "phase",
                "fix"} <= set(r)
    gaps = doc["cross_checks"]["idle_gaps"]["0"]["buckets"]
    assert list(gaps) == ["<10us", "10-100us", "0.1-1ms", ">=1ms"]
    steps = rc.step_ranges(w, 0)
    truth = rc.per_iteration_truth(w, 0, steps)
    assert round(sum(b["total_ms"] for b in gaps.values()), 3) == pytest.approx(
        sum(t["idle_ns"] for t in truth) / 1e6, abs=0.005)
    names = {a["api_name"]: a["count"] for a in doc["cross_checks"]["api_totals"]}
    assert sum(names.values()) == sum(t["launches"] for t in truth)
    assert doc["launch_thread_cpu"] == {"available": False, "reason": cpu_busy.NOT_RECORDED}
    assert "--sample=process-tree --cpuctxsw=process-tree" in doc["launch_thread_cpu"]["reason"]
    json.dumps(doc)


def test_record_json_is_byte_identical_across_runs(traces, tmp_path):
    """definitions.md §9: the same trace and options give byte-identical JSON (here: the same trace
    twice, and a second file written from the same workload, apart from its source identity)."""
    from launchtui.output import dumps
    trace, _, _ = traces("profiler_step")
    a = _record(trace)
    assert dumps(a) == dumps(_record(trace))
    p = synth.write_nsys_sqlite(rc.workload(rc.SCENARIOS["profiler_step"]), tmp_path / "again.sqlite")
    b = _record(open_trace(p, use_cache=False))
    a.pop("source"), b.pop("source")
    assert dumps(a) == dumps(b)


def _truth_host_bound(w, doc, trace):
    """Host-bound share by the independent walk over the record's iterations (their bounds are
    tested above)."""
    dev = rc.primary_device(w)
    it = doc["iterations"]
    truth = rc.per_iteration_truth(w, dev, list(zip(it["starts_ns"], it["ends_ns"])), _cold_calls(trace))
    hb = sum(t["causes"]["launch"] + t["causes"]["host"] for t in truth)
    return hb / sum(t["iteration_ns"] for t in truth)


def test_conclusion_launch_bound_burst_and_back_pressured_limit(traces):
    """definitions.md §V9 on ground truth: host-bound share from the walk, a dry main stream, and
    blocked calls at the simulated limit."""
    trace, w, variant = traces("burst_in_step")
    doc = _record(trace)
    share = _truth_host_bound(w, doc, trace)
    assert doc["idle_by_cause"]["host_bound"]["share"] == round(share, 4) and share >= 0.10
    assert doc["launch_bound"] is True and doc["launch_bound_level"] == "launch-bound"
    c = doc["conclusion"]
    assert c.startswith(f"launch-bound: the GPU waits on the host {share * 100:.1f} % of the iteration")
    assert f"first fix: {doc['fixes'][0]['fix']}" in c and f"{1 / (1 - share):.2f}× faster" in c
    assert "launches/iteration; host-bound" in doc["verdict"][0]
    md = render_markdown(doc).splitlines()
    assert md[2] == f"**Verdict:** {c}"
    trace, w, variant = traces("limit_700")
    doc = _record(trace)
    blocked = sum(t["blocked"] for t in rc.stream_truth(w, variant, _iters(doc)).values())
    assert (f"the CPU is ahead and back-pressured: {blocked} launch calls blocked at depth {w.cfg.queue_limit} — "
            "fewer launches free CPU time, not GPU time") in doc["conclusion"]


def test_conclusion_not_launch_bound_and_whole_window_wording(traces):
    trace, w, _ = traces("limit_700")     # the GPU sets the pace: not launch-bound, whatever blocks
    doc = _record(trace)
    assert doc["launch_bound"] is False and doc["launch_bound_level"] == "not launch-bound"
    assert "GPU-bound" in doc["conclusion"] and "faster" not in doc["conclusion"]
    trace, w, _ = traces("whole")
    doc = _record(trace)
    assert doc["iterations"]["source"] == "none"        # JSON keeps its source value
    md = render_markdown(doc)
    assert "Iterations: none found — the whole window counts as one; median" in md
    assert "from none" not in md


def test_conclusion_too_little_is_null_and_diff_reads_it():
    from launchtui.analysis.diff import launch_class
    from launchtui.analysis.record_conclusion import conclusion
    assert conclusion({"too_little": "3 launches in 20.0 µs"}) == (
        None, "cannot judge: too little activity (3 launches in 20.0 µs)")
    assert launch_class({"launch_bound": None, "overhead_share": 0.5}) == "unknown"
    assert launch_class({"launch_bound": False, "overhead_share": 0.5}) == "not launch-bound"
    assert launch_class({"overhead_share": 0.5}) == "launch-bound"     # records from before §V9
    # the record's level carries the middle band, so a diff says "partly launch-bound → not launch-bound"
    assert launch_class({"launch_bound": False, "launch_bound_level": "partly launch-bound"}) == "partly launch-bound"
    assert launch_class({"launch_bound": None, "launch_bound_level": None}) == "unknown"


def test_names_full_groups_the_top_rows_by_distinguishing_name(traces, tmp_path, capsys):
    """`record --names full` ranks every kernel by its distinguishing name, as `report --names full`
    does; the default ranks by short name except where one short name hides several functors
    (the optimizer's elementwise_kernel<AddcmulFunctor> ...): those rows are the same in both
    (definitions.md §V4). The option is stated in the record."""
    from launchtui.cli import main
    trace, w, _ = traces("profiler_step")
    short, full = _record(trace, top=20), _record(trace, names="full", top=20)
    assert short["options"]["names"] == "short" and full["options"]["names"] == "full"
    full_names = [r["kernel_name"] for r in full["top"]]
    for doc in (short, full):
        names = [r["kernel_name"] for r in doc["top"]]
        assert all("<" in n and n.endswith("Functor>") for n in names if n.startswith("elementwise_kernel")), names
        assert any(n.startswith("elementwise_kernel<") for n in names), names
    # the split rows are the same rows either way; a short name with one functor keeps its short name
    by_full = {r["kernel_name"]: r for r in full["top"]}
    for r in short["top"]:
        if "<" in r["kernel_name"]:
            assert r == by_full[r["kernel_name"]]
    functors = {}
    for kt in w.kernel_types:
        functors.setdefault(kt.short, set()).add(kt.functor)
    assert all("<" not in r["kernel_name"] or len(functors[r["kernel_name"].split("<")[0]]) > 1 for r in short["top"])
    full = _record(trace, names="full")
    full_names = [r["kernel_name"] for r in full["top"]]
    p = synth.write_nsys_sqlite(rc.workload(rc.SCENARIOS["profiler_step"]), tmp_path / "t.sqlite")
    assert main(["record", "--json", "--names", "full", "--no-cache", str(p)]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert [r["kernel_name"] for r in cli["top"]] == full_names


def test_split_rows_qualify_on_their_short_names_launch_count(traces):
    """definitions.md §V4: the launch count qualifies the short name's family (every functor on the
    device), the time share each row; so splitting never hides a frequent family whose functors
    each fall under --min-launches."""
    trace, _, _ = traces("profiler_step")
    every = _record(trace, top=50, min_launches=1, max_avg_us=1e12)
    rows = [r for r in every["top"] if r["kernel_name"].startswith("elementwise_kernel<")]
    assert len(rows) == 3
    most, total = max(r["launches"] for r in rows), sum(r["launches"] for r in rows)
    for names in ("short", "full"):
        doc = _record(trace, top=50, min_launches=most + 1, names=names)
        got = {r["kernel_name"]: r["launches"] for r in doc["top"]
               if r["kernel_name"].startswith("elementwise_kernel<")}
        assert got == {r["kernel_name"]: r["launches"] for r in rows}, names
        none = _record(trace, top=50, min_launches=total + 1, names=names)
        assert not [r for r in none["top"] if r["kernel_name"].startswith("elementwise_kernel<")]
        miss = [r for r in none["near_misses"] if r["kernel_name"].startswith("elementwise_kernel<")]
        assert none["top"] == [] and len(miss) == 3       # the nearest: one launch short
        assert all(f"{total} launches < {total + 1} (elementwise_kernel, every functor)" in r["misses"] for r in miss)
