"""The record's cold-path shortcuts on generated arrays (issue 11): the measure of an intersection
without its pieces, the queue class's empty runs and blocking tests, run heads, flagged positions,
per-group rules and block sums, each against the walk or direct computation it replaces. On
synthetic traces: test_record_fast.py."""
from __future__ import annotations

import numpy as np
import pytest

from launchtui.analysis import exposed as ex
from launchtui.analysis import intervals as iv
from launchtui.analysis import phases as ph
from launchtui.analysis import queue_class as qc
from launchtui.analysis import record_top as top
from launchtui.analysis import stream_calls as sc
from launchtui.analysis.queue_series import StreamSeries


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
        total, both = iv.measure_in_and_both(a, b, lo, hi)       # a's prefix shared
        np.testing.assert_array_equal(total, iv.measure_in(*a, lo, hi))
        np.testing.assert_array_equal(both, want)


def _empty_by_walk(s, backlog, starts, ends):
    """Per window, ns with nothing pending: a walk over every step of the series (depth 0 before its
    first change) with the backlog counted until each of its ops starts."""
    edges = sorted(set(s.t.tolist()) | set(backlog.tolist()) | set(starts.tolist()) | set(ends.tolist()))
    out = np.zeros(len(starts), np.int64)
    for a, b in zip(edges[:-1], edges[1:]):   # the pending count is constant on [a, b)
        v = int(s.value_at(np.array([a]))[0]) + int((backlog > a).sum())
        if v == 0:
            for k, (lo, hi) in enumerate(zip(starts.tolist(), ends.tolist())):
                out[k] += max(0, min(b, hi) - max(a, lo))
    return out


def test_empty_runs_equal_a_walk_over_the_steps():
    """queue_class._empty_runs (runs of depth 0, cut by the backlog's last start) measured in the
    iterations equals a walk over every step (definitions.md §V3's empty time)."""
    rng = np.random.default_rng(17)
    for _ in range(300):
        n = int(rng.integers(1, 60))
        t = np.cumsum(rng.integers(1, 20, n)).astype(np.int64) + int(rng.integers(-50, 50))
        v = rng.choice([0, 0, 1, 2, 3], n).astype(np.int32)
        v[-1] = 0                                   # every launched op starts: the series ends at 0
        s = StreamSeries(0, 7, t, v, 0.0, n, 0, 0)
        backlog = np.sort(rng.integers(int(t[0]) - 40, int(t[-1]), int(rng.integers(0, 4)))).astype(np.int64)
        lo, hi = _windows(rng, int(t[-1]) + 40, int(rng.integers(1, 5)), False)
        runs = qc._empty_runs(s, backlog, int(lo.min()), int(hi.max()))
        assert (runs[1] > runs[0]).all() and (runs[0][1:] >= runs[1][:-1]).all()   # disjoint, sorted
        np.testing.assert_array_equal(iv.measure_in(*runs, lo, hi), _empty_by_walk(s, backlog, lo, hi))


def test_returns_on_op_start_equals_a_walk():
    """ceiling.returns_on_op_start (one search over the stream's starts) equals a walk: an op
    launched before the call (earlier in launch order) and not started when it began, starting
    within the slack of its return."""
    from launchtui.analysis.ceiling import returns_on_op_start
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        starts = np.sort(rng.integers(0, 400, n)).astype(np.int64)
        pos = np.sort(rng.integers(0, n, int(rng.integers(1, 12))))
        c0 = rng.integers(-20, 420, len(pos)).astype(np.int64)
        c1 = c0 + rng.integers(0, 60, len(pos))
        slack = int(rng.integers(0, 25))
        want = [any(j < p and st >= a and abs(st - b) <= slack for j, st in enumerate(starts.tolist()))
                for p, a, b in zip(pos.tolist(), c0.tolist(), c1.tolist())]
        assert returns_on_op_start(starts, pos, c0, c1, slack).tolist() == want


