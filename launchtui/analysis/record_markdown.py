"""The case record as a Markdown page (docs/definitions.md §V8, domain.md §9)."""
from __future__ import annotations

from launchtui.analysis import iterations as itr
from launchtui.analysis.graphs_report import capture_page, graphs_md
from launchtui.analysis.graphs_whatif_report import whatif_md
from launchtui.analysis.idle_causes import CAUSES
from launchtui.analysis.prose import UNNAMED_PHASE, dur, phase_label, short
from launchtui.analysis.record import CAPTURE_GPU, GPU_NOT_RECORDED
from launchtui.analysis.record_conclusion import cannot_judge


def _fmt_ms(x) -> str:
    return f"{x:,.3f}"


CAUSE_LABELS = {"launch": "Launch calls + submission (L)", "host": "Host between launches", "host_stall": "Host stalls (>= 1 ms)",
                "sync": "Syncs and blocking copies", "dependency": "Dependency (queued work late)",
                "cold_start": "Cold start (first launches)", "migration": "Unified-memory migrations",
                "unattributed": "Unattributed (no launch row, or no later op)"}


def _idle_md(doc: dict, out: list[str]) -> None:
    """What the GPU waited for: the idle split by cause, host-bound time and its phases (§V2)."""
    ib = doc["idle_by_cause"]
    hb = ib["host_bound"]
    out += ["", f"## What the GPU waited for (device {ib['device_id']}, {ib['steady_iterations']} steady "
                f"iteration{'s' if ib['steady_iterations'] != 1 else ''})", "",
            "| idle by cause | ms/iteration (mean) | share of the iteration |", "|---|---:|---:|"]
    for c in CAUSES:
        if ib["share"][c] or ib["mean_per_iteration_ms"][c]:
            out.append(f"| {CAUSE_LABELS[c]} | {_fmt_ms(ib['mean_per_iteration_ms'][c])} | {ib['share'][c]:.1%} |")
    g = doc["gain"]
    out.append(f"\n**Host-bound** (launch calls + host between launches, what CUDA graphs / torch.compile remove): "
               f"{dur(hb['mean_per_iteration_ms'])}/iteration (mean) = {hb['share']:.1%}"
               + (f"; removing it: {g['realistic'][0]:.2f}–{g['realistic'][1]:.2f}×" if g["realistic"] else ""))
    if traced := (doc.get("limits") or {}).get("host_tracing"):
        out.append(f"Upper bounds: {traced['note']}.")
    if level := (doc.get("limits") or {}).get("graph_level"):
        out.append(f"GPU busy: {level['note']}.")
    lat = ib["latency"]
    out.append(f"Submission latency L = {lat['us']:g} µs ({lat['source']}, {lat['samples']:,} launches onto an idle stream)")
    for x in ib["excluded_iterations"]:
        out.append(f"- Iteration {x['iteration']} left out: {x['reason']}")
    if ib["by_phase"]:
        out.append("Host-bound time by phase: " + " · ".join(
            (f"`{short(p['phase'], 40)}`" if p["phase"] else UNNAMED_PHASE)
            + f" {p['host_bound_ms_per_iteration']:,.3f} ms/iter"
            for p in ib["by_phase"]))
    cold = doc.get("cold_start") or {}
    if cold.get("calls"):
        out.append(f"Cold start: {cold['calls']} slow first launches ({dur(cold['total_ms'])}), left out of the "
                   "steady state" + ("; a warm-up capture" if cold["warm_up_capture"] else ""))
    if doc.get("fixes"):
        out += ["", "## Fixes, ranked by the time they address", ""]
        if cannot_judge(doc):   # definitions.md §V6, ranked fixes
            out += ["_The verdict cannot judge this trace: these are the times this capture shows, not "
                    "steady-state costs to act on._", ""]
        for i, f in enumerate(doc["fixes"], 1):
            out.append(f"{i}. {f['fix']}" + (f" — `{short(f['phase'], 50)}`" if f.get("phase") else "")
                       + f" ({dur(f['ms_per_iteration'])}/iteration)")
    out += ["", "## Checks", ""] + [f"- {'ok' if c['ok'] else 'FAILED'}: {c['name']} — {c['detail']}"
                                    for c in doc["checks"]]


