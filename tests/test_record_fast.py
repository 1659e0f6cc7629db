"""The record's cold-path shortcuts (issue 11) give what the direct computations give: the measure of
an intersection without its pieces, the dry time's low-depth runs against the per-step set."""
from __future__ import annotations

import numpy as np
import pytest

from launchtui.analysis import intervals as iv
from launchtui.analysis import queue_class as qc
from launchtui.analysis.index import StreamSeries


def _random_set(rng, n, span):
    s = np.sort(rng.integers(0, span, n))
    return iv.union(s, s + rng.integers(0, 30, n))


def _windows(rng, span, k, overlap):
    edges = np.sort(rng.choice(span + 60, 2 * k, replace=False)).astype(np.int64) - 30
    lo, hi = edges[0::2], edges[1::2]
    if overlap:                                 # measure_in's windows need not be disjoint
        hi = hi + rng.integers(0, span, k)
    return lo, hi


@pytest.mark.parametrize("overlap", [False, True])
def test_measure_both_in_equals_the_measure_of_the_pieces(overlap):
    rng = np.random.default_rng(13)
    for _ in range(400):
        span = int(rng.integers(1, 400))
        a = _random_set(rng, int(rng.integers(0, 40)), span)
        b = _random_set(rng, int(rng.integers(0, 40)), span)
        if rng.random() < 0.3:                  # touching and zero-length intervals
            s = np.arange(0, span, 5)
            b = (s, s + rng.integers(0, 6, len(s)))
        lo, hi = _windows(rng, span, int(rng.integers(1, 6)), overlap)
        want = iv.measure_in(*iv.intersect(a, b), lo, hi)
        got = iv.measure_both_in(a, b, lo, hi)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(iv.measure_both_in(b, a, lo, hi), want)


def _low_steps(s, starts, ends):
    """The per-step low set the runs replaced: [lo0, t0), then each step with depth <= 1."""
    low = s.v <= 1
    stop = np.append(s.t[1:], max(int(s.t[-1]), int(ends.max())))
    lo0 = min(int(starts.min()), int(s.t[0]))
    return np.concatenate([[lo0], s.t[low]]), np.concatenate([[int(s.t[0])], stop[low]])


def test_low_runs_cover_the_low_steps():
    rng = np.random.default_rng(17)
    for _ in range(300):
        n = int(rng.integers(1, 80))
        t = np.cumsum(rng.integers(1, 20, n)).astype(np.int64) + int(rng.integers(-50, 50))
        v = rng.choice([0, 1, 1, 2, 3, 7], n).astype(np.int32)
        s = StreamSeries(0, 7, t, v, 0.0, n, 0, 0)
        lo, hi = _windows(rng, int(t[-1]) + 40, int(rng.integers(1, 5)), False)
        runs = qc._low_runs(s, lo, hi)
        steps = _low_steps(s, lo, hi)
        assert len(runs[0]) <= len(steps[0])
        assert (runs[1] >= runs[0]).all() and (runs[0][1:] >= runs[1][:-1]).all()   # disjoint, sorted
        np.testing.assert_array_equal(iv.union(*runs)[0], iv.union(*steps)[0])
        np.testing.assert_array_equal(iv.union(*runs)[1], iv.union(*steps)[1])
        busy = _random_set(rng, int(rng.integers(0, 40)), int(t[-1]) + 40)
        np.testing.assert_array_equal(iv.measure_both_in(busy, runs, lo, hi),
                                      iv.measure_in(*iv.intersect(busy, steps), lo, hi))


# --- on synthetic traces: the shortcuts against the direct computations --------------------------

from fixtures import record_cases as rc   # noqa: E402
from fixtures import synth   # noqa: E402
from launchtui.analysis import exposed as ex   # noqa: E402
from launchtui.analysis import phases as ph   # noqa: E402
from launchtui.analysis import record as rec   # noqa: E402
from launchtui.analysis.launches import kernel_groups   # noqa: E402
from launchtui.analysis.sources import dominant_sites   # noqa: E402
from launchtui.trace.load import open_trace   # noqa: E402


@pytest.fixture(scope="module", params=["profiler_step", "autograd", "emit_nvtx"])
def case(request, tmp_path_factory):
    sc = rc.SCENARIOS[request.param]
    p = synth.write_nsys_sqlite(rc.workload(sc), tmp_path_factory.mktemp(sc.name) / "t.sqlite")
    return open_trace(p, use_cache=False)


def test_device_ops_and_calls_equal_the_masks(case):
    ops, api = case.ops, case.api
    for d in case.device_ids():
        on = ops.device == d
        np.testing.assert_array_equal(ex.device_ops(case, d), np.flatnonzero(on))
        mark = np.zeros(len(api), bool)
        mark[ops.api[on & (ops.api >= 0)]] = True
        mark &= np.isin(api.kind, [ex.API_LAUNCH, ex.API_GRAPH_LAUNCH])
        want = np.flatnonzero(mark)
        want = want[np.argsort(api.start[want], kind="stable")]
        np.testing.assert_array_equal(ex.device_launch_calls(case, d), want)


def _exposed_in_windows(g, starts, ends):
    return iv.measure_in(*g.exposed(), starts, ends)


def test_exposed_measured_without_pieces_equals_the_set(case):
    for d, calls in ex.launch_devices(case).items():
        lo, hi = int(case.ops.start.min()), int(case.ops.end.max())
        g = ex.device_gaps(case, d, lo, hi, calls)
        edges = np.linspace(lo, hi, 9).astype(np.int64)
        starts, ends = edges[:-1], edges[1:] - 1
        want = _exposed_in_windows(g, starts, ends)
        assert want.sum() > 0
        np.testing.assert_array_equal(g.exposed_in(starts, ends), want)
        # a launch call recorded after its op started (x beyond the gap's end): the set itself
        late = np.flatnonzero(g.x < g.end)[:3]
        g.x = g.x.copy()
        g.x[late] = g.end[late] + 50
        np.testing.assert_array_equal(g.exposed_in(starts, ends), _exposed_in_windows(g, starts, ends))


def test_phases_of_the_shown_groups_equal_those_of_all_launches(case):
    """The record computes phase, rule, call site and full name for the rows it shows only; each
    equals what the computation over every launch gives for that group (definitions.md §V5)."""
    gr = kernel_groups(case)
    k, g = gr.op_idx, gr.op_group
    a = case.ops.api[k]
    it = rec.itr.find(case, None, int(gr.device[0]), (int(case.ops.start.min()), int(case.ops.end.max())))
    opt = rec.RecordOptions(phase_level=2)
    ng = len(gr)
    main = ph.main_thread(case, k, it.base_depth, it.start)
    keys, texts, rule = ph.attributed_phase_keys(case, k, it.base_depth, opt.phase_level, main)
    want_phase, want_rules = ph.group_phases_and_rules(keys, texts, rule, g, ng)
    want_source = dominant_sites(case, a, g, ng)
    rng = np.random.default_rng(1)
    for shown in ([0], list(range(ng)), sorted(rng.choice(ng, min(ng, 4), replace=False).tolist())):
        phase, rules, source, full = rec._shown_groups(case, it, opt, k, g, a, ng, shown)
        for i in shown:
            assert phase[i] == want_phase[i] and rules[i] == want_rules[i] and source[i] == want_source[i]
            assert full[i] == case.strings[int(case.ops.full_name[k[g == i].min()])]
    assert any(p is not None for p, _ in want_phase)
