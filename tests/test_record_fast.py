"""The record's cold-path shortcuts (issue 11) on synthetic traces give what the direct computations
give: device ops and calls, ending ops, unmatched ops, the shown groups' phases, gap ends, gap
histograms, sums inside, latency, stream calls, per-thread calls, API totals, the functor split,
gap figures and first launches, each against its walk or mask. On generated arrays:
test_record_fast_arrays.py."""
from __future__ import annotations

import numpy as np
import pytest

from fixtures import record_cases as rc
from fixtures import synth
from launchtui.analysis import cpu_busy
from launchtui.analysis import exposed as ex
from launchtui.analysis import intervals as iv
from launchtui.analysis import launches as launches_mod
from launchtui.analysis import phases as ph
from launchtui.analysis import record as rec
from launchtui.analysis import record_top as top
from launchtui.analysis import stream_calls as sc
from launchtui.analysis.launches import kernel_groups, name_ids, split_by_functor
from launchtui.analysis.sources import dominant_sites
from launchtui.trace.load import open_trace


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


def test_ending_ops_equal_a_walk_per_gap(case):
    """idle_causes.ending_ops (one search after reordering ties) equals a direct walk: per gap end,
    of the device's ops starting at or after it, the first start; among those starting together,
    one with a launch row, then the earliest call, then the lowest stream (definitions.md §V2)."""
    from launchtui.analysis.idle_causes import ending_ops
    ops, api = case.ops, case.api
    for d, calls in ex.launch_devices(case).items():
        lo, hi = int(ops.start.min()), int(ops.end.max())
        g = ex.device_gaps(case, d, lo, hi, calls)
        on = ex.device_ops(case, d)
        got = ending_ops(case, on, g.end)
        on_start = ops.start[on]
        for gi, g1 in enumerate(g.end.tolist()):
            later = on[on_start >= g1]   # the device's ops starting at or after the gap's end
            if not len(later):
                assert got[gi] == -1
                continue
            first = ops.start[later].min()
            tied = [int(i) for i in later[ops.start[later] == first]]
            key = lambda i: (ops.api[i] < 0, int(api.start[ops.api[i]]) if ops.api[i] >= 0 else 0, int(ops.stream[i]))  # noqa: E731
            assert got[gi] == min(tied, key=key)


@pytest.mark.parametrize("few", [0, 8])
def test_unmatched_ops_equal_a_walk_per_stream(case, monkeypatch, few):
    """limits.unmatched_ops, by one pass per stream (few streams) or by one sort (many), equals a
    walk: per unmatched op, whether its stream had a launched op starting before it (§V13)."""
    import copy

    from launchtui.analysis import limits
    t = copy.copy(case)
    t.ops = copy.copy(case.ops)
    api = case.ops.api.copy()
    api[::7] = -1       # every 7th op loses its launch row: several streams, some at their start
    t.ops.api = api
    monkeypatch.setattr(limits, "FEW_STREAMS", few)
    ops = t.ops
    first = {}
    for i in range(len(ops)):
        if ops.api[i] >= 0:
            k = (int(ops.device[i]), int(ops.stream[i]))
            first[k] = min(first.get(k, 2**63 - 1), int(ops.start[i]))
    un = [i for i in range(len(ops)) if ops.api[i] < 0]
    late = sum(int(ops.start[i]) > first.get((int(ops.device[i]), int(ops.stream[i])), 2**63 - 1) for i in un)
    assert len({(int(ops.device[i]), int(ops.stream[i])) for i in un}) > 1
    assert limits.unmatched_ops(t) == (len(un), late)


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
        phase, rules, source, names, median = top._shown_groups(case, it, opt, k, g, a, np.ones(len(k), bool), ng,
                                                                shown)
        for i in shown:
            assert phase[i] == want_phase[i] and rules[i] == want_rules[i] and source[i] == want_source[i]
            first = k[g == i].min()
            assert names[i] == (case.strings[int(case.ops.name[first])], case.strings[int(case.ops.full_name[first])])
            own = k[g == i]
            assert median[i] == float(np.median(case.ops.end[own] - case.ops.start[own]))
    assert any(p is not None for p, _ in want_phase)


