"""What launchtui's own engine measures in a captured trace, and the checks each trace must pass
(scripts/capture_gpu_traces.py). No torch: these run right after a capture, on --remeasure and in
the tests, on real or synthetic traces alike; launchtui is imported on first use, so the script
still loads where its engine cannot (engine_available says why).
"""
from __future__ import annotations

from pathlib import Path

from capture_table import (MIN_OPS_PER_GRAPH_LAUNCH, MIN_OPTIMIZER_RATIO, MIN_SATURATED_DEPTH,
                           MIN_UNFUSED_OPTIMIZER_LAUNCHES)


def engine_available() -> str | None:
    """None when launchtui's engine imports, else the reason (e.g. msgspec missing)."""
    try:
        from launchtui.trace.load import read_trace  # noqa: F401
        from launchtui.trace import kineto  # noqa: F401  (needs msgspec)
        from launchtui.analysis.queue import queue_summary  # noqa: F401
    except ImportError as e:
        return f"launchtui's engine cannot be imported ({e})"
    return None


def _optimizer_selection(trace):
    from launchtui.analysis import nvtx
    from launchtui.analysis.select import range_selection
    hits = nvtx.search(trace, "Optimizer.step")
    return range_selection(trace, hits, "Optimizer.step") if len(hits) else None


def _steps(trace):
    """Indices of ProfilerStep#N ranges, in time order."""
    import numpy as np
    rg = trace.ranges
    if not len(rg):
        return np.zeros(0, np.int64)
    ids = [i for i, s in enumerate(trace.strings.values) if s.startswith("ProfilerStep#")]
    return np.nonzero(np.isin(rg.text, ids))[0]


def step_drains(trace) -> list[dict]:
    """Per ProfilerStep: does the busiest stream's pending depth return to 0 inside it, and at the end
    of a sync call (cudaStreamSynchronize & co.) made in it?"""
    import numpy as np
    from launchtui.analysis.queue import stream_series
    from launchtui.trace.model import API_SYNC
    ops, api, rg = trace.ops, trace.api, trace.ranges
    series = {(s.device, s.stream): s for s in stream_series(trace)}
    out = []
    matched = ops.api >= 0
    a_start = np.where(matched, api.start[np.maximum(ops.api, 0)], -1) if len(api) else np.full(len(ops), -1)
    for i in _steps(trace).tolist():
        s0, s1, th = int(rg.start[i]), int(rg.end[i]), int(rg.thread[i])
        in_step = matched & (a_start >= s0) & (a_start < s1)
        row = {"step": trace.strings[int(rg.text[i])], "launches": int(in_step.sum()), "min_depth": None,
               "syncs": 0, "drained_at_sync": False}
        if in_step.any():
            pairs, counts = np.unique(np.stack([ops.device[in_step].astype(np.int64), ops.stream[in_step]]),
                                      axis=1, return_counts=True)
            dev, stream = (int(x) for x in pairs[:, int(np.argmax(counts))])
            s = series.get((dev, stream))
            first = int(a_start[in_step].min())
            if s is not None:
                lo, hi = np.searchsorted(s.t, [first, s1])
                vals = s.v[lo:hi]
                row["min_depth"] = int(vals.min()) if len(vals) else None
                sync = np.nonzero((api.kind == API_SYNC) & (api.thread == th) & (api.start >= first)
                                  & (api.start < s1))[0]
                row["syncs"] = int(len(sync))
                if len(sync):
                    row["drained_at_sync"] = bool((s.value_at(api.end[sync]) == 0).any())
        out.append(row)
    return out


def measure_trace(name: str, path: Path) -> dict:
    """What launchtui's engine sees in one trace; the fields each trace's checks use."""
    import numpy as np
    from launchtui.analysis.backpressure import backpressure
    from launchtui.analysis.launches import launched_kernels, small_kernel_table
    from launchtui.analysis.queue import queue_summary
    from launchtui.trace.load import read_trace
    from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, OP_KERNEL

    trace = read_trace(path)
    ops, api = trace.ops, trace.api
    m: dict = {
        "gpu_ops": int(len(ops)),
        "kernels": int((ops.kind == OP_KERNEL).sum()),
        "launch_calls": int((api.kind == API_LAUNCH).sum()),
        "graph_launch_calls": int((api.kind == API_GRAPH_LAUNCH).sum()),
        "unmatched_gpu_ops": int((ops.api < 0).sum()),
        "ranges": int(len(trace.ranges)),
        "profiler_steps": int(len(_steps(trace))),
        "devices": {str(k): v for k, v in trace.devices.items()},
        "missing": list(trace.missing),
    }
    qs = queue_summary(trace)
    if qs:
        top = max(qs, key=lambda q: (q.max_depth, -q.stream_id))
        m.update(max_pending_depth=top.max_depth, max_pending_stream=top.stream_id,
                 max_pending_depth_graph_as_one=top.max_depth_graph_as_one,
                 time_at_or_above_ns={str(k): v for k, v in top.time_at_or_above_ns.items()})
    else:
        m.update(max_pending_depth=0, max_pending_stream=None)
    launches = launched_kernels(trace)
    if len(launches):
        d = api.end[ops.api[launches]] - api.start[ops.api[launches]]
        m.update(launch_api_median_us=round(float(np.median(d)) / 1e3, 2),
                 launch_api_max_us=round(float(d.max()) / 1e3, 1))

    if name.startswith("eager_adamw") or name == "sync_in_loop":
        sel = _optimizer_selection(trace)
        n = int(len(launched_kernels(trace, sel))) if sel is not None else 0
        m["optimizer_launches"] = n
        m["optimizer_launches_per_step"] = round(n / m["profiler_steps"], 1) if m["profiler_steps"] else None
        m["optimizer_small_kernel_rows"] = len(small_kernel_table(trace, sel, limit=0)) if sel is not None else 0
    if name == "backpressure":
        bp = backpressure(trace)
        sp = bp["spikes"]
        m.update(spikes=len(sp), episodes=len(bp["episodes"]),
                 worst_spike_us=round(max(e.worst_api_ns for e in sp) / 1e3, 1) if sp else None,
                 max_depth_before_spike=max(e.max_depth for e in sp) if sp else None,
                 longest_kernel_ms=round(float((ops.end - ops.start)[ops.kind == OP_KERNEL].max()) / 1e6, 3)
                 if m["kernels"] else None)
    if name == "cuda_graphs":
        g = (ops.api >= 0) & (api.kind[np.maximum(ops.api, 0)] == API_GRAPH_LAUNCH) if len(api) else ops.api >= 0
        per = np.bincount(ops.api[g]) if g.any() else np.zeros(0, np.int64)
        per = per[per > 0]
        m.update(graph_launches_with_ops=int(len(per)), graph_ops=int(g.sum()),
                 ops_per_graph_launch_min=int(per.min()) if len(per) else 0,
                 ops_per_graph_launch_max=int(per.max()) if len(per) else 0)
    if name == "sync_in_loop":
        rows = step_drains(trace)
        m.update(steps_drained=sum(1 for r in rows if r["min_depth"] == 0 and r["drained_at_sync"]),
                 steps_with_sync=sum(1 for r in rows if r["syncs"]), step_drains=rows)
    return m


