"""What the trace cannot show: sampled traces and trimmed captures (definitions.md §V13).

- *Sampled*: some tools keep a sample of the events (HTA's trace filter keeps 0.5 % of the
  correlation ids), so idle gaps hold work the trace dropped. Seen as correlation ids far sparser
  than any full capture (the runtime numbers every call; full captures sit at 0.09-0.83 of their
  id span), or as many GPU ops without a launch row *among* launched ones on their stream.
- *Trimmed at the start*: ops launched before the capture run at its start without a launch row;
  they all precede their stream's first launched op. The record leaves iterations dominated by
  them out of steady state (record_idle.steady_iterations).
- *Host slowed by the profiler*: a trace recorded with Python tracing (Kineto `with_stack=True`:
  one `python_function` event per Python call) ran its host code under the tracer, which costs
  every Python call; host time between launches is longer than untraced, so host-bound time and
  the gain from removing it are upper bounds.
- *Graph-level replays* (Nsight `--cuda-graph-trace=graph`): each replay is one span, busy whole;
  idle between its nodes is not in the trace (graph_busy.span_limits).
"""
from __future__ import annotations

import numpy as np

from launchtui.analysis.graph_busy import span_limits
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, Trace
from launchtui.trace.registry import FACT_CALL_NUMBERING

LAUNCH_KINDS = (API_LAUNCH, API_GRAPH_LAUNCH)

SAMPLED_DENSITY = 0.02      # correlation ids per id of their span below this: a sample
MIN_CALLS = 100             # a process needs this many ids for its density to mean anything
SAMPLED_INTERLEAVED = 0.05  # ops without a launch row among launched ones, above this share
FEW_STREAMS = 8             # streams with unmatched ops up to this: one pass over the ops each


def correlation_density(trace: Trace) -> float | None:
    """The lowest, over processes with enough API calls, of calls with an id / the ids' span. Counts
    calls, not distinct ids: a reused id (a few %) cannot move a density of 0.001 across 0.02,
    and no per-call sort is needed."""
    if not trace.provides(FACT_CALL_NUMBERING):     # ids that do not number the calls say nothing
        return None
    api = trace.api
    ok = api.corr >= 0
    if ok.sum() < MIN_CALLS:
        return None
    pid, corr = api.pid[ok], api.corr[ok]
    out = None
    for p in unique_sorted(pid).tolist():   # per process (few)
        c = corr[pid == p]
        if len(c) < MIN_CALLS:
            continue
        d = min(1.0, len(c) / float(int(c.max()) - int(c.min()) + 1))
        out = d if out is None else min(out, d)
    return out


def unmatched_ops(trace: Trace) -> tuple[int, int]:
    """(GPU ops without a launch row, of which starting after their stream's first launched op)."""
    ops = trace.ops
    un = np.flatnonzero(ops.api < 0)
    n = len(un)
    if not n:
        return 0, 0
    key = ops.device[un].astype(np.int64) * (1 << 32) + ops.stream[un].astype(np.int64)
    uk, at, inv = unique_sorted(key, return_index=True, return_inverse=True)   # streams with unmatched ops
    if len(uk) > FEW_STREAMS:
        limit = _first_launched_starts(trace, uk)
    else:   # one pass over the ops per stream, no per-op key or sort (the record's last stage, 20M)
        launched = ops.api >= 0
        none = np.iinfo(np.int64).max
        limit = np.array([ops.start.min(where=launched & (ops.device == ops.device[u]) & (ops.stream == ops.stream[u]),
                                        initial=none) for u in un[at].tolist()], np.int64)
    return n, int((ops.start[un] > limit[inv]).sum())


def _first_launched_starts(trace: Trace, streams: np.ndarray) -> np.ndarray:
    """Per stream key of `streams` (device << 32 + stream, sorted): its first launched op's start,
    int64 max without one."""
    ops = trace.ops
    key = ops.device.astype(np.int64) * (1 << 32) + ops.stream.astype(np.int64)
    launched = ops.api >= 0
    first = {}
    if launched.any():
        k, s = key[launched], ops.start[launched]
        o = np.lexsort((s, k))
        k, s = k[o], s[o]
        head = np.ones(len(k), bool)
        head[1:] = k[1:] != k[:-1]
        first = dict(zip(k[head].tolist(), s[head].tolist()))
    return np.array([first.get(x, np.iinfo(np.int64).max) for x in streams.tolist()], np.int64)   # per stream


def trace_limits(trace: Trace) -> dict:
    density = correlation_density(trace)
    n_un, interleaved = unmatched_ops(trace)
    reasons = []
    if density is not None and density < SAMPLED_DENSITY:
        reasons.append(f"correlation ids are sparse ({density:.4f} of their span is used; full captures use "
                       f"0.09 or more): the trace keeps a sample of its events")
    if len(trace.ops) and interleaved > SAMPLED_INTERLEAVED * len(trace.ops):
        reasons.append(f"{interleaved:,} of {len(trace.ops):,} GPU ops have no launch row although launched ops "
                       "precede them on their stream: launches are missing from the trace")
    out = {"sampled": bool(reasons), "host_tracing": host_tracing(trace),
           "correlation_density": None if density is None else round(density, 4),
           "ops_without_launch": n_un, "ops_without_launch_interleaved": interleaved,
           "trimmed_start": n_un - interleaved, "reason": "; ".join(reasons) or None}
    graph_level = span_limits(trace)
    if graph_level is not None:   # only traces with graph-level replays: others' JSON unchanged
        out["graph_level"] = graph_level
    return out


def host_tracing(trace: Trace) -> dict | None:
    """The Python tracer's events, per launch call, or None when the trace has none."""
    frames = int(trace.source.extra.get("python_frames") or 0)
    if not frames:
        return None
    calls = int(np.isin(trace.api.kind, LAUNCH_KINDS).sum())
    per = frames / calls if calls else None
    return {"python_frames": frames, "per_launch_call": None if per is None else round(per, 2),
            "note": f"recorded with Python tracing ({frames:,} Python calls traced"
                    + (f", {per:,.1f} per launch call" if per is not None else "")
                    + "): the tracer slows the host, so host-bound time and its gain are upper bounds"}
