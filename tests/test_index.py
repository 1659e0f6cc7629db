"""The derived index: built once (also under concurrent first use), read-only afterwards, and the
string table interns atomically, so the table and export workers always agree on kernel names."""
from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import numpy as np
import pytest

from launchtui.analysis import index as ix
from launchtui.analysis.export import export_document
from launchtui.analysis.index import TraceIndex, trace_index
from launchtui.analysis.launches import name_ids, small_kernel_table
from launchtui.analysis.report import ReportOptions
from launchtui.analysis.select import WHOLE
from launchtui.trace.load import open_trace
from launchtui.trace.model import StringTable
from launchtui.trace.names import distinguishing_name

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo" / "demo.sqlite"


def _table(trace):
    return sorted((r["device_id"], r["kernel_name"], r["launch_count"])
                  for r in small_kernel_table(trace, WHOLE, min_launches=1, max_avg_us=1e12, limit=0, names="full"))


def _export_names(trace):
    doc = export_document(trace, WHOLE, ReportOptions(names="full", min_launches=1, max_avg_us=1e12, limit=0))
    rows = doc["analysis"]["small_kernels"] + doc["analysis"]["small_kernels_nccl"]
    return sorted((r["device_id"], r["kernel_name"], r["launch_count"]) for r in rows)


