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

from launchtui.analysis import memo, nvtx
from launchtui.trace.arrays import index_type, unique_sorted
from launchtui.trace.grouping import dense_groups, unique_rows
from launchtui.trace.model import RANGE_PUSHPOP, Trace

# the first emit_nvtx key and everything after it
_EMIT_NVTX_SUFFIX = re.compile(r",\s*(?:stashed seq|seq|op_id|sizes|input_op_ids|input_dims)\s*=.*$", re.S)


NORMALISED_TEXT_KEY = "analysis.phases.normalised_text"   # memo key (analysis/memo.py)

_MODULE_INDEX = re.compile(r"(?<=[A-Za-z_])\.\d+(?=[.)\s]|$)")   # `blocks.18.` in a dotted module path


def normalise(name: str) -> str:
    """`aten::mul, seq = 3, op_id = 7, sizes = [[2], []]` -> `aten::mul`; a module path's numeric
    component folds to N (`FSDP::pre_forward (blocks.18._checkpoint_wrapped_module)` ->
    `... (blocks.N._checkpoint_wrapped_module)`), so one phase's layers add up, not rank apart."""
    cut = name.find(",")      # no suffix can start before the first comma
    if cut >= 0:
        suffix = _EMIT_NVTX_SUFFIX.search(name, cut)
        if suffix is not None:
            name = name[:suffix.start()]
    name = name.strip()
    return _MODULE_INDEX.sub(".N", name) if "." in name else name


def normalised_text(trace: Trace) -> np.ndarray:
    """Per range: the string id of its normalised name (interned once per distinct text). Kept in
    the trace's memo: an emit_nvtx trace's names are all distinct (one regex each, ~2 µs), and
    the record asks once per phase level."""
    return memo.of(trace).get(NORMALISED_TEXT_KEY, lambda: _normalised_text(trace))


def _normalised_text(trace: Trace) -> np.ndarray:
    rg = trace.ranges
    if not len(rg):
        return np.zeros(0, np.int32)
    uniq, inv = unique_sorted(rg.text, return_inverse=True)
    ids = trace.strings.intern_many([normalise(trace.strings[u]) for u in uniq.tolist()])  # once per distinct name
    out = ids[inv.reshape(-1)]
    out.setflags(write=False)   # shared by every asker
    return out


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


def _path_matrix(trace: Trace, inner: np.ndarray, base: np.ndarray, level: int) -> np.ndarray:
    """Per innermost range: the normalised names from depth `base` down `level` ranges (-1 pads)."""
    norm = normalised_text(trace)
    par = parents(trace)
    cols = []
    for k in range(max(int(level), 1)):  # one column per path component
        anc = ancestor_at_depth(trace, inner, base + k, par)
        cols.append(np.where(anc >= 0, norm[np.maximum(anc, 0)], -1).astype(np.int64))
    return np.stack(cols, axis=1)


