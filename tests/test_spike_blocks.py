"""Per-launch arrays in 32 bits: the spike stage's launch calls read a block at a time
(backpressure._launch_calls) against the direct whole-table computation (definitions.md §6), and
the narrow group indices (grouping.dense_groups)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import fixtures.synth as synth
from launchtui.analysis import backpressure as bp
from launchtui.trace.load import open_trace
from launchtui.trace.model import API_LAUNCH


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    files = synth.make_trace_files(tmp_path_factory.mktemp("synth"), variants=None)
    return open_trace(files[("nsys", "modern")], use_cache=False)


def _direct_spikes(trace, opt):
    """Per launch call, its thread's median launch duration, then the rule, in int64 and float64."""
    api = trace.api
    launch = np.flatnonzero(api.kind == API_LAUNCH)
    dur = api.end[launch].astype(np.int64) - api.start[launch]
    th = api.thread[launch]
    med = {t: float(np.median(dur[th == t])) for t in np.unique(th).tolist()}
    thr = np.array([max(opt.spike_us * 1e3, opt.spike_factor * med[t]) for t in th.tolist()])
    return launch[dur > thr].tolist()


@pytest.mark.parametrize("block", [1, 3, 7, 1 << 20])
def test_blocked_spikes_equal_the_direct_rule(trace, block, monkeypatch):
    monkeypatch.setattr(bp, "CALL_BLOCK", block)
    opt = bp.Options()
    launch, dur, th = bp._launch_calls(trace.api)
    assert launch.dtype == np.int32 and dur.dtype == np.int32
    want = _direct_spikes(trace, opt)
    assert want, "the synthetic trace has spikes"
    assert sorted(e.worst_api for e in bp.spikes(trace, opt=opt)) == want


@pytest.mark.parametrize("block", [2, 1 << 20])
def test_durations_widen_past_int32_exactly(block, monkeypatch):
    monkeypatch.setattr(bp, "CALL_BLOCK", block)
    start = np.array([0, 10, 20, 30, 40], np.int64)
    end = start + np.array([5, 3_000_000_000, 7, 2**31 - 1, 1], np.int64)
    api = SimpleNamespace(start=start, end=end)
    rows = np.array([0, 1, 2, 3, 4], np.int32)
    d = bp._durations(api, rows)
    assert d.dtype == np.int64
    assert d.tolist() == [5, 3_000_000_000, 7, 2**31 - 1, 1]
    small = bp._durations(api, rows[[0, 2, 3]])
    assert small.dtype == np.int32 and small.tolist() == [5, 7, 2**31 - 1]


def test_threads_seen_are_the_distinct_ids():
    th = np.array([4, 0, 4, 9, 0], np.int32)
    assert bp._threads_seen(th).tolist() == [0, 4, 9]


# the lookup table; the sort for a few keys spread wide within DENSE_LIMIT (the table would cost
# more than the sort); the sort past DENSE_LIMIT
@pytest.mark.parametrize("spread", [1, 1 << 14, 1 << 30])
def test_narrow_dense_groups_equal_np_unique(spread):
    from launchtui.trace.grouping import dense_groups
    rng = np.random.default_rng(3)
    key = rng.integers(0, 50, 1000) * spread - 7
    want_u, want_g = np.unique(key, return_inverse=True)
    for narrow, dtype in ((False, np.int64), (True, np.int32)):
        u, g = dense_groups(key, narrow=narrow)
        assert g.dtype == dtype
        assert u.tolist() == want_u.tolist() and g.tolist() == want_g.tolist()
    assert dense_groups(key[:0], narrow=True)[1].dtype == np.int32


@pytest.mark.parametrize("block", [1, 7, 1 << 20])
def test_command_buffer_full_calls_found_block_by_block(trace, block, monkeypatch):
    """The API calls with a 'command buffer full' overhead on the same thread and correlation id,
    their keys made a block (CALL_BLOCK) at a time: those a set of the overheads' pairs gives, for
    every call and for a chosen few."""
    from launchtui.trace.model import OVERHEAD_COMMAND_BUFFER_FULL
    monkeypatch.setattr(bp, "CALL_BLOCK", block)
    api, ov = trace.api, trace.overheads
    m = ov.type == OVERHEAD_COMMAND_BUFFER_FULL
    pairs = set(zip(ov.thread[m].tolist(), ov.corr[m].tolist()))
    want = [i for i, p in enumerate(zip(api.thread.tolist(), api.corr.tolist())) if p in pairs]
    assert want, "the synthetic trace has command-buffer-full calls"
    assert np.flatnonzero(bp._command_buffer_full(trace)).tolist() == want
    calls = np.array(sorted(set(want[:5]) | set(range(0, len(api), 97))), np.int64)
    assert np.flatnonzero(bp._command_buffer_full(trace, calls)).tolist() == [
        j for j, c in enumerate(calls.tolist()) if c in set(want)]
