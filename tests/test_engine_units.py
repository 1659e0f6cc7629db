"""Unit tests of the engine's building blocks on hand-built inputs with known answers."""
from __future__ import annotations

import numpy as np
import pytest

from launchtui.analysis.lanes import QueueLane, RangeMax
from launchtui.analysis.queue import queue_summary, stream_series
from launchtui.analysis.select import Selection, op_mask
from launchtui.trace.join import finalize
from launchtui.trace.kineto_events import parse_decimal_ns
from launchtui.trace.model import (API_GRAPH_LAUNCH, API_LAUNCH, API_MEMCPY, API_OTHER, API_SYNC,
                                   ApiCalls, GpuOps, Overheads, Ranges, SourceInfo, StringTable, Threads,
                                   Trace)
from launchtui.trace.names import (api_display_name, api_kind, distinguishing_name,
                                   kernel_short_name)
from launchtui.trace.nesting import InnermostIndex, range_depths


def make_trace(api_rows, op_rows, threads=((1, 1, 100),), match_process=True) -> Trace:
    """api_rows: (thread, pid, start, end, corr, kind); op_rows: (device, stream, start, end, corr, pid)."""
    s = StringTable()
    k = s.intern("k")
    a = np.array(api_rows, np.int64).reshape(-1, 6)
    o = np.array(op_rows, np.int64).reshape(-1, 6)
    api = ApiCalls(thread=a[:, 0], pid=a[:, 1], start=a[:, 2], end=a[:, 3], corr=a[:, 4],
                   name=np.full(len(a), s.intern("cudaLaunchKernel")), kind=a[:, 5])
    ops = GpuOps(device=o[:, 0], stream=o[:, 1], start=o[:, 2], end=o[:, 3], corr=o[:, 4], pid=o[:, 5],
                 name=np.full(len(o), k), full_name=np.full(len(o), k), kind=np.zeros(len(o)),
                 api=np.full(len(o), -1))
    t = np.array(threads, np.int64).reshape(-1, 3)
    th = Threads(pid=t[:, 0], tid=t[:, 1], key=t[:, 2], name=np.full(len(t), -1))
    tr = Trace(SourceInfo("mem", 0, 0, "test", "test"), s, ops, api, Ranges.empty(), th, Overheads.empty())
    return finalize(tr, match_process)


# --- names -------------------------------------------------------------------------------

@pytest.mark.parametrize("full,short", [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
     "vectorized_elementwise_kernel"),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 8, false, false>(float*, float "
     "const*, int, int, int, bool const*, int, bool)", "softmax_warp_forward"),
    ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"),
    ("triton_poi_fused_mul_add_0", "triton_poi_fused_mul_add_0"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(cutlass_80_tensorop_s1688gemm_"
     "128x128_32x3_nn_align4::Params)", "Kernel"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
     "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
     "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::"
     "sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned "
     "int, float, 4>)", "reduce_kernel"),
    ("void foo<std::enable_if<((8)>(0)), int>::type>(int)", "foo"),
])
def test_kernel_short_name(full, short):
    assert kernel_short_name(full) == short


ADDCMUL = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::"
           "AddcmulFunctor<float> >(at::TensorIteratorBase&, at::native::AddcmulFunctor<float> const&)::"
           "{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::AddcmulFunctor<float> >("
           "at::TensorIteratorBase&, at::native::AddcmulFunctor<float> const&)::{lambda(int)#1})")


def test_distinguishing_names_split_functors():
    assert distinguishing_name("elementwise_kernel", ADDCMUL) == "elementwise_kernel<AddcmulFunctor>"
    assert distinguishing_name("elementwise_kernel", ADDCMUL.replace("Addcmul", "Sqrt")) == \
        "elementwise_kernel<SqrtFunctor>"
    mul = ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
           "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, ...)")
    assert distinguishing_name("vectorized_elementwise_kernel", mul) == "vectorized_elementwise_kernel<MulFunctor>"
    assert distinguishing_name("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn") == "ampere_sgemm_128x64_nn"