@pytest.mark.parametrize("block", [1 << 20, 3])   # one block, and blocks of 3 steps
def test_time_at_or_above_with_backlog_equals_a_walk(block, monkeypatch):
    from launchtui.analysis import queue
    from launchtui.analysis.queue import time_at_or_above_with_backlog
    monkeypatch.setattr(queue, "STEP_BLOCK", block)
    rng = np.random.default_rng(23)
    for _ in range(300):
        n = int(rng.integers(2, 50))
        t = np.cumsum(rng.integers(1, 20, n)).astype(np.int64)
        v = rng.integers(0, 6, n).astype(np.int16)
        s = StreamSeries(0, 7, t, v, 0.0, n, 0, 0)
        backlog = np.sort(rng.integers(int(t[0]) - 30, int(t[-1]), int(rng.integers(0, 5)))).astype(np.int64)
        x = int(rng.integers(1, 8))
        lo, hi = (None, None) if rng.random() < 0.3 else (int(rng.integers(-40, 200)), int(rng.integers(100, 600)))
        pts = sorted(set(t.tolist()) | set(backlog.tolist()))
        a0 = pts[0] if lo is None else max(pts[0], lo)
        a1 = int(t[-1]) if hi is None else min(int(t[-1]), hi)
        want = 0
        for a, b in zip(pts, pts[1:] + [pts[-1]]):
            a, b = max(a, a0), min(b, a1)
            if b > a and int(s.value_at(np.array([a]))[0]) + int((backlog > a).sum()) >= x:
                want += b - a
        assert time_at_or_above_with_backlog(s, backlog, x, lo, hi) == want


def test_union_heads_are_the_runs_first_positions():
    rng = np.random.default_rng(23)
    for _ in range(300):
        n = int(rng.integers(0, 60))
        s = np.sort(rng.integers(0, 400, n))
        e = s + rng.integers(1, 40, n)
        us, ue, heads = iv.union_heads(s, e)
        want = iv.union(s, e)
        np.testing.assert_array_equal(us, want[0])
        np.testing.assert_array_equal(ue, want[1])
        np.testing.assert_array_equal(s[heads], us)
        assert all((s[:h] < s[h]).all() for h in heads.tolist())     # the first op starting there
        if n > 1:
            assert iv.union_heads(s, np.where(np.arange(n) == 1, s, e))[2] is None   # an empty one dropped
            assert iv.union_heads(s[::-1], e[::-1])[2] is None                      # sorted first


def test_gap_ends_by_run_heads_with_ties():
    """Ops starting together (a tie inside a busy run's head): the run's first position, after the
    launch-order reordering of ties, is the search's answer."""
    from types import SimpleNamespace
    rng = np.random.default_rng(29)
    for _ in range(100):
        n = 300
        start = np.sort(rng.integers(0, 3000, n))
        end = start + rng.integers(1, 20, n)
        api_start = start - rng.integers(0, 50, n)
        trace = SimpleNamespace(ops=SimpleNamespace(start=start, end=end, api=np.arange(n)),
                                api=SimpleNamespace(start=api_start))
        bs, be, heads = iv.union_heads(start, end)
        gs, ge, kept = iv.complement_kept(bs, be, 0, 2900)
        ge, heads = ge[kept], np.append(heads, -1)[kept]
        keep = rng.random(n) < 0.7      # ops not launched by a launch-kind call are skipped
        before = np.concatenate([[0], np.cumsum(keep)])
        lk = ex._by_start_then_launch(trace, np.flatnonzero(keep))
        np.testing.assert_array_equal(ex._ending_ops_by_heads(trace, lk, before, heads, ge),
                                      ex._ending_ops(trace, lk, ge))


def test_positions_of_flagged_calls_equal_the_mask():
    rng = np.random.default_rng(31)
    for _ in range(200):
        a_u = np.unique(rng.integers(0, 300, int(rng.integers(0, 80))))
        ids = np.unique(rng.integers(0, 320, int(rng.integers(0, 12))))
        flagged = np.zeros(400, bool)
        flagged[ids] = True
        np.testing.assert_array_equal(sc.positions_of(a_u, ids), np.flatnonzero(flagged[a_u]))


