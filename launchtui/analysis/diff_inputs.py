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


def diff_side(trace: Trace, iter_name: str | None = None) -> dict:
    """The record, and the kernel/phase tables over the same iterations and primary device; the
    streams paired are those the record classifies."""
    record = record_of(trace, iter_name)
    it = record.get("iterations") or {}
    spans = np.stack([np.asarray(it.get("starts_ns", []), np.int64), np.asarray(it.get("ends_ns", []), np.int64)], 1)
    src = trace.source
    streams = {(r["device_id"], r["stream_id"]) for r in record.get("streams") or []}
    return side(record, iteration_tables(trace, spans, record.get("device_id"), streams),
                {"path": printable(src.path), "format": src.format, "producer": src.producer, "version": src.version})


def diff_document(before: Trace, after: Trace, iter_name: str | None = None) -> dict:
    return build_diff(diff_side(before, iter_name), diff_side(after, iter_name))