def test_api_names_and_kinds():
    assert api_display_name("cudaLaunchKernel_v7000") == "cudaLaunchKernel"
    assert api_display_name("cudaLaunchKernelExC_v11060") == "cudaLaunchKernelExC"
    assert api_display_name("cuMemcpyHtoDAsync_v2") == "cuMemcpyHtoDAsync_v2"
    assert api_kind("cuLaunchKernelEx") == API_LAUNCH
    assert api_kind("cudaGraphLaunch_v10000") == API_GRAPH_LAUNCH
    assert api_kind("cudaStreamSynchronize_v3020") == API_SYNC
    assert api_kind("cudaMemcpyAsync_v3020") == API_MEMCPY
    assert api_kind("cudaLaunchHostFunc") == API_LAUNCH  # drops out of the table: it has no kernel
    assert api_kind("cudaFuncSetAttribute") == API_OTHER


def test_parse_decimal_ns_is_exact():
    toks = [b"1712195495521133.783", b"0.5", b"12", b"-3.25", b"7.0001", b"1e3", b"88437691101.729"]
    assert parse_decimal_ns(toks).tolist() == [1712195495521133783, 500, 12000, -3250, 7000, 1000000,
                                               88437691101729]


# --- join ----------------------------------------------------------------------------------

def test_join_requires_same_process():
    tr = make_trace([(0, 1 << 24, 0, 5, 42, API_LAUNCH), (0, 2 << 24, 1, 6, 42, API_LAUNCH)],
                    [(0, 7, 10, 12, 42, 2 << 24)])
    assert tr.process_keys(tr.api.pid[tr.ops.api[0]]) == 2 << 24


@pytest.mark.parametrize("n_proc", [1, 3, 40_000])
def test_process_index_round_trips_and_joins_like_the_keys(n_proc):
    """finalize stores ops.pid / api.pid as dense indices into trace.processes (int16; int32 past
    32,767 processes): they give the reader's keys back, and the join still pairs only equal keys."""
    rng = np.random.default_rng(n_proc)
    n = max(2 * n_proc, 600)
    keys = (rng.permutation(n_proc).astype(np.int64) + 7) << 24
    pid = keys[rng.integers(0, n_proc, n)]
    corr = rng.integers(0, 50, n)   # correlation ids reused across processes
    api = [(0, int(p), 10 * i, 10 * i + 5, int(c), API_LAUNCH) for i, (p, c) in enumerate(zip(pid, corr))]
    op_pid = np.where(rng.random(n) < 0.1, keys[rng.integers(0, n_proc, n)], pid)   # some foreign
    ops = [(0, 7, 10 * i + 8, 10 * i + 9, int(c), int(p)) for i, (p, c) in enumerate(zip(op_pid, corr))]
    tr = make_trace(api, ops)
    assert tr.ops.pid.dtype == tr.api.pid.dtype == (np.int16 if n_proc < 32768 else np.int32)
    assert tr.processes.tolist() == sorted(set(pid.tolist()) | set(op_pid.tolist()))
    assert tr.process_keys(tr.api.pid).tolist() == pid.tolist()
    assert tr.process_keys(tr.ops.pid).tolist() == op_pid.tolist()
    # brute force: the latest API row of the same (key, corr) starting before the op, else the
    # earliest such row (definitions.md §1)
    expect = []
    for i in range(n if n <= 1200 else 0):
        cands = [j for j in range(n) if pid[j] == op_pid[i] and corr[j] == corr[i]]
        before = [j for j in cands if 10 * j <= 10 * i + 8]
        expect.append(max(before) if before else min(cands, default=-1))
    if expect:
        assert tr.ops.api.tolist() == expect


@pytest.mark.parametrize("one_process", [True, False])
def test_join_of_int32_ids_spanning_the_int32_range(one_process):
    """finalize narrows correlation ids to int32 before the join: keys spanning the whole int32
    range (a difference past 2^31) still pair each op with its own call."""
    ids = [-(2**31), -5, 0, 2**31 - 1]
    pid = [1 << 24, 1 << 24, 2 << 24, 1 << 24] if not one_process else [1 << 24] * 4
    tr = make_trace([(0, p, 10 * i, 10 * i + 5, c, API_LAUNCH) for i, (p, c) in enumerate(zip(pid, ids))],
                    [(0, 7, 10 * i + 8, 10 * i + 9, c, p) for i, (p, c) in enumerate(zip(pid, ids))])
    assert tr.ops.corr.dtype == tr.api.corr.dtype == np.int32
    assert tr.api.corr[tr.ops.api].tolist() == tr.ops.corr.tolist() == ids