def _paths_by_range(trace: Trace, inner: np.ndarray, base: np.ndarray, level: int):
    """(table, row per op): `_path_matrix` once per distinct (base, range) pair, not once per op
    (an iteration's launches share a few thousand ranges: the record's CPU, bench/MISSED.md).
    Row 0 of each base's block is the empty path (range -1)."""
    n = len(trace.ranges) + 1
    if base.ndim == 0 or not len(base) or (base == base[0]).all():
        bvals, bi = np.asarray(base, np.int64).reshape(-1)[:1], 0
    else:
        bvals, bi = unique_sorted(base, return_inverse=True)
    # per op: int32 while every code fits (one of the per-op arrays at the record's peak, 20M)
    code = np.add(inner, 1, dtype=np.int32 if len(bvals) * n < 2**31 else np.int64)
    if len(bvals) > 1:
        code += (bi * n).astype(code.dtype, copy=False)
    used = np.zeros(len(bvals) * n, bool)
    used[code] = True
    pairs = np.flatnonzero(used)
    del used
    # rows as int32 while they fit: `row` is one of the per-op arrays of the record's peak (by_phase)
    slot = np.zeros(len(bvals) * n, np.int32 if len(pairs) < 2**28 else np.int64)   # 2^28: room for the blocks appended
    slot[pairs] = np.arange(len(pairs))
    if not len(trace.ranges):
        return np.full((len(pairs), max(int(level), 1)), -1, np.int64), slot[code]
    return _path_matrix(trace, pairs % n - 1, bvals[pairs // n], level), slot[code]


def _keys(trace: Trace, table: np.ndarray, row: np.ndarray):
    """Keys per op from its path `table[row]` (-1 without one), texts per key. Keys number the distinct paths
    present in the order of their texts as strings (then their length), so a tie between
    phases goes to the first text, never to the first string interned (definitions.md §9)."""
    path = table[:, 0] >= 0               # per row; an op's key is its row's (-1 without a path)
    used = np.zeros(len(table), bool)     # rows some op has: marked, not counted (bincount copies
    used[row] = True                      # `row` to int64, one more per-op array at the record's peak)
    present = np.flatnonzero(used & path)
    # keys count distinct paths, at most the table's rows: 32 bits while they fit, as the per-op
    # keys are the largest block at the record's peak (20M, by_phase: bench/MISSED.md)
    key_type = index_type(len(table))
    if not len(present):
        return np.full(len(row), -1, key_type), []
    uniq, inv = unique_rows(table[present], return_inverse=True)
    parts = [[trace.strings[int(t)] for t in r if t >= 0] for r in uniq.tolist()]
    by_text = sorted(range(len(parts)), key=lambda i: (" > ".join(parts[i]), len(parts[i])))
    rank = np.empty(len(parts), key_type)
    rank[by_text] = np.arange(len(parts))
    key_of = np.full(len(table), -1, key_type)
    key_of[present] = rank[inv.reshape(-1)]
    texts = [" > ".join(parts[i]) for i in by_text]
    return key_of[row], texts


# which rule gave an op its phase (docs/definitions.md §V5)
RULE_NONE, RULE_RANGE, RULE_MAIN_THREAD, RULE_BACKWARD = 0, 1, 2, 3
RULE_NAMES = {RULE_RANGE: "range", RULE_MAIN_THREAD: "main thread", RULE_BACKWARD: "backward link"}
BACKWARD_PHASE = "backward (autograd thread)"


def op_indices(ops) -> np.ndarray:
    """`ops` as an index array in its own integer dtype (the kernel groups' are int32: an int64
    copy per launch at the record's peak, 20M), int64 for anything else (a list, an empty one)."""
    ops = np.asarray(ops)
    return ops if ops.dtype.kind in "iu" else ops.astype(np.int64)


def main_thread(trace: Trace, ops: np.ndarray, base_depth: int, iter_starts=None) -> int:
    """The thread whose ranges time the phases of other threads' launches: the thread of the ranges
    that mark the iterations (those at `base_depth` - 1 starting at `iter_starts`); without such
    ranges, of the threads holding a push/pop range at `base_depth`, the one launching most of
    `ops`; -1 if none (ties: the lowest thread id)."""
    rg = trace.ranges
    ops = op_indices(ops)
    if not len(rg) or not len(ops):
        return -1
    pp = rg.kind == RANGE_PUSHPOP
    if base_depth > 0 and iter_starts is not None and len(iter_starts):
        at = np.sort(np.asarray(iter_starts, np.int64))   # membership by binary search (np.isin sorts both)
        j = np.minimum(np.searchsorted(at, rg.start), len(at) - 1)
        marks = rg.thread[pp & (rg.depth == base_depth - 1) & (at[j] == rg.start)]
        if len(marks):
            return int(np.argmax(np.bincount(marks)))
    cand = unique_sorted(rg.thread[pp & (rg.depth == base_depth)])
    if not len(cand):
        return -1
    th = trace.api.thread[trace.ops.api[ops[trace.ops.api[ops] >= 0]]]
    n = np.bincount(th, minlength=int(cand.max()) + 1)[cand] if len(th) else np.zeros(len(cand), np.int64)
    return int(cand[np.argmax(n)])


def attributed_phase_keys(trace: Trace, ops: np.ndarray, base_depth, level: int = 1, main: int = -1):
    """Phase of each op as (keys, texts, rule per op): texts[key] is the path of normalised names
    from the range at `base_depth` (the first level inside the iteration) down `level` ranges, cut
    at the op's innermost range (rule range); key -1 when none. For a launch with no range of its
    own at the base depth, made on a thread other than `main` (PyTorch's autograd thread carries none):
    the range open on `main` at the launch call's start (rule main thread); else, when its call
    stack was linked to the forward op by `Sequence number` (Kineto), the phase `backward
    (autograd thread)` (rule backward link)."""
    from launchtui.trace.model import STACK_BACKWARD
    ops = op_indices(ops)
    rule = np.zeros(len(ops), np.int8)
    if not len(ops):
        return np.zeros(0, np.int64), [], rule
    base = np.broadcast_to(np.asarray(base_depth, np.int64), ops.shape)
    # each op's path is a row of `table` (its innermost range's, then the main thread's, then the
    # backward-linked copy of the first block): rows per range, not per op
    inner = nvtx.op_ranges(trace)[ops] if len(trace.ranges) else np.full(len(ops), -1, np.int64)
    table, row = _paths_by_range(trace, inner, base, level)
    del inner
    a = trace.ops.api[ops]                # after the paths: one per-op array fewer at the record's peak
    has_path = (table[:, 0] >= 0)[row]   # per row, then one gather per op
    rule[has_path] = RULE_RANGE
    if len(trace.ranges):
        table = _main_thread_paths(trace, table, row, rule, a, has_path, base, level, main)
    del has_path
    st = trace.api_stacks
    if len(st) == len(trace.api) and len(st):
        linked = (rule == RULE_NONE) & (a >= 0) & (st.via[np.maximum(a, 0)] == STACK_BACKWARD)
        if linked.any():    # a copy of the table with the backward phase as its first name
            back = table.copy()
            back[:, 0] = trace.strings.intern(BACKWARD_PHASE)
            row[linked] += len(table)
            rule[linked] = RULE_BACKWARD
            table = np.concatenate([table, back])
    del a    # the keys last, with no other per-op array than the rows: the record's peak (20M)
    keys, texts = _keys(trace, table, row)
    return keys, texts, rule


def _main_thread_paths(trace: Trace, table: np.ndarray, row: np.ndarray, rule: np.ndarray, a: np.ndarray,
                       has_path: np.ndarray, base: np.ndarray, level: int, main: int) -> np.ndarray:
    """The main-thread rule of `attributed_phase_keys`: ops without a path of their own, launched
    on another thread than `main`, take the path of the range open on `main` at their call's start.
    Sets their `row` (into the returned table, `table` with those paths appended) and `rule` in
    place; its per-op temporaries go with the call."""
    api = trace.api
    other = ~has_path
    other &= a >= 0
    other &= main >= 0
    if main >= 0 and other.any():       # the thread test on the ops without a path only
        cand = np.flatnonzero(other)
        other[cand[api.thread[a[cand]] == main]] = False
        del cand
    if not other.any():
        return table
    at = nvtx.innermost_at(trace, np.full(int(other.sum()), main), api.start[a[other]])
    sub, sub_row = _paths_by_range(trace, at, base[other], level)
    got = sub[sub_row, 0] >= 0
    idx = np.nonzero(other)[0][got]
    row[idx] = len(table) + sub_row[got]
    rule[idx] = RULE_MAIN_THREAD
    return np.concatenate([table, sub])


def _best(keys: np.ndarray, width: int, group: np.ndarray, n_groups: int):
    """Per group: (total ops, most common key, its count, ops without a key). One count of
    (group, key + 1) pairs: column 0 holds the ops without a key (-1), so no masked copies."""
    w1 = width + 1
    code = np.asarray(group).astype(np.int64)
    code *= w1
    code += keys
    code += 1
    cnt = np.bincount(code, minlength=n_groups * w1).reshape(n_groups, w1)
    del code
    total = cnt.sum(axis=1)
    best = cnt[:, 1:].argmax(axis=1)
    return total, best, cnt[np.arange(n_groups), best + 1], cnt[:, 0].copy()


def group_phases(keys: np.ndarray, texts: list[str], group: np.ndarray, n_groups: int) -> list[tuple]:
    """Per group of ops: (its most common phase, that phase's share of the group's ops). Ops outside
    every range count as a phase of their own: when they are the most common, the phase is None and
    the share is theirs (a kernel launched mostly from an unannotated thread has no phase)."""
    return _phases(_best(keys, max(len(texts), 1), group, n_groups), texts)


def group_rules(keys: np.ndarray, texts: list[str], rule: np.ndarray, group: np.ndarray, n_groups: int) -> list:
    """Per group: the rule (RULE_NAMES) that attributed most of the ops holding its phase
    (`group_phases`'s choice); None when the group has no phase."""
    return _rules(_best(keys, max(len(texts), 1), group, n_groups), keys, rule, group, n_groups)


def group_phases_and_rules(keys: np.ndarray, texts: list[str], rule: np.ndarray, group: np.ndarray,
                           n_groups: int) -> tuple[list, list]:
    """(group_phases, group_rules) from one count of keys per group."""
    b = _best(keys, max(len(texts), 1), group, n_groups)
    return _phases(b, texts), _rules(b, keys, rule, group, n_groups)


def _phases(b, texts: list[str]) -> list[tuple]:
    total, best, top, none = b
    out = []
    for i in range(len(total)):  # per group (the table's rows)
        if total[i] == 0:
            out.append((None, 0.0))
        elif top[i] > 0 and top[i] >= none[i]:
            out.append((texts[int(best[i])], float(top[i]) / float(total[i])))
        else:
            out.append((None, float(none[i]) / float(total[i])))
    return out


def _rules(b, keys: np.ndarray, rule: np.ndarray, group: np.ndarray, n_groups: int) -> list:
    total, best, top, none = b
    has_phase = (top >= none) & (top > 0)             # per group, then one gather per op
    won = keys == np.where(has_phase, best, -2)[group]   # best >= 0: only ops with a key match
    cnt = np.bincount(group[won] * 4 + rule[won], minlength=n_groups * 4).reshape(n_groups, 4)
    return [RULE_NAMES.get(int(r)) if cnt[i].sum() else None for i, r in enumerate(cnt.argmax(axis=1))]