def _best_direct(keys, width, group, n_groups):
    """phases._best as it was: masked copies of the ops with a key."""
    total = np.bincount(group, minlength=n_groups)
    has = keys >= 0
    cnt = np.bincount(group[has] * width + keys[has], minlength=n_groups * width).reshape(n_groups, width)
    best = cnt.argmax(axis=1)
    return total, best, cnt[np.arange(n_groups), best], total - cnt.sum(axis=1)


def test_best_phase_per_group_equals_the_masked_count():
    rng = np.random.default_rng(5)
    for _ in range(300):
        n_groups, width = int(rng.integers(0, 8)), int(rng.integers(1, 6))
        n = int(rng.integers(0, 60)) if n_groups else 0
        group = rng.integers(0, max(n_groups, 1), n).astype(rng.choice([np.int32, np.int64]))
        keys = rng.integers(-1, width, n)
        got, want = ph._best(keys, width, group, n_groups), _best_direct(keys, width, group, n_groups)
        for x, y in zip(got, want):
            np.testing.assert_array_equal(x, y)
            assert x.dtype == y.dtype


def _rules_direct(b, keys, rule, group, n_groups):
    """phases._rules as it was: three per-op tests."""
    total, best, top, none = b
    has_phase = (top >= none) & (top > 0)
    won = (keys >= 0) & (keys == best[group]) & has_phase[group]
    cnt = np.bincount(group[won] * 4 + rule[won], minlength=n_groups * 4).reshape(n_groups, 4)
    return [ph.RULE_NAMES.get(int(r)) if cnt[i].sum() else None for i, r in enumerate(cnt.argmax(axis=1))]


def test_rules_per_group_equal_the_three_tests():
    rng = np.random.default_rng(8)
    for _ in range(300):
        n_groups, width = int(rng.integers(0, 8)), int(rng.integers(1, 6))
        n = int(rng.integers(0, 60)) if n_groups else 0
        group = rng.integers(0, max(n_groups, 1), n)
        keys = rng.integers(-1, width, n)
        rule = rng.integers(0, 4, n).astype(np.int8)
        b = ph._best(keys, width, group, n_groups)
        assert ph._rules(b, keys, rule, group, n_groups) == _rules_direct(b, keys, rule, group, n_groups)


@pytest.mark.parametrize("block", [7, 1 << 21])
def test_under_inside_counts_the_short_launches_inside(block, monkeypatch):
    from types import SimpleNamespace
    monkeypatch.setattr(top, "LAUNCH_BLOCK", block)
    rng = np.random.default_rng(5)
    start = rng.integers(0, 1000, 50)
    ops = SimpleNamespace(start=start, end=start + rng.integers(0, 30, 50))
    trace = SimpleNamespace(ops=ops)
    k = np.arange(50)
    g = rng.integers(0, 4, 50)
    for inside in (np.ones(50, bool), rng.random(50) < 0.5):
        got = top._under_inside(trace, k, g, inside, 5, 10)
        want = [sum(1 for j in range(50) if inside[j] and g[j] == i and ops.end[j] - ops.start[j] < 10)
                for i in range(5)]
        assert got.tolist() == want


@pytest.mark.parametrize("block", [1, 3, 7, 1 << 20])
def test_duration_sums_by_block_equal_the_prefix_sum(block):
    from types import SimpleNamespace
    from launchtui.analysis.exposed import _duration_sums
    rng = np.random.default_rng(5)
    for _ in range(50):
        n = int(rng.integers(0, 40))
        start = np.sort(rng.integers(0, 1000, n + 5)).astype(np.int64)
        api = SimpleNamespace(start=start, end=start + rng.integers(0, 50, len(start)))
        calls = np.sort(rng.choice(len(start), n, replace=False))
        a = rng.integers(0, n + 1, 6)
        b = np.maximum(a, rng.integers(0, n + 1, 6))
        cum = np.concatenate([[0], np.cumsum(api.end[calls] - api.start[calls])])
        got = _duration_sums(api, calls, a, b, block)
        assert got.dtype == np.int64 and got.tolist() == (cum[b] - cum[a]).tolist()
