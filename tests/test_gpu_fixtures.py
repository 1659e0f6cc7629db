"""First-party GPU fixtures (issue 3): each trace under fixtures/gpu/ shows what it is meant to show.

The traces come from `scripts/capture_gpu_traces.py` on a GPU machine. Until they are committed, the
tests over them skip with a reason that says so. The same checks also run now on small synthetic Kineto
traces (positive and negative), so the assertions themselves are known to work before the capture.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from launchtui.analysis import nvtx
from launchtui.analysis.backpressure import backpressure
from launchtui.analysis.launches import launched_kernels, small_kernel_table
from launchtui.analysis.queue import queue_summary, stream_series
from launchtui.analysis.select import range_selection
from launchtui.trace.load import read_trace
from launchtui.trace.model import API_GRAPH_LAUNCH, API_SYNC, OP_KERNEL

ROOT = Path(__file__).resolve().parents[1]
GPU_FIXTURES = ROOT / "fixtures" / "gpu"
MANIFEST = GPU_FIXTURES / "MANIFEST.json"
NAMES = ("eager_adamw_unfused", "eager_adamw_fused", "backpressure", "cuda_graphs", "sync_in_loop")
SIZE_LIMIT_BYTES = 2 * 1024 * 1024

MIN_RATIO = 10                # unfused optimizer-range launches >= 10 x fused
MIN_OPTIMIZER_LAUNCHES = 1000  # "thousands of tiny optimizer kernels" over the profiled steps
MIN_SATURATED = 1000          # the pending depth a saturated stream reaches at least
MIN_OPS_PER_GRAPH = 100       # "many kernels share one cudaGraphLaunch"


def skip_reason(name: str) -> str:
    return f"fixtures/gpu/{name}.json.gz not captured yet: needs a GPU session (issue 3)"


def fixture_path(name: str) -> Path:
    p = GPU_FIXTURES / f"{name}.json.gz"
    if not p.is_file():
        pytest.skip(skip_reason(name))
    return p


_TRACES: dict = {}


def fixture_trace(name: str):
    if name not in _TRACES:
        _TRACES[name] = read_trace(fixture_path(name))
    return _TRACES[name]


def manifest() -> dict:
    assert MANIFEST.is_file(), "fixtures/gpu has traces but no MANIFEST.json: commit the one the script wrote"
    return json.loads(MANIFEST.read_text())


# ------------------------------------------------------------------------------------------------
# The checks, from the data, with launchtui's engine
# ------------------------------------------------------------------------------------------------

def range_names(trace) -> set[str]:
    return {trace.strings[int(t)] for t in np.unique(trace.ranges.text)} if len(trace.ranges) else set()


def optimizer_launches(trace) -> np.ndarray:
    """Kernels launched (cudaLaunchKernel & co.) from inside the Optimizer.step ranges."""
    hits = nvtx.search(trace, "Optimizer.step")
    assert len(hits), "no Optimizer.step range in the trace"
    return launched_kernels(trace, range_selection(trace, hits, "Optimizer.step"))


def check_eager_ranges(trace) -> None:
    names = range_names(trace)
    for want in ("forward", "backward", "Optimizer.step", "Optimizer.step#AdamW.step"):
        assert want in names, f"range {want!r} missing; ranges: {sorted(names)[:20]}"


def check_unfused_tiny_kernels(trace) -> int:
    """Thousands of tiny optimizer kernels: many launches, and rows in the small-kernel table."""
    n = len(optimizer_launches(trace))
    assert n >= MIN_OPTIMIZER_LAUNCHES, f"only {n} kernels launched inside Optimizer.step"
    hits = nvtx.search(trace, "Optimizer.step")
    rows = small_kernel_table(trace, range_selection(trace, hits, "Optimizer.step"), limit=0)
    assert rows, "no small-and-frequent kernel (>= 100 launches, < 10 us) inside Optimizer.step"
    return n


def check_optimizer_ratio(unfused, fused) -> tuple[int, int]:
    u, f = len(optimizer_launches(unfused)), len(optimizer_launches(fused))
    assert f > 0, "the fused optimizer range launched no kernel"
    assert u >= MIN_RATIO * f, f"unfused {u} vs fused {f} optimizer launches: ratio {u / f:.1f} < {MIN_RATIO}"
    return u, f


LIMIT_TOLERANCE = 8   # the timing loop sees the first call that blocked; the engine the deepest queue


def check_backpressure(trace, limit: int) -> int:
    """The pending depth the engine finds equals the limit the capture measured independently (its own
    timing loop: launch calls before the first blocking one), and launch calls block (spikes)."""
    qs = queue_summary(trace)
    assert qs, "no queue depth: the trace has no launched GPU ops"
    top = max(q.max_depth for q in qs)
    assert abs(top - limit) <= LIMIT_TOLERANCE, \
        f"engine's max pending depth {top} differs from the independently measured limit {limit}"
    assert top >= MIN_SATURATED, f"max pending depth {top}: the queue never filled"
    bp = backpressure(trace)
    assert bp["spikes"], "no launch spike: no launch call blocked on the full queue"
    blocked = [e for e in bp["spikes"] if e.max_depth >= MIN_SATURATED]
    assert blocked, (f"no spike at a full queue; depths before spikes: "
                     f"{sorted(e.max_depth for e in bp['spikes'])[-5:]}")
    return top


def check_graph_launches(trace, replays: int | None = None) -> np.ndarray:
    """Graph kernels joined to their cudaGraphLaunch; many ops per launch. Returns ops per launch."""
    ops, api = trace.ops, trace.api
    joined = ops.api >= 0
    g = np.zeros(len(ops), bool)
    g[joined] = api.kind[ops.api[joined]] == API_GRAPH_LAUNCH
    assert g.any(), "no GPU op is joined to a cudaGraphLaunch"
    assert (ops.corr[g] == api.corr[ops.api[g]]).all(), "a graph op's correlation differs from its launch's"
    n_kernels = int((ops.kind[g] == OP_KERNEL).sum())
    assert n_kernels >= MIN_OPS_PER_GRAPH, f"only {n_kernels} kernels joined to graph launches"
    calls = np.nonzero(api.kind == API_GRAPH_LAUNCH)[0]
    per = np.bincount(ops.api[g], minlength=len(api))[calls]
    assert per.min() >= MIN_OPS_PER_GRAPH, f"ops per cudaGraphLaunch: {per.tolist()}"
    if replays is not None:
        assert len(calls) == replays, f"{len(calls)} cudaGraphLaunch calls, expected {replays} replays"
    return per


def check_sync_drains(trace, steps: int | None = None) -> int:
    """In every ProfilerStep, the busiest stream's pending depth is 0 at the end of a sync call made in
    that step (the GPU has run dry: it now waits for the CPU)."""
    ops, api, rg = trace.ops, trace.api, trace.ranges
    step_ids = [i for i, s in enumerate(trace.strings.values) if s.startswith("ProfilerStep#")]
    step_idx = np.nonzero(np.isin(rg.text, step_ids))[0]
    assert len(step_idx), "no ProfilerStep ranges"
    if steps is not None:
        assert len(step_idx) == steps, f"{len(step_idx)} ProfilerSteps, expected {steps}"
    series = {(s.device, s.stream): s for s in stream_series(trace)}
    joined = ops.api >= 0
    a_start = np.full(len(ops), -1, np.int64)
    a_start[joined] = api.start[ops.api[joined]]
    for i in step_idx.tolist():
        s0, s1, th = int(rg.start[i]), int(rg.end[i]), int(rg.thread[i])
        label = trace.strings[int(rg.text[i])]
        mine = joined & (a_start >= s0) & (a_start < s1)
        assert mine.any(), f"{label}: no launch inside the step"
        pairs, counts = np.unique(np.stack([ops.device[mine].astype(np.int64), ops.stream[mine]]), axis=1,
                                  return_counts=True)
        dev, stream = (int(v) for v in pairs[:, int(np.argmax(counts))])
        s = series[(dev, stream)]
        first = int(a_start[mine].min())
        sync = np.nonzero((api.kind == API_SYNC) & (api.thread == th) & (api.start >= first) & (api.start < s1))[0]
        assert len(sync), f"{label}: no synchronising call (e.g. cudaStreamSynchronize from .item())"
        assert (s.value_at(api.end[sync]) == 0).any(), \
            f"{label}: stream {stream} still had pending launches at the end of every sync call"
        lo, hi = np.searchsorted(s.t, [first, s1])
        assert hi > lo and int(s.v[lo:hi].max()) > 0 and int(s.v[lo:hi].min()) == 0, \
            f"{label}: the queue did not fill and drain inside the step"
    return len(step_idx)


# ------------------------------------------------------------------------------------------------
# The committed traces (skip until captured)
# ------------------------------------------------------------------------------------------------

def test_eager_unfused_shows_thousands_of_tiny_optimizer_kernels():
    t = fixture_trace("eager_adamw_unfused")
    check_eager_ranges(t)
    check_unfused_tiny_kernels(t)


def test_fused_optimizer_launches_ten_times_fewer():
    u = fixture_trace("eager_adamw_unfused")
    f = fixture_trace("eager_adamw_fused")
    check_eager_ranges(f)
    check_optimizer_ratio(u, f)


def test_backpressure_reaches_the_recorded_limit_with_spikes():
    t = fixture_trace("backpressure")
    entry = manifest()["traces"]["backpressure"]
    indep = (entry.get("independent_limit") or {}).get("pending_limit")
    assert indep, ("MANIFEST.json has no independently measured pending limit for backpressure "
                   "(traces.backpressure.independent_limit, from the capture's timing loop): recapture with "
                   "`python scripts/capture_gpu_traces.py --out fixtures/gpu`")
    check_backpressure(t, int(indep))


def test_graph_kernels_join_their_cuda_graph_launch():
    t = fixture_trace("cuda_graphs")
    check_graph_launches(t, replays=int(manifest()["steps"]))


def test_sync_in_loop_drains_the_queue_every_step():
    t = fixture_trace("sync_in_loop")
    check_sync_drains(t, steps=int(manifest()["steps"]))


@pytest.mark.parametrize("name", NAMES)
def test_manifest_describes_each_trace(name):
    p = fixture_path(name)
    doc = manifest()
    assert doc["dry_run"] is False, "a dry-run (CPU-only) manifest must not be committed as the GPU fixtures"
    env = doc["environment"]
    for key in ("gpu_name", "torch_version", "cuda_version", "driver_version"):
        assert env.get(key), f"MANIFEST.json environment lacks {key}"
    assert doc["shapes"] and doc["steps"] >= 1
    entry = doc["traces"][name]
    assert entry["file"] == p.name
    assert entry["purpose"] and entry["shows"]
    assert entry["size_bytes"] == p.stat().st_size, "MANIFEST.json size differs from the committed file"
    assert p.stat().st_size <= SIZE_LIMIT_BYTES, f"{p.name} is {p.stat().st_size} bytes, over ~2 MB"
    assert read_trace(p).has_cuda_tables, f"{p.name} has no GPU activity"


# ------------------------------------------------------------------------------------------------
# The checks on synthetic traces: they accept the intended patterns and reject their absence
# ------------------------------------------------------------------------------------------------

class KinetoBuilder:
    """A minimal Kineto (PyTorch profiler) trace: ranges, runtime calls, kernels. Times in µs."""

    def __init__(self):
        self.events: list[dict] = []
        self.corr = 0

    def _x(self, cat, name, pid, tid, ts, dur, args=None):
        e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(ts, 3), "dur": round(dur, 3)}
        if args is not None:
            e["args"] = args
        self.events.append(e)

    def range(self, name, t0, t1, tid=1):
        self._x("user_annotation", name, 100, tid, t0, t1 - t0)

    def launch(self, t, dur, k_start, k_dur=1.5, kernel="vectorized_elementwise_kernel", stream=7, tid=1,
               api="cudaLaunchKernel"):
        self.corr += 1
        self._x("cuda_runtime", api, 100, tid, t, dur, {"correlation": self.corr, "cbid": 211})
        self._x("kernel", kernel, 0, stream, k_start, k_dur, {"device": 0, "stream": stream, "correlation": self.corr})
        return self.corr

    def graph_launch(self, t, dur, k_starts, stream=7, tid=1):
        self.corr += 1
        self._x("cuda_runtime", "cudaGraphLaunch", 100, tid, t, dur, {"correlation": self.corr, "cbid": 311})
        for i, ks in enumerate(k_starts):
            self._x("kernel", f"graph_kernel_{i % 7}", 0, stream, ks, 1.0,
                    {"device": 0, "stream": stream, "correlation": self.corr})

    def sync(self, t, dur, tid=1):
        self.corr += 1
        self._x("cuda_runtime", "cudaStreamSynchronize", 100, tid, t, dur, {"correlation": self.corr, "cbid": 131})

    def write(self, path: Path) -> Path:
        doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Synthetic GPU"}],
               "baseTimeNanoseconds": 1_700_000_000_000_000_000, "traceEvents": self.events}
        path.write_bytes(gzip.compress(json.dumps(doc).encode()))
        return path


def synth_eager(tmp: Path, opt_launches_per_step: int, name: str, steps: int = 5) -> Path:
    b = KinetoBuilder()
    t = 0.0
    for s in range(steps):
        s0 = t
        b.range("forward", t, t + 100)
        for i in range(20):
            b.launch(t + i * 5, 4, t + 50 + i * 5)
        t += 100
        b.range("backward", t, t + 100)
        t += 100
        end = t + 10 + opt_launches_per_step * 5
        b.range("Optimizer.step", t, end)
        b.range("Optimizer.step#AdamW.step", t + 1, end - 1)
        for i in range(opt_launches_per_step):
            b.launch(t + 2 + i * 5, 4, t + 3 + i * 5, kernel="elementwise_kernel")
        t = end + 10
        b.range(f"ProfilerStep#{s + 1}", s0, t)
    return b.write(tmp / f"{name}.json.gz")


def synth_backpressure(tmp: Path, n: int = 1200, limit: int = 1023, block: bool = True) -> Path:
    """A 50 ms kernel, then n tiny launches; launches block once `limit` are pending."""
    b = KinetoBuilder()
    b.launch(0, 5, 10, k_dur=50_000, kernel="sleep")
    sleep_end = 50_010.0
    t = 20.0
    for i in range(n):
        blocked = block and i == limit
        dur = (sleep_end - t + 3) if blocked else 5.0
        b.launch(t, dur, max(sleep_end + i * 2.0, t + dur + 1) if block else sleep_end + i * 2.0)
        t += dur + 1
    b.range("backpressure_burst", 0, t + 10)
    return b.write(tmp / "backpressure.json.gz")


def synth_graphs(tmp: Path, replays: int = 5, nodes: int = 150) -> Path:
    b = KinetoBuilder()
    t = 0.0
    for r in range(replays):
        b.range(f"ProfilerStep#{r + 1}", t, t + 1000)
        b.graph_launch(t + 10, 20, [t + 40 + k * 1.5 for k in range(nodes)])
        t += 1000
    return b.write(tmp / "cuda_graphs.json.gz")


def synth_sync(tmp: Path, steps: int = 5, sync: bool = True) -> Path:
    b = KinetoBuilder()
    t = 0.0
    for s in range(steps):
        s0 = t
        for i in range(30):                 # the GPU lags: kernels start after all launches are made
            b.launch(t + i * 5, 4, t + 200 + i * 10, k_dur=8)
        last_kernel_start = t + 200 + 29 * 10
        if sync:
            b.sync(t + 160, last_kernel_start + 8 - (t + 160) + 2)
            t = last_kernel_start + 20
        else:
            t = t + 160                     # the next step launches before this one's kernels ran
        b.range(f"ProfilerStep#{s + 1}", s0, t)
    return b.write(tmp / "sync_in_loop.json.gz")


def test_checks_accept_synthetic_eager_pair(tmp_path):
    u = read_trace(synth_eager(tmp_path, 250, "u"))
    f = read_trace(synth_eager(tmp_path, 5, "f"))
    check_eager_ranges(u)
    assert check_unfused_tiny_kernels(u) == 1250
    assert check_optimizer_ratio(u, f) == (1250, 25)


def test_checks_reject_a_small_optimizer_ratio(tmp_path):
    u = read_trace(synth_eager(tmp_path, 40, "u"))
    f = read_trace(synth_eager(tmp_path, 5, "f"))
    with pytest.raises(AssertionError, match="ratio"):
        check_optimizer_ratio(u, f)
    with pytest.raises(AssertionError, match="only 200 kernels"):
        check_unfused_tiny_kernels(u)


def test_checks_accept_synthetic_backpressure(tmp_path):
    t = read_trace(synth_backpressure(tmp_path))
    assert check_backpressure(t, limit=1023) >= 1023


def test_checks_reject_an_engine_depth_that_differs_from_the_measured_limit(tmp_path):
    t = read_trace(synth_backpressure(tmp_path))
    with pytest.raises(AssertionError, match="independently measured limit 1100"):
        check_backpressure(t, limit=1100)


def test_checks_reject_a_queue_that_never_fills(tmp_path):
    t = read_trace(synth_backpressure(tmp_path, n=600, block=False))
    with pytest.raises(AssertionError):
        check_backpressure(t, limit=1023)


def test_checks_accept_synthetic_graph_replays(tmp_path):
    t = read_trace(synth_graphs(tmp_path))
    assert check_graph_launches(t, replays=5).tolist() == [150] * 5


def test_checks_reject_graph_launches_with_few_ops(tmp_path):
    t = read_trace(synth_graphs(tmp_path, nodes=3))
    with pytest.raises(AssertionError):
        check_graph_launches(t)


def test_checks_accept_synthetic_sync_in_loop(tmp_path):
    t = read_trace(synth_sync(tmp_path))
    assert check_sync_drains(t, steps=5) == 5


def test_checks_reject_a_loop_without_syncs(tmp_path):
    t = read_trace(synth_sync(tmp_path, sync=False))
    with pytest.raises(AssertionError, match="no synchronising call"):
        check_sync_drains(t)


def test_skip_reason_names_the_file_and_the_issue():
    assert skip_reason("backpressure") == \
        "fixtures/gpu/backpressure.json.gz not captured yet: needs a GPU session (issue 3)"
