"""Timeline binning (launchtui.analysis.lanes, launchtui.tui.lane_view): exact against brute force, no Textual.

That a frame's cost is flat in the event count is wall-clock: bench/frame_cost.py measures it."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from launchtui.analysis import lanes
from launchtui.tui import format as tfmt
from launchtui.tui import lane_view


def _brute_cover(starts, ends, edges):
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        cov = np.zeros(b - a, bool)
        for s, e in zip(starts, np.maximum(ends, starts + 1)):
            lo, hi = max(s, a), min(e, b)
            if hi > lo:
                cov[lo - a:hi - a] = True
        out.append(int(cov.sum()))
    return np.array(out)


def test_intervals_busy_and_any_match_brute_force():
    rng = np.random.default_rng(1)
    s = np.sort(rng.integers(0, 5000, 150))
    e = s + rng.integers(0, 200, 150)           # overlapping and zero-length intervals included
    iv = lanes.Intervals(s, e)
    edges = np.arange(-50, 5300, 37)
    ref = _brute_cover(s, e, edges)
    assert (iv.busy(edges) == ref).all()
    assert (iv.any(edges) == (ref > 0)).all()


@pytest.mark.parametrize("n", [0, 1, 7, 31, 32, 33, 64, 65, 1000, 4099])
def test_range_max_matches_brute_force(n):
    rng = np.random.default_rng(n)
    v = rng.integers(0, 10_000, n)
    rm = lanes.RangeMax(v, block=8)
    lo = rng.integers(0, n + 1, 400)
    hi = rng.integers(0, n + 1, 400)
    ref = np.array([v[a:b].max() if b > a else 0 for a, b in zip(lo, hi)])
    assert (rm.query(lo, hi) == ref).all()


def test_ticks_and_formats():
    tk, step = tfmt.ticks(1_000, 1_000_000_000, 10)
    assert step == 100_000_000 and tk[0] == 100_000_000 and len(tk) == 10
    assert tfmt.nice_step(7_300, 5) == 2_000
    assert tfmt.fmt_tick(1_500_000_000, 500_000_000, None) == "1.5"
    assert tfmt.fmt_tick(1_200_000, 200_000, 1_000_000) == "+200µs"
    assert tfmt.fmt_tick(3_000_000, 1_000_000, 1_000_000) == "+2ms"
    assert tfmt.fmt_tick(1_500_000_000, 500_000_000, 0) == "+1.5s"
    assert tfmt.fmt_duration(4_600) == "4.60 µs"
    assert tfmt.fmt_duration(30_000_000) == "30.0 ms"


def test_lanes_modules_do_not_import_textual():
    code = ("import sys; import launchtui.analysis.lanes, launchtui.tui.lane_view, launchtui.tui.state, launchtui.tui.loader; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_intervals_of_disjoint_input_share_its_arrays_and_measure_the_same():
    s = np.array([0, 10, 25, 40], np.int64)
    e = np.array([5, 20, 30, 41], np.int64)
    iv = lanes.Intervals(s, e, presorted=True)
    assert iv.s is s and iv.e is e                        # no copy for one stream's / thread's events
    edges = np.arange(-3, 50, 4)
    assert (iv.busy(edges) == _brute_cover(s, e, edges)).all()
    touching = lanes.Intervals(np.array([0, 5]), np.array([5, 9]), presorted=True)   # merged: copies
    assert touching.s.tolist() == [0] and touching.e.tolist() == [9]


def test_compact_lanes_draw_the_cells_of_plain_int64_lanes(tmp_path):
    """build_lanes stores int32 indices and durations and shares arrays between a lane and its busy
    sets; every lane's cells at several zooms equal those of lanes built from plain int64 copies."""
    from fixtures.synth import simulate, write_nsys_sqlite
    from launchtui.analysis.index import trace_index
    from launchtui.trace.load import open_trace
    from launchtui.trace.model import API_LAUNCH
    tr = open_trace(write_nsys_sqlite(simulate(), tmp_path / "t.sqlite", variant="modern"), use_cache=False)
    ops, api = tr.ops, tr.api
    cat = trace_index(tr).op_category
    built = lanes.build_lanes(tr)
    lo, hi = tr.extent()
    views = [lane_view.bin_edges(lo, (hi - lo) / w, w) for w in (7, 190)] + [lane_view.bin_edges(lo + (hi - lo) // 3, 997.0, 200)]
    n_hw = n_api = 0
    for dev, lst in built.hw.items():
        for ln in lst:
            idx = np.nonzero((ops.device == dev) & (ops.stream == ln.stream))[0]
            assert ln.idx.dtype == np.int32 and (ln.idx == idx).all()
            s, e = ops.start[idx].copy(), ops.end[idx].copy()
            ref = lanes.HwLane(dev, ln.stream, lanes.ArrayEvents(idx, s, e),
                               [lanes.Intervals(s[cat[idx] == c], e[cat[idx] == c]) for c in range(4)],
                               lanes.Intervals(s, e))
            for edges in views:
                a, b = lane_view.hw_cells(ln, edges), lane_view.hw_cells(ref, edges)
                assert (a.level == b.level).all() and (a.cat == b.cat).all() and (a.count == b.count).all()
            n_hw += 1
    for dev, lst in built.api.items():
        for ln in lst:
            s, e = api.start[ln.idx].copy(), api.end[ln.idx].copy()
            ld = np.where(api.kind[ln.idx] == API_LAUNCH, e - s, 0).astype(np.int64)
            ref = lanes.ApiLane(dev, ln.thread, lanes.ArrayEvents(ln.idx.astype(np.int64), s, e), lanes.Intervals(s, e),
                                lanes.RangeMax(ld), ln.spike_ns, ln.median_ns)
            ln.spike_ns = ref.spike_ns = int(np.median(ld[ld > 0]))   # some cells spike
            for edges in views:
                a, b = lane_view.api_cells(ln, edges), lane_view.api_cells(ref, edges)
                assert all((getattr(a, f) == getattr(b, f)).all() for f in ("level", "count", "max_ns", "spike"))
            n_api += 1
    assert n_hw >= 2 and n_api >= 1 and built.queue


@pytest.mark.parametrize("seed", range(8))
def test_lane_events_read_through_the_parent_measure_as_intervals_of_copies(seed):
    """LaneEvents (a lane's events as positions into sorted parent columns, no copies) and Rest (the
    dominant category as the lane less the others) give the busy ns, presence and start counts of
    Intervals / searchsorted over copied arrays: zero-length and touching events, bins of one ns up
    (the timeline's bins are at least one clock tick wide)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(30, 400))
    ps = np.cumsum(rng.integers(0, 6, n)).astype(np.int64) + 1000        # the parent: sorted, ties
    pe = ps + rng.integers(0, 9, n)
    # a lane: increasing positions whose events are disjoint (each starts at or after the last's end)
    pos, last = [], -1
    for j in range(n):
        if ps[j] >= last and rng.random() < 0.6:
            pos.append(j)
            last = max(pe[j], ps[j] + 1)
    idx = np.array(pos, np.int32)
    s, e = ps[idx], pe[idx]
    cum = lanes._disjoint_cum(s.copy(), e.copy())
    assert cum is not None
    ev = lanes.LaneEvents(idx, cum, "ops", ps, pe)
    ref = lanes.Intervals(s, e, presorted=True)
    cat = rng.integers(0, 3, len(idx))
    top = int(np.argmax(np.bincount(cat, minlength=3)))
    subs = [lanes.LaneEvents(idx[cat == c], lanes._disjoint_cum(s[cat == c], e[cat == c]), "ops", ps, pe)
            for c in range(3) if c != top]
    rest = lanes.Rest(ev, subs)
    rest_ref = lanes.Intervals(s[cat == top], e[cat == top], presorted=True)
    lo, hi = int(ps[0]) - 5, int(pe.max()) + 5
    for width in (1, 3, 17, 200):
        for step in (1.0, 1.5, max((hi - lo) / width, 1.0), 7.3):
            edges = lane_view.bin_edges(lo + int(rng.integers(0, 20)), step, width)
            assert (ev.busy(edges) == ref.busy(edges)).all()
            assert (ev.any(edges) == ref.any(edges)).all()
            for side in ("left", "right"):
                assert (ev.n_start(edges, side) == np.searchsorted(s, edges, side=side)).all()
            assert (rest.busy(edges) == rest_ref.busy(edges)).all()
            assert (rest.any(edges) == rest_ref.any(edges)).all()
    for i in range(len(idx)):
        assert ev.start_at(i) == s[i] and ev.end_at(i) == e[i]
    # overlapping events are not this layout
    assert lanes._disjoint_cum(np.array([0, 5]), np.array([6, 9])) is None
    assert lanes._disjoint_cum(np.array([3, 3]), np.array([3, 7])) is None   # zero-length counts 1 ns


def test_overlapping_lanes_keep_their_own_arrays_and_draw_the_same(tmp_path):
    """A stream whose ops overlap keeps the copied layout (ArrayEvents and unions); its cells equal a
    plain reference built here."""
    from fixtures.synth import simulate, write_nsys_sqlite
    from launchtui.analysis.index import trace_index
    from launchtui.trace.load import open_trace
    tr = open_trace(write_nsys_sqlite(simulate(), tmp_path / "t.sqlite", variant="modern"), use_cache=False)
    ops = tr.ops
    dev, st = int(ops.device[0]), int(ops.stream[0])
    on = np.nonzero((ops.device == dev) & (ops.stream == st))[0]
    ops.end[on[0]] = ops.start[on[1]] + 5          # the first op now overlaps the second
    built = [ln for ln in lanes.build_lanes(tr).hw[dev] if ln.stream == st][0]
    assert isinstance(built.ev, lanes.ArrayEvents)
    cat = trace_index(tr).op_category[on]
    s, e = ops.start[on].copy(), ops.end[on].copy()
    ref = lanes.HwLane(dev, st, lanes.ArrayEvents(on, s, e),
                       [lanes.Intervals(s[cat == c], e[cat == c]) for c in range(4)], lanes.Intervals(s, e))
    lo, hi = tr.extent()
    for w in (5, 80):
        edges = lane_view.bin_edges(lo, (hi - lo) / w, w)
        a, b = lane_view.hw_cells(built, edges), lane_view.hw_cells(ref, edges)
        assert (a.level == b.level).all() and (a.cat == b.cat).all() and (a.count == b.count).all()
    assert lane_view.interval_at(built, int(s[0]), int(s[0]) + 1) == on[0] and len(built.ev) == len(on)


@pytest.mark.parametrize("seed", range(6))
def test_lanes_of_groups_rows_by_pair_in_key_order(seed):
    """_lanes_of against a dictionary of rows per (hi, lo): small ids (counted), large or negative
    ids (made dense first), few lanes (one pass each) and many (radix argsort)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    span = [3, 40, 5000, 1 << 40][seed % 4]
    hi = rng.integers(-2 if seed == 5 else 0, span, n)
    lo = rng.integers(0, [2, 30][seed % 2], n).astype(np.int32)
    ref = {}
    for i, (h, lw) in enumerate(zip(hi.tolist(), lo.tolist())):
        ref.setdefault((h, lw), []).append(i)
    got = lanes._lanes_of(hi, lo)
    assert [(h, lw) for h, lw, _ in got] == sorted(ref)
    for h, lw, rows in got:
        assert rows.dtype == np.int32 and rows.tolist() == ref[(h, lw)]
    assert lanes._lanes_of(hi[:0], lo[:0]) == []
