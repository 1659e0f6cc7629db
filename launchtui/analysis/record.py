"""The case record ("launch page", domain.md §9): per-iteration launches and their cost, the queue
class per stream, the top small kernels with phase and fix, an Amdahl bound and cross-checks
(docs/definitions.md §V), built as one JSON document (schema `launchtui-record/1`). Its
conclusion is in `record_conclusion`, its top kernels in `record_top`, its Markdown page in
`record_markdown`."""
from __future__ import annotations

from typing import Callable

import numpy as np

from launchtui.analysis import cpu_busy
from launchtui.analysis import exposed as ex
from launchtui.analysis import iterations as itr
from launchtui.analysis import idle_causes as ic
from launchtui.analysis import record_idle as ri
from launchtui.analysis.cold_start import cold_start
from launchtui.analysis.limits import trace_limits
from launchtui.analysis.graph_busy import busy_trace
from launchtui.analysis.fixes import SYNC_FIX, ranked_fixes
from launchtui.analysis.graphs import overlaps_capture, replayed_beyond_calls
from launchtui.analysis.graphs_eager import in_record
from launchtui.analysis.graphs_report import capture_in_iterations, capture_record
from launchtui.analysis.graphs_whatif_report import graph_whatif, whatif_inputs
from launchtui.analysis.join_check import join_line, launch_join
from launchtui.analysis.prose import dur
from launchtui.analysis.record_options import RecordOptions
from launchtui.analysis.record_conclusion import (BOUND_LEVELS, SUB_MS_DIGITS, bound_level, checks, conclusion,
                                                  main_stream, verdict_lines)
from launchtui.analysis.record_top import top_kernels
from launchtui.analysis.queue_class import classify
from launchtui.analysis.select import WHOLE, Selection
from launchtui.analysis.shared import Deferred, Shared
from launchtui.trace.arrays import median_of, unique_sorted
from launchtui.trace.grouping import dense_groups
from launchtui.trace import names as nm
from launchtui.trace.model import Trace

SCHEMA = "launchtui-record/1"
LAUNCH_COST_US = 5.0        # domain.md §4 rule of thumb: launches x 5 µs ...
RULE_SHARE = 0.10           # ... against 10 % of the iteration
MIN_LAUNCHES = 10           # below this, or a window under 100 µs, the page says it cannot judge
MIN_WINDOW_NS = 100_000


def _stats(values: np.ndarray, scale: float = 1.0, nd: int = 6) -> dict:
    if not len(values):
        return {"median": 0, "min": 0, "max": 0}
    f = (lambda x: round(float(x) / scale, nd)) if scale != 1.0 else (lambda x: round(float(x), nd))
    return {"median": f(median_of(values)), "min": f(values.min()), "max": f(values.max())}


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




def _outside_captures(trace: Trace, it: itr.Iterations, window: tuple[int, int], graphs: dict) -> itr.Iterations:
    """The periodic iterations that overlap no graph capture; the whole window when none is left."""
    keep = ~overlaps_capture(it.start, it.end, graphs)
    if keep.all():
        return it
    it = itr.Iterations(it.source, it.start[keep], it.end[keep], it.heuristic, it.name,
                        None if it.range_idx is None else it.range_idx[keep], it.base_depth, it.note)
    return it if len(it) else itr.whole(trace, window)


def _syncs(trace: Trace, it: itr.Iterations, m: np.ndarray) -> dict:
    """Host-blocking syncs inside the iterations (`m`: cpu_busy.host_blocking_calls): *Synchronize
    calls and synchronous copies."""
    api = trace.api
    names = trace.strings
    idx = np.nonzero(m)[0]
    k = it.index_of(api.start[idx])
    idx, k = idx[k >= 0], k[k >= 0]
    per = np.bincount(k, minlength=len(it)) if len(it) else np.zeros(0, np.int64)
    by_name: dict[str, list] = {}
    for u in unique_sorted(api.name[idx]).tolist():   # names sharing a display name add up
        sel = idx[api.name[idx] == u]
        c = by_name.setdefault(nm.api_display_name(names[u]), [0, 0])
        c[0] += int(len(sel))
        c[1] += int((api.end[sel] - api.start[sel]).sum())
    out = {"per_iteration": _stats(per, nd=1), "total_ms": round(float((api.end[idx] - api.start[idx]).sum()) / 1e6, 3),
           "by_api": [{"api_name": n, "count": c, "total_ms": round(t / 1e6, 3)} for n, (c, t) in sorted(by_name.items())],
           "fix": SYNC_FIX if len(idx) else None}
    return out


