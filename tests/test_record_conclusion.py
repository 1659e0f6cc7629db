"""definitions.md §V9's levels on synthetic ground truth and on edited records: host-bound or
launch-bound only with a material host-bound share, a dry main stream and checks that hold; not
launch-bound otherwise, naming what the GPU waited for; cannot judge when the trace cannot show it."""
from __future__ import annotations

import copy

import pytest

from fixtures import record_cases as rc
from fixtures import synth
from launchtui.analysis.config import CONFIG
from launchtui.analysis.record import RecordOptions, build_record
from launchtui.analysis.record_conclusion import bound_level, checks, conclusion, main_stream
from launchtui.trace.load import open_trace


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    d = tmp_path_factory.mktemp("conclusion")
    out = {}

    def get(name):
        if name not in out:
            sc = rc.SCENARIOS[name]
            p = synth.write_nsys_sqlite(rc.workload(sc), d / f"{name}.sqlite")
            out[name] = build_record(open_trace(p, use_cache=False), opt=RecordOptions(iter_name=sc.iter_name))
        return out[name]
    return get


def _edit(doc, share=None, dry=None, launch_share=None):
    """The record with its host-bound share, its main stream's class or its launch part changed."""
    d = copy.deepcopy(doc)
    hb = d["idle_by_cause"]["host_bound"]
    if share is not None:
        ls = hb["launch_share"] / hb["share"] * share if launch_share is None else launch_share
        hb.update(share=share, launch_share=ls, host_share=share - ls,
                  dominant="launch" if ls >= share - ls else "host")
    if dry is not None:
        main_stream(d)["queue_class"] = "dry" if dry else "normal"
    d["checks"] = checks(d)
    return d


def test_dry_scenario_is_launch_bound_with_its_fix_and_gain(docs):
    doc = docs("dry")
    hb = doc["idle_by_cause"]["host_bound"]
    assert hb["share"] >= CONFIG.launch_bound_share and main_stream(doc)["queue_class"] == "dry"
    assert hb["dominant"] == "launch" and doc["launch_bound_level"] == "launch-bound" and doc["launch_bound"] is True
    lo, hi = doc["gain"]["realistic"]
    assert doc["conclusion"].startswith(f"launch-bound: the GPU waits on the host {hb['share'] * 100:.1f} % of the "
                                        "iteration")
    assert f"first fix: {doc['fixes'][0]['fix']}" in doc["conclusion"]
    assert f"{lo:.2f}–{hi:.2f}× faster" in doc["conclusion"]
    assert hi == doc["amdahl_bound"] == round(1 / (1 - hb["share"]), 3)



def test_a_gain_measured_under_the_python_tracer_is_an_upper_bound(docs):
    """The same launch-bound record, recorded under the Python tracer (limits.host_tracing): the
    level stands, the gain is said as "at most", and the reason is named (§V13)."""
    d = copy.deepcopy(docs("dry"))
    d["limits"]["host_tracing"] = {"python_frames": 900, "per_launch_call": 3.0, "note": "n"}
    bound, text = conclusion(d)
    lo, hi = d["gain"]["realistic"]
    assert bound is True and text.startswith("launch-bound")
    assert text.endswith(f"{lo:.2f}–{hi:.2f}× faster at most (Python tracing slowed the host)")
    assert not docs("dry")["conclusion"].endswith("at most (Python tracing slowed the host)")


def test_the_small_gap_check_allows_for_its_figures_rounding(docs):
    """The sub-ms gap figure is stored to 1 µs (SUB_MS_DIGITS): a host-bound time of 20 ns in no
    gap over 1 ms rounds it to 0 and must not fail the check; the same time in long gaps does."""
    d = copy.deepcopy(docs("dry"))
    gaps = d["cross_checks"]["idle_gaps"][str(d["device_id"])]
    hb = d["idle_by_cause"]["host_bound"]
    hb["per_iteration_ms"]["median"] = 0.00002
    gaps["sub_ms_per_iteration_ms"] = 0.0
    small = {c["name"]: c["ok"] for c in checks(d)}["small gaps hold the host-bound time"]
    detail = {c["name"]: c["detail"] for c in checks(d)}["small gaps hold the host-bound time"]
    assert detail == "gaps under 1 ms < 500 ns/iteration against host-bound 20 ns/iteration"
    hb["per_iteration_ms"]["median"] = 0.004      # 4 µs of host-bound time: 0 µs can no longer hold it
    long = {c["name"]: c["ok"] for c in checks(d)}["small gaps hold the host-bound time"]
    assert hb["share"] >= CONFIG.launch_bound_share and (small, long) == (True, False)