def test_process_index_keeps_unknown_processes_unknown():
    tr = make_trace([(0, 5 << 24, 0, 5, 42, API_LAUNCH)], [(0, 7, 10, 12, 42, -1)], match_process=False)
    assert tr.ops.pid.tolist() == [-1] and tr.process_keys(tr.ops.pid).tolist() == [-1]
    assert tr.processes.tolist() == [5 << 24] and tr.ops.api.tolist() == [0]


def test_join_reused_correlation_takes_latest_api_before_op():
    tr = make_trace([(0, 0, 0, 5, 9, API_LAUNCH), (0, 0, 100, 105, 9, API_LAUNCH), (0, 0, 300, 305, 9, API_LAUNCH)],
                    [(0, 7, 50, 60, 9, 0), (0, 7, 200, 210, 9, 0)])
    assert tr.api.start[tr.ops.api].tolist() == [0, 100]


@pytest.mark.parametrize("reuse", [False, True])
def test_lookup_join_in_blocks_pairs_like_the_whole_table(reuse, monkeypatch):
    """The direct-address join writes keys and counts filled slots in blocks (LOOKUP_BLOCK = 3
    here): unique ids pair each op with its own call; a reused id is caught and joined by the
    general rule (the latest call starting before the op)."""
    from launchtui.trace import join
    monkeypatch.setattr(join, "LOOKUP_BLOCK", 3)
    corr = list(range(20)) + ([4] if reuse else [20])
    api = [(0, 0, 10 * i, 10 * i + 5, c, API_LAUNCH) for i, c in enumerate(corr)]
    ops = [(0, 7, 10 * i + 8, 10 * i + 9, c, 0) for i, c in enumerate(corr)]
    tr = make_trace(api, ops)
    want = list(range(21))
    if reuse:
        want[4] = 4    # the op at 48 follows call 4 (start 40); call 20 (start 200) comes later
    assert tr.ops.api.tolist() == want and tr.api.corr[tr.ops.api].tolist() == tr.ops.corr.tolist()


@pytest.mark.parametrize("block", [3, 1 << 22])
def test_lookup_join_of_processes_counting_the_same_ids(block, monkeypatch):
    """Correlation ids counted per process (the same ids in each) join through the direct-address
    table on (process, id), its keys made block by block (LOOKUP_BLOCK): each op pairs with its
    own process's call, and an op whose process made no call with its id (one of an unknown
    process did) stays unmatched."""
    from launchtui.trace import join
    monkeypatch.setattr(join, "LOOKUP_BLOCK", block)
    looked_up = []
    real = join._lookup_join
    monkeypatch.setattr(join, "_lookup_join", lambda *a: looked_up.append(real(*a)) or looked_up[-1])
    procs = [9 << 24, 3 << 24, 5 << 24]
    api = [(0, p, 30 * c + k, 30 * c + k + 5, c, API_LAUNCH) for c in range(1, 7) for k, p in enumerate(procs)]
    api.append((0, -1, 500, 505, 7, API_LAUNCH))
    ops = [(0, 7, t + 20, t + 21, c, p) for _, p, t, _, c, _ in api[:-1]] + [(0, 7, 600, 601, 7, 5 << 24)]
    tr = make_trace(api, ops)
    assert len(looked_up) == 1 and looked_up[0] is not None
    keys = tr.process_keys(tr.api.pid)
    got = {(int(tr.process_keys(tr.ops.pid[i:i + 1])[0]), int(tr.ops.corr[i])):
           (int(keys[a]), int(tr.api.corr[a])) if a >= 0 else None for i, a in enumerate(tr.ops.api.tolist())}
    assert got == {**{(p, c): (p, c) for _, p, _, _, c, _ in api[:-1]}, (5 << 24, 7): None}


def test_join_ties_latest_end_then_smallest_thread():
    tr = make_trace([(0, 0, 10, 20, 5, API_LAUNCH), (1, 0, 10, 30, 5, API_LAUNCH), (0, 0, 10, 30, 5, API_LAUNCH)],
                    [(0, 7, 50, 60, 5, 0)], threads=((1, 1, 200), (1, 2, 100)))
    a = tr.ops.api[0]
    assert tr.api.end[a] == 30 and tr.threads.key[tr.api.thread[a]] == 100


def test_join_op_before_any_api_falls_back_to_earliest():
    tr = make_trace([(0, 0, 100, 105, 3, API_LAUNCH)], [(0, 7, 90, 95, 3, 0)])
    assert tr.ops.api[0] == 0