def _api_totals(trace: Trace, it: itr.Iterations, calls: np.ndarray) -> list[dict]:
    """The device's launch calls inside the iterations, per display name (the cuda_api_sum view)."""
    api = trace.api
    calls = calls[it.index_of(api.start[calls]) >= 0]
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


def record_and_stalls(trace: Trace, sel: Selection = WHOLE, opt: RecordOptions = RecordOptions(),
                      shared: Shared | None = None) -> tuple[dict, dict]:
    """The case record and {API index: what it is} of its spikes that are not blocked calls (CPU
    stalls, cold starts, slow calls without a pattern: the TUI's stall marks, §V3's words)."""
    doc, streams = record_with_streams(trace, sel, opt, shared)
    return doc, {e.worst_api: v.spike_words.get(e.worst_api, "") for v in streams for e in v.unblocked_spikes()}


def record_with_streams(trace: Trace, sel: Selection = WHOLE, opt: RecordOptions = RecordOptions(),
                        shared: Shared | None = None):
    """(record, per-stream verdicts): the verdicts keep what JSON does not (the stall episodes,
    the blocked calls) for the TUI's marks."""
    shared = Shared(trace) if shared is None else shared
    gpu = busy_trace(trace)   # graph-level replays' spans as ops: busy, as their nodes would be (§12.2)
    devs = ex.launch_devices(gpu, sel.devices)
    doc: dict = {"schema": SCHEMA, "source": trace.source.to_json(),
                 "options": {"iter": opt.iter_name, "min_launches": opt.min_launches,
                             "max_avg_us": opt.max_avg_us, "phase_level": opt.phase_level, "names": opt.names}}
    if trace.source.extra.get("skipped"):   # what the reader left out, by reason (definitions.md §H)
        doc["skipped"] = dict(trace.source.extra["skipped"])
    graphs, unrecorded = shared.graphs(sel)   # captures and replays (§12); None: the trace has none
    if graphs is not None and graphs["capture_line"]:   # mostly capture: its own page, no steady state
        return capture_record(doc, graphs), []
    if not devs and not len(gpu.ops):
        calls = cpu_busy.launch_calls(trace, sel.t0 if sel.t0 is not None else -2**62,
                                      sel.t1 if sel.t1 is not None else 2**62)
        if len(calls):   # launches recorded, GPU activity not (definitions.md §V11)
            return _cpu_side_record(trace, sel, opt, doc, calls), []
    if not devs:   # GPU ops that joined no launch call say why (definitions.md §V8 launch_join)
        lj = launch_join(trace, sel)
        why = f"no launched GPU ops: {join_line(lj)}" if lj else "no launched GPU ops in this trace or selection"
        if lj:
            doc["launch_join"] = lj
        doc.update({"empty": why, "iterations": None, "launch_bound": None, "conclusion": f"cannot judge: {why}",
                    "per_iteration": None, "overhead_share": None, "amdahl_bound": None, "streams": [],
                    "backpressure": False, "top": [], "near_misses": [], "cross_checks": {},
                    "launch_thread_cpu": {"available": False, "reason": "no launched GPU ops to judge against"}})
        doc["launch_bound_level"] = None
        return doc, []
    devices = list(devs)
    primary = devices[0]
    # past the ranking only the judged device's calls are read; the others' go (20M: the peak)
    devs = {d: c if d == primary else c[:0] for d, c in devs.items()}
    window = _device_window(gpu, ex.device_ops(gpu, primary), sel, devs[primary])
    it = itr.find(gpu, opt.iter_name, primary, window)
    if sel.t0 is not None or sel.t1 is not None:
        it = _iterations_inside(gpu, it, window)
    if it.heuristic and graphs is not None:   # a launch period never lies inside a capture (§12)
        it = _outside_captures(gpu, it, window, graphs)
    if capture_in_iterations(graphs, it.start, it.end):   # the steps are mostly capture (§12.1)
        return capture_record(doc, graphs), []

    def cold_part():
        return cold_start(trace, shared.spikes(WHOLE, opt.backpressure))

    def top_part():
        top = top_kernels(trace, sel, it, [primary], opt, shared)
        shared.release_groups()   # the record's last read of the groups' per-launch arrays
        return top
    # with a helper lane both compute beside the gaps, the cold starts first, as the gaps' causes
    # read them; else now, the top kernels first: the groups' per-launch arrays go before the gaps
    # (5M peak), and the cold starts' transients meet no report computing beside
    if shared.lane_lent():
        cold, top = shared.defer(cold_part), shared.defer(top_part)
    else:
        top, cold = shared.defer(top_part), shared.defer(cold_part)
    # beside the gaps on a helper lane; else computed where their results are read, after the gaps
    # (20M: their transients never meet the gaps')
    later = shared.lane_defer() or Deferred
    # the record's own copy of the graphs' facts: only this computation touches it until its result
    eager = None if graphs is None else later(lambda: in_record(trace, graphs, unrecorded, it, primary, devs[primary]))
    doc.update({"device_id": primary, "devices": devices, "iterations": it.to_json(),
                "top": None, "nccl": None, "empty_reason": None, "near_misses": None})   # this key order
    # the what-if's sampled steady iterations and their world (§12.5), of the trace as recorded:
    # begun once the steady iterations are known, beside the gaps; only its ranking reads the phases
    whatif_of = lambda excluded, latency_us: later(   # noqa: E731
        lambda: whatif_inputs(trace, it, primary, devs[primary], excluded, latency_us, opt.phase_level))
    streams, whatif = _gpu_figures(gpu, it, devs, doc, cold, opt, shared, whatif_of)
    rows, nccl_rows, misses, why, table_api_ns = top.result()
    doc.update({"top": rows, "nccl": nccl_rows, "empty_reason": why or None, "near_misses": misses})
    _table_cross_check(doc, table_api_ns)
    if eager is not None:
        eager.result()
        doc["graphs"] = graphs
    doc["graph_whatif"] = graph_whatif(whatif.result, doc, shared.lane_defer())   # §12.5
    _judge(doc)
    return doc, streams


