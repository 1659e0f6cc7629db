"""Numbers and names in prose: durations that never read as 0, names elided to a width."""
from __future__ import annotations


def dur(ms: float) -> str:
    """A duration for prose: ms, or µs below 1 ms so tiny windows do not read as 0."""
    if ms >= 1:
        return f"{ms:,.3f} ms"
    return f"{ms * 1e3:,.1f} µs" if ms >= 1e-3 else f"{ms * 1e6:,.0f} ns"


def short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[:width - 1] + "…"


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
