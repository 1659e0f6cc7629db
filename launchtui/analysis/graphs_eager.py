"""The eager remainder of a step that runs graphs (docs/definitions.md §12.4): per iteration, the
launch calls that still run eagerly against the ops replayed from graphs, and which kernels and
call sites the eager launches come from (a sampler, `reshape_and_cache` between the pieces of a
piecewise graph)."""
from __future__ import annotations

import numpy as np

from launchtui.analysis.graphs_report import scope_integrity
from launchtui.analysis.iterations import Iterations
from launchtui.analysis.sources import dominant_sites
from launchtui.trace.arrays import index_type, median_of
from launchtui.trace.grouping import dense_groups
from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, Trace
from launchtui.trace.order import string_ranks

TOP_EAGER = 8


def _stats(v: np.ndarray) -> dict:
    return {"median": float(median_of(v)), "min": int(v.min()), "max": int(v.max())}


def eager_remainder(trace: Trace, it: Iterations, device: int, calls: np.ndarray) -> dict:
    """`calls`: the device's launch calls (exposed.device_launch_calls), in start order."""
    api, ops = trace.api, trace.ops
    n = len(it)
    k = it.index_of(api.start[calls])
    inside = k >= 0
    calls, k = calls[inside], k[inside]
    del inside
    kind = api.kind[calls]
    eager, graph = kind == API_LAUNCH, kind == API_GRAPH_LAUNCH
    del kind
    on = np.flatnonzero(ops.device == device)
    # each op's position in `calls` by a lookup table (the spare last slot answers unmatched ops' -1),
    # in 32 bits while it fits: one slot per API row (20M: the record's peak)
    pos = np.full(len(api) + 1, -1, index_type(len(calls)))
    pos[calls] = np.arange(len(calls))
    at = pos[ops.api[on]]
    del pos
    hit = at >= 0
    at, on = at[hit], on[hit]
    del hit
    per_call = np.bincount(at, minlength=len(calls))
    name_at = np.full(len(calls), -1, np.int64)    # per call: its op's short name (an eager call has one op)
    name_at[at] = ops.name[on]
    del at, on
    e_n = np.bincount(k[eager], minlength=n)
    g_n = np.bincount(k[graph], minlength=n)
    r_n = np.bincount(k[graph], weights=per_call[graph], minlength=n).astype(np.int64)
    share = np.where(e_n + r_n > 0, r_n / np.maximum(e_n + r_n, 1), 0.0)
    return {"iterations": n, "eager_launches": _stats(e_n), "graph_launches": _stats(g_n), "replayed_ops": _stats(r_n),
            "graphed_share": round(float(median_of(share)), 4),
            "eager_kernels": _eager_kernels(trace, calls[eager], name_at[eager], n)}


def _eager_kernels(trace: Trace, ecalls: np.ndarray, names: np.ndarray, n_it: int) -> list[dict]:
    """The eager launches (`names`: each one's kernel short name) by kernel name, most first (ties:
    the name), with their main call site."""
    if not len(ecalls):
        return []
    uniq, group = dense_groups(names)     # string ids span a small range: a table, not a hash or sort
    cnt = np.bincount(group, minlength=len(uniq))
    order = np.lexsort((string_ranks(trace.strings, uniq), -cnt))[:TOP_EAGER]
    sites = dominant_sites(trace, ecalls, group, len(uniq))
    return [{"kernel_name": trace.strings[int(uniq[i])], "launches": int(cnt[i]),
             "launches_per_iteration": round(int(cnt[i]) / max(n_it, 1), 1),
             "site": sites[i]["site"] if sites[i] else None, "site_share": sites[i]["share"] if sites[i] else None}
            for i in order.tolist()]


def in_record(trace: Trace, g: dict, unrecorded: np.ndarray, it, device: int, calls: np.ndarray) -> None:
    """What the record adds once its iterations are known: the integrity gate's scope and, when
    graphs replay, the eager remainder per iteration (§12.4)."""
    scope_integrity(trace, g, unrecorded, it.index_of)
    if g["replays"]["graph_launches"]:
        g["eager_per_iteration"] = eager_remainder(trace, it, device, calls)