def test_graph_launch_one_to_many_and_unmatched():
    tr = make_trace([(0, 0, 0, 50, 1, API_GRAPH_LAUNCH)],
                    [(0, 7, 60, 61, 1, 0), (0, 7, 62, 63, 1, 0), (0, 7, 64, 65, 1, 0), (0, 7, 70, 71, 99, 0)])
    assert tr.ops.api.tolist() == [0, 0, 0, -1]


def test_graph_launched_ops_count_only_the_selection():
    """Two graph replays (3 and 2 ops, on devices 0 and 1) and one ordinary launch: the report's
    graph_launched_ops follows the window and the device (it counted the whole trace before)."""
    from launchtui.analysis.report import launch_totals
    tr = make_trace([(0, 0, 0, 50, 1, API_GRAPH_LAUNCH), (0, 0, 100, 105, 2, API_GRAPH_LAUNCH),
                     (0, 0, 200, 205, 3, API_LAUNCH)],
                    [(0, 7, 60, 61, 1, 0), (0, 7, 62, 63, 1, 0), (0, 7, 64, 65, 1, 0),
                     (1, 7, 110, 111, 2, 0), (1, 7, 112, 113, 2, 0), (0, 7, 210, 215, 3, 0)])
    assert launch_totals(tr, Selection())["graph_launched_ops"] == 5
    assert launch_totals(tr, Selection(0, 63))["graph_launched_ops"] == 2
    assert launch_totals(tr, Selection(devices=(1,)))["graph_launched_ops"] == 2
    assert launch_totals(tr, Selection(150, 300)) == {"kernel_launches": 1, "launch_api_ms": 0.0,
                                                      "graph_launched_ops": 0}


def test_launch_totals_shortcuts_match_the_direct_sums():
    """The report's launch totals from the kernel groups' API sum and, for the whole trace, the typed
    index's graph-op counts equal the direct per-launch computation (no index built, no sum given)."""
    from launchtui.analysis.index import trace_index
    from launchtui.analysis.launches import kernel_groups
    from launchtui.analysis.report import build_report, launch_totals
    us = 1000

    def new():
        return make_trace([(0, 0, 0, 50 * us, 1, API_GRAPH_LAUNCH), (0, 0, 100 * us, 105 * us, 2, API_GRAPH_LAUNCH),
                           (0, 0, 200 * us, 207 * us, 3, API_LAUNCH), (0, 0, 300 * us, 333 * us, 4, API_LAUNCH)],
                          [(0, 7, 60 * us, 61 * us, 1, 0), (0, 7, 62 * us, 63 * us, 1, 0),
                           (0, 7, 64 * us, 65 * us, 1, 0), (1, 7, 110 * us, 111 * us, 2, 0),
                           (1, 7, 112 * us, 113 * us, 2, 0), (0, 7, 210 * us, 215 * us, 3, 0),
                           (1, 8, 340 * us, 345 * us, 4, 0)])
    for sel in (Selection(), Selection(0, 63 * us), Selection(devices=(1,)), Selection(150 * us, 400 * us)):
        tr = new()    # no index built yet
        direct = launch_totals(tr, sel)
        trace_index(tr)
        gr = kernel_groups(tr, sel)
        assert launch_totals(tr, sel, gr.op_idx, float(gr.sum_api.sum())) == direct
        assert build_report(tr, sel)["launches"] == direct
    assert direct == {"kernel_launches": 2, "launch_api_ms": 0.04, "graph_launched_ops": 0}
    whole = launch_totals(tr, Selection())
    assert whole == {"kernel_launches": 2, "launch_api_ms": 0.04, "graph_launched_ops": 5}
    # an API sum at or beyond 2^53 ns is not trusted: the durations are summed directly
    assert launch_totals(tr, Selection(), api_ns=2.0**53) == whole


def test_kineto_join_ignores_process():
    tr = make_trace([(0, 555, 0, 5, 8, API_LAUNCH)], [(0, 7, 10, 12, 8, -1)], match_process=False)
    assert tr.ops.api[0] == 0


# --- nesting ---------------------------------------------------------------------------------

