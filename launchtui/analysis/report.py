"""The headless report: one JSON document and its text rendering (`launchtui report`)."""
from __future__ import annotations

from dataclasses import dataclass


from launchtui.analysis.backpressure import Options, backpressure
from launchtui.analysis.config import CONFIG
from launchtui.analysis.graphs_report import report_lines
from launchtui.analysis.index import attached
from launchtui.analysis.join_check import join_line, launch_join
from launchtui.analysis.launches import launched_kernels, small_kernel_table, split_nccl, unmatched_kernels
from launchtui.analysis.queue import DEFAULT_THRESHOLDS, queue_summary, selection_bounds
from launchtui.analysis.select import WHOLE, Selection, op_mask
from launchtui.analysis.shared import Shared
from launchtui.analysis.stream_calls import selection_ceilings
from launchtui.trace.model import API_GRAPH_LAUNCH, Trace

SCHEMA_VERSION = 1
MAX_TEXT_SPIKES = 10


@dataclass(frozen=True)
class ReportOptions:
    min_launches: int = CONFIG.min_launches
    max_avg_us: float = CONFIG.max_avg_us
    limit: int = CONFIG.table_limit
    names: str = CONFIG.names
    thresholds: tuple = DEFAULT_THRESHOLDS
    backpressure: Options = Options()


def trace_json(trace: Trace, sel: Selection) -> dict:
    w = trace.window()
    ext = trace.extent()
    return {
        "source": trace.source.to_json(),
        "window_ns": list(w) if w else None,
        "window_s": [w[0] / 1e9, w[1] / 1e9] if w else None,
        "extent_ns": list(ext) if ext else None,
        "wall_offset_ns": trace.source.wall_offset_ns,
        "devices": [{"device_id": d, "name": n} for d, n in sorted(trace.devices.items())],
        "selection": sel.to_json(),
        "missing": list(trace.missing),
        # what the reader left out, by reason (definitions.md §H): only when something was, so the
        # JSON of a clean trace is unchanged
        **({"skipped": dict(trace.source.extra["skipped"])} if trace.source.extra.get("skipped") else {}),
    }


def launch_totals(trace: Trace, sel: Selection, k=None, api_ns=None) -> dict:
    """Launch counts that frame the table: kernel launches, graph-launched ops and total launch API time,
    all of the selection (definitions.md §15). `k`: launched_kernels(trace, sel) when known; `api_ns`:
    the launch API time of `k` summed by the caller (the kernel groups' `sum_api` total), used while
    below 2^53 ns, where each float partial sum of integer durations is exact."""
    k = launched_kernels(trace, sel) if k is None else k
    api, ops = trace.api, trace.ops
    if api_ns is None or not 0 <= api_ns < 2**53:
        calls = ops.api[k]
        api_ns = (api.end[calls] - api.start[calls]).sum()
        del calls
    return {"kernel_launches": int(len(k)),
            "launch_api_ms": round(float(api_ns) / 1e6, 3),
            "graph_launched_ops": _graph_ops(trace, sel)}


def selection_stats_of(launches: dict, queues: list[dict], threshold: int) -> dict:
    """The TUI's stats line from a report's `launches` (launch_totals) and `queues` (queue_summary,
    as JSON; its thresholds include `threshold`): launch totals and the deepest queue (the first
    stream of that depth), with its time at or above `threshold`. One function for both, so
    `report` stores what the TUI would compute."""
    peak = max(queues, key=lambda q: q["max_depth"]) if queues else None
    return {
        "launches": launches["kernel_launches"],
        "launch_api_ms": launches["launch_api_ms"],
        "queue_peak": peak["max_depth"] if peak else 0,
        "queue_peak_stream": (peak["device_id"], peak["stream_id"]) if peak else None,
        "time_above_ns": peak["time_at_or_above_ns"].get(str(threshold), 0) if peak else 0,
    }


def selection_stats(trace: Trace, sel: Selection, options: Options = Options()) -> dict:
    """Launch totals and queue summary for the TUI's stats line."""
    qs = queue_summary(trace, sel, (options.threshold, options.full))
    return selection_stats_of(launch_totals(trace, sel), [q.to_json() for q in qs], options.threshold)


