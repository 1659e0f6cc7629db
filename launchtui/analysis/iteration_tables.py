"""Per-iteration kernel, phase and stream tables of one trace: the side of a diff that the case
record does not carry (definitions.md §D).

Iterations are given as spans [start, end) on the trace clock. A GPU op counts for the iteration
whose span holds the start of its launch call. Kernels group by their distinguishing name
(`launches.name_ids(trace, "full")`) over the record's device, all streams together, so that
`elementwise_kernel<AddcmulFunctor>` and `<SqrtFunctor>` stay apart while ids that differ between
runs do not split a row. Phase names are normalised as the record's are (`phases.normalise`).
"""
from __future__ import annotations

import numpy as np

from launchtui.analysis.launches import name_ids
from launchtui.analysis.phases import normalise
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.grouping import dense_groups, unique_rows
from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, OP_KERNEL, RANGE_PUSHPOP, Trace
from launchtui.trace.nesting import InnermostIndex


def merge_spans(spans) -> np.ndarray:
    """Sorted, non-overlapping (n, 2) int64 spans."""
    s = np.asarray(spans, np.int64).reshape(-1, 2)
    if len(s) < 2:
        return s
    s = s[np.argsort(s[:, 0], kind="stable")]
    ends = np.maximum.accumulate(s[:, 1])
    head = np.concatenate([[True], s[1:, 0] >= ends[:-1]])
    starts = s[head, 0]
    last = np.concatenate([np.nonzero(head)[0][1:] - 1, [len(s) - 1]])
    return np.stack([starts, ends[last]], axis=1)


