"""The small-and-frequent kernel table (definitions.md §3-§4), vectorised.

Per launched kernel: API = api.end - api.start; queue = kernel.start - api.end, counted only when
>= 0 (NVIDIA's rule); kernel = kernel.end - kernel.start. Grouped by (device, kernel name).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from launchtui.analysis.config import CONFIG
from launchtui.analysis.index import trace_index
from launchtui.analysis.select import WHOLE, Selection, op_mask
from launchtui.trace import names as nm
from launchtui.trace.arrays import nonzero_index, unique_sorted
from launchtui.trace.grouping import DENSE_LIMIT, dense_groups
from launchtui.trace.model import API_LAUNCH, OP_KERNEL, Trace

def name_ids(trace: Trace, names: str = "short") -> np.ndarray:
    """Per-op grouping name id: Nsight's short name, or the distinguishing ('full') name."""
    if names == "short":
        return trace.ops.name
    if names != "full":
        raise ValueError(f"names must be 'short' or 'full', not {names!r}")
    return trace_index(trace).distinguishing_names


def name_ids_of(trace: Trace, names: str, k: np.ndarray) -> np.ndarray:
    """`name_ids(trace, names)[k]`, without a per-op array of every op's distinguishing name."""
    if names == "full":
        return trace_index(trace).distinguishing_names_of(k)
    return name_ids(trace, names)[k]


def launched_kernels(trace: Trace, sel: Selection = WHOLE) -> np.ndarray:
    """Indices of selected kernels launched by a cudaLaunch*/cuLaunch* call (not graph replays)."""
    ops = trace.ops
    m = (ops.kind == OP_KERNEL) & (ops.api >= 0) & op_mask(trace, sel)
    idx = nonzero_index(m)   # int32 while it fits: the kernel groups hold it (op_idx)
    del m
    return idx[trace.api.kind[ops.api[idx]] == API_LAUNCH]


@dataclass
class KernelGroups:
    """Per-(device, name) aggregates as arrays; one entry per group."""
    device: np.ndarray
    name: np.ndarray          # string id
    count: np.ndarray
    sum_api: np.ndarray
    max_api: np.ndarray
    min_api: np.ndarray
    queue_count: np.ndarray
    sum_queue: np.ndarray
    sum_kernel: np.ndarray
    span_start: np.ndarray
    span_end: np.ndarray
    op_idx: np.ndarray        # the launched kernels aggregated (indices into trace.ops; int32 while they fit)
    op_group: np.ndarray      # their group index (int32: `group_index`)

    def __len__(self):
        return len(self.count)


def launch_group_ids(trace: Trace, sel: Selection = WHOLE, names: str = "short"):
    """(launched kernels, device and name id per group, group index per launch): the grouping of
    `kernel_groups` without its sums, which are most of its cost: the TUI's phase column reads
    only this when `report` stored the sums."""
    k = launched_kernels(trace, sel)
    nid = name_ids_of(trace, names, k)    # first: "full" names are interned by this call
    width = len(trace.strings) + 1
    dev = trace.ops.device[k]
    d0, d1 = (int(dev.min()), int(dev.max())) if len(k) else (0, 0)
    # (device - d0) x width + name: int32 while it fits, and from 0 for the usual names (ids >= 0),
    # so dense_groups indexes its table with the key as it is (no int64 key, no shifted copy)
    key = dev.astype(np.int32 if (d1 - d0 + 1) * width < 2**31 else np.int64)
    del dev
    key -= d0
    key *= width
    key += nid
    del nid
    uniq, g = dense_groups(key, narrow=True)   # int32, as the groups hold it (group_index)
    del key
    uniq = uniq.astype(np.int64)
    return k, uniq // width + d0, uniq % width, group_index(g)


def group_index(g: np.ndarray) -> np.ndarray:
    """A per-launch group index as the groups hold it: int32 (there are far fewer than 2^31
    groups), half the bytes of the int64 the grouping gives; the groups live through the report
    and the record's top kernels (bench/MISSED.md, issue 24)."""
    return g.astype(np.int32, copy=False)


def kernel_groups(trace: Trace, sel: Selection = WHOLE, names: str = "short") -> KernelGroups:
    """Per-(device, name) aggregates of the launched kernels (definitions §3)."""
    return _aggregate(trace, *launch_group_ids(trace, sel, names))


AGG_BLOCK = 1 << 18   # launches per block: temporaries of a block, not of every launch (and cache-sized)


