"""Launch <-> GPU-op join and the final sort every reader applies (definitions.md §1).

Rule: op.corr == api.corr AND op.pid == api.pid (when both are known). When a correlation id is
reused, the latest API row starting at or before the op wins (ties: latest end, then smallest
thread key). Graph launches join one-to-many for free: every op of a replay carries the same id.
If no candidate starts before the op (clock skew), the earliest candidate is taken, so the join
never loses an op that a plain equi-join (NVIDIA's) would keep.
"""
from __future__ import annotations

from dataclasses import fields

import numpy as np

from launchtui.trace.arrays import unique_sorted
from launchtui.trace.model import Trace
from launchtui.trace.order import equal_runs, in_order, time_order  # noqa: F401  (in_order: readers' test)


def _group_keys(pid_a, corr_a, pid_b, corr_b):
    """Dense group ids for (pid, corr) pairs of both sides, comparable across sides."""
    pid = np.concatenate([pid_a, pid_b])
    corr = np.concatenate([corr_a, corr_b])
    order = np.lexsort((corr, pid))
    sp, sc = pid[order], corr[order]
    new = np.ones(len(order), bool)
    new[1:] = (sp[1:] != sp[:-1]) | (sc[1:] != sc[:-1])
    gid_sorted = np.cumsum(new) - 1
    gid = np.empty(len(order), np.int64)
    gid[order] = gid_sorted
    return gid[:len(pid_a)], gid[len(pid_a):]


def _unique_key_join(api_pid, api_corr, op_pid, op_corr):
    """The common case: (process, correlation) is unique among API rows, so the join is a lookup.
    `api_pid` None: processes are not matched (the key is the correlation id alone). Returns int32
    row ids (-1 unmatched), or None when keys repeat (correlation reuse) or do not fit one int64."""
    lo = min(int(api_corr.min()), int(op_corr.min()))
    hi = max(int(api_corr.max()), int(op_corr.max()))
    span = hi - lo + 1
    if span <= 0:
        return None
    budget = 4 * (len(api_corr) + len(op_corr)) + 1024
    if api_pid is None or ((api_pid == api_pid[0]).all() and (op_pid == api_pid[0]).all()):
        # one process (or processes not matched): the key is the correlation id
        p_lo, n_pids = 0, 1
        key_api, key_op = _corr_key(api_corr, lo), _corr_key(op_corr, lo)
    else:   # process indices (finalize's dense codes, -1 unknown) from the lowest present, as the high part
        p_lo = min(int(api_pid.min()), int(op_pid.min()))
        n_pids = max(int(api_pid.max()), int(op_pid.max())) - p_lo + 1
        key_api, key_op = _pair_key(api_pid, api_corr, p_lo, span, lo), _pair_key(op_pid, op_corr, p_lo, span, lo)
    if n_pids * span >= 2**62:
        return None
    size = n_pids * span
    if size <= budget:
        return _lookup_join(key_api, len(api_corr), key_op, len(op_corr), size)
    ka, ko = key_api(0, len(api_corr)), key_op(0, len(op_corr))
    order = np.argsort(ka, kind="stable")
    ks = ka[order]
    if len(ks) > 1 and not (ks[1:] != ks[:-1]).all():
        return None
    pos = np.minimum(np.searchsorted(ks, ko), len(ks) - 1)
    hit = ks[pos] == ko
    return np.where(hit, order[pos], -1).astype(np.int32)


def _corr_key(corr, lo: int):
    """Rows a..b's keys, the correlation id less `lo`: the ids as they are (views) where lo is 0."""
    if lo == 0:
        return lambda a, b: corr[a:b]
    return lambda a, b: np.subtract(corr[a:b], lo, dtype=np.int64)


def _pair_key(proc, corr, p_lo: int, span: int, lo: int):
    """Rows a..b's keys, (proc - p_lo) * span + (corr - lo) as int64, built in place in one array."""
    def key(a: int, b: int) -> np.ndarray:
        k = proc[a:b].astype(np.int64)
        k -= p_lo
        k *= span
        k += corr[a:b]
        k -= lo
        return k
    return key


LOOKUP_BLOCK = 1 << 22   # keys written, counted or read at once: bounded temporaries (32 MiB: mapped, given back)


