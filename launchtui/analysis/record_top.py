"""The case record's top small kernels (docs/definitions.md §V4): kernels launched inside the
iterations, grouped as the small-kernel table groups them but split where one short name hides
several functors, qualified by the share of their launches under the time threshold, NCCL set
apart, ranked by launch cost per iteration; each shown row with its phase, call site and fix."""
from __future__ import annotations

import numpy as np

from launchtui.analysis import iterations as itr
from launchtui.analysis.fixes import rule_for
from launchtui.analysis.launches import split_by_functor
from launchtui.analysis.record_options import RecordOptions
from launchtui.analysis.phases import attributed_phase_keys, group_phases_and_rules, main_thread
from launchtui.analysis.select import Selection
from launchtui.analysis.shared import Shared
from launchtui.analysis.sources import dominant_sites
from launchtui.trace import names as nm
from launchtui.trace.arrays import median_of
from launchtui.trace.grouping import dense_groups
from launchtui.trace.model import Trace

# a group is small when at least this share of its launches run under the time threshold (§V4)
SMALL_SHARE = 0.5
LAUNCH_BLOCK = 1 << 21      # launches read at a time


def top_kernels(trace: Trace, sel: Selection, it: itr.Iterations, devices: list[int], opt: RecordOptions,
                 shared: Shared):
    """Small kernels launched inside the iterations, ranked by launch cost per iteration."""
    whole = shared.kernel_groups_on(sel, devices, opt.names)
    gr = split_by_functor(trace, whole) if opt.names == "short" else whole
    ops, api = trace.ops, trace.api
    k, g = gr.op_idx, gr.op_group
    a = ops.api[k]
    inside = np.empty(len(k), bool)
    for i in range(0, len(k), LAUNCH_BLOCK):    # the launch starts gathered a block at a time
        inside[i:i + LAUNCH_BLOCK] = it.index_of(api.start[a[i:i + LAUNCH_BLOCK]]) >= 0
    count, sum_api, sum_kern, qn, sum_q = _sums_inside(trace, gr, k, g, a, inside)
    under = _under_inside(trace, k, g, inside, len(gr), opt.max_avg_us * 1e3)
    family = count if gr is whole and opt.names == "short" else _family_counts(trace, gr, count)
    ng = len(gr)
    names = [trace.strings[int(n)] for n in gr.name]
    mean_k = sum_kern / np.maximum(count, 1)
    share = under / np.maximum(count, 1)
    # at least half the launches under the threshold: a few long instances do not hide a small kernel
    small = share >= SMALL_SHARE
    ok = (family >= opt.min_launches) & small & (count > 0)
    nccl = np.array([nm.is_nccl(n) for n in names], bool) if ng else np.zeros(0, bool)
    # order: launch cost per iteration desc, then launches desc, name, device (definitions §4)
    order = sorted(range(ng), key=lambda i: (-sum_api[i], -count[i], names[i], int(gr.device[i])))
    qualified = [i for i in order if ok[i] and not nccl[i]]
    cand = [] if qualified else [i for i in order if count[i] and not nccl[i] and not ok[i]]
    # distance: how far from qualifying, as a ratio (1 = on the line): launches short of the
    # minimum, the share of launches under the threshold short of half; ties by mean kernel time
    dist = {i: max(opt.min_launches / family[i], SMALL_SHARE / share[i] if share[i] else np.inf) for i in cand}
    near = sorted(cand, key=lambda i: (dist[i], mean_k[i], names[i]))[:3]
    shown = qualified[:opt.top] + [i for i in order if ok[i] and nccl[i]] + near
    # phase, call site and full name only for the groups shown: each is the group's own launches'
    # (the phase keys rank paths by content, so a subset keeps their order and the ties' choice)
    phase, rules, source, full_names, median = _shown_groups(trace, it, opt, k, g, a, inside, ng, shown)
    n_it = max(len(it), 1)

    def row(i: int) -> dict:
        ph, ph_share = phase[i]
        short_name, full_name = full_names[i]
        rule, fix = rule_for(short_name or names[i], ph, full_name)
        return {"kernel_name": names[i], "device_id": int(gr.device[i]), "launches": int(count[i]),
                "launches_per_iteration": round(float(count[i]) / n_it, 1),
                "launch_cost_per_iteration_ms": round(float(sum_api[i]) / n_it / 1e6, 3),
                "avg_api_us": round(float(sum_api[i]) / count[i] / 1e3, 1),
                "avg_queue_us": round(float(sum_q[i]) / qn[i] / 1e3, 1) if qn[i] else 0,
                "avg_kernel_us": round(float(mean_k[i]) / 1e3, 3),
                "median_kernel_us": round(median[i] / 1e3, 3),
                "share_under_threshold": round(float(share[i]), 4),
                "phase": ph, "phase_share": round(ph_share, 4), "phase_rule": rules[i], "fix_rule": rule, "fix": fix, "source": source[i]}

    def miss(i: int) -> str:
        fam = f" ({full_names[i][0]}, every functor)" if family[i] != count[i] else ""
        return "; ".join(
            ([f"{family[i]} launches < {opt.min_launches}{fam}"] if family[i] < opt.min_launches else [])
            + ([f"{share[i]:.0%} of launches < {opt.max_avg_us:g} µs (median {median[i] / 1e3:.1f} µs)"]
               if not small[i] else []))

    top = [row(i) for i in qualified[:opt.top]]
    nccl_rows = [row(i) for i in order if ok[i] and nccl[i]]
    table_api_ns = float(sum_api[[i for i in order if ok[i]]].sum()) if ok.any() else 0.0
    misses = [dict(row(i), misses=miss(i)) for i in near] if not qualified else []
    why = "" if qualified else _why_empty(opt, ng, [(family[i] < opt.min_launches, not small[i]) for i in cand])
    return top, nccl_rows, misses, why, table_api_ns