def _gaps_by_search(monkeypatch, trace, d, lo, hi, calls):
    monkeypatch.setattr(ex, "_ending_ops_by_heads", lambda trace, lk, before, heads, ge: ex._ending_ops(trace, lk, ge))
    g = ex.device_gaps(trace, d, lo, hi, calls)
    monkeypatch.undo()
    return g


@pytest.mark.parametrize("clip", [False, True])
def test_gap_ends_by_run_heads_equal_the_search(case, monkeypatch, clip):
    for d, calls in ex.launch_devices(case).items():
        lo, hi = int(case.ops.start.min()), int(case.ops.end.max())
        if clip:    # the window ends inside the ops: the last gaps clipped at hi
            lo, hi = lo + (hi - lo) // 7, hi - (hi - lo) // 5
        g = ex.device_gaps(case, d, lo, hi, calls)
        want = _gaps_by_search(monkeypatch, case, d, lo, hi, calls)
        for f in ("start", "end", "next_stream", "waited"):
            np.testing.assert_array_equal(getattr(g, f), getattr(want, f), err_msg=f)
        assert (g.next_stream >= 0).any()


def test_gaps_without_their_ending_ops_have_the_same_bounds_and_busy_set(case):
    """The record asks for the gaps' bounds and the busy set only (its causes find the ending ops
    by their own rule): the same arrays as the full gaps, the ending-op columns not built."""
    for d, calls in ex.launch_devices(case).items():
        lo, hi = int(case.ops.start.min()), int(case.ops.end.max())
        full, bare = ex.device_gaps(case, d, lo, hi, calls), ex.device_gaps(case, d, lo, hi, calls, ending=False)
        for got, want in ((bare.start, full.start), (bare.end, full.end), *zip(bare.busy, full.busy)):
            np.testing.assert_array_equal(got, want)
        assert len(bare.start) and bare.next_stream is None and bare.waited is None


@pytest.mark.slow
def test_gap_histogram_equals_the_intersected_pieces(case):
    """Gaps inside one iteration count whole; the rest are cut by the iterations (definitions.md §V7)."""
    for d, calls in ex.launch_devices(case).items():
        lo, hi = int(case.ops.start.min()), int(case.ops.end.max())
        g = ex.device_gaps(case, d, lo, hi, calls)
        rng = np.random.default_rng(d)
        for k in (1, 3, 12):
            edges = np.sort(rng.choice(np.arange(lo, hi), 2 * k, replace=False)).astype(np.int64)
            starts, ends = edges[0::2], edges[1::2]
            if k == 12:
                ends = ends + (hi - lo) // 20       # overlapping windows: their union counts
            ps, pe = iv.intersect((g.start, g.end), iv.union(starts, ends))
            length = pe - ps
            b = np.searchsorted(np.asarray(ex.GAP_BUCKETS_NS), length, side="right")
            want = {lab: {"count": int((b == i).sum()), "total_ms": round(float(length[b == i].sum()) / 1e6, 3)}
                    for i, lab in enumerate(ex.GAP_BUCKET_LABELS)}
            assert ex.gap_histogram(g, starts, ends) == want
        assert ex.gap_histogram(g, starts[:1], starts[:1]) == {lab: {"count": 0, "total_ms": 0.0}
                                                               for lab in ex.GAP_BUCKET_LABELS}


@pytest.mark.parametrize("share_inside", [0.0, 0.1, 0.6, 0.97, 1.0])
def test_sums_inside_equal_the_sums_over_the_launches_inside(case, share_inside):
    """The groups' totals less the launches outside the iterations, or the sums over those inside:
    the same figures (definitions.md §V4), whichever side is summed."""
    gr = kernel_groups(case)
    k, g = gr.op_idx, gr.op_group
    a = case.ops.api[k]
    inside = np.random.default_rng(3).random(len(k)) < share_inside
    got = top._sums_inside(case, gr, k, g, a, inside)
    ops, api = case.ops, case.api
    ki, gi, ai = k[inside], g[inside], a[inside]
    ng = len(gr)
    queue = ops.start[ki] - api.end[ai]
    want = (np.bincount(gi, minlength=ng), np.bincount(gi, weights=api.end[ai] - api.start[ai], minlength=ng),
            np.bincount(gi, weights=ops.end[ki] - ops.start[ki], minlength=ng),
            np.bincount(gi, weights=queue >= 0, minlength=ng),
            np.bincount(gi, weights=np.where(queue >= 0, queue, 0), minlength=ng))
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)
    assert got[0].dtype == np.int64


