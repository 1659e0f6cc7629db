"""Nsight graph node lineage (docs/definitions.md §12.6): per replayed GPU op, the captured node it
runs (`Trace.op_node`), and per API call, the node created inside it (`Trace.api_node`), so the
capture ↔ replay join can pair them by id.

- `CUDA_GRAPH_NODE_EVENTS`: a row with `originalGraphNodeId` NULL is a node's creation, on the
  creating thread, inside the call that created it (a captured `cudaLaunchKernel`); a row with it set
  is a clone (instantiation copies every node into the executable graph), `graphNodeId` the copy.
  A clone of a clone is followed to its root: the node the capture created.
- A replayed op's node: `graphNodeId` on its kernel / memcpy / memset row (node mode, read by the
  GPU-op tables' scan: graph_ids.replay_rows), matched to the model's ops on (start, correlation
  id, device), only for ops of a graph launch.
- Node ids count per process: every lookup is keyed by (process, id). A creation row maps to the
  one API call on its thread whose [start, end] holds its instant (searchsorted per thread).

One query of the node table, read only when it exists (Nsight writes it only for traces with
graphs; up to 2022.4 its rows were in `CUDA_GRAPH_EVENTS`, taken when that table has the node
columns); what does not resolve is counted by reason in `source.extra["graph_nodes"]`.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from launchtui.trace.arrays import unique_sorted
from launchtui.trace.graph_ids import graph_launch_ops, match_rows
from launchtui.trace.model import Trace

# the node table; up to Nsight 2022.4 the node rows were in CUDA_GRAPH_EVENTS (same columns)
TABLES = ("CUDA_GRAPH_NODE_EVENTS", "CUDA_GRAPH_EVENTS")
NODE_COLUMNS = {"graphNodeId", "originalGraphNodeId", "globalTid", "start"}
PID_BITS = 24                # Nsight globalTid = globalPid | tid (the low 24 bits)
MAX_CHAIN = 64               # clone hops followed before a chain counts as not ending
U_NO_CREATION = "replayed ops whose node has no creation row (nor a clone chain leading to one)"
U_OUTSIDE = "replayed ops whose node was created outside any API call on its thread"
U_SEVERAL = "replayed ops whose node was created inside several API calls at once (nested calls)"
U_CYCLE = "replayed ops whose node's clone chain does not end"
U_SHARED_CALL = "API calls inside which several nodes were created (the first node id kept)"


def _process(gtid: np.ndarray) -> np.ndarray:
    """Nsight globalPid of a globalTid (the model's process key)."""
    return gtid & ~np.int64((1 << PID_BITS) - 1)


def node_table(r) -> str | None:
    """The canonical name of the trace's node table (reader `r`), None when it has none."""
    return next((t for t in TABLES if r.has(t) and NODE_COLUMNS <= r.colset(t)), None)


def read_nsys(trace: Trace, r, replayed: dict[str, np.ndarray]) -> None:
    """Fill `trace.op_node` and `trace.api_node` when the trace has the node table; `replayed`:
    the GPU-op rows carrying a graphNodeId (graph_ids.replay_rows()["node"])."""
    table = node_table(r)
    if table is None:
        return
    ev = r.ints(table, {"start": "start", "gtid": "globalTid", "node": "graphNodeId", "orig": "originalGraphNodeId"})
    if not len(ev["node"]):
        return
    why: Counter = Counter()
    proc = _process(ev["gtid"])
    clone = ev["orig"] >= 0
    edges = (proc[clone], ev["node"][clone], ev["orig"][clone])
    made = np.flatnonzero(~clone)
    # one creation per (process, node): a repeated row (any later lifecycle row) never overrides the first
    made = made[np.lexsort((ev["start"][made], ev["node"][made], proc[made]))]
    first = np.r_[True, (ev["node"][made][1:] != ev["node"][made][:-1]) | (proc[made][1:] != proc[made][:-1])]
    repeated, made = int((~first).sum()), made[first]
    created = (proc[made], ev["node"][made])
    call = _creating_calls(trace, ev["gtid"][made], ev["start"][made])   # -1 outside any, -2 several
    trace.api_node = _api_nodes(trace, call, created[1], why)
    op_proc, op_node = _replayed_nodes(trace, replayed)
    if len(op_node):
        # per distinct (process, exec node): a graph's nodes replay many times, resolve each once
        have = np.flatnonzero(op_node >= 0)
        order = have[np.lexsort((op_node[have], op_proc[have]))]
        head = np.r_[True, (op_node[order][1:] != op_node[order][:-1]) | (op_proc[order][1:] != op_proc[order][:-1])]
        u_proc, u_node = op_proc[order[head]], op_node[order[head]]
        u_root = _roots(u_proc, u_node, edges)
        k = match_rows((u_proc, np.maximum(u_root, 0)), created)
        u_state = np.where(u_root < 0, -3, np.where(k >= 0, call[np.maximum(k, 0)], -4))
        root, state = np.full(len(op_node), -1, np.int64), np.zeros(len(op_node), np.int64)
        root[order], state[order] = u_root[np.cumsum(head) - 1], u_state[np.cumsum(head) - 1]
        for code, text in ((-1, U_OUTSIDE), (-2, U_SEVERAL), (-3, U_CYCLE), (-4, U_NO_CREATION)):
            if (state == code).any():
                why[text] = int((state == code).sum())
        trace.op_node = np.where(op_node >= 0, root, -1)
    trace.source.extra["graph_nodes"] = {
        "creation_rows": len(made), "repeated_creation_rows": repeated, "clone_rows": int(clone.sum()),
        "calls_with_node": int((trace.api_node >= 0).sum()) if len(trace.api_node) else 0,
        "replayed_ops_with_node": int((trace.op_node >= 0).sum()) if len(trace.op_node) else 0,
        "unresolved": dict(sorted(why.items()))}


def _creating_calls(trace: Trace, gtid: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per creation row: the API row whose [start, end] holds its instant on its thread; -1 none
    (or an unknown thread), -2 several (nested calls)."""
    out = np.full(len(t), -1, np.int64)
    api, keys = trace.api, trace.threads.key
    if not len(api) or not len(keys):
        return out
    order = np.argsort(keys, kind="stable")
    pos = np.clip(np.searchsorted(keys[order], gtid), 0, len(keys) - 1)
    th = np.where(keys[order][pos] == gtid, order[pos], -1)
    by_thread = np.argsort(api.thread, kind="stable")   # api rows are in start order: stays so per thread
    bounds = np.searchsorted(api.thread[by_thread], np.arange(len(keys) + 1))
    for x in unique_sorted(th[th >= 0]).tolist():   # per creating thread
        rows = by_thread[bounds[x]:bounds[x + 1]]
        mine = np.flatnonzero(th == x)
        s, e = api.start[rows], api.end[rows]
        tt = t[mine]
        begun = np.searchsorted(s, tt, "right")
        inside = begun - np.searchsorted(np.sort(e), tt, "left")   # calls begun minus calls ended
        last = rows[np.maximum(begun - 1, 0)]
        one = (inside == 1) & (begun > 0) & (api.end[last] >= tt)
        out[mine[one]] = last[one]
        out[mine[inside > 1]] = -2
        for i in np.flatnonzero((inside == 1) & ~one).tolist():   # the one holding call began earlier (rare)
            out[mine[i]] = rows[np.flatnonzero((s <= tt[i]) & (e >= tt[i]))[-1]]
    return out


def _api_nodes(trace: Trace, call: np.ndarray, node: np.ndarray, why: Counter) -> np.ndarray:
    """Per API row: the node id created inside it, -1 none; with several, the first in id order."""
    out = np.full(len(trace.api), -1, np.int64)
    ok = np.flatnonzero(call >= 0)
    order = ok[np.lexsort((node[ok], call[ok]))]
    first = np.r_[True, call[order][1:] != call[order][:-1]] if len(order) else np.zeros(0, bool)
    out[call[order[first]]] = node[order[first]]
    if (~first).any():
        why[U_SHARED_CALL] = int(len(unique_sorted(call[order[~first]])))
    return out


def _replayed_nodes(trace: Trace, got: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(process key, exec node id) per op of the model, node -1 where the op has none; empty when no
    op of a graph launch carries one (`got`: the GPU-op rows with a node id)."""
    ops = trace.ops
    cand = graph_launch_ops(trace)
    if not len(cand) or not len(got["start"]):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    k = match_rows((ops.start[cand], ops.corr[cand], ops.device[cand]), (got["start"], got["corr"], got["dev"]))
    if not (k >= 0).any():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    node = np.full(len(ops), -1, np.int64)
    node[cand[k >= 0]] = got["node"][k[k >= 0]]
    return trace.process_keys(ops.pid), node


def _roots(proc: np.ndarray, node: np.ndarray, edges: tuple) -> np.ndarray:
    """Per (process, node): the root of its clone chain (itself when it is no clone); -1 when the
    chain does not end within MAX_CHAIN hops (a cycle)."""
    cur = node.copy()
    live = np.flatnonzero(node >= 0)
    for _ in range(MAX_CHAIN):   # per hop: every node still in a chain moves one step up at once
        if not len(live) or not len(edges[0]):
            return cur
        k = match_rows((proc[live], cur[live]), edges[:2])
        live = live[k >= 0]
        cur[live] = edges[2][k[k >= 0]]
    cur[live] = -1
    return cur