def check_expectations(traces: dict[str, dict]) -> list[str]:
    """Problems with what the measured traces show (empty: every captured trace shows its pattern)."""
    problems = []
    meas = {n: t.get("measured") or {} for n, t in traces.items()}
    for n, t in traces.items():
        if t.get("within_limit") is False:
            problems.append(f"{n}: {t.get('size_bytes')} bytes gzipped, over the {t.get('size_limit_bytes')} limit")
        if t.get("measured") is None:
            problems.append(f"{n}: not measured ({t.get('measure_error', 'engine unavailable')})")
    u, f = meas.get("eager_adamw_unfused"), meas.get("eager_adamw_fused")
    if u:
        if u.get("optimizer_launches", 0) < MIN_UNFUSED_OPTIMIZER_LAUNCHES:
            problems.append(f"eager_adamw_unfused: {u.get('optimizer_launches', 0)} optimizer-range launches, "
                            f"expected >= {MIN_UNFUSED_OPTIMIZER_LAUNCHES}")
        if f and u.get("optimizer_launches", 0) < MIN_OPTIMIZER_RATIO * max(f.get("optimizer_launches", 0), 1):
            problems.append(f"eager_adamw_unfused/fused: optimizer-range launches {u.get('optimizer_launches')} "
                            f"vs {f.get('optimizer_launches')}, expected a ratio >= {MIN_OPTIMIZER_RATIO}")
    b = meas.get("backpressure")
    if b:
        if b.get("max_pending_depth", 0) < MIN_SATURATED_DEPTH:
            problems.append(f"backpressure: max pending depth {b.get('max_pending_depth')}, expected the stream "
                            f"limit (>= {MIN_SATURATED_DEPTH})")
        if not b.get("spikes"):
            problems.append("backpressure: no launch spike (no launch call blocked)")
    g = meas.get("cuda_graphs")
    if g:
        if not g.get("graph_launches_with_ops"):
            problems.append("cuda_graphs: no GPU op is joined to a cudaGraphLaunch")
        elif g.get("ops_per_graph_launch_min", 0) < MIN_OPS_PER_GRAPH_LAUNCH:
            problems.append(f"cuda_graphs: a graph launch has only {g.get('ops_per_graph_launch_min')} ops, "
                            f"expected >= {MIN_OPS_PER_GRAPH_LAUNCH}")
    s = meas.get("sync_in_loop")
    if s:
        steps = s.get("profiler_steps", 0)
        if not steps or s.get("steps_drained", 0) != steps:
            problems.append(f"sync_in_loop: queue drained at a sync in {s.get('steps_drained', 0)} of {steps} steps")
    return problems


def independent_pending_limit(launch_ns: list[int]) -> int | None:
    """The stream's pending-launch limit from the capture's own timing loop, not from the trace.

    `launch_ns` are the wall times of consecutive tiny-kernel launch calls made while a long kernel
    holds the stream: calls return at once until the queue is full, then each waits for a slot. The
    limit is the number of calls before the first one that blocked (> 20 × the median of the first
    32 calls and > 50 µs). None when no call blocked (dry run, or the queue never filled)."""
    if len(launch_ns) < 64:
        return None
    head = sorted(launch_ns[:32])
    fast = (head[15] + head[16]) / 2
    slow = max(20 * fast, 50_000)
    for i, d in enumerate(launch_ns):
        if d > slow:
            return i
    return None


def backpressure_needs_retry(measured: dict | None, n_kernels: int) -> bool:
    """True when the burst did not hit the limit: no blocking launch, or every tiny kernel fit in the queue."""
    if not measured:
        return False
    depth = measured.get("max_pending_depth", 0)
    return not measured.get("spikes") or depth >= n_kernels - 16 or depth < MIN_SATURATED_DEPTH
