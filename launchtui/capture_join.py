"""Open a capture trace and join an execution trace's replays to it (docs/definitions.md §12.6): the
one place the CLI (`--capture`), the pandas API (`open(..., capture=)`) and the TUI do it."""
from __future__ import annotations


def capture_join(trace, path, use_cache: bool = True):
    """The analysis.graphs_join.GraphJoin of `trace`'s replays with the captures of the trace at
    `path`, read through the per-user cache; a missing or unreadable file, or one with no capture,
    raises TraceError: one line naming it (exit status 2)."""
    from launchtui.analysis.graphs_join import join, require_captures
    from launchtui.session import Session
    cs = Session.open(path, use_cache=use_cache)
    cs.commit()
    require_captures(cs.trace, path)
    j = join(trace, cs.trace)
    j.capture_path = str(path)
    return j
