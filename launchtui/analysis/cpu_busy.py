"""The launching threads' CPU busy share (docs/definitions.md §V10): on-CPU time / wall time over the
record's window, from Nsight scheduling data (SCHED_EVENTS runs), else estimated from CPU samples
(COMPOSITE_EVENTS). A launching thread near 100 % busy outside its syncs is the bottleneck on the CPU
side; one mostly off the CPU leaves the GPU idle for another reason."""
from __future__ import annotations

import numpy as np

from launchtui.analysis import intervals as iv
from launchtui.trace import names as nm
from launchtui.trace.arrays import median_of, percentile_int, unique_sorted
from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, OP_MEMCPY, Trace
from launchtui.trace.registry import FACT_CPU_SAMPLING

SOURCE_SCHED, SOURCE_SAMPLES = "SCHED_EVENTS", "COMPOSITE_EVENTS"
STATE_RUNNING = 1            # ENUM_SAMPLING_THREAD_STATE
BUSY_PCT, OFF_CPU_PCT, SYNC_PCT = 90.0, 50.0, 50.0   # the reading's bounds (§V10)
MAX_THREADS = 8              # launching threads listed (most launches first); the rest are counted
SYNC_COPIES = ("cudaMemcpy", "cuMemcpyDtoH", "cuMemcpyDtoH_v2", "hipMemcpy", "cudaMemcpy2D", "hipMemcpyWithStream",
               "cudaMemset", "hipMemset", "hipMemcpyDtoH", "hipMemcpyHtoD")
NOT_RECORDED = ("not recorded: capture with CPU sampling or context switches "
                "(nsys profile --sample=process-tree --cpuctxsw=process-tree)")


def host_blocking_calls(trace: Trace) -> np.ndarray:
    """Mask over API rows: calls that block the host until the GPU catches up (definitions.md §V6):
    names containing `Synchronize`, synchronous copies and memsets (CUDA and HIP), Kineto's
    Stream/Event/Context Sync, and asynchronous copies whose op is a device-to-host copy into
    pageable memory (the driver copies through a staging buffer and returns when it is done)."""
    api, names = trace.api, trace.strings
    blocking = []
    for u in unique_sorted(api.name).tolist():  # once per distinct API name
        n = nm.api_display_name(names[u])
        if "Synchronize" in n or n in ("Stream Sync", "Event Sync", "Context Sync") or n in SYNC_COPIES:
            blocking.append(u)
    out = np.isin(api.name, blocking) if blocking else np.zeros(len(api), bool)
    ops = trace.ops
    pageable = [u for u in unique_sorted(ops.full_name[ops.kind == OP_MEMCPY]).tolist() if _to_pageable(names[u])]
    if pageable:
        a = ops.api[np.isin(ops.full_name, pageable) & (ops.kind == OP_MEMCPY) & (ops.api >= 0)]
        out[a] = True
    return out


def _to_pageable(op_name: str) -> bool:
    """A device-to-host copy into pageable memory, as Kineto names it: `Memcpy DtoH (Device -> Pageable)`."""
    return "DtoH" in op_name and "-> Pageable" in op_name


def launch_calls(trace: Trace, lo: int, hi: int) -> np.ndarray:
    """Launch-kind API calls (kernel and graph launches, any device) starting in [lo, hi)."""
    api = trace.api
    m = ((api.kind == API_LAUNCH) | (api.kind == API_GRAPH_LAUNCH)) & (api.start >= lo) & (api.start < hi)
    return np.nonzero(m)[0]


def sample_interval(trace: Trace) -> int:
    """The sampling interval in ns: the lower quartile of the gaps between one thread's consecutive
    samples, pooled over threads (while a thread runs, its samples come one interval apart; longer
    gaps are time off the CPU). 0 when there are too few samples."""
    s = trace.cpu_samples
    same = s.thread[1:] == s.thread[:-1]
    gaps = (s.time[1:] - s.time[:-1])[same]
    gaps = gaps[gaps > 0]
    return int(percentile_int(gaps, 25)) if len(gaps) >= 4 else 0


def _slice(keys: np.ndarray, key: int) -> slice:
    return slice(int(np.searchsorted(keys, key, "left")), int(np.searchsorted(keys, key, "right")))


def _pct_stats(values: np.ndarray) -> dict:
    return {"median": round(float(median_of(values)), 1), "min": round(float(values.min()), 1),
            "max": round(float(values.max()), 1)}


def launch_thread_cpu(trace: Trace, lo: int, hi: int, it_start: np.ndarray, it_end: np.ndarray,
                      blocking: np.ndarray | None = None) -> dict:
    """The record's `launch_thread_cpu` (definitions.md §V10) over the window [lo, hi) and its iterations;
    `blocking`: host_blocking_calls(trace) when the caller has it."""
    if not trace.provides(FACT_CPU_SAMPLING):
        return {"available": False, "reason": f"not recorded: {trace.format_title()} traces carry no CPU scheduling or "
                                              "sampling data"}
    runs, smp = trace.cpu_runs, trace.cpu_samples
    source = SOURCE_SCHED if len(runs) else SOURCE_SAMPLES if len(smp) else None
    if source is None:
        return {"available": False, "reason": NOT_RECORDED}
    api, th = trace.api, trace.threads
    calls = launch_calls(trace, lo, hi)
    if not len(calls) or hi <= lo:
        return {"available": False, "source": source, "reason": "no launch calls in the window"}
    per_thread = np.bincount(api.thread[calls], minlength=len(th))
    order = sorted(np.nonzero(per_thread)[0].tolist(), key=lambda t: (-per_thread[t], t))
    blocking = host_blocking_calls(trace) if blocking is None else blocking
    interval = sample_interval(trace) if len(smp) else 0
    rows = [_thread_row(trace, int(t), int(per_thread[t]), blocking, interval, lo, hi, it_start, it_end)
            for t in order[:MAX_THREADS]]
    main = rows[0]
    doc = {"available": main["busy_pct"] is not None, "source": source, "window_ns": [int(lo), int(hi)],
           "sample_interval_ns": interval or None, "threads": rows,
           "other_launching_threads": max(0, len(order) - MAX_THREADS)}
    if not doc["available"]:
        doc["reason"] = f"{source} holds no events for the main launching thread (tid {main['tid']})"
        return doc
    doc["busy_pct"], doc["reading"] = main["busy_pct"], reading(main)
    doc["note"] = note(doc)
    return doc