def _aggregate(trace: Trace, k: np.ndarray, device: np.ndarray, name: np.ndarray, g: np.ndarray) -> KernelGroups:
    """The sums of launches `k` in groups `g` (of `device`, `name`), AGG_BLOCK launches at a time:
    full-length per-launch temporaries were the cold report's peak memory (bench/MISSED.md). The
    sums add in int64 (exact; ufunc.at on integers, not bincount's float64 weights, a converted
    copy of each block) and are float64 as stored: exact while a group's total is below 2^53 ns."""
    ops, api = trace.ops, trace.api
    ng = len(device)
    big = np.iinfo(np.int64)
    count = np.bincount(g, minlength=ng)
    late_count = np.zeros(ng, np.int64)
    sum_queue, sum_api, sum_kernel = np.zeros(ng, np.int64), np.zeros(ng, np.int64), np.zeros(ng, np.int64)
    max_api, span_end = np.full(ng, big.min, np.int64), np.full(ng, big.min, np.int64)
    min_api, span_start = np.full(ng, big.max, np.int64), np.full(ng, big.max, np.int64)
    for lo in range(0, len(k), AGG_BLOCK):   # one iteration per block of launches
        # ufunc.at and gathers take numpy's fast path with intp indices (int32 ones are cast in
        # buffers at every use): the block's group, launch and call indices widened once
        kb, gb = k[lo:lo + AGG_BLOCK].astype(np.intp, copy=False), g[lo:lo + AGG_BLOCK].astype(np.intp, copy=False)
        calls = ops.api[kb].astype(np.intp, copy=False)
        call_end, start = api.end[calls], ops.start[kb]
        queue = start - call_end          # queue wait: kernel start - API end (definitions §3)
        late = queue < 0                  # no wait measurable (rare): out of the queue figures
        if late.any():
            late_count += np.bincount(gb[late], minlength=ng)
            queue[late] = 0
        np.add.at(sum_queue, gb, queue)
        api_t = call_end                  # in place: the call ends are not read again
        api_t -= api.start[calls]
        np.add.at(sum_api, gb, api_t)
        np.maximum.at(max_api, gb, api_t)
        np.minimum.at(min_api, gb, api_t)
        np.minimum.at(span_start, gb, start)
        kern = ops.end[kb]
        np.maximum.at(span_end, gb, kern)
        kern -= start
        np.add.at(sum_kernel, gb, kern)
    return KernelGroups(
        device=device, name=name, count=count,
        sum_api=sum_api.astype(np.float64), max_api=max_api, min_api=min_api,
        queue_count=count - late_count, sum_queue=sum_queue.astype(np.float64),
        sum_kernel=sum_kernel.astype(np.float64),
        span_start=span_start, span_end=span_end,
        op_idx=k, op_group=group_index(g),
    )


_FIELDS = ("device", "name", "count", "sum_api", "max_api", "min_api", "queue_count", "sum_queue", "sum_kernel",
           "span_start", "span_end")


