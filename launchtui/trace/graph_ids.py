"""Per-op CUDA graph ids (docs/definitions.md §12.2): which graph each replayed GPU op came from.

Nsight node mode (`--cuda-graph-trace=node`) writes `graphId` on kernel rows (from Nsight 2025.5.2);
memcpy and memset rows carry `graphNodeId` only, so they stay without a graph. The ids are read by
one small query after the model is built, only when the trace holds a graph-launch call, and
matched to the model's ops on (start, correlation id, device), the keys the model keeps: a trace
without graphs pays nothing and the column reader is left alone.
"""
from __future__ import annotations

import numpy as np

from launchtui.trace.model import API_GRAPH_LAUNCH, Trace


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
    k = match_rows((ops.start, ops.corr, ops.device), (got["start"], got["corr"], got["dev"]))
    if (k >= 0).any():
        trace.op_graph = np.where(k >= 0, got["graph"][np.maximum(k, 0)], -1)
