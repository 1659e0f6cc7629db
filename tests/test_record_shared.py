"""The record's shared and shortcut computations give what the direct ones give: kernel groups cut
from the report's (analysis/shared.py), the report and record with and without a `Shared`, and the
sort-free paths of the gaps, the queue class and the phases against the general ones."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from fixtures import record_cases as rc
from fixtures import synth
from launchtui.analysis import exposed as ex
from launchtui.analysis import queue_class as qc
from launchtui.analysis.index import StreamSeries
from launchtui.analysis.launches import groups_on_devices, kernel_groups
from launchtui.analysis.record import build_record
from launchtui.analysis.report import build_report
from launchtui.analysis.select import WHOLE, Selection
from launchtui.analysis.shared import Shared
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.load import open_trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    sc = rc.SCENARIOS["profiler_step"]
    p = synth.write_nsys_sqlite(rc.workload(sc), tmp_path_factory.mktemp("shared") / "t.sqlite")
    return open_trace(p, use_cache=False)


def _same_groups(a, b):
    for f in ("device", "name", "count", "sum_api", "max_api", "min_api", "queue_count", "sum_queue",
              "sum_kernel", "span_start", "span_end", "op_idx", "op_group"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)


def test_groups_cut_per_device_equal_the_devices_own(trace):
    devices = sorted(trace.device_ids())
    assert len(devices) >= 2     # the cut has something to drop
    sel = Selection(t0=int(trace.ops.start.min()) + 1)
    whole = kernel_groups(trace, sel)
    for d in devices:
        cut = groups_on_devices(whole, [d])
        assert len(cut) and set(cut.device.tolist()) == {d}
        _same_groups(cut, kernel_groups(trace, sel.with_devices([d])))
    _same_groups(groups_on_devices(whole, devices), whole)


def test_report_and_record_same_with_or_without_shared(trace):
    sh = Shared(trace)
    rep = build_report(trace, WHOLE, shared=sh)
    assert sh._groups and sh._spikes          # the report filled the memo ...
    rec = build_record(trace, WHOLE, shared=sh)
    assert not sh._groups                     # ... and the record dropped the per-launch arrays
    assert rep == build_report(trace, WHOLE)
    assert rec == build_record(trace, WHOLE)
    assert rec["top"] and rec["streams"]


def test_gap_ending_order_equals_the_lexsort():
    rng = np.random.default_rng(3)
    n = 2000
    start = np.sort(rng.integers(0, 300, n))          # start order with many ties
    api_start = rng.integers(0, 50, n)                # ties inside ties keep index order
    trace = SimpleNamespace(ops=SimpleNamespace(start=start, api=np.arange(n)), api=SimpleNamespace(start=api_start))
    lk = np.sort(rng.choice(n, 1500, replace=False))
    want = lk[np.lexsort((api_start[lk], start[lk]))]
    np.testing.assert_array_equal(ex._by_start_then_launch(trace, lk), want)
    trace.ops.start = rng.permutation(start)          # not in start order: the general sort
    want = lk[np.lexsort((api_start[lk], trace.ops.start[lk]))]
    np.testing.assert_array_equal(ex._by_start_then_launch(trace, lk), want)


def test_max_in_windows_equals_the_search_per_change():
    rng = np.random.default_rng(5)
    t = np.cumsum(rng.integers(1, 20, 5000))
    v = rng.integers(0, 1000, 5000)
    s = StreamSeries(0, 0, t, v, 0.0, 0, 0, 0)
    edges = np.sort(rng.choice(int(t[-1]) + 50, 40, replace=False))
    starts, ends = edges[0::2], edges[1::2]
    inside = v[qc._in_windows(t, starts, ends) >= 0]
    want = int(max(s.value_at(starts).max(initial=0), inside.max(initial=0)))
    assert qc._max_in_windows(s, starts, ends) == want
    assert want > 0


@pytest.mark.parametrize("sort", [True, False])
def test_first_of_runs_equals_unique(sort):
    a = np.random.default_rng(7).integers(0, 500, 3000)
    a = np.sort(a) if sort else a
    u, first = qc._first_of_runs(a)
    wu, wf = unique_sorted(a, return_index=True)
    np.testing.assert_array_equal(u, wu)
    np.testing.assert_array_equal(first, wf)