def split_by_functor(trace: Trace, gr: KernelGroups) -> KernelGroups:
    """Short-name groups whose launches carry more than one distinguishing name (§3: one short
    name hiding several functors, `vectorized_elementwise_kernel` for fills, adds and casts alike)
    split by that name; the other groups as they are, after them the split ones (definitions §V4).
    The launches keep their order; only their group indices change. Every per-launch step runs a
    block of AGG_BLOCK launches at a time: n-long keys and copies were the 20M record's peak."""
    k, g, ng = gr.op_idx, gr.op_group, len(gr)
    if not len(k):
        return gr
    mixed = _mixed_groups(trace, k, g, ng)   # first: "full" names are interned by this call
    if not mixed.any():
        return gr
    width = len(trace.strings) + 1
    d0 = int(gr.device.min())
    base = (gr.device - d0) * width          # per group: its launches' key is base + name id
    split_keys, lut = _split_key_table(trace, k, g, mixed, base, int(base.max()) + width)
    keep = ~mixed
    new_id = np.cumsum(keep) - 1
    nkeep = int(keep.sum())
    op_group = np.empty(len(k), np.int32)
    lo = 0
    for g_b, d_b in _full_names_by_block(trace, k, g):   # one iteration per block of launches
        og = new_id[g_b]
        m_b = mixed[g_b]
        key = _pair_keys(base, g_b, d_b, m_b)
        # the split groups in (device, name) order after the kept ones: what grouping their
        # launches by (device, distinguishing name) gives (definitions §V4)
        og[m_b] = nkeep + (lut[key] if lut is not None else np.searchsorted(split_keys, key))
        op_group[lo:lo + len(g_b)] = og
        lo += len(g_b)
    # the kept groups' sums are their old ones again: integer sums, exact in any order
    return _aggregate(trace, k, np.concatenate([gr.device[keep], split_keys // width + d0]),
                      np.concatenate([gr.name[keep], split_keys % width]), op_group)


def _full_names_by_block(trace: Trace, k: np.ndarray, g: np.ndarray):
    """(group index, distinguishing name id) of AGG_BLOCK launches at a time, in launch order."""
    for lo in range(0, len(k), AGG_BLOCK):
        yield g[lo:lo + AGG_BLOCK], name_ids_of(trace, "full", k[lo:lo + AGG_BLOCK])


def _mixed_groups(trace: Trace, k: np.ndarray, g: np.ndarray, ng: int) -> np.ndarray:
    """Per group: do its launches carry more than one distinguishing name?"""
    rep = np.full(ng, -1, np.int64)      # one of each group's names, once seen; any other marks it mixed
    mixed = np.zeros(ng, bool)
    for g_b, d_b in _full_names_by_block(trace, k, g):
        unset = rep[g_b] < 0
        rep[g_b[unset]] = d_b[unset]
        mixed[g_b[d_b != rep[g_b]]] = True
    return mixed


def _pair_keys(base: np.ndarray, g_b: np.ndarray, d_b: np.ndarray, m_b: np.ndarray) -> np.ndarray:
    """The (device, distinguishing name) key, base + name id, of a block's launches in `m_b`."""
    key = base[g_b[m_b]]
    key += d_b[m_b]
    return key


def _split_key_table(trace: Trace, k, g, mixed, base, span: int):
    """(sorted distinct keys of the launches in mixed groups, key -> rank table or None). The table
    when the key range is small (the usual few devices and thousands of names), else the keys are
    ranked by a search."""
    dense = span <= DENSE_LIMIT
    present = np.zeros(span if dense else 0, bool)
    found = []
    for g_b, d_b in _full_names_by_block(trace, k, g):
        key = _pair_keys(base, g_b, d_b, mixed[g_b])
        if dense:
            present[key] = True
        else:
            found.append(unique_sorted(key))
    if not dense:
        return unique_sorted(np.concatenate(found)), None
    lut = np.cumsum(present, dtype=np.int64)
    lut -= 1
    return np.flatnonzero(present), lut


def groups_on_devices(gr: KernelGroups, devices) -> KernelGroups:
    """The groups of `devices` only, renumbered: what `kernel_groups` gives for the same selection
    restricted to those devices (groups are in (device, name) order, launches in index order)."""
    keep = np.isin(gr.device, np.asarray(list(devices), np.int64))
    if keep.all():     # one device's trace: the same groups, nothing to cut
        return gr
    new_id = np.cumsum(keep) - 1
    on = keep[gr.op_group]
    return KernelGroups(
        device=gr.device[keep], name=gr.name[keep], count=gr.count[keep], sum_api=gr.sum_api[keep],
        max_api=gr.max_api[keep], min_api=gr.min_api[keep], queue_count=gr.queue_count[keep],
        sum_queue=gr.sum_queue[keep], sum_kernel=gr.sum_kernel[keep], span_start=gr.span_start[keep],
        span_end=gr.span_end[keep], op_idx=gr.op_idx[on], op_group=group_index(new_id[gr.op_group[on]]))


def _row(trace: Trace, gr: KernelGroups, i: int) -> dict:
    n = int(gr.count[i])
    qn = int(gr.queue_count[i])
    name = trace.strings[int(gr.name[i])]
    return {
        "kernel_name": name,
        "device_id": int(gr.device[i]),
        "launch_count": n,
        "total_api_ms": round(float(gr.sum_api[i]) / 1e6, 3),
        "avg_api_us": round(float(gr.sum_api[i]) / n / 1e3, 1),
        "max_api_us": round(float(gr.max_api[i]) / 1e3, 1),
        "queue_count": qn,
        "total_queue_ms": round(float(gr.sum_queue[i]) / 1e6, 3) if qn else 0,
        "avg_queue_us": round(float(gr.sum_queue[i]) / qn / 1e3, 1) if qn else 0,
        "total_kernel_ms": round(float(gr.sum_kernel[i]) / 1e6, 3),
        "avg_kernel_us": round(float(gr.sum_kernel[i]) / n / 1e3, 3),
        "span_start_ns": int(gr.span_start[i]),
        "span_end_ns": int(gr.span_end[i]),
        "is_nccl": nm.is_nccl(name),
    }


def ranked_groups(trace: Trace, gr: KernelGroups, min_launches: int = CONFIG.min_launches,
                  max_avg_us: float = CONFIG.max_avg_us, limit: int = CONFIG.table_limit) -> np.ndarray:
    """Group indices that qualify, in the table's total order (§4), limited (0 = no limit)."""
    if not len(gr):
        return np.zeros(0, np.int64)
    mean_kernel = gr.sum_kernel / np.maximum(gr.count, 1)
    ok = (gr.count >= min_launches) & (mean_kernel < max_avg_us * 1000.0)
    idx = np.nonzero(ok)[0]
    texts = np.array([trace.strings[int(n)] for n in gr.name[idx]], dtype=object)
    # order: total API desc, launches desc, name asc, device asc (lexsort: last key is primary)
    name_rank = np.argsort(np.argsort(texts, kind="stable"), kind="stable") if len(idx) else idx
    o = np.lexsort((gr.device[idx], name_rank, -gr.count[idx], -gr.sum_api[idx]))
    idx = idx[o]
    return idx[:limit] if limit and limit > 0 else idx


def launches_of(gr: KernelGroups, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(op indices, group indices) of the launches in `groups` (e.g. the table's ranked rows): a
    table lookup per launch, not np.isin; the arrays as they are when every launch is in one."""
    wanted = np.zeros(len(gr), bool)
    wanted[groups] = True
    wanted = wanted[gr.op_group]
    if wanted.all():
        return gr.op_idx, gr.op_group
    return gr.op_idx[wanted], gr.op_group[wanted]


def _launches_counted(gr: KernelGroups, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(op indices, group indices, group count) for counting the launches of `groups`: when they
    are at least half the launches, every launch, with the other groups' launches in one extra
    group `len(gr)` (an int32 per launch, not copies of both arrays); else `launches_of`."""
    wanted = np.zeros(len(gr), bool)
    wanted[groups] = True
    wanted = wanted[gr.op_group]
    n = int(np.count_nonzero(wanted))
    if n == len(wanted) or 2 * n < len(wanted):
        return *launches_of(gr, groups), len(gr)
    return gr.op_idx, np.where(wanted, gr.op_group, np.int32(len(gr))).astype(np.int32, copy=False), len(gr) + 1


def small_kernel_table(trace: Trace, sel: Selection = WHOLE, min_launches: int = CONFIG.min_launches,
                       max_avg_us: float = CONFIG.max_avg_us, limit: int = CONFIG.table_limit,
                       names: str = CONFIG.names,
                       with_phase: bool = False, groups: KernelGroups | None = None) -> list[dict]:
    """Rows with nsys-ai's 13 keys plus `is_nccl`, ranked by total API time. `with_phase` adds
    each row's most common NVTX range (`nvtx_range`) and the share of its launches there.
    `groups`: kernel_groups(trace, sel, names) when the caller has them."""
    gr = kernel_groups(trace, sel, names) if groups is None else groups
    ranked = ranked_groups(trace, gr, min_launches, max_avg_us, limit)
    rows = [_row(trace, gr, int(i)) for i in ranked]
    if with_phase:
        from launchtui.analysis.nvtx import top_range_per_group
        top = {}
        if len(trace.ranges):
            top = top_range_per_group(trace, *_launches_counted(gr, ranked))
            top.pop(len(gr), None)   # the launches of the groups not asked for, when counted
        for r, i in zip(rows, ranked.tolist()):
            text, share = top.get(i, (None, 0.0))
            r["nvtx_range"] = trace.strings[text] if text is not None else None
            r["nvtx_share"] = round(share, 4)
    return rows


def split_nccl(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(compute rows, NCCL rows): NCCL kernels belong to communication analysis, not fusion."""
    return [r for r in rows if not r["is_nccl"]], [r for r in rows if r["is_nccl"]]


def unmatched_kernels(trace: Trace, sel: Selection = WHOLE) -> dict:
    """GPU ops with no launch row in the trace (e.g. launched before a time-sliced window)."""
    ops = trace.ops
    m = op_mask(trace, sel)
    un = m & (ops.api < 0)
    return {"count": int(un.sum()), "kernels": int((un & (ops.kind == OP_KERNEL)).sum()),
            "of_total": int(m.sum())}


def group_totals(gr: KernelGroups) -> KernelGroups:
    """Kernel groups without their per-launch arrays: what the table's rows read (kilobytes, not
    the launch indices of every kernel)."""
    import dataclasses
    return dataclasses.replace(gr, op_idx=np.zeros(0, np.int64), op_group=np.zeros(0, np.int32))