def _why_empty(opt: RecordOptions, ng: int, cand: list[tuple[bool, bool]]) -> str:
    """Why no kernel qualifies, from each candidate's (too few launches, too slow)."""
    if not cand:
        return "no kernel launches inside the iterations" if not ng else "only NCCL kernels qualify"
    few = sum(1 for f, _ in cand if f)
    slow = sum(1 for _, s in cand if s)
    return (f"no kernel runs < {opt.max_avg_us:g} µs in at least half of >= {opt.min_launches} launches: "
            f"{slow} of {len(cand)} kernels run >= {opt.max_avg_us:g} µs in most launches, "
            f"{few} have fewer launches")


def _family_counts(trace: Trace, gr, count: np.ndarray) -> np.ndarray:
    """Per group: the launches (`count`) of every group of its short name on its device, the rows
    of one split short name pooled (definitions.md §V4: the launch count qualifies the family)."""
    short = np.zeros(len(gr), np.int64)
    short[gr.op_group] = trace.ops.name[gr.op_idx]     # every launch of a group has its short name
    key = gr.device.astype(np.int64) * (len(trace.strings) + 1) + short
    _, fam = dense_groups(key)
    return np.bincount(fam, weights=count, minlength=len(gr)).astype(np.int64)[fam]


def _under_inside(trace: Trace, k: np.ndarray, g: np.ndarray, inside: np.ndarray, ng: int,
                  threshold_ns: float) -> np.ndarray:
    """Per group: its launches inside the iterations whose kernel ran under `threshold_ns` (strict)."""
    ops = trace.ops
    out = np.zeros(ng, np.int64)
    for i in range(0, len(k), LAUNCH_BLOCK):    # a block of launches at a time: no per-launch copies
        kb, gb, ib = k[i:i + LAUNCH_BLOCK], g[i:i + LAUNCH_BLOCK], inside[i:i + LAUNCH_BLOCK]
        short = ops.end[kb]
        short -= ops.start[kb]
        short = short < threshold_ns
        short &= ib
        out += np.bincount(gb[short], minlength=ng)
    return out


