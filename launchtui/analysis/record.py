"""The case record ("launch page", domain.md §9): per-iteration launches and their cost, the queue
class per stream, the top small kernels with phase and fix, an Amdahl bound and cross-checks
(docs/definitions.md §V). One JSON document (schema `launchtui-record/1`) and its Markdown page."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from launchtui.analysis import cpu_busy
from launchtui.analysis import exposed as ex
from launchtui.analysis import iterations as itr
from launchtui.analysis.backpressure import Options
from launchtui.analysis.config import CONFIG
from launchtui.analysis.fixes import SYNC_FIX, rule_for
from launchtui.analysis.sources import dominant_sites
from launchtui.analysis.phases import attributed_phase_keys, group_phases_and_rules, main_thread
from launchtui.analysis.intervals import in_windows
from launchtui.analysis.queue_class import classify
from launchtui.analysis.select import WHOLE, Selection
from launchtui.analysis.shared import Shared
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.grouping import dense_groups
from launchtui.trace import names as nm
from launchtui.trace.model import Trace

SCHEMA = "launchtui-record/1"
LAUNCH_COST_US = 5.0        # domain.md §4 rule of thumb: launches x 5 µs ...
RULE_SHARE = 0.10           # ... against 10 % of the iteration
MIN_LAUNCHES = 10           # below this, or a window under 100 µs, the page says it cannot judge
MIN_WINDOW_NS = 100_000


@dataclass(frozen=True)
class RecordOptions:
    iter_name: str | None = None
    min_launches: int = CONFIG.min_launches
    max_avg_us: float = CONFIG.max_avg_us
    phase_level: int = 1
    names: str = CONFIG.names     # how the top kernels group: "short" or "full" (distinguishing) names
    top: int = 3
    backpressure: Options = Options()


def _stats(values: np.ndarray, scale: float = 1.0, nd: int = 6) -> dict:
    if not len(values):
        return {"median": 0, "min": 0, "max": 0}
    f = (lambda x: round(float(x) / scale, nd)) if scale != 1.0 else (lambda x: round(float(x), nd))
    return {"median": f(np.median(values)), "min": f(values.min()), "max": f(values.max())}


def _device_window(trace: Trace, on: np.ndarray, sel: Selection, calls: np.ndarray) -> tuple[int, int]:
    """`on`: the device's ops (ex.device_ops)."""
    ops, api = trace.ops, trace.api
    lo = min(int(ops.start[on].min()), int(api.start[calls].min()) if len(calls) else int(ops.start[on].min()))
    hi = int(ops.end[on].max())
    if sel.t0 is not None:
        lo = max(lo, sel.t0)
    if sel.t1 is not None:
        hi = min(hi, sel.t1)
    return lo, hi


def _iterations_inside(trace: Trace, it: itr.Iterations, window: tuple[int, int]) -> itr.Iterations:
    """The iterations fully inside a trimmed window; the whole window when none is."""
    keep = (it.start >= window[0]) & (it.end <= window[1])
    if not keep.all():
        it = itr.Iterations(it.source, it.start[keep], it.end[keep], it.heuristic, it.name,
                            None if it.range_idx is None else it.range_idx[keep], it.base_depth, it.note)
    return it if len(it) else itr.whole(trace, window)


def _in_iterations(t: np.ndarray, it: itr.Iterations) -> np.ndarray:
    """Per time: index of the iteration [start, end) holding it, -1 when none."""
    return in_windows(t, it.start, it.end)


