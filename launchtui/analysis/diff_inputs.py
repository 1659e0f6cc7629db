"""The two sides of a diff from loaded traces: case record + per-iteration tables + source facts."""
from __future__ import annotations

from launchtui.analysis.diff import build_diff, side
from launchtui.analysis.iteration_tables import iteration_tables
from launchtui.trace.model import Trace


def diff_side(trace: Trace, iter_name: str | None = None) -> dict:
    from launchtui.analysis.provisional_record import iterations, provisional_record
    _, spans, defining = iterations(trace, iter_name)
    record = provisional_record(trace, iter_name)
    src = trace.source
    return side(record, iteration_tables(trace, spans, defining),
                {"path": src.path, "format": src.format, "producer": src.producer, "version": src.version})


def diff_document(before: Trace, after: Trace, iter_name: str | None = None) -> dict:
    return build_diff(diff_side(before, iter_name), diff_side(after, iter_name))