def _graph_ops(trace: Trace, sel: Selection) -> int:
    """Matched ops of the selection launched by a graph launch. For the whole trace, the sum of the
    typed index's per-stream counts when the index is built (it counts every matched op once)."""
    idx = attached(trace)
    if sel.t0 is None and sel.t1 is None and sel.devices is None and sel.ranges is None and idx is not None:
        return sum(s.graph_ops for s in idx.queue_series)
    api, ops = trace.api, trace.ops
    m = (ops.api >= 0) & op_mask(trace, sel)
    return int((api.kind[ops.api[m]] == API_GRAPH_LAUNCH).sum()) if m.any() else 0


def build_report(trace: Trace, sel: Selection = WHOLE, opt: ReportOptions = ReportOptions(),
                 shared: Shared | None = None, bp: dict | None = None) -> dict:
    """`shared`: the memo the case record reads too (`report --json`), so neither recomputes.
    `bp`: `backpressure(trace, sel, opt.backpressure)` when the caller has it (the CLI keeps it for the TUI)."""
    shared = Shared(trace) if shared is None else shared
    if bp is None:
        bp = backpressure(trace, sel, opt.backpressure, sp=shared.spikes(sel, opt.backpressure))
    # each stream's blocking depth where its calls block (definitions §V3): fixed thresholds miss it.
    # Before the kernel groups: their per-launch arrays, kept for the record, would be live under
    # the ceilings' per-call arrays (the report's peak, bench/MISSED.md issue 24)
    ceilings = selection_ceilings(trace, bp["spikes"], *selection_bounds(trace, sel), sel.devices)
    gr = shared.kernel_groups(sel, opt.names)
    rows = small_kernel_table(trace, sel, opt.min_launches, opt.max_avg_us, opt.limit, opt.names, with_phase=True,
                              groups=gr)
    compute, nccl = split_nccl(rows)
    launches = launch_totals(trace, sel, gr.op_idx, float(gr.sum_api.sum()))
    # GPU ops that joined no launch call: what failed to join and why (only then: §V8 launch_join)
    lj = launch_join(trace, sel) if not launches["kernel_launches"] and not launches["graph_launched_ops"] else None
    return {
        "schema_version": SCHEMA_VERSION,
        "trace": trace_json(trace, sel),
        "options": {"min_launches": opt.min_launches, "max_avg_us": opt.max_avg_us, "limit": opt.limit,
                    "names": opt.names, "thresholds": list(opt.thresholds)},
        "launches": launches,
        **({"launch_join": lj} if lj else {}),
        "small_kernels": compute,
        "small_kernels_nccl": nccl,
        "queues": [dict(q.to_json(), ceiling=ceilings.get((q.device_id, q.stream_id)))
                   for q in queue_summary(trace, sel, opt.thresholds)],
        "backpressure": {
            "threshold": bp["threshold"], "full": bp["full"], "spike_us": bp["spike_us"],
            "spike_factor": bp["spike_factor"],
            "command_buffer_full_events": bp["command_buffer_full_events"],
            "episodes": [e.to_json(trace) for e in bp["episodes"]],
            "spikes": [e.to_json(trace) for e in bp["spikes"]],
        },
        "unmatched_kernels": unmatched_kernels(trace, sel),
        # captures and replays (definitions.md §12): only for a trace that has any
        **({"graphs": g} if (g := shared.graphs(sel)[0]) is not None else {}),
    }


# --- text rendering -----------------------------------------------------------------------

def _table(rows: list[dict]) -> list[str]:
    w = max([len("Kernel")] + [len(r["kernel_name"]) for r in rows]) if rows else 6
    w = min(max(w, 50), 80)
    head = (f"{'Kernel':<{w}} {'Launches':>9} {'API avg(us)':>12} {'Queue avg(us)':>14} {'Kernel avg(us)':>15}"
            f" {'max API(us)':>12} {'total API(ms)':>14}")
    lines = [head, "-" * len(head)]
    for r in rows:
        name = r["kernel_name"] if len(r["kernel_name"]) <= w else r["kernel_name"][:w - 1] + "…"
        lines.append(f"{name:<{w}} {r['launch_count']:>9} {r['avg_api_us']:>12.1f} {r['avg_queue_us']:>14.1f}"
                     f" {r['avg_kernel_us']:>15.3f} {r['max_api_us']:>12.1f} {r['total_api_ms']:>14.3f}")
    return lines