def _lookup_join(key_api, n_api: int, key_op, n_op: int, size: int):
    """Correlation ids are dense counters per process: a direct-address table, no sort at all. A
    repeated key leaves fewer filled slots than keys: caught by counting them (None). Keys are
    made (`key_api(a, b)`: rows a..b's keys), written, counted and read block by block, so no
    n-long key, row number or read-back exists beside the table and the result."""
    lut = np.full(size, -1, np.int32)
    for a in range(0, n_api, LOOKUP_BLOCK):   # one iteration per block
        b = min(a + LOOKUP_BLOCK, n_api)
        lut[key_api(a, b)] = np.arange(a, b, dtype=np.int32)
    filled = sum(int(np.count_nonzero(lut[a:a + LOOKUP_BLOCK] >= 0)) for a in range(0, size, LOOKUP_BLOCK))
    if filled != n_api:
        return None
    out = np.empty(n_op, np.int32)
    for a in range(0, n_op, LOOKUP_BLOCK):   # one iteration per block
        b = min(a + LOOKUP_BLOCK, n_op)
        out[a:b] = lut[key_op(a, b)]
    return out


def join_ops_to_api(trace: Trace, match_process: bool = True) -> np.ndarray:
    """Index of the launching API row for every GPU op (int32), -1 when unmatched."""
    ops, api = trace.ops, trace.api
    n_ops, n_api = len(ops), len(api)
    result = np.full(n_ops, -1, np.int32)
    if n_ops == 0 or n_api == 0:
        return result
    fast = _unique_key_join(api.pid if match_process else None, api.corr, ops.pid, ops.corr)
    if fast is not None:
        return fast
    if match_process:
        api_pid, op_pid = api.pid, ops.pid
    else:
        api_pid = np.zeros(n_api, np.int64)
        op_pid = np.zeros(n_ops, np.int64)
    g_api, g_op = _group_keys(api_pid, api.corr, op_pid, ops.corr)
    thread_key = trace.threads.key[api.thread] if len(trace.threads) else np.zeros(n_api, np.int64)

    # Merge API rows and ops into one sequence ordered by (group, time, api-before-op, end, -thread);
    # the last API row preceding an op in that order is its launch if it is in the same group.
    n = n_api + n_ops
    grp = np.concatenate([g_api, g_op])
    time = np.concatenate([api.start, ops.start])
    is_op = np.concatenate([np.zeros(n_api, np.int8), np.ones(n_ops, np.int8)])
    end = np.concatenate([api.end, np.zeros(n_ops, np.int64)])
    negtk = np.concatenate([-thread_key, np.zeros(n_ops, np.int64)])
    order = np.lexsort((negtk, end, is_op, time, grp))
    is_api_sorted = is_op[order] == 0
    pos = np.where(is_api_sorted, np.arange(n), -1)
    last_api_pos = np.maximum.accumulate(pos)
    op_positions = np.nonzero(~is_api_sorted)[0]
    op_index = order[op_positions] - n_api
    cand = last_api_pos[op_positions]
    ok = cand >= 0
    cand_api = np.where(ok, order[np.maximum(cand, 0)], 0)
    same = ok & (g_api[cand_api] == g_op[op_index])
    result[op_index[same]] = cand_api[same]

    # Fallback for ops that start before every candidate: take the group's earliest API row.
    missing = op_index[~same]
    if len(missing):
        first_pos = np.full(g_api.max() + 2 if len(g_api) else 1, -1, np.int64)
        api_order = np.lexsort((api.start, g_api))
        gs = g_api[api_order]
        firsts = np.ones(len(gs), bool)
        firsts[1:] = gs[1:] != gs[:-1]
        first_pos[gs[firsts]] = api_order[firsts]
        gm = g_op[missing]
        inrange = gm < len(first_pos)
        cand2 = np.where(inrange, first_pos[np.minimum(gm, len(first_pos) - 1)], -1)
        result[missing] = cand2
    return result