def test_depths_and_innermost():
    # thread 0: A[0,100) > B[10,50) > C[20,30); D[50,60) sibling of B; thread 1: E[0,100)
    th = np.array([0, 0, 0, 0, 1])
    st = np.array([0, 10, 20, 50, 0])
    en = np.array([100, 50, 30, 60, 100])
    assert range_depths(th, st, en).tolist() == [0, 1, 2, 1, 0]
    ix = InnermostIndex(th, st, en)
    q_t = np.array([0, 5, 10, 25, 30, 49, 50, 59, 60, 99, 100, 25])
    q_th = np.array([0] * 11 + [1])
    assert ix.lookup(q_th, q_t).tolist() == [0, 0, 1, 2, 1, 1, 3, 3, 0, 0, -1, 4]


@pytest.mark.parametrize("n_threads", [3, 12])   # both lookup paths: a mask per thread, or grouped
def test_innermost_lookup_in_blocks_matches_brute_force(n_threads, monkeypatch):
    """Queries looked up in blocks of 5 (LOOKUP_BLOCK) give the innermost enclosing range found by
    scanning every range: the deepest one on the query's thread with start <= t < end."""
    from launchtui.trace import nesting
    monkeypatch.setattr(nesting, "LOOKUP_BLOCK", 5)
    rng = np.random.default_rng(n_threads)
    th, st, en = [], [], []
    for thread in range(n_threads - 1):          # the last thread has queries but no ranges
        a, b = 0, 48
        for _ in range(6):                       # each range strictly inside the previous one
            th.append(thread), st.append(a), en.append(b)
            a, b = a + int(rng.integers(1, 4)), b - int(rng.integers(1, 4))
    th, st, en = np.array(th), np.array(st), np.array(en)
    depth = range_depths(th, st, en)
    q_th = rng.integers(0, n_threads, 67)
    q_t = rng.integers(-2, 50, 67)
    want = []
    for qt, qq in zip(q_t, q_th):
        inside = np.flatnonzero((th == qq) & (st <= qt) & (qt < en))
        want.append(int(inside[np.argmax(depth[inside])]) if len(inside) else -1)
    assert InnermostIndex(th, st, en).lookup(q_th, q_t, np.int32).tolist() == want


def test_equal_start_ranges_nest_by_length():
    th = np.zeros(3, int)
    st = np.array([0, 0, 0])
    en = np.array([10, 30, 20])
    assert range_depths(th, st, en).tolist() == [2, 0, 1]
    assert InnermostIndex(th, st, en).lookup(np.zeros(3, int), np.array([5, 15, 25])).tolist() == [0, 2, 1]


# --- queue depth -----------------------------------------------------------------------------

def _depth_trace():
    # launches at 0,1,2,3 (API 0..), kernels start at 10, 10, 20, 30; tie at 10 applies -1 before +1
    api = [(0, 0, t, t + 1, i, API_LAUNCH) for i, t in enumerate([0, 1, 2, 10])]
    ops = [(0, 7, s, s + 5, i, 0) for i, s in enumerate([10, 10, 20, 30])]
    return make_trace(api, ops)


def test_pending_depth_step_function():
    tr = _depth_trace()
    (s,) = stream_series(tr)
    assert s.t.tolist() == [0, 1, 2, 10, 20, 30]
    assert s.v.tolist() == [1, 2, 3, 2, 1, 0]
    (q,) = queue_summary(tr, thresholds=(2, 3))
    assert q.max_depth == 3
    assert q.span_ns == 30
    assert q.mean_depth == pytest.approx((1 * 1 + 2 * 1 + 3 * 8 + 2 * 10 + 1 * 10) / 30)
    assert q.time_at_or_above_ns == {2: 1 + 8 + 10, 3: 8}


def test_queue_window_clips_steps():
    tr = _depth_trace()
    (q,) = queue_summary(tr, Selection(5, 25), thresholds=(2,))
    assert q.span_ns == 20 and q.max_depth == 3
    assert q.mean_depth == pytest.approx((3 * 5 + 2 * 10 + 1 * 5) / 20)


def test_bin_max_matches_brute_force():
    rng = np.random.default_rng(1)
    n = 3000
    starts = np.sort(rng.integers(0, 10**6, n))
    api = [(0, 0, int(t), int(t) + 3, i, API_LAUNCH) for i, t in enumerate(starts)]
    kst = np.maximum.accumulate(starts + rng.integers(5, 5000, n))
    ops = [(0, 7, int(k), int(k) + 2, i, 0) for i, k in enumerate(kst)]
    (s,) = stream_series(make_trace(api, ops))
    edges = np.linspace(-100, 1.2e6, 97).astype(np.int64)
    v = s.v.astype(np.int64)
    got = QueueLane(s.device, s.stream, s.t, v, RangeMax(v), int(v.max()), 0).bin_max(edges)
    fine = np.arange(-100, int(1.2e6) + 1)
    vals = s.value_at(fine)
    want = [vals[(fine >= a) & (fine < b)].max() for a, b in zip(edges[:-1], edges[1:])]
    assert got.tolist() == want


