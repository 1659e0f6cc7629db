"""Numbers and names in prose: durations that never read as 0, names elided to a width."""
from __future__ import annotations

import re

from launchtui.trace.markers import TRACE_MARKER


def dur(ms: float) -> str:
    """A duration for prose: ms, or µs below 1 ms so tiny windows do not read as 0."""
    if ms >= 1:
        return f"{ms:,.3f} ms"
    return f"{ms * 1e3:,.1f} µs" if ms >= 1e-3 else f"{ms * 1e6:,.0f} ns"


def short(name: str, width: int = 60) -> str:
    """`name` as prose shows it (a pyprof / DLProf marker by `marker_name`), elided to `width`."""
    name = marker_name(name)
    return name if len(name) <= width else name[:width - 1] + "…"


# pyprof's and DLProf's NVTX markers: the repr of a Python dict (definitions.md §V5, shown name)
_MARKER = re.compile(r"\{'(?:traceMarker|funcStack|mod|op)': ")
_FIELD = {k: re.compile(rf"'{k}': '([^']*)'") for k in ("funcStack", "mod", "op")}
_LIBRARY = ("site-packages", "dist-packages", "/lib/python")
_BASENAME = re.compile(r"[\\/]")   # a frame's file: after the last separator, either kind


def marker_name(text: str) -> str:
    """A pyprof / DLProf marker (`{'traceMarker': [...], 'funcStack': '.../Conv2d::forward/conv2d'}`,
    `{'mod': 'torch.nn.functional', 'op': 'conv2d', 'args': [...]}`) by its op and, where the
    marker holds its call stack, the innermost frame outside the installed libraries: `conv2d
    (net.py:25)`, `torch.nn.functional.conv2d`. Any other text, or a marker without an op, as is.
    The prose name only: grouping, matching and JSON keep the text (every layer's marker differs
    in its stack, so the text already tells two layers apart; its first 40 characters do not)."""
    if not _MARKER.match(text):
        return text
    stack = _FIELD["funcStack"].search(text)
    op = stack.group(1).rsplit("/", 1)[-1] if stack else (_FIELD["op"].search(text) or [None, ""])[1]
    if not op:
        return text
    if not stack:
        mod = _FIELD["mod"].search(text)
        return f"{mod.group(1)}.{op}" if mod and mod.group(1) else op
    frames = re.findall(r"'([^']*)'", (TRACE_MARKER.search(text) or [None, ""])[1])
    own = [f for f in frames if not any(x in f for x in _LIBRARY)]
    return f"{op} ({_BASENAME.split(own[-1])[-1]})" if own else op


UNNAMED_PHASE = "outside the trace's named ranges"   # a phase of launches no range encloses (§V5)


def phase_place(phase: str | None, width: int = 40) -> str:
    """'in `forward`' for a named phase; for launches no range encloses, where they are, not a
    pseudo-name: the trace cannot say which phase they belong to."""
    return f"in `{short(phase, width)}`" if phase else UNNAMED_PHASE


def phase_label(r: dict, width: int = 50) -> str:
    """`forward (93 %)`, `## backward ## (97 %, main thread)` when timed on the main thread (§V5), or
    `(no range: 95 %)` when most launches lie outside every range."""
    share = f"{r['phase_share']:.0%}"
    how = {"main thread": ", main thread"}.get(r.get("phase_rule"), "")
    return f"{short(r['phase'], width)} ({share}{how})" if r["phase"] else f"(no range: {share})"