def _top_kernels(trace: Trace, sel: Selection, it: itr.Iterations, devices: list[int], opt: RecordOptions,
                 shared: Shared):
    """Small kernels launched inside the iterations, ranked by launch cost per iteration."""
    gr = shared.kernel_groups_on(sel, devices, opt.names)
    ops, api = trace.ops, trace.api
    k, g = gr.op_idx, gr.op_group
    a = ops.api[k]
    inside = _in_iterations(api.start[a], it) >= 0
    count, sum_api, sum_kern, qn, sum_q = _sums_inside(trace, gr, k, g, a, inside)
    ng = len(gr)
    names = [trace.strings[int(n)] for n in gr.name]
    mean_k = sum_kern / np.maximum(count, 1)
    ok = (count >= opt.min_launches) & (mean_k < opt.max_avg_us * 1e3) & (count > 0)
    nccl = np.array([nm.is_nccl(n) for n in names], bool) if ng else np.zeros(0, bool)
    # order: launch cost per iteration desc, then launches desc, name, device (definitions §4)
    order = sorted(range(ng), key=lambda i: (-sum_api[i], -count[i], names[i], int(gr.device[i])))
    qualified = [i for i in order if ok[i] and not nccl[i]]
    cand = [] if qualified else [i for i in order if count[i] and not nccl[i] and not ok[i]]
    # distance: how far from qualifying, as a ratio (1 = on the line)
    dist = {i: max(opt.min_launches / count[i], mean_k[i] / (opt.max_avg_us * 1e3)) for i in cand}
    near = sorted(cand, key=lambda i: (dist[i], names[i]))[:3]
    shown = qualified[:opt.top] + [i for i in order if ok[i] and nccl[i]] + near
    # phase, call site and full name only for the groups shown: each is the group's own launches'
    # (the phase keys rank paths by content, so a subset keeps their order and the ties' choice)
    phase, rules, source, full_names = _shown_groups(trace, it, opt, k, g, a, inside, ng, shown)
    n_it = max(len(it), 1)

    def row(i: int) -> dict:
        ph, share = phase[i]
        rule, fix = rule_for(names[i], ph, full_names[i])
        return {"kernel_name": names[i], "device_id": int(gr.device[i]), "launches": int(count[i]),
                "launches_per_iteration": round(float(count[i]) / n_it, 1),
                "launch_cost_per_iteration_ms": round(float(sum_api[i]) / n_it / 1e6, 3),
                "avg_api_us": round(float(sum_api[i]) / count[i] / 1e3, 1),
                "avg_queue_us": round(float(sum_q[i]) / qn[i] / 1e3, 1) if qn[i] else 0,
                "avg_kernel_us": round(float(mean_k[i]) / 1e3, 3),
                "phase": ph, "phase_share": round(share, 4), "phase_rule": rules[i], "fix_rule": rule, "fix": fix, "source": source[i]}

    top = [row(i) for i in qualified[:opt.top]]
    nccl_rows = [row(i) for i in order if ok[i] and nccl[i]]
    table_api_ns = float(sum_api[[i for i in order if ok[i]]].sum()) if ok.any() else 0.0
    misses, why = [], ""
    if not qualified:
        for i in near:
            r = row(i)
            r["misses"] = "; ".join(
                ([f"{count[i]} launches < {opt.min_launches}"] if count[i] < opt.min_launches else [])
                + ([f"avg {mean_k[i] / 1e3:.1f} µs >= {opt.max_avg_us:g} µs"]
                   if mean_k[i] >= opt.max_avg_us * 1e3 else []))
            misses.append(r)
        few = sum(1 for i in cand if count[i] < opt.min_launches)
        slow = sum(1 for i in cand if mean_k[i] >= opt.max_avg_us * 1e3)
        if not cand:
            why = "no kernel launches inside the iterations" if not ng else "only NCCL kernels qualify"
        else:
            why = (f"no kernel averages < {opt.max_avg_us:g} µs with >= {opt.min_launches} launches: "
                   f"{slow} of {len(cand)} kernels run >= {opt.max_avg_us:g} µs, {few} have fewer launches")
    return top, nccl_rows, misses, why, table_api_ns


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
    (definitions.md §V5), its call site (§S) and its full name from its first launch (the fix
    rules read it). Launches from a thread without ranges (autograd) take the main thread's phase:
    the main thread is chosen from all launches inside."""
    main = main_thread(trace, k if inside.all() else k[inside], it.base_depth, it.start)
    on = np.zeros(ng, bool)
    on[shown] = True
    sub = on[g]
    sub &= inside
    k, g, a = k[sub], g[sub], a[sub]
    keys, texts, prule = attributed_phase_keys(trace, k, it.base_depth, opt.phase_level, main)
    phase, rules = group_phases_and_rules(keys, texts, prule, g, ng)
    source = dominant_sites(trace, a, g, ng)
    full_names = {i: trace.strings[int(trace.ops.full_name[f])] if f >= 0 else ""
                  for i, f in _first_launches(k, g, ng, shown).items()}
    return phase, rules, source, full_names


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


def _one_device_at_a_time(trace: Trace, primary: int, primary_gaps: ex.DeviceGaps, lo: int, hi: int,
                          devs: dict[int, np.ndarray]):
    """The queue class's `gaps(device)`: the primary's light gaps, another device's computed when
    first asked for and dropped when the next device is (one device's ~2.5M gaps at 5M)."""
    held: dict[int, ex.DeviceGaps] = {}

    def gaps(d: int) -> ex.DeviceGaps | None:
        if d == primary:
            return primary_gaps
        if d not in devs:
            return None
        if d not in held:
            held.clear()
            held[d] = ex.device_gaps(trace, d, lo, hi, devs[d], exposed=False)
        return held[d]
    return gaps


def _syncs(trace: Trace, it: itr.Iterations, m: np.ndarray) -> dict:
    """Host-blocking syncs inside the iterations (`m`: cpu_busy.host_blocking_calls): *Synchronize
    calls and synchronous copies."""
    api = trace.api
    names = trace.strings
    idx = np.nonzero(m)[0]
    k = _in_iterations(api.start[idx], it)
    idx, k = idx[k >= 0], k[k >= 0]
    per = np.bincount(k, minlength=len(it)) if len(it) else np.zeros(0, np.int64)
    by_name: dict[str, list] = {}
    for u in unique_sorted(api.name[idx]).tolist():
        sel = idx[api.name[idx] == u]
        by_name[nm.api_display_name(names[u])] = [int(len(sel)), round(float((api.end[sel] - api.start[sel]).sum()) / 1e6, 3)]
    out = {"per_iteration": _stats(per, nd=1), "total_ms": round(float((api.end[idx] - api.start[idx]).sum()) / 1e6, 3),
           "by_api": [{"api_name": n, "count": c, "total_ms": t} for n, (c, t) in sorted(by_name.items())],
           "fix": SYNC_FIX if len(idx) else None}
    return out


def _api_totals(trace: Trace, it: itr.Iterations, calls: np.ndarray) -> list[dict]:
    """The device's launch calls inside the iterations, per display name (the cuda_api_sum view)."""
    api = trace.api
    calls = calls[_in_iterations(api.start[calls], it) >= 0]
    out: dict[str, list] = {}
    names, name_of = dense_groups(api.name[calls])    # a lookup table, not a sort of the calls
    dur = api.end[calls] - api.start[calls]
    for i, u in enumerate(names.tolist()):  # once per API name
        sel = name_of == i
        n = nm.api_display_name(trace.strings[u])
        c = out.setdefault(n, [0, 0])
        c[0] += int(sel.sum())
        c[1] += int(dur[sel].sum())
    return [{"api_name": n, "count": c, "total_ms": round(t / 1e6, 3)}
            for n, (c, t) in sorted(out.items(), key=lambda x: (-x[1][1], x[0]))]


def build_record(trace: Trace, sel: Selection = WHOLE, opt: RecordOptions = RecordOptions(),
                 shared: Shared | None = None) -> dict:
    """The record as one JSON-ready document (docs/definitions.md §V8). `shared`: the report's
    memo (`report --json`): its kernel groups and spikes are reused, not recomputed."""
    return record_with_streams(trace, sel, opt, shared)[0]


def record_with_streams(trace: Trace, sel: Selection = WHOLE, opt: RecordOptions = RecordOptions(),
                        shared: Shared | None = None):
    """(record, per-stream verdicts): the verdicts keep what JSON does not (the stall episodes,
    the blocked calls) for the TUI's marks."""
    shared = Shared(trace) if shared is None else shared
    devs = ex.launch_devices(trace, sel.devices)
    doc: dict = {"schema": SCHEMA, "source": trace.source.to_json(),
                 "options": {"iter": opt.iter_name, "min_launches": opt.min_launches,
                             "max_avg_us": opt.max_avg_us, "phase_level": opt.phase_level, "names": opt.names}}
    if not devs and not len(trace.ops):
        calls = cpu_busy.launch_calls(trace, sel.t0 if sel.t0 is not None else -2**62,
                                      sel.t1 if sel.t1 is not None else 2**62)
        if len(calls):   # launches recorded, GPU activity not (definitions.md §V11)
            return _cpu_side_record(trace, sel, opt, doc, calls), []
    if not devs:
        doc.update({"empty": "no launched GPU ops in this trace or selection", "iterations": None,
                    "launch_bound": None, "conclusion": "cannot judge: no launched GPU ops in this trace or selection",
                    "per_iteration": None, "overhead_share": None, "amdahl_bound": None, "streams": [],
                    "backpressure": False, "top": [], "near_misses": [], "cross_checks": {},
                    "launch_thread_cpu": {"available": False, "reason": "no launched GPU ops to judge against"}})
        doc["launch_bound_level"] = None
        return doc, []
    devices = list(devs)
    primary = devices[0]
    window = _device_window(trace, ex.device_ops(trace, primary), sel, devs[primary])
    it = itr.find(trace, opt.iter_name, primary, window)
    if sel.t0 is not None or sel.t1 is not None:
        it = _iterations_inside(trace, it, window)
    lo, hi = int(it.start.min()), int(it.end.max())
    # kernels, API totals and gaps on the primary device: the iterations are its thread's. The top
    # kernels first: the groups' per-launch arrays go before the gaps and the queue class (5M peak)
    top, nccl_rows, misses, why, table_api_ns = _top_kernels(trace, sel, it, [primary], opt, shared)
    shared.release_groups()
    gaps = ex.device_gaps(trace, primary, lo, hi, devs[primary])
    f = ex.per_iteration(trace, primary, it.start, it.end, gaps, devs[primary])
    h = ex.gap_histogram(gaps, it.start, it.end)
    gaps = gaps.light()    # the busy and exposed sets are done with (5M peak)
    share = float(f.exposed_ns.sum()) / float(f.iteration_ns.sum()) if f.iteration_ns.sum() > 0 else 0.0
    amdahl = 1.0 / (1.0 - share) if share < 1 else None
    med_launches = float(np.median(f.launches))
    med_iter = float(np.median(f.iteration_ns))
    rule_ms = med_launches * LAUNCH_COST_US / 1e3

    def per_it(fg: ex.IterationFigures) -> dict:
        return {"launches": _stats(fg.launches, nd=1), "launch_api_ms": _stats(fg.launch_api_ns, 1e6),
                "gpu_busy_ms": _stats(fg.busy_ns, 1e6), "gpu_idle_ms": _stats(fg.idle_ns, 1e6),
                "exposed_overhead_ms": _stats(fg.exposed_ns, 1e6), "iteration_ms": _stats(fg.iteration_ns, 1e6)}

    streams = classify(trace, _one_device_at_a_time(trace, primary, gaps, lo, hi, devs), it.start, it.end,
                       opt.backpressure, set(devices), sp=shared.spikes(WHOLE, opt.backpressure))
    del gaps
    api_totals = _api_totals(trace, it, devs[primary])
    launch_api_ms = sum(r["total_ms"] for r in api_totals)
    blocking = cpu_busy.host_blocking_calls(trace)
    sub_ms = (h["<10us"]["total_ms"] + h["10-100us"]["total_ms"] + h["0.1-1ms"]["total_ms"]) / max(len(it), 1)
    idle = {str(primary): {"buckets": h, "sub_ms_per_iteration_ms": round(sub_ms, 3),
                           "exposed_per_iteration_ms": round(float(f.exposed_ns.sum()) / max(len(it), 1) / 1e6, 3)}}
    doc.update({
        "device_id": primary,
        "devices": devices,
        "iterations": it.to_json(),
        "per_iteration": per_it(f),
        "overhead_share": round(share, 4),
        "amdahl_bound": None if amdahl is None else round(amdahl, 3),
        "rule_of_thumb": {"launch_cost_us": LAUNCH_COST_US, "launches": med_launches,
                          "estimate_ms": round(rule_ms, 3), "ten_percent_ms": round(med_iter * RULE_SHARE / 1e6, 3),
                          "flag": bool(rule_ms * 1e6 >= RULE_SHARE * med_iter)},
        "streams": [s.to_json() for s in streams],
        "backpressure": any(s.queue_class == "saturated" for s in streams),
        "cpu_stalls": sum(s.cpu_stalls for s in streams),
        "top": top,
        "nccl": nccl_rows,
        "empty_reason": why or None,
        "near_misses": misses,
        "syncs": _syncs(trace, it, blocking),
        "cross_checks": {
            "idle_gaps": idle,
            "api_totals": api_totals,
            "launch_api_ms": round(launch_api_ms, 3),
            "table_api_ms": round(table_api_ns / 1e6, 3),
            "table_share_of_launch_api": round(table_api_ns / 1e6 / launch_api_ms, 4) if launch_api_ms else None,
        },
        "launch_thread_cpu": cpu_busy.launch_thread_cpu(trace, lo, hi, it.start, it.end, blocking),
    })
    n_launch = int(f.launches.sum())
    if n_launch < MIN_LAUNCHES or int(f.iteration_ns.sum()) < MIN_WINDOW_NS:
        doc["too_little"] = (f"{n_launch} launch{'es' if n_launch != 1 else ''} in "
                             f"{_dur(float(f.iteration_ns.sum()) / 1e6)}")
    doc["verdict"] = verdict_lines(doc)
    doc["launch_bound"], doc["conclusion"] = conclusion(doc)
    doc["launch_bound_level"] = bound_level(doc)
    return doc, streams


GPU_NOT_RECORDED = "GPU activity not recorded (no kernel, memcpy or memset rows): CPU side only"
CAPTURE_GPU = "capture with `nsys profile --trace=cuda` (GPU activity is not captured under WSL2)"


def _cpu_side_record(trace: Trace, sel: Selection, opt: RecordOptions, doc: dict, calls: np.ndarray) -> dict:
    """Launch calls but no GPU op in the trace (definitions.md §V11): the CPU-side facts (launches and
    launch-API time per iteration, syncs, API totals, the launching thread's CPU busy share); every
    figure that needs the GPU is null, never guessed. `empty` stays set, so consumers that need GPU
    figures (diff, ranks) treat the record as they treat one without launches."""
    api = trace.api
    window = (int(api.start[calls].min()), int(api.end[calls].max()))
    it = itr.find(trace, opt.iter_name, None, window)
    if sel.t0 is not None or sel.t1 is not None:
        it = _iterations_inside(trace, it, window)
    lo, hi = int(it.start.min()), int(it.end.max())
    k = _in_iterations(api.start[calls], it)
    inside = k >= 0
    n_it = len(it)
    launches = np.bincount(k[inside], minlength=n_it)
    api_ns = np.bincount(k[inside], weights=(api.end[calls] - api.start[calls])[inside].astype(np.float64), minlength=n_it)
    med_launches, med_iter = float(np.median(launches)), float(np.median(it.durations()))
    rule_ms = med_launches * LAUNCH_COST_US / 1e3
    api_totals = _api_totals(trace, it, calls)
    launch_api_ms = sum(r["total_ms"] for r in api_totals)
    blocking = cpu_busy.host_blocking_calls(trace)
    doc.update({
        "empty": GPU_NOT_RECORDED, "gpu_recorded": False, "device_id": None, "devices": [],
        "iterations": it.to_json(),
        "per_iteration": {"launches": _stats(launches, nd=1), "launch_api_ms": _stats(api_ns, 1e6),
                          "gpu_busy_ms": None, "gpu_idle_ms": None, "exposed_overhead_ms": None,
                          "iteration_ms": _stats(it.durations(), 1e6)},
        "per_device": None, "overhead_share": None, "amdahl_bound": None,
        "rule_of_thumb": {"launch_cost_us": LAUNCH_COST_US, "launches": med_launches,
                          "estimate_ms": round(rule_ms, 3), "ten_percent_ms": round(med_iter * RULE_SHARE / 1e6, 3),
                          "flag": bool(rule_ms * 1e6 >= RULE_SHARE * med_iter)},
        "streams": [], "backpressure": None, "cpu_stalls": None, "top": [], "nccl": [],
        "empty_reason": GPU_NOT_RECORDED, "near_misses": [],
        "syncs": _syncs(trace, it, blocking),
        "cross_checks": {"idle_gaps": None, "api_totals": api_totals, "launch_api_ms": round(launch_api_ms, 3),
                         "table_api_ms": None, "table_share_of_launch_api": None},
        "launch_thread_cpu": cpu_busy.launch_thread_cpu(trace, lo, hi, it.start, it.end, blocking),
    })
    n_launch = int(launches.sum())
    if n_launch < MIN_LAUNCHES or int(it.durations().sum()) < MIN_WINDOW_NS:
        doc["too_little"] = (f"{n_launch} launch{'es' if n_launch != 1 else ''} in "
                             f"{_dur(float(it.durations().sum()) / 1e6)}")
    sy = doc["syncs"]
    pi = doc["per_iteration"]
    per = "iteration" if it.source != itr.SOURCE_NONE else "window"
    facts = (f"{pi['launches']['median']:,.0f} launches/{per}, launch API {_dur(pi['launch_api_ms']['median'])}/{per}, "
             f"{sum(b['count'] for b in sy['by_api']):,} host syncs ({_dur(sy['total_ms'])})")
    lt = doc["launch_thread_cpu"]
    doc["verdict"] = [f"{GPU_NOT_RECORDED}: {facts}"]
    doc["launch_bound"] = None
    doc["conclusion"] = (f"cannot judge: GPU activity was not recorded, so neither the exposed launch overhead nor the "
                         f"queue class can be judged — {CAPTURE_GPU}; CPU side: {facts}"
                         + (f"; {lt['note']}" if lt.get("available") else ""))
    doc["launch_bound_level"] = None
    return doc


def verdict_lines(doc: dict) -> list[str]:
    """One line for the page's head, then one per stream."""
    pi = doc["per_iteration"]
    it = doc["iterations"]
    share = doc["overhead_share"]
    if doc.get("too_little"):
        return [f"too little activity to judge: {doc['too_little']}"] + [
            f"device {s['device_id']} stream {s['stream_id']}: {s['queue_class']}" for s in doc["streams"]]
    lines = [f"{pi['launches']['median']:,.0f} launches/iteration; exposed launch overhead "
             f"{pi['exposed_overhead_ms']['median']:.3f} ms/iteration = {share:.1%} of "
             f"{pi['iteration_ms']['median']:.3f} ms (Amdahl bound {doc['amdahl_bound']:.3f}x)"
             + (" [iterations: heuristic]" if it["heuristic"] else "")
             + (" [no iteration marks: whole window]" if it["source"] == itr.SOURCE_NONE else "")]
    for s in doc["streams"]:
        lines.append(f"device {s['device_id']} stream {s['stream_id']}: {s['queue_class']}{class_mix(s)}")
    return lines


def class_mix(s: dict) -> str:
    """' (3 of 4 iterations; 1 saturated)' when the stream's iterations fall in several classes."""
    ic = s.get("iteration_classes") or {}
    if sum(1 for n in ic.values() if n) < 2:
        return ""
    others = ", ".join(f"{n} {c}" for c, n in ic.items() if n and c != s["queue_class"])
    return f" ({ic[s['queue_class']]} of {sum(ic.values())} iterations; {others})"


LEVEL_BOUND, LEVEL_PARTLY, LEVEL_NOT = "launch-bound", "partly launch-bound", "not launch-bound"


def _waiting_stream(doc: dict) -> dict | None:
    """The dry stream with most launches: the evidence that the GPU waits on launches (§V3)."""
    dry = [s for s in doc["streams"] if s["queue_class"] == "dry"]
    return max(dry, key=lambda s: (s["launches"], -s["device_id"], -s["stream_id"])) if dry else None


def bound_level(doc: dict, share_min: float = CONFIG.launch_bound_share,
                partly_min: float = CONFIG.partly_bound_share) -> str | None:
    """launch-bound (share >= share_min), partly launch-bound (partly_min <= share < share_min with
    evidence: a dry stream or the rule of thumb's flag), else not; None when too little to judge
    (docs/definitions.md §V9)."""
    if doc.get("too_little"):
        return None
    share = doc["overhead_share"]
    if share >= share_min:
        return LEVEL_BOUND
    if share >= partly_min and (_waiting_stream(doc) is not None or doc["rule_of_thumb"]["flag"]):
        return LEVEL_PARTLY
    return LEVEL_NOT


def conclusion(doc: dict, share_min: float = CONFIG.launch_bound_share,
               partly_min: float = CONFIG.partly_bound_share) -> tuple[bool | None, str]:
    """(launch_bound, one line the user should take away), from the record's own evidence
    (docs/definitions.md §V9): the exposed share against `share_min` (a middle band from
    `partly_min` when the queue or the rule of thumb backs it), the rule of thumb as a second
    opinion, what the queues say in words that agree with the level, and unless not launch-bound
    the top row's fix and the Amdahl gain."""
    if doc.get("too_little"):
        return None, f"cannot judge: too little activity ({doc['too_little']})"
    share, rt = doc["overhead_share"], doc["rule_of_thumb"]
    level = bound_level(doc, share_min, partly_min)
    bound = level == LEVEL_BOUND
    flagged = level != LEVEL_NOT     # the rule of thumb agrees when its flag matches
    band = (f">= {share_min * 100:g} %" if bound else
            f">= {partly_min * 100:g} %, < {share_min * 100:g} %" if level == LEVEL_PARTLY else f"< {share_min * 100:g} %")
    parts = [f"{level}: exposed launch overhead is {share * 100:.1f} % of the iteration ({band})"
             + ("; the rule of thumb agrees" if rt["flag"] == flagged else
                f"; the rule of thumb disagrees ({rt['launches']:,.0f} launches × {rt['launch_cost_us']:g} µs = "
                f"{_dur(rt['estimate_ms'])} {'<' if flagged else '>='} 10 % of the iteration)")]
    sat = [s for s in doc["streams"] if s["queue_class"] == "saturated"]
    if sat:
        known = [s["observed_limit"] for s in sat if s["observed_limit"] is not None]
        # an unknown limit (ops launched before a sliced capture were pending): the seen depth is a lower bound
        where = f"at depth {max(known)}" if known else f"at a depth of at least {max(s['max_depth'] for s in sat)}"
        parts.append(f"the CPU is ahead and back-pressured: {sum(s['blocked_launches'] for s in sat):,} launch calls "
                     f"blocked {where} — fewer launches free CPU time, not GPU time")
    # a stream that saturates in some iterations but not most: said, never counted as backpressure
    for s in doc["streams"]:
        n_sat = (s.get("iteration_classes") or {}).get("saturated", 0)
        if s["queue_class"] != "saturated" and n_sat:
            parts.append(f"device {s['device_id']} stream {s['stream_id']} is back-pressured in {n_sat} of "
                         f"{sum(s['iteration_classes'].values())} iterations")
    s = _waiting_stream(doc)
    if s is not None:
        pct, at = f"{s['waited_gap_share'] * 100:.0f} %", f"device {s['device_id']} stream {s['stream_id']}"
        # not launch-bound: the gaps wait on launches, but they are too short to matter
        parts.append(f"the GPU waits on launches: {pct} of idle gaps had the launch call in flight ({at})" if flagged
                     else f"idle gaps wait on launches ({pct} had the launch call in flight, {at}) but add up to only "
                          f"{share * 100:.1f} % of the iteration")
    if flagged:
        if doc["top"]:
            r = doc["top"][0]
            parts.append(f"first fix: {r['fix']} (`{_short(r['kernel_name'], 40)}`)")
        if doc["amdahl_bound"] is not None:
            parts.append(f"removing all exposed launch overhead would make the iteration at most "
                         f"{doc['amdahl_bound']:.2f}× faster")
    return bound, "; ".join(parts)


# --- Markdown ---------------------------------------------------------------------------

def _fmt_ms(x) -> str:
    return f"{x:,.3f}"


def _dur(ms: float) -> str:
    """A duration for prose: ms, or µs below 1 ms so tiny windows do not read as 0."""
    if ms >= 1:
        return f"{ms:,.3f} ms"
    return f"{ms * 1e3:,.1f} µs" if ms >= 1e-3 else f"{ms * 1e6:,.0f} ns"


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[:width - 1] + "…"


def phase_label(r: dict, width: int = 50) -> str:
    """`forward (93 %)`, `## backward ## (97 %, main thread)` when timed on the main thread (§V5), or
    `(no range: 95 %)` when most launches lie outside every range."""
    share = f"{r['phase_share']:.0%}"
    how = {"main thread": ", main thread"}.get(r.get("phase_rule"), "")
    return f"{_short(r['phase'], width)} ({share}{how})" if r["phase"] else f"(no range: {share})"


def _queue_and_top_md(doc: dict, out: list[str]) -> None:
    """The page's Queue and Top sections (GPU activity recorded)."""
    out += ["", "## Queue", ""]
    for s in doc["streams"]:
        lim = f", observed limit {s['observed_limit']}" if s["observed_limit"] is not None else ""
        out.append(f"- device {s['device_id']} stream {s['stream_id']}: **{s['queue_class']}** "
                   f"(max pending {s['max_depth']}{lim}; blocked launches {s['blocked_launches']}, "
                   f"CPU stalls {s['cpu_stalls']}) — {s['reason']}")
    outside = [f"device {s['device_id']} stream {s['stream_id']} reaches {s['outside_max_depth']} pending "
               f"({s['outside_blocked']} launch calls blocked)" for s in doc["streams"] if s.get("outside_blocked")]
    out.append(f"- Backpressure: {'yes' if doc['backpressure'] else 'no'}"
               + (" inside the iterations" if outside else "")
               + f"; CPU stalls (slow launches at low depth, not backpressure): {doc['cpu_stalls']}"
               + (f"; outside the iterations (not judged): {', '.join(outside)}" if outside else ""))
    out += ["", "## Top small kernels (by launch cost per iteration)", ""]
    if doc["top"]:
        out += ["| # | Kernel | Launches/iter | API avg (µs) | Queue avg (µs) | Kernel avg (µs) | Phase | Fix |",
                "|---:|---|---:|---:|---:|---:|---|---|"]
        for i, r in enumerate(doc["top"], 1):
            out.append(f"| {i} | `{_short(r['kernel_name'])}` | {r['launches_per_iteration']:,.1f} | "
                       f"{r['avg_api_us']:,.1f} | {r['avg_queue_us']:,.1f} | "
                       f"{r['avg_kernel_us']:.3f} | {phase_label(r)} | {r['fix']} |")
    else:
        out.append(f"(empty) {doc['empty_reason']}")
        if doc["near_misses"]:
            out.append("Nearest misses:")
            for r in doc["near_misses"]:
                out.append(f"- `{_short(r['kernel_name'])}` (device {r['device_id']}): {r['launches']:,} launches at "
                           f"{r['avg_kernel_us']:.1f} µs — {r['misses']}")
    for r in doc["nccl"]:
        out.append(f"- NCCL `{r['kernel_name']}`: {r['launches_per_iteration']:,.1f}/iter — {r['fix']}")


def render_markdown(doc: dict) -> str:
    src = doc["source"]
    out = [f"# Launch page: {src['path'].rsplit('/', 1)[-1]}", ""]
    if doc.get("conclusion"):
        out += [f"**Verdict:** {doc['conclusion']}", ""]
    out.append(f"{src['producer']} {src['version']}".strip())
    cpu_side = doc.get("gpu_recorded") is False   # launches without GPU activity (§V11)
    if doc.get("empty") and not cpu_side:
        out += ["", f"**{doc['empty']}**: nothing to record.", ""]
        return "\n".join(out) + "\n"
    it = doc["iterations"]
    pi = doc["per_iteration"]
    ds = doc["devices"]
    if cpu_side:
        out.append(f"**{GPU_NOT_RECORDED}**: exposed launch overhead, queue class and the small-kernel table "
                   f"cannot be judged — {CAPTURE_GPU}.")
    else:
        out.append(f"Device {doc['device_id']}" + (f" (of {', '.join(map(str, ds))}: the one with most launches; "
                                                   "`--device N` for another)" if len(ds) > 1 else ""))
    src_line = ("Iterations: none found — the whole window counts as one" if it["source"] == itr.SOURCE_NONE else
                f"Iterations: {it['count']} from {it['source']}" + (f" `{_short(it['name'])}`" if it["name"] else ""))
    src_line += (f"; median {_dur(it['median_ns'] / 1e6)} (min {_dur(it['min_ns'] / 1e6)}, "
                 f"max {_dur(it['max_ns'] / 1e6)})")
    out += [src_line, f"_{it['note']}_" if it["note"] else "", ""]
    rt = doc["rule_of_thumb"]
    if doc.get("too_little"):
        out.append(f"**Too little activity to judge launch overhead: {doc['too_little']}.**")
    elif cpu_side:
        out.append(f"**Launches/iteration: {pi['launches']['median']:,.0f} · launch API: "
                   f"{_dur(pi['launch_api_ms']['median'])}/iter · iteration: {_dur(pi['iteration_ms']['median'])}**")
    else:
        out.append(f"**Launches/iteration: {pi['launches']['median']:,.0f} · exposed launch overhead: "
                   f"{_dur(pi['exposed_overhead_ms']['median'])}/iter · share: {doc['overhead_share']:.1%} of "
                   f"{_dur(pi['iteration_ms']['median'])} · Amdahl bound: {doc['amdahl_bound']:.3f}×**")
        out.append(f"Rule of thumb: {rt['launches']:,.0f} launches × {rt['launch_cost_us']:g} µs = "
                   f"{_dur(rt['estimate_ms'])} against 10 % of the iteration = {_dur(rt['ten_percent_ms'])}: "
                   + ("launch throughput is probably a bottleneck" if rt["flag"] else "below"))
    out += ["", "| per iteration | median | min | max |", "|---|---:|---:|---:|"]
    for key, label in (("launches", "Launches"), ("launch_api_ms", "Launch API (ms)"), ("gpu_busy_ms", "GPU busy (ms)"),
                       ("gpu_idle_ms", "GPU idle (ms)"), ("exposed_overhead_ms", "Exposed launch overhead (ms)"),
                       ("iteration_ms", "Iteration (ms)")):
        v = pi[key]
        fmt = (lambda x: f"{x:,.0f}") if key == "launches" else _fmt_ms
        out.append(f"| {label} | " + (f"{fmt(v['median'])} | {fmt(v['min'])} | {fmt(v['max'])} |" if v is not None
                                      else "not recorded | | |"))
    if not cpu_side:
        _queue_and_top_md(doc, out)
    sy = doc["syncs"]
    if sy["by_api"]:
        out += ["", "## Syncs inside the step", "",
                f"{sy['per_iteration']['median']:,.0f} per iteration ("
                + ", ".join(f"{b['api_name']} ×{b['count']}" for b in sy["by_api"]) + f"): {sy['fix']}"]
    cc = doc["cross_checks"]
    out += ["", "## Cross-checks", ""]
    for d, g in (cc["idle_gaps"] or {}).items():
        b = g["buckets"]
        out.append(f"- Idle gaps, device {d}: " + " · ".join(f"{k} {v['count']:,} ({v['total_ms']:,.3f} ms)"
                                                          for k, v in b.items())
                   + f". Gaps < 1 ms: {g['sub_ms_per_iteration_ms']:,.3f} ms/iter against exposed launch overhead "
                     f"{g['exposed_per_iteration_ms']:,.3f} ms/iter (means over the iterations)")
    if cc["api_totals"]:
        out.append("- Launch API totals: " + " · ".join(f"{a['api_name']} {a['count']:,} calls {a['total_ms']:,.3f} ms"
                                                      for a in cc["api_totals"])
                   + (f"; the small-kernel table holds {cc['table_api_ms']:,.3f} ms" if cc["table_api_ms"] is not None else "")
                   + (f" ({cc['table_share_of_launch_api']:.0%})" if cc["table_share_of_launch_api"] is not None else ""))
    lt = doc["launch_thread_cpu"]
    out.append("- Launching thread CPU busy: " + (lt["note"] if lt["available"] else lt["reason"]))
    return "\n".join(x for x in out if x is not None) + "\n"
