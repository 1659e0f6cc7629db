"""The cold path's leaner rewrites (issue 11) against brute-force references computed here: the depth
merge, the time order with ties, the per-stream queue stats' clipping, the first op of each spike
call; and the id columns that are int32 now, with ops_by_api built only on first use."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from launchtui.analysis.backpressure import _first_ops
from launchtui.analysis.index import trace_index
from launchtui.analysis.queue_series import StreamSeries, _merge_depth, _merge_depth_search
from launchtui.analysis.queue import _stats
from launchtui.trace.join import time_order
from launchtui.trace.load import open_trace

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo" / "demo.sqlite"


def _reference_merge(plus, minus):
    """Events sorted by (time, -1 before +1, input order); depth after each; per +1 the depth before."""
    ev = sorted([(int(t), 0, i) for i, t in enumerate(minus)] + [(int(t), 1, i) for i, t in enumerate(plus)])
    depth, after, before = 0, [], [0] * len(plus)
    for t, kind, i in ev:
        if kind == 1:
            before[i] = depth
        depth += 1 if kind == 1 else -1
        after.append((t, depth))
    last = {}
    for t, d in after:       # the value at t is the one after all changes at t
        last[t] = d
    times = sorted(last)
    return times, [last[t] for t in times], sum(d for _, d in after) / len(after), before


@pytest.mark.parametrize("seed", range(6))
def test_merge_depth_matches_an_event_by_event_walk(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    plus = np.sort(rng.integers(0, 40, n))                 # many equal times: the tie rule matters
    minus = np.sort(rng.integers(0, 40, int(rng.integers(1, 60))))
    t, v, mean, before = _merge_depth(plus, minus)
    rt, rv, rmean, rbefore = _reference_merge(plus, minus)
    assert t.tolist() == rt and v.tolist() == rv and before.tolist() == rbefore
    assert mean == rmean and v.dtype == np.int32


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("offset", [0, -(1 << 40), (1 << 62) - 100, -(1 << 62) - 100])
def test_merge_depth_sorted_key_and_search_agree_with_the_walk(seed, offset):
    """The sign-in-the-low-bit merge, and the binary-search path it falls back to beyond +-2^62,
    against the event-by-event walk; wide spacing gives series with no equal times (no copies)."""
    rng = np.random.default_rng(seed)
    spread = 40 if seed % 2 else 10**6                     # odd seeds: many equal times
    plus = np.sort(rng.integers(0, spread, int(rng.integers(1, 80)))) + offset
    minus = np.sort(rng.integers(0, spread, int(rng.integers(1, 80)))) + offset
    rt, rv, rmean, rbefore = _reference_merge(plus, minus)
    for fn in (_merge_depth, _merge_depth_search):
        t, v, mean, before = fn(plus, minus)
        assert t.tolist() == rt and v.tolist() == rv and before.tolist() == rbefore
        assert mean == rmean and v.dtype == np.int32 and before.dtype == np.int32 and t.dtype == np.int64


@pytest.mark.parametrize("seed", range(6))
def test_stream_depth_gathers_into_the_key_and_compacts_in_place(seed, monkeypatch):
    """_stream_depth (the ops' and calls' starts gathered into the merge key's halves, unsorted
    launch starts sorted there, equal times compacted in place in blocks of 7) against the walk."""
    from launchtui.analysis import queue_series
    monkeypatch.setattr(queue_series, "COMPACT_BLOCK", 7)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 90))
    ops_start = np.sort(rng.integers(0, 50 if seed % 2 else 10**6, n))
    api_start = rng.integers(0, 50 if seed % 2 else 10**6, n + 5)
    if seed < 2:
        api_start.sort()                                   # the usual FIFO case: no permutation
    sel = np.arange(n, dtype=np.int32)
    calls = rng.permutation(n + 5)[:n].astype(np.int32)
    t, v, mean, before, perm = queue_series._stream_depth(ops_start, sel, api_start, calls)
    plus = api_start[calls]
    rt, rv, rmean, rbefore = _reference_merge(np.sort(plus, kind="stable"), ops_start)
    assert t.tolist() == rt and v.tolist() == rv and mean == rmean
    assert (perm is None) == bool((plus[1:] >= plus[:-1]).all())
    got = np.empty(n, np.int64)
    got[np.arange(n) if perm is None else perm] = before
    order = np.argsort(plus, kind="stable")
    assert got[order].tolist() == rbefore


@pytest.mark.parametrize("seed", range(5))
def test_time_order_equals_a_full_lexsort(seed):
    rng = np.random.default_rng(seed)
    n = 300
    start = rng.integers(0, 30, n)
    end = start + rng.integers(0, 3, n)
    dev, stream = rng.integers(0, 2, n), rng.integers(0, 3, n)
    if seed == 0:                                          # already ordered: no permutation at all
        o = np.lexsort((stream, dev, end, start))
        start, end, dev, stream = start[o], end[o], dev[o], stream[o]
    order, s = time_order(start, end, dev, stream)
    keys = list(zip(start.tolist(), end.tolist(), dev.tolist(), stream.tolist()))
    got = keys if order is None else [keys[i] for i in order]
    assert got == sorted(keys)
    assert s.tolist() == [k[0] for k in got]


def _reference_stats(t, v, lo, hi, thresholds):
    """Time-weighted mean and time at or above each threshold over [lo, hi], summed step by step."""
    total, above = 0.0, dict.fromkeys(thresholds, 0)
    for i in range(len(t)):
        a, b = max(t[i], lo), min(t[i + 1] if i + 1 < len(t) else hi, hi)
        if b > a:
            total += v[i] * (b - a)
            for th in thresholds:
                above[th] += (b - a) if v[i] >= th else 0
    return total / (hi - lo), above


@pytest.mark.parametrize("block", [1, 3, 1 << 20])
@pytest.mark.parametrize("window", [(None, None), (5, 95), (12, 13), (40, 40), (0, 200)])
def test_queue_stats_clip_the_steps_to_the_window(window, block, monkeypatch):
    """Measured STEP_BLOCK steps at a time, the statistics equal a walk over the steps."""
    from launchtui.analysis import queue
    monkeypatch.setattr(queue, "STEP_BLOCK", block)
    rng = np.random.default_rng(1)
    t = np.unique(rng.integers(0, 100, 40)).astype(np.int64)
    v = rng.integers(0, 6, len(t)).astype(np.int32)
    s = StreamSeries(0, 7, t, v, 0.0, len(t), 0, 0)
    st = _stats(s, *window, thresholds=(2, 4, 2))   # a repeated threshold counts once
    lo = int(t[0]) if window[0] is None else max(int(t[0]), window[0])
    hi = int(t[-1]) if window[1] is None else min(int(t[-1]), window[1])
    assert st.span_ns == hi - lo
    if hi > lo:
        mean, above = _reference_stats(t.tolist(), v.tolist(), lo, hi, (2, 4))
        assert st.mean_depth == pytest.approx(mean, rel=1e-12)
        assert st.time_at_or_above_ns == above
    # the deepest step that holds any of the window, or starts inside it
    held = [int(v[i]) for i in range(len(t))
            if (int(t[i + 1]) if i + 1 < len(t) else hi) > lo and int(t[i]) <= hi]
    assert st.max_depth == max(held + [0])


def test_first_op_of_each_call_is_the_lowest_index():
    op_api = np.array([-1, 3, 5, 3, -1, 9, 5, 2], np.int32)
    calls = np.array([2, 3, 4, 5, 9, 11])
    expect = [min((k for k, a in enumerate(op_api) if a == c), default=-1) for c in calls]
    assert _first_ops(op_api, calls).tolist() == expect


def test_id_columns_are_int32_and_ops_by_api_waits_for_first_use():
    trace = open_trace(DEMO, use_cache=False)
    idx = trace_index(trace)
    assert trace.ops.api.dtype == np.int32
    assert idx.op_ranges.dtype == np.int32
    assert idx.depth_before_launch.dtype == np.int16   # depths up to SMALL_DEPTH
    assert idx._ops_by_api is None                          # a report never builds it
    keys, ops = idx.ops_by_api
    assert keys.dtype == ops.dtype == np.int32
    matched = np.flatnonzero(trace.ops.api >= 0)
    assert sorted(zip(keys.tolist(), ops.tolist())) == sorted(zip(trace.ops.api[matched].tolist(), matched.tolist()))
    a = int(trace.ops.api[matched[0]])
    assert idx.ops_of_call(a).tolist() == np.flatnonzero(trace.ops.api == a).tolist()


def test_process_index_survives_the_cache():
    """ops.pid / api.pid are int16 indices into trace.processes, stored with the model (format 10)."""
    cold = open_trace(DEMO)
    stages = []
    warm = open_trace(DEMO, progress=lambda stage, rows: stages.append(stage))
    assert stages == ["loaded from cache"] and cold.processes.dtype == warm.processes.dtype == np.int64
    assert warm.ops.pid.dtype == warm.api.pid.dtype == np.int16
    assert len(cold.processes) >= 1
    for a, b in ((cold.ops.pid, warm.ops.pid), (cold.api.pid, warm.api.pid)):
        assert np.array_equal(cold.process_keys(a), warm.process_keys(b))
    assert (warm.process_keys(warm.api.pid) > 0).all()


@pytest.mark.parametrize("one_short_per_full", [True, False])
def test_distinguishing_names_by_full_name_match_the_pair_path(monkeypatch, one_short_per_full):
    """The per-full-name tables give the same ids, interned in the same order, as the (full, short)
    pair paths (sorted keys, and the dense pair table); a full name with two short names falls back."""
    from launchtui.analysis import index as ix
    results = []
    for variant in ("by_full", "sorted", "dense"):
        trace = open_trace(DEMO, use_cache=False)
        ops = trace.ops
        if not one_short_per_full:   # a second short name for one full name
            k = int(np.flatnonzero(ops.kind == 0)[0])
            ops.name[np.flatnonzero(ops.full_name == ops.full_name[k])[::2]] = ops.full_name[k]
        monkeypatch.setattr(ix, "DENSE_PAIRS", 1 << 62 if variant == "dense" else 0)
        if variant != "by_full":
            monkeypatch.setattr(ix, "_pair_by_full_name", lambda trace, width: None)
        elif not one_short_per_full:
            assert ix._pair_by_full_name(trace, len(trace.strings) + 1) is None
        n0 = len(trace.strings)
        ids = ix._distinguishing_names(trace)
        results.append((ids.tolist(), trace.strings.values[n0:]))
        monkeypatch.undo()
    assert results[0] == results[1] == results[2]


@pytest.mark.parametrize("lo, hi", [(0, 4), (-3, 3), (2**31 - 5, 2**31 + 5), (-(2**40), -(2**40) + 3)])
def test_stream_groups_match_a_sort_of_the_pairs(lo, hi):
    """(device, stream) groups against np.unique of the pairs: key order, group per op, and the key
    decoded back, for small ids (int32 keys), negative ones and ids beyond int32 (int64 keys)."""
    from launchtui.analysis.queue_series import _stream_groups
    rng = np.random.default_rng(abs(lo) % 97)
    dev = rng.integers(lo, hi, 500)
    stream = rng.integers(lo, hi, 500) * 3
    pairs, inv = np.unique(np.stack([dev, stream], 1), axis=0, return_inverse=True)
    skeys, grp, dev_of, stream_of = _stream_groups(dev, stream)
    assert [(dev_of(k), stream_of(k)) for k in skeys] == [tuple(p) for p in pairs.tolist()]
    assert grp.tolist() == inv.reshape(-1).tolist() and grp.dtype == np.uint16


@pytest.mark.parametrize("block", [3, 1 << 20])
@pytest.mark.parametrize("seed", range(4))
def test_top_range_per_group_table_matches_a_count_per_pair(seed, block, monkeypatch):
    """The (group, text) table, counted `block` launches at a time, against a Counter of each
    group's launches by range text (ties: the smaller text id), and against the sorted-pairs path
    it falls back to, on the demo trace's NVTX ranges with random groups of launches."""
    from collections import Counter
    from launchtui.analysis import nvtx
    from launchtui.trace.load import open_trace
    demo = Path(__file__).resolve().parents[1] / "fixtures" / "demo" / "demo.sqlite"
    trace = open_trace(str(demo))
    rng = np.random.default_rng(seed)
    n_groups = int(rng.integers(1, 9))
    op_idx = np.sort(rng.choice(len(trace.ops), int(rng.integers(1, len(trace.ops) + 1)), replace=False))
    group = rng.integers(0, n_groups, len(op_idx))
    ranges = nvtx.op_ranges(trace)[op_idx]
    want = {}
    for g in range(n_groups):
        texts = Counter(int(trace.ranges.text[r]) for r in ranges[group == g] if r >= 0)
        if texts:
            text, c = min(texts.items(), key=lambda kv: (-kv[1], kv[0]))
            want[g] = (text, c / int((group == g).sum()))
    assert want, "the demo trace's launches lie in NVTX ranges"
    monkeypatch.setattr(nvtx, "KEY_BLOCK", block)
    got = nvtx.top_range_per_group(trace, op_idx, group, n_groups)
    assert got == want and list(got) == sorted(want)
    monkeypatch.setattr(nvtx, "DENSE_CELLS", 0)
    assert nvtx.top_range_per_group(trace, op_idx, group, n_groups) == want


@pytest.mark.parametrize("seed", range(8))
def test_max_without_matches_the_per_time_correction(seed):
    """The graph-replays-as-one peak by runs of constant correction against the correction counted at
    every change time (the direct searchsorted of each time), with equal times and removed entries
    before the first change or after the last."""
    from launchtui.analysis.queue_series import _max_without
    rng = np.random.default_rng(seed)
    plus = np.sort(rng.integers(0, 200, int(rng.integers(5, 120))))
    minus = np.sort(rng.integers(0, 200, int(rng.integers(5, 120))))
    t, v, _, _ = _merge_depth(plus, minus)
    pick_p = rng.random(len(plus)) < 0.3
    pick_m = rng.random(len(minus)) < 0.3
    rp, rm = plus[pick_p], minus[pick_m]
    if seed == 0:
        rp, rm = rp[:0], rm[:0]
    if seed == 1:
        rp, rm = np.append(rp, [-5, 500]), np.append(rm, [-7, 900])
    direct = (v.astype(np.int64) - (np.searchsorted(np.sort(rp), t, side="right")
                                    - np.searchsorted(np.sort(rm), t, side="right"))).max()
    assert _max_without(t, v, rng.permutation(rp), rng.permutation(rm)) == int(direct)
