"""Cold start: slow launch calls that load code, not steady-state launch cost (definitions.md §V12).

A kernel's first launch may pay for lazy module or code-object loading, context creation or a JIT
(6.5 ms on ROCm, up to 0.6-1.3 s for CUDA contexts, cuDNN or JIT loads). Such a call is slow
once; it is not backpressure (its queue is empty) and not the launch cost a fix can remove. A slow
launch call (a launch spike, §6) is a cold start when it is the first launch of its kernel on its
device, or when a module-load call on its thread overlaps it or ended shortly before it began,
and its stream held at most a few pending ops (a deep queue makes a slow call backpressure, and a
time-sliced capture's first launches are not the process's first).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from launchtui.analysis.config import CONFIG
from launchtui.trace.arrays import median_of, unique_sorted
from launchtui.trace.grouping import DENSE_LIMIT, dense_groups
from launchtui.trace.model import API_LAUNCH, Trace

MODULE_LOAD_PREFIXES = ("cuLibraryLoad", "cuModuleLoad", "cuLibraryGetKernel", "cuModuleGetFunction",
                        "hipModuleLoad", "hipLibraryLoad", "cudaLibraryLoad")
NEAR_NS = 1_000_000      # a load that ended this shortly before the call is part of its start-up
SHALLOW_DEPTH = 4        # pending ops at most this: the call cannot be waiting for queue space
WARM_UP_SHARE = 0.5      # more launches than this are first launches: nothing ran in steady state
OP_BLOCK = 1 << 21       # ops read at a time


@dataclass
class ColdStart:
    calls: np.ndarray            # API indices of the cold-start launch calls, sorted
    first_launch: np.ndarray     # per call: the first launch of its kernel on its device
    module_load: np.ndarray      # per call: a module load overlaps it or ended just before it
    total_ns: int                # their launch-API time
    launches: int                # kernel launch calls in the trace
    first_launches: int          # of which the first launch of their kernel (on their device)

    @property
    def warm_up(self) -> bool:
        """A capture in which most launches are first launches: it shows start-up, not the steady
        state a launch-overhead verdict is about."""
        return self.launches > 0 and self.first_launches > WARM_UP_SHARE * self.launches

    def to_json(self) -> dict:
        return {"calls": int(len(self.calls)), "total_ms": round(self.total_ns / 1e6, 3),
                "with_module_load": int(self.module_load.sum()), "first_launches": int(self.first_launch.sum()),
                "launches": self.launches, "distinct_first_launches": self.first_launches,
                "warm_up_capture": self.warm_up}


def _module_loads(trace: Trace) -> np.ndarray:
    names = trace.strings
    ids = [u for u in unique_sorted(trace.api.name).tolist() if names[u].startswith(MODULE_LOAD_PREFIXES)]
    return np.flatnonzero(np.isin(trace.api.name, ids)) if ids else np.zeros(0, np.int64)


def _first_launch_calls(trace: Trace) -> tuple[np.ndarray, int]:
    """(mask over API rows: the launch call that first launched each (device, kernel full name),
    the number of kernel launch calls). API rows are in the model's total order (start first), so
    the first call is the lowest API index: a minimum per group over a lookup table, no sort. The
    ops are read a block at a time, twice (the pairs present, then the minima): no per-op array
    (20M: this was the record's peak)."""
    ops, api = trace.ops, trace.api
    first = np.zeros(len(api), bool)
    if not len(ops):
        return first, 0
    d_lo, n_lo = int(ops.device.min()), int(ops.full_name.min())
    if int(ops.full_name.max()) - n_lo >= DENSE_LIMIT or int(ops.device.max()) - d_lo >= DENSE_LIMIT:
        return _first_launch_calls_sorted(trace)
    dev_seen = np.zeros(int(ops.device.max()) - d_lo + 1, bool)
    name_seen = np.zeros(int(ops.full_name.max()) - n_lo + 1, bool)
    for i, a, m in _kernel_launches(trace):
        first[a] = True                  # every kernel launch call, to count them
        dev_seen[ops.device[i:i + OP_BLOCK][m] - d_lo] = True
        name_seen[ops.full_name[i:i + OP_BLOCK][m] - n_lo] = True
    n_calls = int(np.count_nonzero(first))
    if not n_calls:
        return first, 0
    first[:] = False
    # (device, name) as one code over a table of every pair present, each numbered densely
    dev_of, name_of = np.cumsum(dev_seen) - 1, np.cumsum(name_seen) - 1
    n_names = int(name_of[-1]) + 1
    # in the calls' own dtype (int32 call indices): ufunc.at casting int32 into int64 is 40x slower
    none = np.iinfo(ops.api.dtype).max
    firsts = np.full((int(dev_of[-1]) + 1) * n_names, none, ops.api.dtype)   # a pair without launches keeps `none`
    for i, a, m in _kernel_launches(trace):
        code = dev_of[ops.device[i:i + OP_BLOCK][m] - d_lo]
        code *= n_names
        code += name_of[ops.full_name[i:i + OP_BLOCK][m] - n_lo]
        np.minimum.at(firsts, code, a)
    first[firsts[firsts != none]] = True
    return first, n_calls


def _kernel_launches(trace: Trace):
    """Per block of OP_BLOCK ops from i: (i, the kernel launch calls of its ops, the mask of those
    ops in the block)."""
    ops, api = trace.ops, trace.api
    for i in range(0, len(ops), OP_BLOCK):
        a = ops.api[i:i + OP_BLOCK]
        m = a >= 0
        m[m] = api.kind[a[m]] == API_LAUNCH
        yield i, a[m], m


def _first_launch_calls_sorted(trace: Trace) -> tuple[np.ndarray, int]:
    """_first_launch_calls for device or name ids spanning too wide a range for a table."""
    ops, api = trace.ops, trace.api
    launched = np.flatnonzero(ops.api >= 0)
    a = ops.api[launched]
    kind_ok = api.kind[a] == API_LAUNCH
    launched, a = launched[kind_ok], a[kind_ok]
    first = np.zeros(len(api), bool)
    if not len(a):
        return first, 0
    first[a] = True
    n_calls = int(np.count_nonzero(first))
    first[:] = False
    devs, dev = dense_groups(ops.device[launched])
    names, name = dense_groups(ops.full_name[launched])
    dev *= len(names)
    dev += name
    none = np.iinfo(a.dtype).max
    firsts = np.full(len(devs) * len(names), none, a.dtype)   # a pair without launches keeps `none`
    np.minimum.at(firsts, dev, a)
    first[firsts[firsts != none]] = True
    return first, n_calls


def _slow_first_launches(trace: Trace, first: np.ndarray) -> np.ndarray:
    """First launches slower than the spike rule (§6) measured against the thread's *other* launch
    calls: in a warm-up capture most calls are first launches, so the thread's median over all of
    them is itself a cold call and would hide every spike. Only at a shallow queue."""
    from launchtui.analysis.queue import depth_before_launch
    api, ops = trace.api, trace.ops
    cand = np.flatnonzero(first)
    dur = api.end[cand] - api.start[cand]
    floor = CONFIG.spike_us * 1e3
    slow = dur > floor          # the limit is never below the floor: only these can be slow
    if not slow.any():          # (then no thread's median is needed)
        return cand[:0]
    cand, dur = cand[slow], dur[slow]
    steady = api.kind == API_LAUNCH     # a mask, not indices: the thread's durations are the one copy
    steady &= ~first
    cand_thread = api.thread[cand]
    keep = np.zeros(len(cand), bool)
    for thread in unique_sorted(cand_thread).tolist():   # per launching thread
        mine = cand_thread == thread
        s = steady & (api.thread == thread)
        base = api.end[s]
        base -= api.start[s]
        del s
        limit = max(floor, CONFIG.spike_factor * float(median_of(base, overwrite_input=True)) if len(base) else 0.0)
        del base
        keep[mine] = dur[mine] > limit
    del steady
    cand = cand[keep]
    # the depth at each candidate's op (cand ascends: a position by search, a mask over the ops)
    mark = np.zeros(len(api) + 1, bool)      # the last slot, False, answers the unmatched ops' -1
    mark[cand] = True
    hit = np.flatnonzero(mark[ops.api])
    del mark
    depth = np.full(len(cand), -1, np.int64)
    depth[np.searchsorted(cand, ops.api[hit])] = depth_before_launch(trace)[hit]
    return cand[(depth >= 0) & (depth <= SHALLOW_DEPTH)]


def cold_start(trace: Trace, spikes: list) -> ColdStart:
    """The cold-start calls: among `spikes` (backpressure.spikes episodes, §6) at a shallow queue,
    the first launches and those beside a module load; and the first launches slow against the
    thread's other launches."""
    api = trace.api
    first, n_calls = _first_launch_calls(trace)
    shallow = {e.worst_api for e in spikes if e.worst_api >= 0 and 0 <= e.max_depth <= SHALLOW_DEPTH
               and not e.command_buffer_full}
    shallow |= set(_slow_first_launches(trace, first).tolist())
    spike_calls = np.array(sorted(shallow), np.int64)
    n_first = int(first.sum())
    is_first = first[spike_calls] if len(spike_calls) else np.zeros(0, bool)
    near = np.zeros(len(spike_calls), bool)
    loads = _module_loads(trace)
    if len(loads) and len(spike_calls):
        for thread in unique_sorted(api.thread[spike_calls]).tolist():   # per thread with spikes
            mine = np.flatnonzero(api.thread[spike_calls] == thread)
            lt = loads[api.thread[loads] == thread]
            if not len(lt):
                continue
            ls, le = api.start[lt], api.end[lt]
            for i in mine.tolist():   # spikes are rare events
                c = spike_calls[i]
                near[i] = bool(((ls < api.end[c]) & (le >= api.start[c] - NEAR_NS)).any())
    cold = is_first | near
    calls = spike_calls[cold]
    return ColdStart(calls, is_first[cold], near[cold], int((api.end[calls] - api.start[calls]).sum()),
                     n_calls, n_first)