def _gpu_figures(trace: Trace, it: itr.Iterations, devs: dict, doc: dict, cold: Deferred, opt: RecordOptions,
                 shared: Shared, whatif_of: Callable[[list, float], Deferred]):
    """The primary device's per-iteration figures, idle by cause, queues, syncs and cross-checks
    into `doc`; returns (stream verdicts, the what-if's inputs: `whatif_of(excluded iterations,
    latency µs)`, begun once the steady iterations are known). `cold`: cold_start.cold_start."""
    primary = doc["device_id"]
    calls = devs[primary]
    on = ex.device_ops(trace, primary)
    latency = ic.device_latency(trace, primary, lambda: ic.by_stream(trace, on))
    first = int(trace.ops.start[on].min())
    del on
    blocking = cpu_busy.host_blocking_calls(trace)    # once: the gap causes, syncs and thread CPU read it
    # what needs no gap first, so nothing per gap is held while it runs (20M: the record's peak),
    # or beside the gaps on a helper lane
    side = _gapless_figures(trace, it, devs, primary, opt, shared, cold, blocking)
    # gaps from the device's first op: the gap an iteration starts in is judged from where the GPU
    # went idle (a sync that drained it before the iteration began), then measured inside it
    gaps = ex.device_gaps(trace, primary, min(int(it.start.min()), first), int(it.end.max()), calls, ending=False)
    f = ex.per_iteration(trace, primary, it.start, it.end, np.zeros(len(it), np.int64), gaps, calls)
    sync_busy = ri.sync_blocked_while_busy(trace, calls, gaps.busy, it, blocking)
    gaps.busy = None    # the last reader of the busy set
    h = ex.gap_histogram(gaps, it.start, it.end)
    nxt = ic.ending_ops(trace, ex.device_ops(trace, primary), gaps.end)
    steady = ri.steady_of(trace, it, gaps.start, gaps.end, nxt, f.idle_ns, f.launches)
    lane = shared.lane_defer()
    # offered before the what-if's inputs: by_phase reads the keys first, the what-if runs last
    keys = _phase_keys(trace, it, gaps.start, nxt, steady[0], calls, opt.phase_level, latency.ns, lane)
    whatif = whatif_of(steady[1], latency.to_json()["us"])
    g = ri.gap_figures(trace, it, calls, gaps.start, gaps.end, nxt, latency, cold.result().calls, blocking, steady,
                       defer=lane)
    del gaps, nxt    # without a lane the phase keys are computed below: the peak (20M)
    facts, per_cause = g.facts, g.facts.per_it
    f.exposed_ns = per_cause["launch"].astype(np.int64)
    phases = ri.by_phase(g.phase_gaps, keys.result, facts.steady)
    g.phase_gaps = None
    idle = ri.idle_json(facts, it, f.iteration_ns, f.idle_ns, primary, phases, sync_busy)
    streams, syncs, limits, thread_cpu, api_totals = side()
    idle["sum_ok"] = bool((sum(per_cause.values()) == f.idle_ns).all())
    idle["launch_limit"] = g.launch_limit
    share = facts.pooled(f.iteration_ns)
    med_launches, med_iter = float(median_of(f.launches)), float(median_of(f.iteration_ns))
    rule_ms = med_launches * LAUNCH_COST_US / 1e3
    doc.update({
        "per_iteration": _per_iteration_json(f),
        "idle_by_cause": idle,
        "overhead_share": round(share["launch"], 4),
        "gain": ri.gain(idle["host_bound"]["share"]),
        "rule_of_thumb": {"launch_cost_us": LAUNCH_COST_US, "launches": med_launches,
                          "estimate_ms": round(rule_ms, 3), "ten_percent_ms": round(med_iter * RULE_SHARE / 1e6, 3),
                          "flag": bool(rule_ms * 1e6 >= RULE_SHARE * med_iter)},
        "cold_start": cold.result().to_json(),
        "limits": limits,
        "streams": [s.to_json() for s in streams],
        "backpressure": any(s.queue_class == "saturated" for s in streams),
        "cpu_stalls": sum(s.cpu_stalls for s in streams),
        "syncs": syncs,
        "cross_checks": _cross_checks(primary, h, f, facts, len(it), api_totals),
        "launch_thread_cpu": thread_cpu,
    })
    doc["amdahl_bound"] = doc["gain"]["amdahl_bound"]
    n_launch = int(f.launches.sum())
    window = int(f.iteration_ns.sum())
    # a graph launch's replayed ops are activity too (definitions.md §12.2): 8 launches replaying
    # 3,848 ops are a step to judge, not too little
    n_work = n_launch + replayed_beyond_calls(trace, calls, it.index_of)
    if n_work < MIN_LAUNCHES or window < MIN_WINDOW_NS:
        doc["too_little"] = f"{n_launch} launch{'es' if n_launch != 1 else ''} in {dur(window / 1e6)}"
        # the launch calls and their submission bound what launching can cost (definitions.md §V2)
        bound = (int(f.launch_api_ns.sum()) + n_launch * latency.ns) / window if window > 0 else None
        doc["too_little_bound"] = None if bound is None else round(bound, 4)
    return streams, whatif


