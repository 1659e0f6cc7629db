"""Nsight graph-level replays as GPU busy time (docs/definitions.md §12.2, §12.3, §V2).

Nsight's default `--cuda-graph-trace=graph` records one `CUPTI_ACTIVITY_KIND_GRAPH_TRACE` row per
replay (`Trace.graph_spans`) and no kernel row for the graph's nodes. The GPU ran them: a timed span
is GPU busy on its device and stream. The idle analyses read the trace through `busy_trace(trace)`:
the same trace with each timed span as one op (a kernel named SPAN_OP, launched by its graph-launch
call, on the span's device and stream). So every busy/idle figure (device gaps and their causes,
per-iteration busy and idle, the queue class, where an iteration's GPU work ends) counts a replay
as a node-mode replay's ops count, through the one code path they already have. A span is an upper
bound of its nodes' busy time: idle between nodes inside a replay is invisible in this mode.

Invariants:
- a trace without a timed span is returned as it is: no copy, no cost;
- the view is built once per trace (kept in its memo) and is a function of the data: each span op
  goes after the real ops with the same start, the spans in their own total order, so an op index
  of the view is the same on every build (the TUI's idle lane keeps them on disk);
- a row without timing (start = end = 0: CUPTI did not collect it) is never busy; it is counted.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from launchtui.analysis import memo
from launchtui.trace.model import OP_KERNEL, GpuOps, GraphSpans, Trace

SPAN_OP = "(graph-level replay)"        # the name of a span's op in the view
MEMO_KEY = "analysis.graph_busy"        # the view's key in the trace's memo


def timed(gs: GraphSpans) -> np.ndarray:
    """Per row: whether CUPTI collected its timing (a span of positive length)."""
    return gs.end > gs.start


@dataclass
class SpanIntervals:
    """The timed graph-level replays as busy intervals [start, end), in start order, with the
    device and stream they ran on and their graph-launch call (-1: none joined); `untimed`: the
    rows without timing, counted, never busy."""
    device: np.ndarray
    stream: np.ndarray
    start: np.ndarray
    end: np.ndarray
    corr: np.ndarray
    api: np.ndarray
    untimed: int

    def __len__(self) -> int:
        return len(self.start)


def span_intervals(trace: Trace) -> SpanIntervals:
    gs = trace.graph_spans
    ok = timed(gs)
    return SpanIntervals(gs.device[ok], gs.stream[ok], gs.start[ok], gs.end[ok], gs.corr[ok], gs.api[ok],
                         int((~ok).sum()))


def busy_trace(trace: Trace) -> Trace:
    """`trace` as the idle analyses read it: its timed graph-level spans as ops (module docstring);
    `trace` itself when it has none."""
    if not len(trace.graph_spans) or not timed(trace.graph_spans).any():
        return trace
    return memo.of(trace).get(MEMO_KEY, lambda: _with_span_ops(trace, span_intervals(trace)))


def _with_span_ops(trace: Trace, sp: SpanIntervals) -> Trace:
    ops, api = trace.ops, trace.api
    n = len(sp)
    name = trace.strings.intern(SPAN_OP)
    pid = np.where(sp.api >= 0, api.pid[np.maximum(sp.api, 0)], -1) if len(api) else np.full(n, -1)
    add = {"device": sp.device, "stream": sp.stream, "start": sp.start, "end": sp.end, "corr": sp.corr, "pid": pid,
           "name": np.full(n, name), "full_name": np.full(n, name), "kind": np.full(n, OP_KERNEL), "api": sp.api}
    at = np.searchsorted(ops.start, sp.start, side="right")   # after the ops starting with it
    cols = {f.name: _insert(getattr(ops, f.name), at, add[f.name]) for f in dataclasses.fields(GpuOps)}
    op_graph = trace.op_graph
    if len(op_graph) == len(ops) and len(op_graph):
        gs = trace.graph_spans
        op_graph = _insert(op_graph, at, gs.graph[timed(gs)])
    return dataclasses.replace(trace, ops=GpuOps(**cols), op_graph=op_graph)


def _insert(col: np.ndarray, at: np.ndarray, values: np.ndarray) -> np.ndarray:
    """`col` with `values` inserted before positions `at`, in the column's dtype when every value
    fits it (ids narrowed by finalize), else in int64: no id is ever changed."""
    values = np.asarray(values)
    dtype = col.dtype
    if values.dtype.kind in "iu" and len(values) and dtype.kind in "iu":
        info = np.iinfo(dtype)
        if int(values.min()) < info.min or int(values.max()) > info.max:
            dtype = np.dtype(np.int64)
    return np.insert(col.astype(dtype, copy=False), at, values.astype(dtype))


def span_limits(trace: Trace) -> dict | None:
    """What the trace cannot show of its graph-level replays (the record's `limits.graph_level`), or
    None for a trace without any (its JSON stays as it was)."""
    if not len(trace.graph_spans):
        return None
    sp = span_intervals(trace)
    note = (f"{len(sp):,} graph replays traced at graph level (--cuda-graph-trace=graph) count as GPU busy "
            "for their whole span: idle between a replay's nodes is not in the trace, so GPU busy is an upper "
            "bound there and GPU idle a lower bound")
    if sp.untimed:
        note += (f"; {sp.untimed:,} graph-level records carry no timing (CUPTI did not collect it): the GPU "
                 "time of those replays is unknown")
    return {"replays": len(sp), "untimed": sp.untimed, "note": note}
