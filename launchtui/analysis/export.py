"""Range export (definitions.md §13): one window's events plus the analyses restricted to it.

`launchtui export` and the TUI's `e` key both call `export_document`, so the two files are equal.
"""
from __future__ import annotations

import numpy as np

from launchtui.analysis import nvtx
from launchtui.analysis.report import ReportOptions, build_report
from launchtui.analysis.select import Selection, op_mask
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.model import API_KIND_NAMES, OP_KIND_NAMES, Trace

EXPORT_KIND = "launchtui-range-export"


def _names(trace: Trace, ids: np.ndarray) -> list[str]:
    vals = trace.strings.array()
    return vals[ids].tolist() if len(ids) else []


def export_document(trace: Trace, sel: Selection, opt: ReportOptions = ReportOptions(), record_opt=None) -> dict:
    """The range document; `record_opt` (a RecordOptions, `--phase-level`): the case record of the
    window at those options under `analysis.record`, as the TUI's verdict panel shows it (for a
    whole-trace export, the whole trace's record: the same as `record --json`)."""
    asked = sel
    if sel.t0 is None or sel.t1 is None:
        ext = trace.extent() or (0, 0)
        sel = Selection(ext[0] if sel.t0 is None else sel.t0, ext[1] if sel.t1 is None else sel.t1,
                        sel.devices, sel.ranges, sel.label)
    t0, t1 = sel.t0, sel.t1
    ops, api, rg, th = trace.ops, trace.api, trace.ranges, trace.threads

    o = np.nonzero(op_mask(trace, sel))[0]
    launch = ops.api[o]
    a_in = np.nonzero((api.end >= t0) & (api.start <= t1))[0]
    a = np.union1d(a_in, launch[launch >= 0])
    a_pos = {int(x): i for i, x in enumerate(a.tolist())}
    r = np.nonzero((rg.end >= t0) & (rg.start <= t1))[0]
    op_rng = nvtx.op_ranges(trace)[o]

    def thread_label(ti: np.ndarray) -> list[str]:
        return [f"{p}/{t}" for p, t in zip(th.pid[ti].tolist(), th.tid[ti].tolist())]

    api_rows = [
        {"start_ns": s, "end_ns": e, "name": n, "kind": API_KIND_NAMES[k], "thread": t, "correlation": c}
        for s, e, n, k, t, c in zip(api.start[a].tolist(), api.end[a].tolist(), _names(trace, api.name[a]),
                                    api.kind[a].tolist(), thread_label(api.thread[a]), api.corr[a].tolist())]
    range_names = {int(i): nvtx.range_name(trace, int(i)) for i in unique_sorted(op_rng[op_rng >= 0]).tolist()}
    # no API table at all (GPU activity only): every op is unmatched
    queue = np.where(launch >= 0, ops.start[o] - api.end[np.maximum(launch, 0)], 0) if len(api) else \
        np.zeros(len(o), np.int64)
    op_rows = [
        {"start_ns": s, "end_ns": e, "name": n, "kind": OP_KIND_NAMES[k], "device_id": d, "stream_id": st,
         "correlation": c, "api_index": a_pos.get(la) if la >= 0 else None,
         "queue_ns": q if la >= 0 else None, "nvtx_range": range_names.get(rr) if rr >= 0 else None}
        for s, e, n, k, d, st, c, la, q, rr in zip(
            ops.start[o].tolist(), ops.end[o].tolist(), _names(trace, ops.name[o]), ops.kind[o].tolist(),
            ops.device[o].tolist(), ops.stream[o].tolist(), ops.corr[o].tolist(), launch.tolist(),
            queue.tolist(), op_rng.tolist())]
    rng_rows = [
        {"start_ns": s, "end_ns": e, "name": nvtx.range_name(trace, int(i)), "depth": d, "thread": t}
        for i, s, e, d, t in zip(r.tolist(), rg.start[r].tolist(), rg.end[r].tolist(), rg.depth[r].tolist(),
                                 thread_label(rg.thread[r]))]
    return {
        "kind": EXPORT_KIND,
        "schema_version": 1,
        "source": trace.source.to_json(),
        "window": {"t0_ns": t0, "t1_ns": t1, "t0_s": t0 / 1e9, "t1_s": t1 / 1e9, "label": sel.label,
                   "devices": None if sel.devices is None else list(sel.devices)},
        "counts": {"api_calls": len(api_rows), "gpu_ops": len(op_rows), "nvtx_ranges": len(rng_rows)},
        "api_calls": api_rows,
        "gpu_ops": op_rows,
        "nvtx_ranges": rng_rows,
        "analysis": _analysis(trace, sel, opt, record_opt, asked),
    }


def _analysis(trace: Trace, sel: Selection, opt: ReportOptions, record_opt, asked: Selection) -> dict:
    doc = build_report(trace, sel, opt)
    if record_opt is not None:
        from launchtui.analysis.record import build_record
        doc["record"] = build_record(trace, asked, record_opt)
    return doc


def default_export_name(trace: Trace, sel: Selection) -> str:
    from pathlib import Path
    stem = Path(trace.source.path).name.split(".")[0] or "trace"
    return f"{stem}.{sel.t0 / 1e9:.6f}-{sel.t1 / 1e9:.6f}.launchtui.json"