def _thread_row(trace: Trace, t: int, launches: int, blocking: np.ndarray, interval: int, lo: int, hi: int,
                it_start: np.ndarray, it_end: np.ndarray) -> dict:
    """One launching thread: its time in host syncs, on the CPU, and on the CPU outside syncs."""
    api, th, runs, smp = trace.api, trace.threads, trace.cpu_runs, trace.cpu_samples
    key = int(th.key[t])
    win = (np.array([lo]), np.array([hi]))
    wall, it_wall = hi - lo, np.maximum(it_end - it_start, 1).astype(np.float64)
    b = np.nonzero(blocking & (api.thread == t))[0]
    sync = iv.union(api.start[b], api.end[b])
    sync_ns = int(iv.measure_in(*sync, *win)[0])
    free_ns = max(wall - sync_ns, 1)   # the window outside host syncs
    r = {"tid": int(th.tid[t]), "pid": int(th.pid[t]),
         "name": trace.strings[int(th.name[t])] if th.name[t] >= 0 else None, "launches": launches,
         "sync_ms": round(sync_ns / 1e6, 3), "sync_pct": round(sync_ns / wall * 100, 1),
         "on_cpu_ms": None, "busy_pct": None, "busy_outside_sync_pct": None, "per_iteration_busy_pct": None}
    if len(runs):
        k = _slice(runs.thread, key)
        s, e = runs.start[k], runs.end[k]
        if len(s):
            on = int(iv.measure_in(s, e, *win)[0])
            on_sync = int(iv.measure_in(*iv.intersect((s, e), sync), *win)[0])
            r.update({"on_cpu_ms": round(on / 1e6, 3), "busy_pct": round(on / wall * 100, 1),
                      "busy_outside_sync_pct": round((on - on_sync) / free_ns * 100, 1),
                      "per_iteration_busy_pct": _pct_stats(iv.measure_in(s, e, it_start, it_end) / it_wall * 100)})
        else:
            r["note"] = "no scheduling events for this thread"
    if len(smp):
        k = _slice(smp.thread, key)
        ts, st = smp.time[k], smp.state[k]
        inside = (ts >= lo) & (ts < hi)
        n = int(inside.sum())
        r["samples"] = n
        r["running_sample_share"] = round(float((st[inside] == STATE_RUNNING).mean()), 4) if n else None
        r["sampled_busy_pct"] = round(min(100.0, n * interval / wall * 100), 1) if interval else None
        if not len(runs) and interval:   # the samples are the source: estimate (definitions.md §V10)
            in_sync = iv.measure_in(*sync, ts[inside], ts[inside] + 1) > 0
            cnt = np.diff(np.searchsorted(ts, np.stack([it_start, it_end])), axis=0)[0]
            r.update({"on_cpu_ms": round(n * interval / 1e6, 3), "busy_pct": r["sampled_busy_pct"],
                      "busy_outside_sync_pct": round(min(100.0, int((~in_sync).sum()) * interval / free_ns * 100), 1),
                      "per_iteration_busy_pct": _pct_stats(np.minimum(100.0, cnt * interval / it_wall * 100))})
    return r


def reading(row: dict) -> str:
    """waiting_in_syncs | busy | partly_busy | mostly_off_cpu (definitions.md §V10): first whether the
    thread spends most of the window in host syncs (waiting for the GPU, on the CPU or not: the CUDA
    driver may spin), then how busy it is outside them."""
    if row["sync_pct"] >= SYNC_PCT:
        return "waiting_in_syncs"
    busy = row["busy_outside_sync_pct"]
    if busy >= BUSY_PCT:
        return "busy"
    return "mostly_off_cpu" if busy < OFF_CPU_PCT else "partly_busy"


_READING = {"waiting_in_syncs": "it mostly waits for the GPU in host syncs",
            "busy": "the CPU side is the bottleneck (launch-bound on the CPU)",
            "partly_busy": "neither saturated nor idle",
            "mostly_off_cpu": "mostly off the CPU (blocked or sleeping): when the GPU runs dry, it is not for lack "
                              "of CPU time"}


def note(doc: dict) -> str:
    """One line: the main launching thread's busy share, its source and what it means."""
    r = doc["threads"][0]
    est = ", estimated from CPU samples" if doc["source"] == SOURCE_SAMPLES else ""
    return (f"main launching thread (tid {r['tid']}, {r['launches']:,} launches) on the CPU {r['busy_pct']:.0f} % of "
            f"the window; {r['sync_pct']:.0f} % in host syncs; on the CPU {r['busy_outside_sync_pct']:.0f} % of the rest "
            f"({doc['source']}{est}): {_READING[doc['reading']]}")


def cpu_line(doc: dict) -> str:
    """The short form for the TUI's verdict panel."""
    r = doc["threads"][0]
    return (f"Launching thread: on the CPU {r['busy_pct']:.0f} %, {r['sync_pct']:.0f} % in syncs — "
            f"{doc['reading'].replace('_', ' ')} ({doc['source']})")
