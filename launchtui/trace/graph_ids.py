"""Per-op CUDA graph ids and graph-level replays (docs/definitions.md §12.2): which graph each
replayed GPU op came from, and, when Nsight traced graphs whole, each replay's GPU span.

Nsight node mode (`--cuda-graph-trace=node`) writes `graphId` on kernel rows (from Nsight 2025.5.2);
memcpy and memset rows carry `graphNodeId` only, so they stay without a graph. Both columns are
read by the GPU-op tables' one scan (`scan_exprs`), and only their few set rows are kept
(`replay_rows`), matched after the model is built to its ops on (start, correlation id, device),
the keys the model keeps. The scan reads them only when a StringIds text can name a graph launch
(`may_launch_graphs`): a trace without graphs pays nothing.
"""
from __future__ import annotations

import numpy as np

from launchtui.trace.arrays import halves, keep_low
from launchtui.trace.model import API_GRAPH_LAUNCH, GraphSpans, Trace
from launchtui.trace.sqlite_columns import Packed


def narrow(graph: np.ndarray) -> np.ndarray:
    """Per-op graph ids (`Trace.op_graph`) as int32 when every id fits, as CUDA's 32-bit graph ids
    do (4 bytes per op, not 8: the column is as long as the ops even when a few replays set it);
    the int64 column as it is otherwise, so no id is ever changed."""
    i32 = np.iinfo(np.int32)
    if len(graph) and i32.min <= int(graph.min()) and int(graph.max()) <= i32.max:
        return graph.astype(np.int32)
    return graph


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


# what every graph-launch name of names.api_kind holds (cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch)
LAUNCH_NAME_PART = "GraphLaunch"


def may_launch_graphs(con, strings_table: str | None) -> bool:
    """False only when no text in StringIds (`strings_table`, None when absent) can name a graph
    launch, so that no API call is one (names.api_kind; LIKE is the looser, case-blind test)."""
    if strings_table is None:
        return False
    return con.execute(f'SELECT 1 FROM "{strings_table}" WHERE value LIKE ? LIMIT 1',
                       (f"%{LAUNCH_NAME_PART}%",)).fetchone() is not None


# a kernel table's correlation id with its graphId (0 for NULL: none either way) in the high half
GRAPH_CORR = Packed("ifnull(graphId, 0)", "correlationId")


def scan_exprs(columns: set[str], kernel: bool, nodes: bool) -> dict:
    """What a GPU-op table's scan changes or adds for the graph ids: a kernel table with graphId
    reads its `corr` as GRAPH_CORR (no column of its own: 8 bytes of fresh memory per op, nearly
    all NULL; `replay_rows` splits it), and only when `nodes` (the trace has a node table to
    resolve them) a `node` output (graphNodeId, NULL where the table lacks it)."""
    out = {"corr": GRAPH_CORR} if kernel and "graphId" in columns else {}
    if nodes:
        out["node"] = "graphNodeId" if "graphNodeId" in columns else "NULL"
    return out


def replay_rows(cols: dict[str, np.ndarray], graph_spans: list) -> dict[str, dict[str, np.ndarray]]:
    """Split the graph ids out of `cols["corr"]` in the rows of `graph_spans` ((first row, end
    row, the ids read apart or None) of the tables read with GRAPH_CORR), in place, pop the `node`
    column (when read) from the GPU-op columns `cols` (start, corr, device: every table's rows, in
    the tables' and rowids' order) and keep only their set rows' keys and ids: {"graph": rows with
    graphId > 0 (0 and NULL: none), "node": rows with a graphNodeId} (ids are never negative: a
    negative one would read as NULL)."""
    corr, rows, ids = cols["corr"], [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for a, b, apart in graph_spans:
        graph = apart.pop("graph") if apart else halves(corr[a:b])[0]   # a view: no n-long copy
        at = np.flatnonzero(graph > 0)
        rows.append(at + a)
        ids.append(graph[at].astype(np.int64))
        if not apart:
            keep_low(corr[a:b])
    node = cols.pop("node", None)
    out = {"node": NO_REPLAY_ROWS["node"]}
    for name, got, at in (("graph", np.concatenate(ids), np.concatenate(rows)),
                          ("node", node, None if node is None else np.flatnonzero(node >= 0))):
        if got is None:
            continue
        out[name] = {"start": cols["start"][at], "corr": corr[at], "dev": cols["device"][at].astype(np.int64),
                     name: got if name == "graph" else got[at]}
    return out


NO_REPLAY_ROWS = {k: {"start": np.zeros(0, np.int64), "corr": np.zeros(0, np.int64),
                      "dev": np.zeros(0, np.int64), k: np.zeros(0, np.int64)} for k in ("graph", "node")}


def graph_launch_ops(trace: Trace) -> np.ndarray:
    """Indices of the ops joined to a graph-launch call: the only ones that can be graph nodes."""
    ops = trace.ops
    cand = np.flatnonzero(ops.api >= 0)
    return cand[trace.api.kind[ops.api[cand]] == API_GRAPH_LAUNCH]


def read_nsys(trace: Trace, rows: dict[str, dict[str, np.ndarray]]) -> None:
    """Fill `trace.op_graph` from the kernel rows' `graphId` (node mode; `rows`: replay_rows), when
    the trace holds a graph launch; 0 and NULL read as none."""
    got = rows["graph"]
    if not len(trace.ops) or not len(got["start"]) or not (trace.api.kind == API_GRAPH_LAUNCH).any():
        return
    ops = trace.ops
    cand = graph_launch_ops(trace)   # match those few, not every op
    k = match_rows((ops.start[cand], ops.corr[cand], ops.device[cand]), (got["start"], got["corr"], got["dev"]))
    if (k >= 0).any():
        ids = narrow(got["graph"][k[k >= 0]])
        trace.op_graph = np.full(len(ops), -1, ids.dtype)
        trace.op_graph[cand[k >= 0]] = ids


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