def test_op_mask_fully_inside_window_and_devices():
    tr = make_trace([(0, 0, 0, 1, i, API_LAUNCH) for i in range(3)],
                    [(0, 7, 10, 20, 0, 0), (1, 7, 15, 25, 1, 0), (0, 7, 18, 40, 2, 0)])
    assert op_mask(tr, Selection(10, 25)).tolist() == [True, True, False]
    assert op_mask(tr, Selection(10, 25, (1,))).tolist() == [False, True, False]


@pytest.mark.parametrize("n", [300, 20_000])
def test_depths_are_int16_up_to_small_depth_and_exact_beyond(n):
    """n launches before the first op starts: depth i before launch i, peak n (int32 past SMALL_DEPTH)."""
    from launchtui.analysis.index import trace_index
    from launchtui.analysis.queue_series import SMALL_DEPTH
    api = [(0, 1, i, i + 1, i, API_LAUNCH) for i in range(n)]
    ops = [(0, 7, 10 * n + 2 * i, 10 * n + 2 * i + 1, i, 1) for i in range(n)]
    idx = trace_index(make_trace(api, ops))
    want = np.int16 if n <= SMALL_DEPTH else np.int32
    (s,) = idx.queue_series
    assert idx.depth_before_launch.dtype == s.v.dtype == want
    assert idx.depth_before_launch.tolist() == list(range(n))
    assert int(s.v.max()) == n and s.v[:n].tolist() == list(range(1, n + 1)) and int(s.v[-1]) == 0


@pytest.mark.parametrize("stream", [7, 2**40 + 7])
def test_stream_ids_are_int32_when_they_fit_and_kept_exact_otherwise(stream):
    tr = make_trace([(0, 1, 0, 5, 42, API_LAUNCH)], [(0, stream, 10, 12, 42, 1)])
    assert tr.ops.stream.dtype == (np.int32 if stream < 2**31 else np.int64)
    assert tr.ops.stream.tolist() == [stream] and tr.streams() == [(0, stream)]
    assert [(s.device, s.stream) for s in stream_series(tr)] == [(0, stream)]


@pytest.mark.parametrize("corr", [42, 2**40 + 42])
def test_correlation_ids_are_int32_when_they_fit_and_kept_exact_otherwise(corr):
    """The join runs on the reader's int64 ids; the model keeps int32 only when every id fits."""
    tr = make_trace([(0, 1, 0, 5, corr, API_LAUNCH), (0, 1, 1, 6, corr + 1, API_LAUNCH)],
                    [(0, 7, 10, 12, corr + 1, 1), (0, 7, 13, 14, corr, 1)])
    want = np.int32 if corr < 2**31 else np.int64
    assert tr.ops.corr.dtype == tr.api.corr.dtype == want
    assert tr.api.corr.tolist() == [corr, corr + 1] and tr.ops.corr.tolist() == [corr + 1, corr]
    assert tr.ops.api.tolist() == [1, 0]


def test_string_table_bulk_builds_equal_one_intern_at_a_time():
    """intern_many and from_values give the ids that `intern`, text by text, gives (readers and the
    model cache use them in its place); a repeated text in stored values is refused."""
    texts = ["b", "a", "b", "", "c", "a", "d", "é", ""]
    one, bulk = StringTable(), StringTable()
    for t in ("z", "a"):
        one.intern(t)
        bulk.intern(t)
    ids = [one.intern(t) for t in texts]
    got = bulk.intern_many(texts)
    assert got.dtype == np.int32 and got.tolist() == ids == [2, 1, 2, 3, 4, 1, 5, 6, 3]
    assert bulk.values == one.values and all(bulk.lookup(t) == one.lookup(t) for t in one.values)
    assert bulk.intern_many([]).tolist() == [] and bulk.intern("new") == len(one.values)
    stored = StringTable.from_values(one.values)
    assert stored.values == one.values and [stored.lookup(t) for t in texts] == ids
    with pytest.raises(ValueError):
        StringTable.from_values(["x", "y", "x"])
