"""definitions.md §V9's three levels on synthetic ground truth: launch-bound, partly launch-bound (the
middle band, only with evidence) and not launch-bound, with queue words that agree with the level."""
from __future__ import annotations

import copy

import pytest

from fixtures import record_cases as rc
from fixtures import synth
from launchtui.analysis.config import CONFIG
from launchtui.analysis.record import RecordOptions, build_record
from launchtui.analysis.record_conclusion import bound_level, conclusion
from launchtui.trace.load import open_trace


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    d = tmp_path_factory.mktemp("conclusion")
    out = {}

    def get(name):
        if name not in out:
            sc = rc.SCENARIOS[name]
            p = synth.write_nsys_sqlite(rc.workload(sc), d / f"{name}.sqlite")
            doc = build_record(open_trace(p, use_cache=False), opt=RecordOptions(iter_name=sc.iter_name))
            w = rc.nsys_view(sc)
            it = list(zip(doc["iterations"]["starts_ns"], doc["iterations"]["ends_ns"]))
            truth = rc.per_iteration_truth(w, rc.primary_device(w), it)
            out[name] = (doc, sum(t["exposed_ns"] for t in truth) / sum(t["iteration_ns"] for t in truth))
        return out[name]
    return get


def _with_share(doc, share, flag=None):
    d = copy.deepcopy(doc)
    d["overhead_share"], d["amdahl_bound"] = share, round(1 / (1 - share), 3)
    if flag is not None:
        d["rule_of_thumb"]["flag"] = flag
    return d


def test_band_without_evidence_is_not_launch_bound(docs):
    # the whole-window scenario: 5-10 % exposed, the rule of thumb does not flag it. Its stream 7 runs
    # dry (nothing pending most of the window, §V3): that evidence makes it partly launch-bound;
    # with normal queues in its place nothing backs the band
    doc, share = docs("whole")
    assert CONFIG.partly_bound_share <= share < CONFIG.launch_bound_share and not doc["rule_of_thumb"]["flag"]
    s = next(x for x in doc["streams"] if (x["device_id"], x["stream_id"]) == (0, 7))
    assert s["queue_class"] == "dry" and s["empty_time_share"] >= 0.4
    assert doc["launch_bound"] is False and doc["launch_bound_level"] == "partly launch-bound"
    normal = copy.deepcopy(doc)
    for x in normal["streams"]:
        x["queue_class"] = "normal"
    assert bound_level(normal) == "not launch-bound"
    bound, text = conclusion(normal)
    assert bound is False and text == (f"not launch-bound: exposed launch overhead is {share * 100:.1f} % of the "
                                       "iteration (< 10 %); the rule of thumb agrees")


def test_dry_stream_moves_the_band_to_partly_and_words_agree(docs):
    doc, share = docs("dry")
    s = next(x for x in doc["streams"] if x["queue_class"] == "dry")
    assert share >= CONFIG.launch_bound_share and doc["launch_bound_level"] == "launch-bound"
    waits = (f"the GPU waits on launches: {s['dry_launch_share'] * 100:.0f} % of launches start as their call "
             f"returns (device {s['device_id']} stream {s['stream_id']})")
    assert waits in doc["conclusion"]
    # the same evidence at 7 %: partly launch-bound, with the fix and the Amdahl gain
    partly = _with_share(doc, 0.07, flag=False)
    assert bound_level(partly) == "partly launch-bound"
    bound, text = conclusion(partly)
    assert bound is False
    assert text.startswith("partly launch-bound: exposed launch overhead is 7.0 % of the iteration (>= 5 %, < 10 %)")
    assert waits in text and f"first fix: {doc['top'][0]['fix']}" in text and f"at most {partly['amdahl_bound']:.2f}× faster" in text
    # at 3 % the gaps still wait on launches, but the words say they do not add up to much
    low = _with_share(doc, 0.03, flag=False)
    bound, text = conclusion(low)
    assert (bound, bound_level(low)) == (False, "not launch-bound")
    assert "the GPU waits on launches" not in text and "first fix" not in text and "faster" not in text
    assert (f"launches start as their call returns ({s['dry_launch_share'] * 100:.0f} %, "
            f"device {s['device_id']} stream {s['stream_id']}) but the waits add up to only 3.0 % of the "
            "iteration") in text


def test_rule_of_thumb_alone_is_evidence_for_partly(docs):
    doc, _ = docs("step_like")      # normal queues only
    assert {s["queue_class"] for s in doc["streams"]} == {"normal"}
    assert bound_level(_with_share(doc, 0.08, flag=True)) == "partly launch-bound"
    assert bound_level(_with_share(doc, 0.08, flag=False)) == "not launch-bound"
    assert bound_level(_with_share(doc, 0.04, flag=True)) == "not launch-bound"
    assert bound_level({"too_little": "3 launches in 20.0 µs"}) is None


@pytest.mark.samples
def test_real_flux_pair_rule_of_thumb_backs_the_band():
    """The diffusion pair: 10.1 % exposed is launch-bound; 8.3 % with the rule of thumb's flag (no dry
    stream) is partly launch-bound, and its words name the fix and the gain, not the queues."""
    from conftest import sample
    base = build_record(open_trace(sample("kineto/xdit_flux1__baseline__rank0.json.gz"), use_cache=False))
    sage = build_record(open_trace(sample("kineto/xdit_flux1__aiter_sage__rank0.json.gz"), use_cache=False))
    assert base["overhead_share"] >= 0.10 and base["launch_bound_level"] == "launch-bound"
    assert 0.05 <= sage["overhead_share"] < 0.10 and sage["rule_of_thumb"]["flag"] is True
    assert all(s["queue_class"] == "normal" for s in sage["streams"])
    assert sage["launch_bound_level"] == "partly launch-bound" and sage["launch_bound"] is False
    assert sage["conclusion"].startswith("partly launch-bound: exposed launch overhead is 8.3 % of the iteration "
                                         "(>= 5 %, < 10 %); the rule of thumb agrees; first fix: ")