def test_a_dry_phase_behind_a_busy_queue_is_launch_bound_in_it(docs):
    """The profiler_step scenario: the unfused optimizer's launches run dry while the forward's
    GEMMs keep the stream busy the rest of the step: the step is not dry, the optimizer phase is,
    and it holds >= 10 % of the step in host-bound time."""
    doc = docs("profiler_step")
    hb = doc["idle_by_cause"]["host_bound"]
    assert hb["share"] >= CONFIG.launch_bound_share and main_stream(doc)["queue_class"] == "normal"
    top = doc["idle_by_cause"]["by_phase"][0]
    assert top["phase"] == "Optimizer.step#AdamW.step" and top["dry_launch_share"] >= 0.5
    assert top["launches_per_iteration"] == 384.0
    assert doc["launch_bound_level"] == "launch-bound" and doc["launch_bound"] is True
    assert doc["conclusion"].startswith("launch-bound in `Optimizer.step#AdamW.step`: ")
    assert doc["fixes"][0]["rule"] == "optimizer" and "faster" in doc["conclusion"]
    # the same host-bound time in a phase whose launches queue behind work: host bubbles, not bound
    d = _edit(doc)
    for p in d["idle_by_cause"]["by_phase"]:
        p["dry_launch_share"] = 0.3
    assert bound_level(d) == "not launch-bound"
    _, text = conclusion(d)
    assert (f"host-bound time {hb['share'] * 100:.1f} % in host bubbles, most of it in `{top['phase']}`" in text
            and "faster" not in text)


def test_level_rule_on_edited_records(docs):
    doc = _edit(docs("dry"))
    for p in doc["idle_by_cause"]["by_phase"]:
        p["dry_launch_share"] = 0.3     # the stream's own dryness decides below
    assert bound_level(_edit(doc, dry=False)) == "not launch-bound"
    assert bound_level(_edit(doc, share=0.09)) == "not launch-bound"
    assert bound_level(_edit(doc, share=0.30, launch_share=0.05)) == "host-bound"
    assert bound_level(_edit(doc, share=0.30, launch_share=0.20)) == "launch-bound"
    # a failed check lowers the level and the conclusion says why
    bad = _edit(doc)
    bad["checks"][1] = {**bad["checks"][1], "ok": False, "detail": "exposed launch time above the calls"}
    assert bound_level(bad) == "not launch-bound"
    assert "checks lower the level: exposed launch time above the calls" in conclusion(bad)[1]


def test_cannot_judge_and_provably_not():
    base = {"too_little": "3 launches in 20.0 µs", "too_little_bound": 0.2, "streams": []}
    assert bound_level(base) is None
    assert conclusion(base) == (None, "cannot judge: too little activity (3 launches in 20.0 µs)")
    small = {**base, "too_little_bound": 0.0004}
    assert bound_level(small) == "not launch-bound"
    assert conclusion(small)[1].startswith("not launch-bound (at most 0.04 % of the window")


def test_warm_up_capture_and_sampled_trace_cannot_judge(docs):
    whole = docs("whole")     # one short window: most launches are their kernel's first
    assert whole["cold_start"]["warm_up_capture"] and whole["launch_bound_level"] is None
    assert whole["conclusion"].startswith("cannot judge: cold start / warm-up capture")
    d = copy.deepcopy(docs("dry"))
    d["limits"] = {**d["limits"], "sampled": True, "reason": "correlation ids are sparse"}
    assert bound_level(d) is None
    assert conclusion(d)[1] == "cannot judge: GPU idle not measurable here: correlation ids are sparse"


def test_backpressure_is_said_with_the_level(docs):
    doc = docs("limit_700")
    assert doc["backpressure"] and doc["launch_bound_level"] == "not launch-bound"
    assert "the CPU is ahead and back-pressured" in doc["conclusion"] and "at depth 700" in doc["conclusion"]
