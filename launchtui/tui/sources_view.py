"""Call sites in the TUI (definitions.md §S): the whole stack of the launch under the cursor (`c`)
and a picker of the selection's call sites (`C`) whose Enter highlights that site's launches on the
timeline, stepped with n / N like a kernel's instances."""
from __future__ import annotations

from dataclasses import dataclass

from launchtui.tui.screens import NvtxPicker


@dataclass
class SiteEntry:
    """One call site as the picker lists it (the fields NvtxPicker shows)."""
    name: str          # "file:line function"
    count: int         # launches
    total_ns: int      # launch-API time
    frame_id: int      # string id of the frame, the key of `sources.op_sites`


class SitePicker(NvtxPicker):
    """Fuzzy picker over call sites: launches and launch-API time per site."""

    def __init__(self, entries: list[SiteEntry], fmt_duration, coverage: str):
        super().__init__(entries, fmt_duration)
        self.coverage = coverage

    PLACEHOLDER = "file, line or function"
    HINT = "n / N then step through the chosen site's launches; c: whole stack at the cursor"

    def title_text(self) -> str:
        return (f"Call sites ({len(self.entries)}) — {self.coverage}; type to filter, Enter highlights the "
                "site's launches")


def site_entries(trace, sel) -> tuple[list[SiteEntry], str, str]:
    """(entries, coverage line, hint when there are none) for the selection."""
    from launchtui.analysis import sources
    doc = sources.source_table(trace, sel, limit=0)
    c = doc["coverage"]
    cover = f"{c['attributed']} of {c['launches']} launches attributed"
    entries = [SiteEntry(s["site"], s["launches"], int(round(s["launch_api_ms"] * 1e6)),
                         trace.strings.lookup(s["frame"])) for s in doc["sites"]]
    return entries, cover, doc["hint"]


def stack_text(trace, api_row: int) -> str:
    """The whole call stack of one API call, innermost first, the call site marked."""
    from launchtui.analysis import sources
    st = sources.launch_stack(trace, api_row)
    if st is None:
        return ("No call stack for this call."
                + ("" if len(trace.stacks) else "\n" + sources.RECORD_HINT))
    how = " (backward: the forward op's stack)" if st["via_backward"] else ""
    lines = [f"call site: {st['site'] or '(no user frame)'}{how}", ""]
    site = st["site"]
    for f in st["frames"]:
        mark = "▶ " if site and sources.site_label(f) == site else "  "
        lines.append(mark + f)
    return "\n".join(lines)