def test_table_and_export_workers_race_on_a_fresh_trace_and_agree():
    expect_trace = open_trace(DEMO, use_cache=False)
    expect_table, expect_export = _table(expect_trace), _export_names(expect_trace)
    assert expect_table and expect_table == expect_export
    for _ in range(3):
        trace = open_trace(DEMO, use_cache=False)   # no index yet: the workers race to build it
        start = threading.Barrier(6)
        results: dict = {}

        def work(i, fn):
            start.wait()
            results[i] = fn(trace)
        threads = [threading.Thread(target=work, args=(i, _table if i % 2 else _export_names)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(results[i] == expect_table for i in range(6))
        # every op's distinguishing-name id spells its names, computed independently here
        ids = name_ids(trace, "full")
        ops, s = trace.ops, trace.strings
        for k in range(0, len(ops), 97):
            assert s[int(ids[k])] == distinguishing_name(s[int(ops.name[k])], s[int(ops.full_name[k])])


def test_index_is_built_once_and_frozen():
    trace = open_trace(DEMO, use_cache=False)
    idx = trace_index(trace)
    n_strings = len(trace.strings)
    assert trace_index(trace) is idx
    # held per full name (every full name of the demo has one short name), expanded per call
    assert idx.op_full_name is trace.ops.full_name and len(idx.names_table) <= len(trace.strings)
    ids = name_ids(trace, "full")
    assert np.array_equal(ids, idx.distinguishing_names) and np.array_equal(ids, ix._distinguishing_names(trace))
    some = np.arange(0, len(trace.ops), 7)
    assert np.array_equal(idx.distinguishing_names_of(some), ids[some])
    assert len(trace.strings) == n_strings      # nothing interned after the build
    with pytest.raises(dataclasses.FrozenInstanceError):
        idx.op_ranges = None  # type: ignore[misc]
    ops_of = {int(a): idx.ops_of_call(int(a)).tolist() for a in trace.ops.api[:50] if a >= 0}
    for a, ks in ops_of.items():
        assert ks and all(int(trace.ops.api[k]) == a for k in ks)


@pytest.mark.parametrize("case", ["demo", "generated"])
def test_queue_series_beside_the_rest_builds_the_same_index(case, monkeypatch, tmp_path):
    """The queue series' streams shared by the index's two threads (build_index under SPLIT_MAX_OPS
    with two CPUs: the helper begins them, the index's own thread takes those left once its other
    parts are done) give the index, and the string ids interned for it, that one thread gives."""
    from launchtui.analysis import queue_series as qs
    path = DEMO
    if case == "generated":   # two devices, graph launches (the replay-as-one maximum), a burst
        from fixtures import record_cases as rc
        from fixtures import synth
        path = synth.write_nsys_sqlite(rc.workload(rc.SCENARIOS["profiler_step"]), tmp_path / "g.sqlite")
    built = {}
    real = qs.QueueSeriesWork._one_stream
    for cpus in (1, 2):
        monkeypatch.setattr(ix, "usable_cpus", lambda cpus=cpus: cpus)
        trace = open_trace(path, use_cache=False)
        threads = []
        both = threading.Barrier(cpus, timeout=30)   # with two threads, each takes a stream first

        def one_stream(self, g, sel):
            if len(threads) < cpus:
                threads.append(threading.current_thread().name)
                both.wait()
            real(self, g, sel)
        monkeypatch.setattr(qs.QueueSeriesWork, "_one_stream", one_stream)
        arrays = ix.build_index(trace).to_arrays()
        built[cpus] = (arrays, list(trace.strings.values), threads)
    (one, strings_one, on_one), (two, strings_two, on_two) = built[1], built[2]
    assert on_one == ["MainThread"]
    assert sorted(on_two)[0] == "MainThread" and sorted(on_two)[1].startswith("launchtui-index")
    assert strings_one == strings_two and one.keys() == two.keys()
    for k in one:
        assert one[k].dtype == two[k].dtype and np.array_equal(one[k], two[k]), k
    assert len(one["qs.meta"]) >= 2 and (one["depth_before_launch"] >= 0).any()
    if case == "generated":
        assert (one["qs.meta"][:, 5] > 0).any() and len(set(one["qs.meta"][:, 0])) == 2


def test_a_deep_stream_widens_the_depths_while_another_thread_writes_its_own(monkeypatch):
    """Two streams on two threads: one passes SMALL_DEPTH (the depths become int32) while the other
    writes its int16 depths; every depth is exact either way."""
    from launchtui.analysis import queue_series as qs
    from launchtui.trace.model import API_LAUNCH
    from test_engine_units import make_trace
    n, m = 20_000, 300
    late = 30 * n   # the shallow stream's calls, each op started before the next call
    api = [(0, 1, i, i + 1, i, API_LAUNCH) for i in range(n)]
    api += [(0, 1, late + 10 * j, late + 10 * j + 1, n + j, API_LAUNCH) for j in range(m)]
    ops = [(0, 7, 10 * n + 2 * i, 10 * n + 2 * i + 1, i, 1) for i in range(n)]   # deep: all launched first
    ops += [(0, 9, late + 10 * j + 2, late + 10 * j + 3, n + j, 1) for j in range(m)]
    monkeypatch.setattr(ix, "usable_cpus", lambda: 2)
    both, real, threads = threading.Barrier(2, timeout=30), qs.QueueSeriesWork._one_stream, []

    def one_stream(self, g, sel):
        threads.append(threading.current_thread().name)
        both.wait()
        real(self, g, sel)
    monkeypatch.setattr(qs.QueueSeriesWork, "_one_stream", one_stream)
    idx = trace_index(make_trace(api, ops))
    assert len(set(threads)) == 2
    assert idx.depth_before_launch.dtype == np.int32
    by_stream = {s.stream: s for s in idx.queue_series}
    assert by_stream[7].v.dtype == np.int32 and by_stream[9].v.dtype == np.int16
    assert sorted(idx.depth_before_launch.tolist()) == sorted(list(range(n)) + [0] * m)


def test_round_trip_through_arrays():
    trace = open_trace(DEMO, use_cache=False)
    idx = trace_index(trace)
    back = TraceIndex.from_arrays(trace, idx.to_arrays())
    assert (back.op_ranges == idx.op_ranges).all() and (back.op_category == idx.op_category).all()
    assert [(q.device, q.stream, q.points) for q in back.queue_series] == \
        [(q.device, q.stream, q.points) for q in idx.queue_series]
    bad = dict(idx.to_arrays(), op_ranges=idx.op_ranges[:-1])
    with pytest.raises(ValueError):
        TraceIndex.from_arrays(trace, bad)


def test_string_table_intern_is_atomic():
    table = StringTable()
    words = [f"kernel_{i}" for i in range(2000)]
    go = threading.Barrier(8)
    got: list = [None] * 8

    def work(j):
        go.wait()
        got[j] = [table.intern(w) for w in (words if j % 2 else reversed(words))]
    threads = [threading.Thread(target=work, args=(j,)) for j in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(table) == len(words) and sorted(table.values) == sorted(words)
    for j in range(8):
        seq = words if j % 2 else list(reversed(words))
        assert [table[i] for i in got[j]] == seq


def test_op_categories_built_on_first_use():
    """A fresh index holds no per-op categories until asked (a cold `report` never reads them);
    then each op's category follows its kind, duration and name (definitions: timeline lanes)."""
    from launchtui.analysis.config import CONFIG
    from launchtui.trace.model import OP_KERNEL
    trace = open_trace(DEMO, use_cache=False)
    idx = trace_index(trace)
    assert idx._op_category is None
    cat = idx.op_category
    assert idx._op_category is cat and idx.op_category is cat
    ops, s = trace.ops, trace.strings
    for k in range(len(ops)):
        if ops.kind[k] != OP_KERNEL:
            want = ix.CAT_MEM
        elif "nccl" in s[int(ops.name[k])].lower():
            want = ix.CAT_NCCL
        else:
            want = ix.CAT_SMALL if ops.end[k] - ops.start[k] < CONFIG.small_kernel_ns else ix.CAT_KERNEL
        assert cat[k] == want, k
    assert set(cat.tolist()) >= {ix.CAT_KERNEL, ix.CAT_SMALL, ix.CAT_MEM}


def test_the_nvtx_lookup_round_trips_without_sorting_the_ranges_again(monkeypatch):
    """A warm open maps the NVTX lookup's change points with the index (rebuilding them sorts every
    push/pop range: ~20 ms of a 5M reopen, before the first frame); its answers are the built one's."""
    trace = open_trace(DEMO, use_cache=False)
    idx = trace_index(trace)
    arrays = idx.to_arrays()
    monkeypatch.setattr(ix, "_nvtx_index", lambda *a: (_ for _ in ()).throw(AssertionError("rebuilt")))
    back = TraceIndex.from_arrays(trace, arrays)
    rg = trace.ranges
    th = np.concatenate([rg.thread, rg.thread, trace.api.thread])
    t = np.concatenate([rg.start, rg.end, trace.api.start])
    assert len(rg) and (back.nvtx.lookup(th, t) == idx.nvtx.lookup(th, t)).all()
    bad = dict(arrays, **{"nvtx.n": arrays["nvtx.n"] + 1})
    with pytest.raises(ValueError):
        TraceIndex.from_arrays(trace, bad)
