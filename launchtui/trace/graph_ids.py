"""Per-op CUDA graph ids and graph-level replays (docs/definitions.md §12.2): which graph each
replayed GPU op came from, and, when Nsight traced graphs whole, each replay's GPU span.

Nsight node mode (`--cuda-graph-trace=node`) writes `graphId` on kernel rows (from Nsight 2025.5.2);
memcpy and memset rows carry `graphNodeId` only, so they stay without a graph. The ids are read by
one small query after the model is built, only when the trace holds a graph-launch call, and
matched to the model's ops on (start, correlation id, device), the keys the model keeps: a trace
without graphs pays nothing and the column reader is left alone.
"""
from __future__ import annotations

import numpy as np

from launchtui.trace.model import API_GRAPH_LAUNCH, GraphSpans, Trace


def match_rows(a: tuple, b: tuple) -> np.ndarray:
    """Per row of the key columns `a`: the index of a row of `b` with equal keys, -1 when none
    (ties in `b`: any one of them). One lexsort over both, no per-row Python."""
    na = len(a[0])
    if not na or not len(b[0]):
        return np.full(na, -1, np.int64)
    cols = [np.concatenate([np.asarray(x, np.int64), np.asarray(y, np.int64)]) for x, y in zip(a, b)]
    side = np.r_[np.ones(na, np.int8), np.zeros(len(b[0]), np.int8)]   # b rows sort before a rows
    order = np.lexsort((side, *reversed(cols)))
    same = np.ones(len(order) - 1, bool)
    for c in cols:
        same &= c[order[1:]] == c[order[:-1]]
    # the latest b row at or before each position, within the run of equal keys
    is_b = side[order] == 0
    last_b = np.maximum.accumulate(np.where(is_b, np.arange(len(order)), -1))
    run = np.r_[0, np.cumsum(~same)]
    ok = (last_b >= 0) & ~is_b
    ok[ok] = run[last_b[ok]] == run[ok]
    out = np.full(na, -1, np.int64)
    pos = np.flatnonzero(ok)
    out[order[pos]] = order[last_b[pos]] - na
    return out


def graph_launch_ops(trace: Trace) -> np.ndarray:
    """Indices of the ops joined to a graph-launch call: the only ones that can be graph nodes."""
    ops = trace.ops
    cand = np.flatnonzero(ops.api >= 0)
    return cand[trace.api.kind[ops.api[cand]] == API_GRAPH_LAUNCH]


def read_nsys(trace: Trace, r) -> None:
    """Fill `trace.op_graph` from the kernel table's `graphId` (node mode), when the trace holds a
    graph launch and the column exists; 0 and NULL read as none."""
    table = "CUPTI_ACTIVITY_KIND_KERNEL"
    if not len(trace.ops) or not r.has(table) or "graphId" not in r.colset(table):
        return
    if not (trace.api.kind == API_GRAPH_LAUNCH).any():
        return
    got = r.ints(table, {"start": "start", "corr": "correlationId", "dev": "deviceId", "graph": "graphId"},
                 where="graphId IS NOT NULL AND graphId > 0")
    if not len(got["start"]):
        return
    ops = trace.ops
    cand = graph_launch_ops(trace)   # match those few, not every op
    k = match_rows((ops.start[cand], ops.corr[cand], ops.device[cand]), (got["start"], got["corr"], got["dev"]))
    if (k >= 0).any():
        trace.op_graph = np.full(len(ops), -1, np.int64)
        trace.op_graph[cand[k >= 0]] = got["graph"][k[k >= 0]]


def read_graph_trace(trace: Trace, r) -> None:
    """Fill `trace.graph_spans` from `CUPTI_ACTIVITY_KIND_GRAPH_TRACE` (graph-level mode): one row per
    replay, joined to its graph-launch call on (correlationId, process). Rows without timing (start
    and end 0: CUPTI did not collect it) are kept with start = end = 0: their replay is known, its
    GPU time is not (analysis/graph_busy.py counts them, never as busy)."""
    table = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
    if not r.has(table):
        return
    have = r.colset(table)
    if not {"start", "end", "correlationId"} <= have:
        return
    exprs = {"start": "start", "end": "end", "corr": "correlationId"}
    for k, c in (("dev", "deviceId"), ("stream", "streamId"), ("graph", "graphId"), ("pid", "globalPid")):
        exprs[k] = c if c in have else "NULL"
    got = r.ints(table, exprs)
    untimed = (got["end"] <= got["start"]) | (got["start"] <= 0)
    got["start"], got["end"] = np.where(untimed, 0, got["start"]), np.where(untimed, 0, got["end"])
    order = np.lexsort((got["graph"], got["corr"], got["stream"], got["dev"], got["end"], got["start"]))
    got = {k: v[order] for k, v in got.items()}
    api = trace.api
    gl = np.flatnonzero(api.kind == API_GRAPH_LAUNCH)
    pid_code = np.full(len(got["pid"]), -1, np.int64)
    if len(trace.processes):
        pos = np.clip(np.searchsorted(trace.processes, got["pid"]), 0, len(trace.processes) - 1)
        hit = trace.processes[pos] == got["pid"]
        pid_code[hit] = pos[hit]
    # an unknown process (-1 on either side) joins on the correlation id alone
    same_pid = (pid_code >= 0).all() and (api.pid[gl] >= 0).all()
    k = (match_rows((got["corr"], pid_code), (api.corr[gl], api.pid[gl])) if same_pid
         else match_rows((got["corr"],), (api.corr[gl],)))
    trace.graph_spans = GraphSpans(device=got["dev"].astype(np.int32), stream=got["stream"], start=got["start"],
                                   end=got["end"], corr=got["corr"], graph=got["graph"],
                                   api=np.where(k >= 0, gl[np.maximum(k, 0)], -1).astype(np.int32))
