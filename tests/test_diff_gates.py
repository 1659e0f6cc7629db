"""The `--fail-if` expression language and the diff's pure helpers, on hand-made documents."""
from __future__ import annotations

import math

import pytest

from launchtui.analysis import diff
from launchtui.analysis.gates import Gate, GateError, evaluate, parse_gate, parse_gates, tripped_line


def doc(**per):
    """A diff document with only per-iteration figures: name=(before, after)."""
    return {"per_iteration": {k: diff.change(b, a) for k, (b, a) in per.items()}}


@pytest.mark.parametrize("text,gate", [
    ("launches_per_iter>+5%", ("launches_per_iter", ">", 5.0, "rel")),
    ("launches_per_iter > 5 %", ("launches_per_iter", ">", 5.0, "rel")),
    ("launches_per_iter<-10%", ("launches_per_iter", "<", -10.0, "rel")),
    ("exposed_overhead_ms>+0.5", ("exposed_overhead_ms", ">", 0.5, "delta")),
    ("exposed_overhead_ms>=-0.25", ("exposed_overhead_ms", ">=", -0.25, "delta")),
    ("share>0.10", ("share", ">", 0.10, "abs")),
    ("share<=.5", ("share", "<=", 0.5, "abs")),
    ("iteration_ms<12", ("iteration_ms", "<", 12.0, "abs")),
    ("launches>+1", ("launches_per_iter", ">", 1.0, "delta")),          # alias
    ("overhead_share>0.2", ("share", ">", 0.2, "abs")),
])
def test_parse(text, gate):
    g = parse_gate(text)
    assert (g.metric, g.op, g.value, g.mode) == gate
    assert g.text == text.strip()


@pytest.mark.parametrize("text", ["", "share", "share>", ">0.1", "share=0.1", "share>>0.1", "share>0.1x",
                                  "share>1e-3", "share>+-1", "share > 0.1 %%", "1share>0", "share>0.1;rm"])
def test_bad_syntax(text):
    with pytest.raises(GateError) as e:
        parse_gate(text)
    assert "expected METRIC OP VALUE" in str(e.value) and "\n" not in str(e.value)
    assert e.value.exit_code == 2


def test_unknown_metric_lists_the_valid_ones():
    with pytest.raises(GateError) as e:
        parse_gate("speed>5%")
    assert "unknown metric 'speed'" in str(e.value) and "launches_per_iter" in str(e.value)


def test_several_gates_commas_and_repeats():
    gs = parse_gates(["launches_per_iter>+5%, share>0.1", "iteration_ms>+1"])
    assert [g.metric for g in gs] == ["launches_per_iter", "share", "iteration_ms"]
    assert parse_gates([]) == [] and parse_gates(None) == []
    with pytest.raises(GateError):
        parse_gates([""])


@pytest.mark.parametrize("gate,before,after,trips", [
    ("launches_per_iter>+5%", 100, 105, False),     # exactly +5 %: not above
    ("launches_per_iter>+5%", 100, 105.1, True),
    ("launches_per_iter>=+5%", 100, 105, True),
    ("launches_per_iter>+5%", 100, 50, False),
    ("launches_per_iter<-40%", 100, 50, True),
    ("launches_per_iter>+5%", 0, 3, True),          # from nothing: an unbounded rise
    ("launches_per_iter<-5%", 0, 3, False),
    ("launches_per_iter>+5%", 0, 0, False),
    ("exposed_overhead_ms>+0.5", 1.0, 1.5, False),
    ("exposed_overhead_ms>+0.5", 1.0, 1.6, True),
    ("exposed_overhead_ms>-0.5", 1.0, 0.6, True),   # signed: a fall of 0.4 is above −0.5
    ("exposed_overhead_ms>-0.5", 1.0, 0.4, False),
    ("share>0.10", 0.5, 0.10, False),               # unsigned: the after value
    ("share>0.10", 0.05, 0.11, True),
    ("share<0.10", 0.5, 0.09, True),
    ("iteration_ms<=10", 20, 10, True),
])
def test_evaluate_modes(gate, before, after, trips):
    g = parse_gate(gate)
    d = doc(**{g.metric: (before, after)})
    assert bool(evaluate([g], d)) is trips


def test_evaluate_reports_the_observed_figure_and_names_the_gate():
    d = doc(launches_per_iter=(200, 250), share=(0.3, 0.2))
    ((g, x),) = evaluate(parse_gates(["launches_per_iter>+5%", "share>0.25"]), d)
    assert g.text == "launches_per_iter>+5%" and x == pytest.approx(25.0)
    line = tripped_line(g, x, d)
    assert line.startswith("gate tripped: launches_per_iter>+5% (launches relative change +25 %")
    assert "before 200, after 250" in line


def test_unavailable_figure_is_an_error_not_a_pass():
    d = doc(share=(None, None), exposed_overhead_ms=(None, 2.0))
    with pytest.raises(GateError, match="not available"):
        evaluate([parse_gate("share>0.1")], d)
    with pytest.raises(GateError, match="not available"):
        evaluate([parse_gate("exposed_overhead_ms>+0.5")], d)
    assert evaluate([parse_gate("exposed_overhead_ms>1")], d)   # the after value alone suffices
    with pytest.raises(GateError):   # a gate on a figure the document lacks
        evaluate([Gate("gpu_idle_ms>1", "gpu_idle_ms", ">", 1.0, "abs")], d)


