"""The two sides of a diff from loaded traces: case record + per-iteration tables + source facts."""
from __future__ import annotations

import numpy as np

from launchtui.analysis.diff import build_diff, side
from launchtui.analysis.iteration_tables import iteration_tables
from launchtui.trace.model import Trace
from launchtui.errors import printable


def record_of(trace: Trace, iter_name: str | None = None) -> dict:
    """The case record with its default options: the side's iterations, device and figures."""
    from launchtui.analysis.record import RecordOptions, build_record
    from launchtui.analysis.select import WHOLE
    return build_record(trace, WHOLE, RecordOptions(iter_name=iter_name))


def diff_side(trace: Trace, iter_name: str | None = None, record: dict | None = None) -> dict:
    """The record (`record`: the one `record_of` gives, found elsewhere, e.g. stored by `report`),
    and the kernel/phase tables over the same iterations and primary device; the streams paired
    are those the record classifies."""
    record = record_of(trace, iter_name) if record is None else record
    it = record.get("iterations") or {}
    spans = np.stack([np.asarray(it.get("starts_ns", []), np.int64), np.asarray(it.get("ends_ns", []), np.int64)], 1)
    src = trace.source
    streams = {(r["device_id"], r["stream_id"]) for r in record.get("streams") or []}
    tables = iteration_tables(trace, spans, record.get("device_id"), streams)
    tables["window"] = window_facts(trace, record.get("device_id"), spans)
    return side(record, tables,
                {"path": printable(src.path), "format": src.format, "producer": src.producer, "version": src.version})


def window_facts(trace: Trace, device: int | None, spans: np.ndarray) -> dict:
    """The whole capture window of the side's device (first kernel start to last kernel end): its
    length, kernels, the share of it the iterations cover, and the kernel table over all of it
    (launches and graph ops as totals), so a diff sees kernels that fall outside the iterations
    (definitions.md §D1)."""
    from launchtui.analysis.iteration_tables import kernel_table, merge_spans
    from launchtui.trace.model import OP_KERNEL
    ops = trace.ops
    m = ops.kind == OP_KERNEL
    if device is not None:
        m &= ops.device == device
    k = np.flatnonzero(m)
    if not len(k):
        return {"start_ns": None, "end_ns": None, "ms": None, "kernels": 0, "iterations_ms": 0.0,
                "iteration_share": None, "kernel_rows": []}
    lo, hi = int(ops.start[k].min()), int(ops.end[k].max())
    merged = merge_spans(spans)
    covered = int(np.clip(np.minimum(merged[:, 1], hi) - np.maximum(merged[:, 0], lo), 0, None).sum()) \
        if len(merged) else 0
    rows = kernel_table(trace, np.array([[np.iinfo(np.int64).min // 2, np.iinfo(np.int64).max // 2]]), device)
    return {"start_ns": lo, "end_ns": hi, "ms": (hi - lo) / 1e6, "kernels": int(len(k)),
            "iterations_ms": covered / 1e6, "iteration_share": covered / (hi - lo) if hi > lo else None,
            "kernel_rows": [{"kernel_name": r["kernel_name"], "launches": r["launches_per_iteration"],
                             "graph_ops": r["graph_ops_per_iteration"], "avg_api_us": r["avg_api_us"],
                             "avg_queue_us": r["avg_queue_us"], "avg_kernel_us": r["avg_kernel_us"]} for r in rows]}


def diff_document(before: Trace, after: Trace, iter_name: str | None = None,
                  records: tuple[dict, dict] | None = None) -> dict:
    """The diff of two traces; `records`: their `record_of`, when already known (diff_side)."""
    rb, ra = records if records is not None else (None, None)
    return build_diff(diff_side(before, iter_name, rb), diff_side(after, iter_name, ra))
