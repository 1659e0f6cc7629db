"""The capture ↔ replay join's first rule, by graph node id (docs/definitions.md §12.6): a replayed
op whose node (Nsight `graphNodeId`, followed through its clones to the captured node:
trace/graph_nodes.py) was created inside a captured launch call came from that call.

Node ids are counters of one process in one recording: they are trusted only when both traces are
the same recording (the same file, or the same session start in two exports of it) and they pair
on (process, node id). Otherwise the kernel-sequence rules run alone, and `why` says so.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from launchtui.trace.graph_ids import match_rows
from launchtui.trace.model import Trace


def same_recording(exec_trace: Trace, cap_trace: Trace) -> str:
    """"" when the two traces are one recording, else why not (one line)."""
    if exec_trace is cap_trace:
        return ""
    a, b = exec_trace.source, cap_trace.source
    try:
        if Path(a.path).resolve() == Path(b.path).resolve():
            return ""
    except OSError:
        pass
    if a.format == b.format and a.wall_offset_ns is not None and a.wall_offset_ns == b.wall_offset_ns \
            and a.wall_offset_ns != 0:
        return ""   # two exports of one session: the same session start, to the ns
    return ("the capture trace is another recording (another file, another session start): node ids count "
            "per process and recording, so they name other nodes there")


def node_id_sources(exec_trace: Trace, cap_trace: Trace, calls: np.ndarray, op_idx: np.ndarray) -> tuple:
    """(per op of `op_idx`: the index into `calls` (the capture trace's captured launch calls) its
    node was created in, -1 none; the `node_ids` facts: used, why, counts)."""
    src = np.full(len(op_idx), -1, np.int64)
    ex_n = int((exec_trace.op_node[op_idx] >= 0).sum()) if len(exec_trace.op_node) else 0
    cap_n = int((cap_trace.api_node[calls] >= 0).sum()) if len(cap_trace.api_node) else 0
    facts = {"used": False, "why": "", "replayed_ops_with_id": ex_n, "captured_calls_with_id": cap_n,
             "matched_ops": 0, "unresolved": _unresolved(exec_trace, cap_trace)}
    if not ex_n:
        facts["why"] = ("no replayed op carries a graph node id with its lineage (Nsight node mode with "
                        "CUDA_GRAPH_NODE_EVENTS; Kineto's capture side records none)")
    elif not cap_n:
        facts["why"] = "no captured launch call of the capture trace has a node creation inside it"
    else:
        facts["why"] = same_recording(exec_trace, cap_trace)
    if facts["why"]:
        return src, facts
    node = exec_trace.op_node[op_idx]
    have = np.flatnonzero(node >= 0)
    k = match_rows((exec_trace.process_keys(exec_trace.ops.pid[op_idx[have]]), node[have]),
                   (cap_trace.process_keys(cap_trace.api.pid[calls]), cap_trace.api_node[calls]))
    src[have] = k
    facts["used"], facts["matched_ops"] = True, int((k >= 0).sum())
    return src, facts


def _unresolved(exec_trace: Trace, cap_trace: Trace) -> dict:
    """The readers' counts of node ids that resolve to no call, by reason: the replayed ops' from the
    execution trace, the calls' from the capture trace (a self-join counts each once)."""
    out = {}
    for t, ops_side in ((exec_trace, True), (cap_trace, False)):
        for reason, n in t.source.extra.get("graph_nodes", {}).get("unresolved", {}).items():
            if reason.startswith("replayed ops") == ops_side:
                out[reason] = n
    return dict(sorted(out.items()))
