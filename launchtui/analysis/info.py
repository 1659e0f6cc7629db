"""`launchtui info`: what a trace holds and what its gaps disable."""
from __future__ import annotations

from launchtui.trace.arrays import unique_sorted
from launchtui.trace.model import (API_KIND_NAMES, OP_KIND_NAMES, OVERHEAD_COMMAND_BUFFER_FULL,
                                   RANGE_PUSHPOP, Trace)
from launchtui.trace.registry import FACT_CPU_SAMPLING, facts_of


def trace_info(trace: Trace) -> dict:
    ops, api, rg = trace.ops, trace.api, trace.ranges
    w = trace.window()
    ext = trace.extent()
    streams = {}
    for d, s in trace.streams():
        streams.setdefault(str(d), []).append(s)
    out = {
        "source": trace.source.to_json(),
        "details": {k: v for k, v in trace.source.extra.items() if k != "skipped"},
        "window_s": [w[0] / 1e9, w[1] / 1e9] if w else None,
        "window_ns": list(w) if w else None,
        "extent_s": [ext[0] / 1e9, ext[1] / 1e9] if ext else None,
        "devices": [{"device_id": d, "name": n} for d, n in sorted(trace.devices.items())],
        "streams": streams,
        "counts": {
            "gpu_ops": {OP_KIND_NAMES[k]: int((ops.kind == k).sum()) for k in range(len(OP_KIND_NAMES))},
            "api_calls": {API_KIND_NAMES[k]: int((api.kind == k).sum()) for k in range(len(API_KIND_NAMES))},
            "ranges": {"push_pop": int((rg.kind == RANGE_PUSHPOP).sum()),
                       "start_end": int((rg.kind != RANGE_PUSHPOP).sum())},
            "threads": len(trace.threads),
            "unmatched_gpu_ops": int((ops.api < 0).sum()),
            "command_buffer_full_events": int((trace.overheads.type == OVERHEAD_COMMAND_BUFFER_FULL).sum()),
            "max_range_depth": int(rg.depth.max()) + 1 if len(rg) else 0,
        },
        "missing": list(trace.missing),
    }
    # CPU scheduling / sampling data behind the record's launching-thread CPU busy % (definitions.md
    # §V10); present only when the trace has some, so other traces' JSON is unchanged
    runs, smp = trace.cpu_runs, trace.cpu_samples
    if len(runs) or len(smp):
        out["cpu"] = {"sched_runs": len(runs), "sched_threads": len(unique_sorted(runs.thread)),
                      "samples": len(smp), "sample_threads": len(unique_sorted(smp.thread))}
    # what the reader tolerated, by reason (present only when something was skipped, so the JSON
    # of a clean trace is unchanged)
    if trace.source.extra.get("skipped"):
        out["skipped"] = dict(trace.source.extra["skipped"])
    return out


def render_info(info: dict) -> str:
    s = info["source"]
    out = [f"file      {s['path']}",
           f"format    {s['format']}  ({s['producer']}, {s['version']})",
           f"size      {s['size']:,} bytes"]
    for k, v in info["details"].items():
        out.append(f"{k:<9} {v}")
    if info["window_s"]:
        out.append(f"window    {info['window_s'][0]:.6f} s to {info['window_s'][1]:.6f} s "
                   "(first GPU op start .. last GPU op end; use with --trim)")
    if info["extent_s"]:
        out.append(f"extent    {info['extent_s'][0]:.6f} s to {info['extent_s'][1]:.6f} s (all events)")
    if info["devices"]:
        for d in info["devices"]:
            st = info["streams"].get(str(d["device_id"]), [])
            out.append(f"device    {d['device_id']}: {d['name']}  streams {', '.join(map(str, st))}")
    else:
        out.append("device    (none with GPU activity)")
    c = info["counts"]
    out.append("gpu ops   " + ", ".join(f"{k} {v:,}" for k, v in c["gpu_ops"].items()))
    out.append("api calls " + ", ".join(f"{k} {v:,}" for k, v in c["api_calls"].items()))
    out.append(f"ranges    push/pop {c['ranges']['push_pop']:,}, start/end {c['ranges']['start_end']:,}, "
               f"max depth {c['max_range_depth']}")
    out.append(f"threads   {c['threads']}")
    if c["unmatched_gpu_ops"]:
        out.append(f"unmatched {c['unmatched_gpu_ops']:,} GPU ops have no launch row (e.g. launched before a sliced window)")
    if c["command_buffer_full_events"]:
        out.append(f"overhead  {c['command_buffer_full_events']} 'command buffer full' events")
    if cpu := info.get("cpu"):
        out.append(f"cpu       {cpu['sched_runs']:,} on-CPU runs of {cpu['sched_threads']} threads (SCHED_EVENTS), "
                   f"{cpu['samples']:,} samples of {cpu['sample_threads']} threads (COMPOSITE_EVENTS): the record's "
                   "launching-thread CPU busy %")
    elif FACT_CPU_SAMPLING in facts_of(s["format"]):   # the format could have recorded it; this capture did not
        out.append("cpu       no scheduling or sampling data: the record cannot say how busy the launching thread "
                   "is (record with nsys profile --cpuctxsw=process-tree --sample=process-tree)")
    for m in info["missing"]:
        out.append(f"missing   {m}")
    for reason, n in info.get("skipped", {}).items():
        out.append(f"skipped   {n:,} × {reason}")
    return "\n".join(out) + "\n"