# --- diff helpers ---------------------------------------------------------------------------------

def test_change_and_relative():
    assert diff.change(4, 2) == {"before": 4.0, "after": 2.0, "delta": -2.0, "rel": -0.5}
    assert diff.change(0, 0)["rel"] == 0.0
    assert diff.change(0, 1)["rel"] is None and diff.change(0, 1)["delta"] == 1.0
    assert diff.change(None, 1) == {"before": None, "after": 1.0, "delta": None, "rel": None}
    assert math.copysign(1, diff.change(1.0, 1.0)["delta"]) == 1    # never −0.0


def test_record_figures_accept_median_summaries():
    assert diff._num({"median": 3, "min": 1, "max": 5}) == 3.0
    assert diff._num(None) is None and diff._num(True) is None and diff._num(float("nan")) is None


def _side(streams, rec_streams=(), share=None, launch_bound=None, iters=(4, 10_000_000, 10_000_000)):
    rec = {"streams": list(rec_streams), "overhead_share": share,
           "iterations": {"count": iters[0], "min_ns": iters[1], "max_ns": iters[2], "median_ns": iters[1]}}
    if launch_bound is not None:
        rec["launch_bound"] = launch_bound
    tables = {"kernels": [], "phases": [], "graph_launches_per_iteration": 0.0,
              "streams": [{"device_id": d, "stream_id": s, "first_use_ns": 0, "device_rank": dr, "stream_rank": sr}
                          for d, s, dr, sr in streams]}
    return diff.side(rec, tables)


def test_stream_matching_by_device_and_first_use():
    b = _side([(0, 7, 0, 0), (0, 20, 0, 1), (1, 15, 1, 0)],
              [{"device_id": 0, "stream_id": 7, "queue_class": "saturated", "max_depth": 1022, "observed_limit": 1022}])
    a = _side([(2, 0, 0, 0), (2, 3, 0, 1)],
              [{"device_id": 2, "stream_id": 0, "queue_class": "dry", "max_depth": 3, "observed_limit": None}])
    rows = diff.match_streams(b, a)
    assert [r["matched_by"] for r in rows] == [
        "1st device (id 0 → 2), 1st stream by first use",
        "1st device (id 0 → 2), 2nd stream by first use",
        "unmatched: only before has a 1st stream on its 2nd device"]
    assert rows[0]["before"]["queue_class"] == "saturated" and rows[0]["after"]["queue_class"] == "dry"
    assert rows[0]["before"]["observed_limit"] == 1022 and rows[2]["after"] is None


def _per(**kw):
    base = dict(launches_per_iter=(1000, 1000), exposed_overhead_ms=(None, None), iteration_ms=(10, 10))
    base.update(kw)
    return {k: diff.change(*v) for k, v in base.items()}


EMPTY_K = {"gone": [], "new": [], "changed": [], "unchanged": 0}


def test_verdict_launch_bound_to_not():
    b, a = _side([], share=0.4), _side([], share=0.05, iters=(4, 6_000_000, 6_100_000))
    per = _per(launches_per_iter=(1000, 100), exposed_overhead_ms=(4.0, 0.5), iteration_ms=(10, 6))
    v = diff.verdict(b, a, per, EMPTY_K, [], [])
    assert v["status"] == "improved"
    assert v["line"] == ("launch-bound → not launch-bound: the fix removed 900 launches/iter (−90.0 %) and "
                         "3.500 ms of exposed overhead; iteration −40.0 %")


def test_verdict_no_improvement_because_queue_saturated():
    streams = [{"before": {"device_id": 0, "stream_id": 7, "queue_class": "saturated"}, "after": {}}]
    b = _side([], share=None, iters=(4, 9_500_000, 10_500_000))
    a = _side([], share=None, iters=(4, 9_600_000, 10_400_000))
    per = _per(launches_per_iter=(1000, 500), iteration_ms=(10, 9.9))
    v = diff.verdict(b, a, per, EMPTY_K, [], streams)
    assert v["status"] == "no_improvement"
    assert v["line"].startswith("no improvement: the fix removed 500 launches/iter (−50.0 %), but iteration "
                                "time moved −1.0 %, within the runs' iteration spread (±0.500 ms)")
    assert "queue was already saturated before (device 0 stream 7)" in v["line"]


def test_verdict_no_improvement_because_gpu_bound():
    b = _side([], share=0.03, iters=(4, 9_500_000, 10_500_000))
    per = _per(launches_per_iter=(1000, 500), iteration_ms=(10, 10.1))
    v = diff.verdict(b, b, per, EMPTY_K, [], [])
    assert v["status"] == "no_improvement" and "only 3.0 % of the iteration before" in v["line"]


def test_verdict_regression_and_record_launch_bound_flag():
    b = _side([], launch_bound=False)
    a = _side([], launch_bound=True)
    per = _per(launches_per_iter=(100, 200), iteration_ms=(10, 12))
    v = diff.verdict(b, a, per, EMPTY_K, [], [])
    assert v["status"] == "regressed"
    assert v["line"] == ("regression (not launch-bound → launch-bound): the change added 100 launches/iter "
                         "(+100.0 %); iteration +20.0 %")