def _latency_by_walk(trace, device: int) -> int:
    """§V2's L by a walk over the device's ops, stream by stream in start order: the median of
    (op start - call end) over kernel launches whose stream's previous op ended by the call's
    return and whose op started after the call began."""
    from launchtui.analysis.idle_causes import DEFAULT_LATENCY_NS, MIN_LATENCY_SAMPLES
    from launchtui.trace.model import API_LAUNCH
    ops, api = trace.ops, trace.api
    prev_end, samples = {}, []
    for i in range(len(ops)):
        if int(ops.device[i]) != device:
            continue
        st, a = int(ops.stream[i]), int(ops.api[i])
        if a >= 0 and int(api.kind[a]) == API_LAUNCH and prev_end.get(st, -2**63) <= int(api.end[a]) \
                and int(ops.start[i]) >= int(api.start[a]):
            samples.append(int(ops.start[i]) - int(api.end[a]))
        prev_end[st] = int(ops.end[i])
    if len(samples) < MIN_LATENCY_SAMPLES:
        return DEFAULT_LATENCY_NS
    return max(0, int(np.median(samples)))


def test_device_latency_is_one_value_per_device(case):
    """The gap causes, the queue classes and the ceilings read one L per device
    (idle_causes.device_latency): computed by the first caller from its form of the streams' ops,
    and handed to every later caller without calling theirs."""
    from launchtui.analysis.idle_causes import by_stream, device_latency

    def again():
        raise AssertionError("the device's latency computed a second time")
    for d in case.device_ids():
        first = device_latency(case, d, lambda: by_stream(case, ex.device_ops(case, d)))
        assert first.ns == _latency_by_walk(case, d)
        assert device_latency(case, d, again) is first


def test_latency_read_in_small_blocks_equals_the_walk(case, monkeypatch):
    """The latency samples are read a block of a stream's ops at a time: with blocks of 1, 2 and 5
    ops (the stream's previous op then lies in the block before) L is the walk's."""
    from launchtui.analysis import idle_causes as ic
    for block in (1, 2, 5):
        monkeypatch.setattr(ic, "LATENCY_BLOCK", block)
        for d in case.device_ids():
            lat = ic.streams_latency(case, ic.by_stream(case, ex.device_ops(case, d)))
            assert lat.ns == _latency_by_walk(case, d) and lat.samples > 0