def _phase_keys(trace: Trace, it: itr.Iterations, g0: np.ndarray, nxt: np.ndarray, steady: np.ndarray,
                calls: np.ndarray, level: int, latency_ns: int, lane) -> Deferred:
    """by_phase's keys (record_idle.phase_keys), which read no gap figure: begun beside the gaps on
    the helper lane (`lane`: Shared.defer), else computed when by_phase asks, once the gaps'
    transients are gone (20M: the keys are the record's peak)."""
    ending = [ri.steady_gap_ops(it, g0, nxt, steady)]   # phase_keys takes it: none else holds it then
    return (lane or Deferred)(lambda: ri.phase_keys(trace, ending, it, steady, calls, level, latency_ns))


def _cross_checks(primary: int, h: dict, f, facts: ri.IdleFacts, n_iterations: int, api_totals: list) -> dict:
    """The record's cross_checks (definitions.md §V8): the device's idle gaps by size against the
    exposed and host-bound time, and the launch calls' API totals; the top kernels' share of them
    is filled in later (`_table_cross_check`)."""
    n_it = max(n_iterations, 1)
    sub_ms = (h["<10us"]["total_ms"] + h["10-100us"]["total_ms"] + h["0.1-1ms"]["total_ms"]) / n_it
    return {
        "idle_gaps": {str(primary): {"buckets": h, "sub_ms_per_iteration_ms": round(sub_ms, SUB_MS_DIGITS),
                                     "exposed_per_iteration_ms": round(float(f.exposed_ns.sum()) / n_it / 1e6, 3),
                                     "host_bound_per_iteration_ms":
                                         round(float(facts.host_bound_ns().sum()) / n_it / 1e6, 3)}},
        "api_totals": api_totals,
        "launch_api_ms": round(sum(r["total_ms"] for r in api_totals), 3),
        "table_api_ms": None, "table_share_of_launch_api": None,   # _table_cross_check, this key order
    }