def in_spans(t: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """Mask of times inside any of the merged spans [start, end)."""
    if not len(spans):
        return np.zeros(len(t), bool)
    pos = np.searchsorted(spans[:, 0], t, side="right") - 1
    return (pos >= 0) & (t < spans[np.maximum(pos, 0), 1])


def op_phases(trace: Trace, spans: np.ndarray) -> np.ndarray:
    """Per GPU op: the outermost push/pop range inside an iteration span that encloses its launch
    call on the same thread (index into trace.ranges; -1: none). A range that is the span itself
    (the iteration's own range) is not a phase."""
    ops, api, rg = trace.ops, trace.api, trace.ranges
    out = np.full(len(ops), -1, np.int64)
    spans = merge_spans(spans)
    if not len(rg) or not len(spans):
        return out
    pos = np.searchsorted(spans[:, 0], rg.start, side="right") - 1
    sp = spans[np.maximum(pos, 0)]
    cand = (rg.kind == RANGE_PUSHPOP) & (pos >= 0) & (rg.end <= sp[:, 1])
    cand &= ~((rg.start == sp[:, 0]) & (rg.end == sp[:, 1]))
    c = np.nonzero(cand)[0]
    if not len(c):
        return out
    # outermost candidates: not enclosed by an earlier-starting candidate on the same thread
    o = c[np.lexsort((-rg.end[c], rg.start[c], rg.thread[c]))]
    _, grp = dense_groups(rg.thread[o])
    end_rank = np.argsort(np.argsort(rg.end[o], kind="stable"), kind="stable")
    key = grp * (len(o) + 1) + end_rank
    prev = np.concatenate([[-1], np.maximum.accumulate(key)[:-1]])
    top = o[prev < key]
    m = ops.api >= 0
    a = ops.api[m]
    idx = InnermostIndex(rg.thread[top], rg.start[top], rg.end[top]).lookup(api.thread[a], api.start[a])
    out[m] = np.where(idx >= 0, top[np.maximum(idx, 0)], -1)
    return out


def _kernel_rows(trace: Trace, k: np.ndarray, graph: np.ndarray, n_iter: int) -> list[dict]:
    ops, api = trace.ops, trace.api
    nid = name_ids(trace, "full")[k]
    uniq, g = dense_groups(nid)
    ng = len(uniq)
    a = ops.api[k]
    direct = ~graph
    api_t = np.where(direct, api.end[a] - api.start[a], 0)
    queue = ops.start[k] - api.end[a]
    has_q = direct & (queue >= 0)            # NVIDIA's rule: negative queue times are not counted
    launches = np.bincount(g, weights=direct, minlength=ng)
    graphed = np.bincount(g, weights=graph, minlength=ng)
    qn = np.bincount(g, weights=has_q, minlength=ng)
    sum_api = np.bincount(g, weights=api_t, minlength=ng)
    sum_q = np.bincount(g, weights=np.where(has_q, queue, 0), minlength=ng)
    sum_k = np.bincount(g, weights=ops.end[k] - ops.start[k], minlength=ng)
    count = np.bincount(g, minlength=ng)
    rows = []
    for i in range(ng):  # once per distinct kernel name
        rows.append({
            "kernel_name": trace.strings[int(uniq[i])],
            "launches_per_iteration": float(launches[i]) / n_iter,
            "graph_ops_per_iteration": float(graphed[i]) / n_iter,
            "avg_api_us": float(sum_api[i]) / launches[i] / 1e3 if launches[i] else None,
            "avg_queue_us": float(sum_q[i]) / qn[i] / 1e3 if qn[i] else None,
            "avg_kernel_us": float(sum_k[i]) / count[i] / 1e3,
        })
    rows.sort(key=lambda r: (-r["launches_per_iteration"] - r["graph_ops_per_iteration"], r["kernel_name"]))
    return rows


def _phase_rows(trace: Trace, k: np.ndarray, graph: np.ndarray, ph: np.ndarray, n_iter: int) -> list[dict]:
    sel = ~graph
    rg_idx = ph[k[sel]]
    texts = np.full(len(rg_idx), -1, np.int64)
    texts[rg_idx >= 0] = trace.ranges.text[rg_idx[rg_idx >= 0]]
    uniq, g = dense_groups(texts)
    cnt = np.bincount(g, minlength=len(uniq))
    acc: dict[str | None, int] = {}
    for t, c in zip(uniq.tolist(), cnt.tolist()):  # once per distinct range text
        name = normalise(trace.strings[t]) if t >= 0 else None
        acc[name] = acc.get(name, 0) + c       # counts add exactly, in any order of the texts
    rows = [{"phase": p, "launches_per_iteration": v / n_iter} for p, v in acc.items()]
    rows.sort(key=lambda r: (-r["launches_per_iteration"], r["phase"] or ""))
    return rows


def stream_order(trace: Trace, keep=None) -> list[dict]:
    """Streams (those in `keep`, a set of (device, stream), when given) with their first use (first
    GPU op start), ranked by device id and, within a device, by first use: the keys that pair
    streams across runs whose ids differ."""
    ops = trace.ops
    if not len(ops):
        return []
    pairs, g = unique_rows(np.stack([ops.device.astype(np.int64), ops.stream.astype(np.int64)], axis=1),
                           return_inverse=True)
    first = np.full(len(pairs), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first, g, ops.start)
    if keep:
        shown = np.array([(d, s) in keep for d, s in pairs.tolist()], bool)   # once per stream
        pairs, first = pairs[shown], first[shown]
    dev, st = pairs[:, 0], pairs[:, 1]
    devs = sorted(set(dev.tolist()))
    rows = []
    for d in devs:
        m = np.nonzero(dev == d)[0]
        m = m[np.argsort(first[m], kind="stable")]
        for r, i in enumerate(m.tolist()):
            rows.append({"device_id": int(d), "stream_id": int(st[i]), "first_use_ns": int(first[i]),
                         "device_rank": devs.index(d), "stream_rank": r})
    return rows


def _launched_kernels(trace: Trace, merged: np.ndarray, device: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(kernels on `device` (all when None) whose launch or graph-launch call starts inside the
    merged spans, which of them a graph launch ran)."""
    ops, api = trace.ops, trace.api
    m = (ops.kind == OP_KERNEL) & (ops.api >= 0)
    if device is not None:
        m &= ops.device == device
    k = np.nonzero(m)[0]
    kinds = api.kind[ops.api[k]]
    k = k[((kinds == API_LAUNCH) | (kinds == API_GRAPH_LAUNCH)) & in_spans(api.start[ops.api[k]], merged)]
    return k, api.kind[ops.api[k]] == API_GRAPH_LAUNCH


def kernel_table(trace: Trace, spans, device: int | None = None) -> list[dict]:
    """`iteration_tables(...)["kernels"]` alone: the kernels per iteration of `spans` on `device`."""
    spans = np.asarray(spans, np.int64).reshape(-1, 2)
    k, graph = _launched_kernels(trace, merge_spans(spans), device)
    return _kernel_rows(trace, k, graph, max(len(spans), 1))


def iteration_tables(trace: Trace, spans, device: int | None = None, streams=None) -> dict:
    """Kernels and phases per iteration on `device` (all devices when None), graph launches per
    iteration, and the order of `streams` ((device, stream) pairs; all streams when None)."""
    spans = np.asarray(spans, np.int64).reshape(-1, 2)
    n_iter = max(len(spans), 1)
    merged = merge_spans(spans)
    k, graph = _launched_kernels(trace, merged, device)
    ph = op_phases(trace, merged)
    gl = unique_sorted(trace.ops.api[k[graph]])
    return {
        "kernels": _kernel_rows(trace, k, graph, n_iter),
        "phases": _phase_rows(trace, k, graph, ph, n_iter),
        "graph_launches_per_iteration": float(len(gl)) / n_iter,
        "streams": stream_order(trace, streams),
    }