def _queue_and_top_md(doc: dict, out: list[str]) -> None:
    """The page's Queue and Top sections (GPU activity recorded)."""
    out += ["", "## Queue", ""]
    for s in doc["streams"]:
        lim = f", observed limit {s['observed_limit']}" if s["observed_limit"] is not None else ""
        out.append(f"- device {s['device_id']} stream {s['stream_id']}: **{s['queue_class']}** "
                   f"(max pending {s['max_depth']}{lim}; blocked launches {s['blocked_launches']}, "
                   f"CPU stalls {s['cpu_stalls']}) — {s['reason']}")
    outside = [f"device {s['device_id']} stream {s['stream_id']} reaches {s['outside_max_depth']} pending "
               + (f"in `{s['outside']['range']}` " if (s.get("outside") or {}).get("range") else "")
               + f"({s['outside_blocked']} launch calls blocked)" for s in doc["streams"] if s.get("outside_blocked")]
    out.append(f"- Backpressure: {'yes' if doc['backpressure'] else 'no'}"
               + (" inside the iterations" if outside else "")
               + f"; CPU stalls (slow launches at depth <= 4, not backpressure): {doc['cpu_stalls']}"
               + (f"; outside the iterations (not judged): {', '.join(outside)}" if outside else ""))
    out += ["", "## Top small kernels (by launch cost per iteration)", ""]
    if doc["top"]:
        out += ["| # | Kernel | Launches/iter | API avg (µs) | Queue avg (µs) | Kernel avg (µs) | Kernel median (µs) "
                "| Phase | Fix |",
                "|---:|---|---:|---:|---:|---:|---:|---|---|"]
        for i, r in enumerate(doc["top"], 1):
            out.append(f"| {i} | `{short(r['kernel_name'])}` | {r['launches_per_iteration']:,.1f} | "
                       f"{r['avg_api_us']:,.1f} | {r['avg_queue_us']:,.1f} | "
                       f"{r['avg_kernel_us']:.3f} | {r['median_kernel_us']:.3f} | {phase_label(r)} | {r['fix']} |")
    else:
        out.append(f"(empty) {doc['empty_reason']}")
        if doc["near_misses"]:
            out.append("Nearest misses:")
            for r in doc["near_misses"]:
                out.append(f"- `{short(r['kernel_name'])}` (device {r['device_id']}): {r['launches']:,} launches at "
                           f"{r['avg_kernel_us']:.1f} µs on average — {r['misses']}")
    for r in doc["nccl"]:
        out.append(f"- NCCL `{r['kernel_name']}`: {r['launches_per_iteration']:,.1f}/iter — {r['fix']}")


def render_markdown(doc: dict) -> str:
    src = doc["source"]
    out = [f"# Launch page: {src['path'].rsplit('/', 1)[-1]}", ""]
    if doc.get("conclusion"):
        out += [f"**Verdict:** {doc['conclusion']}", ""]
    out.append(f"{src['producer']} {src['version']}".strip())
    if doc.get("skipped"):
        out.append("Skipped input (definitions.md §H): " + "; ".join(f"{n:,} × {r}" for r, n in doc["skipped"].items()))
    cpu_side = doc.get("gpu_recorded") is False   # launches without GPU activity (§V11)
    if (doc.get("graphs") or {}).get("capture_line"):   # mostly graph capture (§12): the capture page
        capture_page(doc, out)
        return "\n".join(out) + "\n"
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
                f"Iterations: {it['count']} from {it['source']}" + (f" `{short(it['name'])}`" if it["name"] else ""))
    src_line += (f"; median {dur(it['median_ns'] / 1e6)} (min {dur(it['min_ns'] / 1e6)}, "
                 f"max {dur(it['max_ns'] / 1e6)})")
    out += [src_line, f"_{it['note']}_" if it["note"] else "", ""]
    rt = doc["rule_of_thumb"]
    if doc.get("too_little"):
        out.append(f"**Too little activity to judge launch overhead: {doc['too_little']}.**")
    elif cpu_side:
        out.append(f"**Launches/iteration: {pi['launches']['median']:,.0f} · launch API: "
                   f"{dur(pi['launch_api_ms']['median'])}/iter · iteration: {dur(pi['iteration_ms']['median'])}**")
    else:
        hb = doc["idle_by_cause"]["host_bound"]
        out.append(f"**Launches/iteration: {pi['launches']['median']:,.0f} · host-bound (launch calls + host "
                   f"between launches): {dur(hb['mean_per_iteration_ms'])}/iter (mean) = {hb['share']:.1%} of the "
                   f"iteration (exposed launch overhead {doc['overhead_share']:.1%}) · "
                   f"Amdahl bound: {doc['amdahl_bound']:.3f}×**")
        out.append(f"Rule of thumb: {rt['launches']:,.0f} launches × {rt['launch_cost_us']:g} µs = "
                   f"{dur(rt['estimate_ms'])} against 10 % of the iteration = {dur(rt['ten_percent_ms'])}: "
                   + ("reaches it (a second opinion; the measured host-bound time decides, see Checks)"
                      if rt["flag"] else "below"))
    out += ["", "| per iteration | median | min | max |", "|---|---:|---:|---:|"]
    for key, label in (("launches", "Launches"), ("launch_api_ms", "Launch API (ms)"), ("gpu_busy_ms", "GPU busy (ms)"),
                       ("gpu_idle_ms", "GPU idle (ms)"), ("exposed_overhead_ms", "Exposed launch overhead (ms)"),
                       ("iteration_ms", "Iteration (ms)")):
        v = pi[key]
        fmt = (lambda x: f"{x:,.0f}") if key == "launches" else _fmt_ms
        out.append(f"| {label} | " + (f"{fmt(v['median'])} | {fmt(v['min'])} | {fmt(v['max'])} |" if v is not None
                                      else "not recorded | | |"))
    if not cpu_side:
        if not doc.get("too_little"):
            _idle_md(doc, out)
        _queue_and_top_md(doc, out)
    graphs_md(doc, out)
    whatif_md(doc, out)
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