def _gapless_figures(trace: Trace, it: itr.Iterations, devs: dict, primary: int, opt: RecordOptions, shared: Shared,
                     cold: Deferred, blocking: np.ndarray) -> Callable[[], tuple]:
    """The getter of (stream verdicts, syncs, limits, launch-thread CPU, API totals): the record's
    figures that read no gap, for device `primary`. Three parts, each deferred on its own
    (`shared.defer`): spread over whichever threads are free beside the gaps on a helper lane, else
    computed now, in this order. `cold`: cold_start.cold_start, read by the queue classes."""
    calls = devs[primary]
    lo, hi = int(it.start.min()), int(it.end.max())
    streams = shared.defer(lambda: classify(trace, it.start, it.end, opt.backpressure, set(devs),
                                            sp=shared.spikes(WHOLE, opt.backpressure), cold=cold.result()))
    syncs_limits = shared.defer(lambda: (_syncs(trace, it, blocking), trace_limits(trace)))
    cpu_api = shared.defer(lambda: (cpu_busy.launch_thread_cpu(trace, lo, hi, it.start, it.end, blocking),
                                    _api_totals(trace, it, calls)))
    return lambda: (streams.result(), *syncs_limits.result(), *cpu_api.result())


def _table_cross_check(doc: dict, table_api_ns: float) -> None:
    """The top kernels' launch-API time against all launch calls' (definitions.md §V8 cross_checks)."""
    cc = doc["cross_checks"]
    cc["table_api_ms"] = round(table_api_ns / 1e6, 3)
    launch_api_ms = sum(r["total_ms"] for r in cc["api_totals"])
    cc["table_share_of_launch_api"] = round(table_api_ns / 1e6 / launch_api_ms, 4) if launch_api_ms else None


def _per_iteration_json(f: ex.IterationFigures) -> dict:
    return {"launches": _stats(f.launches, nd=1), "launch_api_ms": _stats(f.launch_api_ns, 1e6),
            "gpu_busy_ms": _stats(f.busy_ns, 1e6), "gpu_idle_ms": _stats(f.idle_ns, 1e6),
            "exposed_overhead_ms": _stats(f.exposed_ns, 1e6), "iteration_ms": _stats(f.iteration_ns, 1e6)}


def _judge(doc: dict) -> None:
    """Checks, level, ranked fixes, verdict lines and conclusion, from the document's own figures."""
    doc["checks"] = checks(doc)
    level = bound_level(doc)
    ms = main_stream(doc)
    doc["fixes"] = ranked_fixes(doc["idle_by_cause"], doc["syncs"], ms is not None and ms["queue_class"] == "dry",
                                level in BOUND_LEVELS)
    doc["verdict"] = verdict_lines(doc)
    doc["launch_bound"], doc["conclusion"] = conclusion(doc)
    doc["launch_bound_level"] = level


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
    k = it.index_of(api.start[calls])
    inside = k >= 0
    n_it = len(it)
    launches = np.bincount(k[inside], minlength=n_it)
    api_ns = np.bincount(k[inside], weights=(api.end[calls] - api.start[calls])[inside].astype(np.float64), minlength=n_it)
    med_launches, med_iter = float(median_of(launches)), float(median_of(it.durations()))
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
                             f"{dur(float(it.durations().sum()) / 1e6)}")
    sy = doc["syncs"]
    pi = doc["per_iteration"]
    per = "iteration" if it.source != itr.SOURCE_NONE else "window"
    facts = (f"{pi['launches']['median']:,.0f} launches/{per}, launch API {dur(pi['launch_api_ms']['median'])}/{per}, "
             f"{sum(b['count'] for b in sy['by_api']):,} host syncs ({dur(sy['total_ms'])})")
    lt = doc["launch_thread_cpu"]
    doc["verdict"] = [f"{GPU_NOT_RECORDED}: {facts}"]
    doc["launch_bound"] = None
    doc["conclusion"] = (f"cannot judge: GPU activity was not recorded, so neither the exposed launch overhead nor the "
                         f"queue class can be judged — {CAPTURE_GPU}; CPU side: {facts}"
                         + (f"; {lt['note']}" if lt.get("available") else ""))
    doc["launch_bound_level"] = None
    return doc
