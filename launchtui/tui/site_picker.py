"""The call-site picker (`C`, definitions.md §S4): a screen imported when first opened (§T1b)."""
from __future__ import annotations

from launchtui.tui.screens import NvtxPicker
from launchtui.tui.sources_view import SiteEntry


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