@pytest.mark.parametrize("call_block", [3, sc.CALL_BLOCK])
def test_stream_calls_and_latency_equal_a_walk(case, call_block, monkeypatch):
    """stream_calls' per-call arrays (one entry per call, at its first op) and the device's latency
    from its streams' ops (idle_causes.streams_latency, as the queue class and the ceilings read it)
    equal a walk over the ops and idle_causes.submission_latency (the gap causes' L, §V2, §V3),
    with the calls measured a few at a time too (CALL_BLOCK 3)."""
    monkeypatch.setattr(sc, "CALL_BLOCK", call_block)
    from launchtui.analysis.idle_causes import streams_latency, submission_latency
    from launchtui.analysis.queue import backlog_starts, depth_before_launch, stream_series
    ops, api = case.ops, case.api
    dbl = depth_before_launch(case)
    lo, hi = int(ops.start.min()), int(ops.end.max())
    edges = np.linspace(lo, hi, 8).astype(np.int64)
    starts, ends = edges[:-1], edges[1:] - 3
    for d in case.device_ids():
        streams = [s.stream for s in stream_series(case) if s.device == d]
        ons = sc.streams_ops(case, d, streams)
        lat = streams_latency(case, ons).ns
        assert lat == submission_latency(case, ex.device_ops(case, d)).ns
        assert (np.diff(ops.start) >= 0).all() and lat == _latency_by_walk(case, d)   # walked in start order
        for st, on in zip(streams, ons):
            np.testing.assert_array_equal(on, np.flatnonzero((ops.device == d) & (ops.stream == st)))
            backlog = backlog_starts(case, on)
            c = sc.stream_calls(case, on, dbl, backlog, starts, ends, lat + sc.DRY_SLACK_NS)
            first = {}
            for j, i in enumerate(on.tolist()):
                if ops.api[i] >= 0:
                    first.setdefault(int(ops.api[i]), j)
            assert c.api.tolist() == sorted(first) and c.pos.tolist() == [first[a] for a in sorted(first)]
            for a, p, dep, k, dry in zip(c.api.tolist(), c.pos.tolist(), c.depth.tolist(), c.k.tolist(),
                                         c.dry.tolist()):
                op = int(on[p])
                t0 = int(api.start[a])
                assert dep == int(dbl[op]) + 1 + sum(1 for b in backlog.tolist() if b > t0)
                assert k == next((i for i, (x, y) in enumerate(zip(starts, ends)) if x <= t0 < y), -1)
                assert dry == (int(ops.start[op]) - int(api.end[a]) <= lat + sc.DRY_SLACK_NS)


def test_launch_calls_per_thread_equal_the_masks(case):
    """iterations' tie-break (threads holding as many matching ranges): the calls that launched an
    op (on the device), per thread, by index and a spare slot, equal the full-length masks."""
    from launchtui.analysis.iterations import _calls_per_thread
    ops, api = case.ops, case.api
    n = int(api.thread.max()) + 3
    for d in [None, *case.device_ids(), 99]:
        m = ops.api >= 0
        if d is not None:
            m &= ops.device == d
        mark = np.zeros(len(api), bool)
        mark[ops.api[m]] = True
        want = np.bincount(api.thread[mark], minlength=n)
        np.testing.assert_array_equal(_calls_per_thread(case, d, n), want)