def _sums_inside(trace: Trace, gr, k: np.ndarray, g: np.ndarray, a: np.ndarray, inside: np.ndarray):
    """Per group, over its launches inside the iterations (`inside`, per launch): count, launch API
    ns, kernel ns, launches with a queue wait and their wait ns (definitions.md §3, §V4). With few
    launches outside, the groups' own totals less those of the launches outside: the same exact
    integers (float64 sums of integers stay exact below 2^53 ns), from a pass over the few."""
    ops, api = trace.ops, trace.api
    ng = len(gr)
    n_out = len(inside) - int(np.count_nonzero(inside))
    few_out = 2 * n_out <= len(inside)
    pick = ~inside if few_out else inside
    k, g, a = k[pick], g[pick], a[pick]
    count = np.bincount(g, minlength=ng)
    # bincount casts its weights to float64 itself: one temporary per sum, freed as soon as summed
    sum_api = np.bincount(g, weights=api.end[a] - api.start[a], minlength=ng)
    sum_kern = np.bincount(g, weights=ops.end[k] - ops.start[k], minlength=ng)
    queue = ops.start[k] - api.end[a]
    has_q = queue >= 0
    qn = np.bincount(g, weights=has_q, minlength=ng)
    queue[~has_q] = 0
    sum_q = np.bincount(g, weights=queue, minlength=ng)
    del queue, has_q
    if few_out:
        return (gr.count - count, gr.sum_api - sum_api, gr.sum_kernel - sum_kern,
                gr.queue_count - qn, gr.sum_queue - sum_q)
    return count, sum_api, sum_kern, qn, sum_q


def _shown_groups(trace: Trace, it: itr.Iterations, opt: RecordOptions, k: np.ndarray, g: np.ndarray,
                  a: np.ndarray, inside: np.ndarray, ng: int, shown: list[int]):
    """Per group of `shown` (dicts keyed by group; lists of length ng for the phases), over its
    launches inside the iterations (`inside`): its most common phase and the rule that gave it
    (definitions.md §V5), its call site (§S), its (short name, full name) from its first launch
    (the fix rules read them) and its median kernel time in ns (§V4). Launches from a thread
    without ranges (autograd) take the main thread's phase: the main thread is chosen from all
    launches inside."""
    main = main_thread(trace, k if inside.all() else k[inside], it.base_depth, it.start)
    on = np.zeros(ng, bool)
    on[shown] = True
    sub = on[g]
    sub &= inside
    k, g, a = k[sub], g[sub], a[sub]
    keys, texts, prule = attributed_phase_keys(trace, k, it.base_depth, opt.phase_level, main)
    phase, rules = group_phases_and_rules(keys, texts, prule, g, ng)
    source = dominant_sites(trace, a, g, ng)
    ops = trace.ops
    names = {i: (trace.strings[int(ops.name[f])], trace.strings[int(ops.full_name[f])]) if f >= 0 else ("", "")
             for i, f in _first_launches(k, g, ng, shown).items()}
    kern = ops.end[k] - ops.start[k]
    median = {}
    for i in shown:  # a few groups
        own = kern[g == i]
        median[i] = float(median_of(own)) if len(own) else 0.0
    return phase, rules, source, names, median


def _first_launches(k: np.ndarray, g: np.ndarray, ng: int, shown: list[int]) -> dict[int, int]:
    """Per group of `shown`: its first launch (`k` ascends: its first position), -1 without one.
    A few groups: one pass each; more: one minimum.at over all launches."""
    if len(shown) <= 8:
        out = {}
        for i in shown:
            at = int(np.argmax(g == i)) if len(g) else 0
            out[i] = int(k[at]) if len(g) and g[at] == i else -1
        return out
    none = np.iinfo(np.int64).max
    firsts = np.full(ng, none, np.int64)
    np.minimum.at(firsts, g, k)
    return {i: int(firsts[i]) if firsts[i] < none else -1 for i in shown}