def render_text(doc: dict) -> str:
    out = []
    t = doc["trace"]
    src = t["source"]
    out.append(f"{src['path']}  ({src['producer']} {src['version']})")
    if t["window_s"]:
        out.append(f"window {t['window_s'][0]:.6f} s to {t['window_s'][1]:.6f} s on the trace clock; "
                   f"selection: {t['selection']['label']}")
    for m in t["missing"]:
        out.append(f"note: {m}")
    for r, n in t.get("skipped", {}).items():
        out.append(f"skipped: {n:,} × {r}")
    if doc.get("launch_join"):
        out.append(f"no launched GPU ops: {join_line(doc['launch_join'])}")
    out.append("")
    out.append("-- Small and Frequent Kernel Launches --")
    rows = doc["small_kernels"]
    devs = sorted({r["device_id"] for r in rows + doc["small_kernels_nccl"]})
    if not rows and not doc["small_kernels_nccl"]:
        out.append("(No small-and-frequent kernel launch data found)")
    else:
        for d in devs:
            sub = [r for r in rows if r["device_id"] == d]
            if len(devs) > 1 or len(doc["trace"]["devices"]) > 1:
                out.append(f"[device {d}]")
            out.extend(_table(sub))
            nc = [r for r in doc["small_kernels_nccl"] if r["device_id"] == d]
            if nc:
                out.append("NCCL (communication; excluded from fusion estimates):")
                out.extend(_table(nc)[2:])
    un = doc["unmatched_kernels"]
    if un["count"]:
        out.append(f"{un['count']} of {un['of_total']} GPU ops have no launch row in the trace "
                   "(launched before the capture window); left out of API and queue figures")
    if doc.get("graphs"):
        out += ["", "-- CUDA / HIP graphs --"] + report_lines(doc["graphs"])
    out.append("")
    out.append("-- Queue depth (pending launches per stream) --")
    if not doc["queues"]:
        out.append("(no launched GPU ops)")
    else:
        ths = doc["options"]["thresholds"]
        head = f"{'Device':>6} {'Stream':>8} {'max':>6} {'mean(tw)':>9} " + " ".join(f"{'>=' + str(x) + '(ms)':>11}" for x in ths)
        out.append(head)
        out.append("-" * len(head))
        for q in doc["queues"]:
            extra = "  (graph replays as one entry: max %d)" % q["max_depth_graph_as_one"] if q["graph_ops"] else ""
            out.append(f"{q['device_id']:>6} {q['stream_id']:>8} {q['max_depth']:>6} {q['mean_depth']:>9.1f} "
                       + " ".join(f"{q['time_at_or_above_ns'][str(x)] / 1e6:>11.3f}" for x in ths) + extra)
            c = q.get("ceiling")
            if c:
                pre = (f"; the depth counts {c['backlog_ops']:,} ops launched before the capture"
                       if c["backlog_ops"] else "")
                out.append(f"{'':>15} launch calls block at depth {c['depth']} (band {c['band'][0]}-{c['band'][1]}, "
                           f"{c['blocked_calls']} calls{pre}): {c['time_at_or_above_band_ns'] / 1e6:.3f} ms "
                           f"at >= {c['band'][0]}")
    out.append("")
    bp = doc["backpressure"]
    out.append(f"-- Backpressure (pending >= {bp['threshold']}, saturated >= {bp['full']}; spikes > "
               f"{bp['spike_us']:g} us and > {bp['spike_factor']:g}x thread median) --")
    if not bp["episodes"] and not bp["spikes"]:
        out.append("(none)")
    for e in bp["episodes"]:
        out.append(f"queue  {e['start_ns'] / 1e9:.6f}s +{e['duration_ns'] / 1e6:.3f}ms dev {e['device_id']} "
                   f"stream {e['stream_id']} max {e['max_depth']} {e['level']}, worst API {e['worst_api_us']:.1f}us"
                   + (f" in {e['nvtx_range']}" if e["nvtx_range"] else ""))
    sp = sorted(bp["spikes"], key=lambda e: -e["worst_api_us"])
    if sp:
        out.append(f"{len(sp)} launch spikes; longest:")
    for e in sp[:MAX_TEXT_SPIKES]:
        out.append(f"spike  {e['start_ns'] / 1e9:.6f}s {e['worst_api_name']} {e['worst_api_us']:.1f}us dev "
                   f"{e['device_id']} stream {e['stream_id']} depth {e['max_depth']}"
                   + (" [command buffer full]" if e["command_buffer_full"] else "")
                   + (f" in {e['nvtx_range']}" if e["nvtx_range"] else ""))
    if bp["command_buffer_full_events"]:
        out.append(f"Nsight recorded {bp['command_buffer_full_events']} 'command buffer full' events "
                   "(launches that waited for queue space)")
    return "\n".join(out) + "\n"
