"""Phases: normalised NVTX / annotation names and the phase of each GPU op at a chosen level
(docs/definitions.md §V5).

PyTorch's `emit_nvtx` appends `, seq = N`, `, op_id = M`, `, sizes = [...]` (and `stashed seq`,
`input_op_ids`) to every range, so no two names are equal; the suffix is stripped so ranges group.
A phase is the path of normalised range names enclosing an op's launch call, starting at the
outermost range inside the iteration (level 1) and going `level` ranges deep.
"""
from __future__ import annotations

import re

import numpy as np

from launchtui.analysis import nvtx
from launchtui.trace.arrays import unique_rows, unique_sorted
from launchtui.trace.grouping import dense_groups
from launchtui.trace.model import RANGE_PUSHPOP, Trace

# the first emit_nvtx key and everything after it
_EMIT_NVTX_SUFFIX = re.compile(r",\s*(?:stashed seq|seq|op_id|sizes|input_op_ids|input_dims)\s*=.*$", re.S)


def normalise(name: str) -> str:
    """`aten::mul, seq = 3, op_id = 7, sizes = [[2], []]` -> `aten::mul`."""
    return _EMIT_NVTX_SUFFIX.sub("", name).strip()


def normalised_text(trace: Trace) -> np.ndarray:
    """Per range: the string id of its normalised name (interned once per distinct text)."""
    rg = trace.ranges
    if not len(rg):
        return np.zeros(0, np.int32)
    uniq, inv = unique_sorted(rg.text, return_inverse=True)
    ids = np.fromiter((trace.strings.intern(normalise(trace.strings[int(u)])) for u in uniq.tolist()),
                      np.int32, len(uniq))  # once per distinct name
    return ids[inv.reshape(-1)]


def parents(trace: Trace) -> np.ndarray:
    """Per range: the enclosing push/pop range one level up on the same thread and domain (-1 at
    depth 0 or for start/end ranges). Same-depth ranges of a thread are disjoint, so the parent of
    a range at depth d+1 is the depth-d range of its thread with the latest start at or before its
    own (searched on one combined (thread, start) key)."""
    rg = trace.ranges
    out = np.full(len(rg), -1, np.int64)
    pp = np.nonzero(rg.kind == RANGE_PUSHPOP)[0]
    if len(pp):
        _, grp = dense_groups(rg.thread[pp].astype(np.int64) * (1 << 32) + rg.domain[pp].astype(np.int64) + 1)
        t0 = int(rg.start[pp].min())
        span = int(rg.start[pp].max()) - t0 + 1
        comb = grp * span + (rg.start[pp] - t0)
        dep = rg.depth[pp]
        for d in range(1, int(dep.max()) + 1):  # one pass per nesting level
            up = np.nonzero(dep == d - 1)[0]
            me = np.nonzero(dep == d)[0]
            if not len(up) or not len(me):
                continue
            up = up[np.argsort(comb[up], kind="stable")]
            j = np.searchsorted(comb[up], comb[me], side="right") - 1
            ok = j >= 0
            cand = up[np.maximum(j, 0)]
            ok &= (grp[cand] == grp[me]) & (rg.end[pp[cand]] >= rg.end[pp[me]])
            out[pp[me[ok]]] = pp[cand[ok]]
    return out


def ancestor_at_depth(trace: Trace, idx: np.ndarray, depth, par: np.ndarray | None = None) -> np.ndarray:
    """For ranges idx: the enclosing range at `depth` (per element); -1 when the range is not that
    deep or idx is -1. `par` is `parents(trace)` when the caller already has it."""
    rg = trace.ranges
    par = parents(trace) if par is None else par
    cur = np.asarray(idx, np.int64).copy()
    depth = np.broadcast_to(np.asarray(depth, np.int64), cur.shape)
    valid = cur >= 0
    cur[valid & (rg.depth[np.maximum(cur, 0)] < depth)] = -1
    while True:  # one pass per level climbed
        climb = (cur >= 0) & (rg.depth[np.maximum(cur, 0)] > depth)
        if not climb.any():
            return cur
        cur[climb] = par[cur[climb]]


def op_phase_keys(trace: Trace, ops: np.ndarray, base_depth, level: int = 1):
    """Phase of each op as (key per op, texts): texts[key] is the path of normalised names from
    the range at `base_depth` (the first level inside the iteration) down `level` ranges, cut at
    the op's innermost range. Ops with no range at `base_depth` get key -1."""
    ops = np.asarray(ops, np.int64)
    keys = np.full(len(ops), -1, np.int64)
    if not len(trace.ranges) or not len(ops):
        return keys, []
    inner = nvtx.op_ranges(trace)[ops]
    base = np.broadcast_to(np.asarray(base_depth, np.int64), ops.shape)
    norm = normalised_text(trace)
    par = parents(trace)
    cols = []
    for k in range(max(int(level), 1)):  # one column per path component
        anc = ancestor_at_depth(trace, inner, base + k, par)
        cols.append(np.where(anc >= 0, norm[np.maximum(anc, 0)], -1).astype(np.int64))
    mat = np.stack(cols, axis=1)
    has = mat[:, 0] >= 0
    if not has.any():
        return keys, []
    uniq, inv = unique_rows(mat[has], return_inverse=True)
    texts = [" > ".join(trace.strings[int(t)] for t in row if t >= 0) for row in uniq.tolist()]
    keys[has] = inv.reshape(-1)
    return keys, texts


def group_phases(keys: np.ndarray, texts: list[str], group: np.ndarray, n_groups: int) -> list[tuple]:
    """Per group of ops: (its most common phase, that phase's share of the group's ops). Ops outside
    every range count as a phase of their own: when they are the most common, the phase is None and
    the share is theirs (a kernel launched mostly from an unannotated thread has no phase)."""
    total = np.bincount(group, minlength=n_groups)
    has = keys >= 0
    width = max(len(texts), 1)
    cnt = np.bincount(group[has] * width + keys[has], minlength=n_groups * width).reshape(n_groups, width)
    best = cnt.argmax(axis=1)
    top = cnt[np.arange(n_groups), best]
    none = total - cnt.sum(axis=1)
    out = []
    for i in range(n_groups):  # per group (the table's rows)
        if total[i] == 0:
            out.append((None, 0.0))
        elif top[i] > 0 and top[i] >= none[i]:
            out.append((texts[int(best[i])], float(top[i]) / float(total[i])))
        else:
            out.append((None, float(none[i]) / float(total[i])))
    return out