def test_calls_per_thread_take_unmatched_ops():
    """Ops without a launch call (api -1) count for no thread."""
    from types import SimpleNamespace
    from launchtui.analysis.iterations import _calls_per_thread
    ops = SimpleNamespace(api=np.array([-1, 0, 2, 2, -1]), device=np.array([0, 0, 1, 0, 1], np.int32))
    class Api(SimpleNamespace):
        def __len__(self):
            return len(self.thread)
    tr = SimpleNamespace(ops=ops, api=Api(thread=np.array([5, 6, 7], np.int32)))
    np.testing.assert_array_equal(_calls_per_thread(tr, 0, 8), [0, 0, 0, 0, 0, 1, 0, 1])
    np.testing.assert_array_equal(_calls_per_thread(tr, 1, 8), [0, 0, 0, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(_calls_per_thread(tr, None, 8), [0, 0, 0, 0, 0, 1, 0, 1])


def test_api_totals_equal_a_pass_per_name(case):
    """The cross-check's launch-API totals per name, counted at once, equal one pass per name."""
    from launchtui.analysis import iterations as itr
    from launchtui.trace import names as nm
    api = case.api
    d = next(iter(ex.launch_devices(case)))
    calls = ex.device_launch_calls(case, d)
    it = itr.find(case, None, d)
    got = rec._api_totals(case, it, calls)
    inside = calls[it.index_of(api.start[calls]) >= 0]
    want: dict = {}
    for u in np.unique(api.name[inside]).tolist():
        m = api.name[inside] == u
        c = want.setdefault(nm.api_display_name(case.strings[u]), [0, 0])
        c[0] += int(m.sum())
        c[1] += int((api.end[inside][m] - api.start[inside][m]).sum())
    assert got == [{"api_name": n, "count": c, "total_ms": round(t / 1e6, 3)}
                   for n, (c, t) in sorted(want.items(), key=lambda x: (-x[1][1], x[0]))]
    assert sum(r["count"] for r in got) == len(inside) > 0


@pytest.mark.parametrize("block,dense", [(3, True), (1 << 20, True), (3, False)])
def test_split_by_functor_equals_grouping_each_launch_by_its_row_name(case, block, dense, monkeypatch):
    """definitions.md §V4: a short-name group whose launches carry several distinguishing names is
    split by them, the others stay; every sum equals that of grouping each launch by its row name
    directly (short name, or distinguishing name where the short name has several). In blocks of
    3 launches (mixed groups found, split and summed across blocks) as in one, and with the split
    keys ranked by a search as by the dense table."""
    gr = kernel_groups(case)
    monkeypatch.setattr(launches_mod, "AGG_BLOCK", block)
    monkeypatch.setattr(launches_mod, "DENSE_LIMIT", (1 << 24) if dense else 0)
    sp = split_by_functor(case, gr)
    ops, api = case.ops, case.api
    k = gr.op_idx
    np.testing.assert_array_equal(sp.op_idx, k)
    short, dist = ops.name[k], name_ids(case, "full")[k]
    several = {}
    for d, s_, f in zip(ops.device[k].tolist(), short.tolist(), dist.tolist()):
        several.setdefault((d, s_), set()).add(f)
    row = [(d, f if len(several[d, s_]) > 1 else s_) for d, s_, f in zip(ops.device[k].tolist(), short.tolist(),
                                                                         dist.tolist())]
    assert len(set(row)) == len(sp) > len(gr)       # the scenarios' elementwise kernels carry functors
    got = {(int(sp.device[i]), int(sp.name[i])): i for i in range(len(sp))}
    assert set(got) == set(row)
    for key, i in got.items():
        mine = np.array([j for j, r in enumerate(row) if r == key])
        assert (sp.op_group[mine] == i).all()
        kk = k[mine]
        assert sp.count[i] == len(mine)
        assert sp.sum_api[i] == (api.end[ops.api[kk]] - api.start[ops.api[kk]]).sum()
        assert sp.sum_kernel[i] == (ops.end[kk] - ops.start[kk]).sum()
        assert sp.max_api[i] == (api.end[ops.api[kk]] - api.start[ops.api[kk]]).max()
        assert (sp.span_start[i], sp.span_end[i]) == (ops.start[kk].min(), ops.end[kk].max())
    assert split_by_functor(case, sp).count.tolist() == sp.count.tolist()   # nothing left to split


def _on_threads(threads: list, names: list):
    """A `defer` that computes each block at once on a thread of its own (all at the same time,
    finishing in any order); `names`: the thread each block ran on."""
    import threading

    from launchtui.analysis.shared import Deferred

    def defer(compute):
        d = Deferred(lambda: (names.append(threading.current_thread().name), compute())[1])
        threads.append(threading.Thread(target=d.run, name=f"block-{len(threads)}"))
        threads[-1].start()
        return d
    return defer


@pytest.mark.parametrize("block,lane", [(1, None), (5, None), (1 << 20, None), (1 << 20, "threads"),
                                        (1 << 20, "shared")])
def test_gap_figures_by_block_equal_the_whole_gaps_causes(case, block, lane):
    """record_idle.gap_figures (the gaps' causes a block at a time) gives what the causes of all the
    gaps at once give: idle by cause per iteration, the steady iterations, §V7's launch-limit
    figures and by_phase's gaps (host-bound and launch ns per steady gap, whose ending ops
    steady_gap_ops gives in the same order). With a
    helper lane (`defer`) the gaps go in LANE_PIECES blocks: computed on threads of their own at
    once, or on a command's lane (analysis/shared.py), the figures are the same."""
    from launchtui.analysis import idle_causes as ic
    from launchtui.analysis import iterations as itr
    from launchtui.analysis import record_idle as ri
    from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH
    d, calls = next(iter(ex.launch_devices(case).items()))
    on = ex.device_ops(case, d)
    it = itr.find(case, None, d, (int(case.ops.start[on].min()), int(case.ops.end[on].max())))
    g = ex.device_gaps(case, d, int(case.ops.start[on].min()), int(it.end.max()), calls, ending=False)
    f = ex.per_iteration(case, d, it.start, it.end, np.zeros(len(it), np.int64), g, calls)
    blocking = cpu_busy.host_blocking_calls(case)
    whole = ic.gap_causes(case, on, calls, g.start, g.end, blocking=blocking)
    per = whole.measure_in(it.start, it.end)
    steady, excluded = ri.steady_iterations(per, f.idle_ns, f.launches)
    nxt = ic.ending_ops(case, on, g.end)
    threads, names, defer = [], [], None
    if lane == "threads":
        defer = _on_threads(threads, names)
    elif lane == "shared":
        from launchtui.analysis.shared import Shared
        shared = Shared(case)
        shared.lend_lane()
        defer = shared.defer
    got = ri.gap_figures(case, it, calls, g.start, g.end, nxt, whole.latency, None, blocking,
                         ri.steady_of(case, it, g.start, g.end, nxt, f.idle_ns, f.launches), block=block, defer=defer)
    for t in threads:
        t.join()
    if lane == "threads":   # every block on a thread of its own, none on the caller's
        assert len(g.start) >= ri.LANE_PIECES and sorted(names) == [f"block-{i}" for i in range(ri.LANE_PIECES)]
    assert got.facts.steady.tolist() == steady.tolist() and got.facts.excluded == excluded
    assert {c: v.tolist() for c, v in got.facts.per_it.items()} == {c: v.tolist() for c, v in per.items()}
    k = it.index_of(whole.g0)
    inside = (k >= 0) & (whole.op >= 0)
    inside[inside] = steady[k[inside]]
    assert got.phase_gaps.host_bound.tolist() == whole.host_bound_per_gap()[inside].tolist()
    assert got.phase_gaps.launch.tolist() == whole.launch_per_gap()[inside].tolist()
    assert ri.steady_gap_ops(it, g.start, nxt, steady).tolist() == whole.op[inside].tolist()
    tails = (whole.tail == 0) & (whole.cut_dep > whole.cut_tail) & (whole.call >= 0) & ~whole.sync & (k >= 0)
    tails[tails] = steady[k[tails]]
    kind = case.api.kind[whole.call[tails]]
    other = (kind != API_LAUNCH) & (kind != API_GRAPH_LAUNCH)
    copy = np.maximum(np.minimum(whole.cut_dep[tails], case.api.end[whole.call[tails]]) - whole.cut_tail[tails], 0)
    flight = iv.measure_in(*iv.intersect(whole.flight, (g.start, g.end)), it.start, it.end)
    lim = got.launch_limit
    assert lim["tails"] == int(tails.sum()) > 0
    assert lim["in_flight_ms"] == round((float(flight[steady].sum()) + float(copy[other].sum())) / 1e6, 6)
    assert lim["launch_ms"] == round(float(per["launch"][steady].sum()) / 1e6, 6)


@pytest.mark.parametrize("block", [3, 1 << 21])
def test_first_launches_by_block_equal_the_grouped_minimum(case, block, monkeypatch):
    """cold_start's first launch per (device, kernel) from blocks of ops equals the minimum call per
    group of every launched op at once, and a walk over the launches in call order."""
    from launchtui.analysis import cold_start as cs
    monkeypatch.setattr(cs, "OP_BLOCK", block)
    got, n = cs._first_launch_calls(case)
    want, n_want = cs._first_launch_calls_sorted(case)
    assert n == n_want > 0 and got.tolist() == want.tolist()
    ops, api = case.ops, case.api
    seen, walk = set(), np.zeros(len(api), bool)
    for o in np.argsort(ops.api, kind="stable").tolist():    # launches in call (API row) order
        a = int(ops.api[o])
        if a >= 0 and api.kind[a] == ex.API_LAUNCH and (int(ops.device[o]), int(ops.full_name[o])) not in seen:
            seen.add((int(ops.device[o]), int(ops.full_name[o])))
            walk[a] = True
    assert got.tolist() == walk.tolist()
