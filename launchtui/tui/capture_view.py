"""`launchtui TRACE --capture CAPTURE_TRACE` (docs/definitions.md §12.6): the capture ↔ replay join
computed in the load worker (a bad capture file fails the load with its one line, exit status 2),
and the details line of a replayed kernel saying what it was captured from."""
from __future__ import annotations


def attach_join(loaded, args) -> None:
    """Join the loaded trace's replays to the captures of `args.capture` (TraceError when it
    cannot be read or holds no capture)."""
    from launchtui.capture_join import capture_join
    j = capture_join(loaded.trace, args.capture, not getattr(args, "no_cache", False))
    loaded.graph_join = (j, j.source_of_ops(len(loaded.trace.ops)))


def captured_line(scr, k: int) -> str:
    """'captured from: OP · RANGE · SITE (capture N, LABEL)' for GPU op k, "" without --capture or
    for an op no graph replayed."""
    gj = getattr(scr.loaded, "graph_join", None)
    if gj is None:
        return ""
    from launchtui.analysis.graphs_join_report import captured_from
    return captured_from(gj[0], gj[1], k)