def _encode_processes(trace: Trace) -> None:
    """Replace ops.pid and api.pid (the reader's int64 process keys, -1 unknown) by indices into
    `trace.processes` (model.process_col). Before the sort, so the sort and the join move 2-byte
    codes. Equal keys get equal codes and -1 stays -1, so the join's matches are unchanged."""
    # keys come in long runs: sort only the run heads (their values; where the runs are short,
    # positions held for both tables would be two more columns, so each table's are found again)
    keys = unique_sorted(np.concatenate([raw[_run_starts(raw)] for raw in (trace.api.pid, trace.ops.pid)]))
    processes = keys[keys != -1]
    dtype = np.int16 if len(processes) <= np.iinfo(np.int16).max else np.int32
    for table in (trace.api, trace.ops):
        # a code per run, repeated over its rows: the one n-long array is the narrow result
        at = _run_starts(table.pid)
        head = table.pid[at]
        code = np.searchsorted(processes, head).astype(dtype)
        code[head == -1] = -1
        table.pid = np.repeat(code, np.diff(at, append=len(table.pid)))
    trace.processes = processes


def _run_starts(raw: np.ndarray) -> np.ndarray:
    """Positions where a run of equal values starts."""
    h = np.ones(len(raw), bool)
    np.not_equal(raw[1:], raw[:-1], out=h[1:])
    return np.flatnonzero(h)


def _narrow_ids(table, name: str) -> None:
    """`table.name` as int32 (model.id_col) when every id fits (half the bytes of every id column),
    else the reader's int64 as it is."""
    a = getattr(table, name)
    i32 = np.iinfo(np.int32)
    if not len(a) or (i32.min <= int(a.min()) and int(a.max()) <= i32.max):
        setattr(table, name, a.astype(np.int32))


# Each table's sort keys after (start, end): integer columns, then name columns compared as strings
# (docs/definitions.md §9). Every column of a row is a key (ranges: all but the depth, which
# follows from the order), so only rows equal in every column stay tied.
SORT_KEYS = {"ops": (("device", "stream", "kind", "corr", "pid"), ("name", "full_name")),
             "api": (("thread", "pid", "corr", "kind"), ("name",)),
             "ranges": (("thread", "kind"), ("domain", "text")),
             "overheads": (("thread", "corr", "type"), ())}


def finalize(trace: Trace, match_process: bool = True) -> Trace:
    """Sort every table into its total order (SORT_KEYS) and join ops to their launches. Readers
    call this last; what they read is then a function of the set of rows, not of the file's order."""
    trace.ops.coerce()
    trace.api.coerce()
    _encode_processes(trace)
    # ids narrowed before the sort and the join: each moves and keys on 4-byte ids, and the join's
    # lookup runs while the model is whole, so 8 bytes per op and per call less at its peak
    for table, name in ((trace.ops, "stream"), (trace.ops, "corr"), (trace.api, "corr")):
        _narrow_ids(table, name)
    for name, (ints, names) in SORT_KEYS.items():
        table = getattr(trace, name) if name in ("ops", "api") else getattr(trace, name).coerce()
        if len(table):
            order, start = time_order(table.start, table.end, *(getattr(table, k) for k in ints),
                                      names=tuple(getattr(table, k) for k in names), strings=trace.strings)
            if order is not None:   # column by column, in place: each unsorted column is freed as
                if name == "ops" and len(trace.op_graph) == len(table):   # graph ids follow their ops
                    trace.op_graph = np.take(trace.op_graph, order)
                table.start = start  # soon as its sorted copy exists (peak: one column, not a table)
                del start
                for f in fields(table):
                    if f.name != "start":
                        setattr(table, f.name, np.take(getattr(table, f.name), order))
                del order
    _nest_equal_ranges(trace.ranges)
    trace.threads.coerce()
    trace.ops.api = None     # the reader's placeholder goes before the join's result is allocated
    trace.ops.api = join_ops_to_api(trace, match_process)
    return trace


def _nest_equal_ranges(rg) -> None:
    """Ranges with the same thread, start and end nest in table order (definitions.md §7, §9): the
    first (by kind, then domain and text as strings) is the outermost. Readers number depths in
    file order, so equal ranges get their depths handed out again, smallest first, per domain."""
    tie = equal_runs(rg.start, rg.end, rg.thread)
    if not len(tie):
        return
    members = unique_sorted(np.concatenate([tie, tie + 1]))
    block = np.cumsum(~np.isin(members, tie + 1))
    dom = rg.domain[members]
    by_depth = np.lexsort((rg.depth[members], dom, block))
    by_row = np.lexsort((members, dom, block))
    depth = rg.depth.copy()
    depth[members[by_row]] = rg.depth[members[by_depth]]
    rg.depth = depth
