"""The call-site pane: the selection's call sites (definitions.md §S3) as a table beside the kernel table.

Same Line-API table as the kernel table (sorting by the shown column's digit, s / S, ←/→ for the
columns that do not fit), over the rows of `analysis.sources.source_table`. Enter posts `SiteChosen`;
the screen highlights that site's launches. With no attributed launch the body says why and how to
record stacks, with the attributed fraction.
"""
from __future__ import annotations

import textwrap
from textual.binding import Binding

from launchtui.analysis.config import CONFIG
from launchtui.tui.messages import SiteChosen
from launchtui.tui.widgets.kernel_table import Col, KernelTable

COLUMNS = (
    Col("site", "Call site", 0, numeric=False),
    Col("launches", "Launches", 9, fmt="{:,d}"),
    Col("launch_api_ms", "API ms", 9, fmt="{:,.3f}"),
    Col("launches_per_iteration", "Per iter", 9, fmt="{:,.2f}"),
    Col("small_launches", f"<{CONFIG.small_kernel_ns / 1000:g}µs", 7, fmt="{:,d}"),
    Col("top_kernel", "Top kernel", 0, numeric=False),
)
PINNED = frozenset(("site", "launches", "launch_api_ms"))


def site_rows(doc: dict, strings) -> list[dict]:
    """Table rows from a `source_table` document: its sites plus the frame's string id and the
    most-launched kernel as one cell."""
    rows = []
    for s in doc["sites"]:
        top = s["top_kernels"][0] if s["top_kernels"] else None
        rows.append({**s, "frame_id": strings.lookup(s["frame"]),
                     "top_kernel": f"{top['kernel_name']} ×{top['launches']}" if top else ""})
    return rows


def fit_site(site: str, width: int) -> str:
    """A call site in `width` cells: the directories go first (`…/fused_moe/core.py:1633 fn`), then
    the end of the function name (`core.py:1633 trtllm_fp4_block_sc…`); file and line stay."""
    if len(site) <= width:
        return site
    if width <= 1:
        return "…"[:max(width, 0)]
    loc, sp, fn = site.partition(" ")
    short = loc.rsplit("/", 1)[-1] + sp + fn
    if len(short) < width:
        return "…" + site[len(site) - width + 1:]
    return short[:width - 1] + "…"


class SourceTable(KernelTable):
    """Call sites of the selection's launches; Enter highlights the site's launches."""

    COLUMNS = COLUMNS
    PINNED = PINNED
    NAME_KEY = "site"
    FLEX_KEY = "top_kernel"
    MIN_NAME = 30          # `dir/file.py:line function`: the site is what the pane is for
    MAX_NAME = 60
    NAME_SHARE = 0.5       # the top kernel's name gets half of the spare width
    FLEX_MIN = 24          # narrower, a kernel name says little: the site keeps the width (details show it)
    BINDINGS = [b if b.id != "table.choose" else
                Binding("enter", "choose", "Highlight launches", id="sources.choose")
                for b in KernelTable.BINDINGS if b.id != "table.sort_phase"]

    DEFAULT_CSS = """
    SourceTable { height: 12; }
    """

    def __init__(self, **kw):
        super().__init__(**kw)
        self.doc: dict | None = None
        self.empty_text = "(call sites: computing…)"

    def set_doc(self, doc: dict, strings) -> None:
        """Show a `source_table` document (no per-iteration column when the selection has no
        iterations: it would repeat the launches)."""
        self.doc = doc
        self.COLUMNS = tuple(c for c in COLUMNS if c.key != "launches_per_iteration" or doc["per"] == "iteration")
        self.set_rows(site_rows(doc, strings))

    def coverage(self) -> str:
        if self.doc is None:
            return ""
        c = self.doc["coverage"]
        return (f"{c['attributed']:,} of {c['launches']:,} launches attributed "
                f"({100 * c['attributed_fraction']:.1f} %)")

    def fit_name(self, name: str, width: int) -> str:
        return fit_site(name, width)

    def name_title(self, title: str, width: int) -> str:
        c = self.doc["coverage"] if self.doc else None
        if not c:
            return title
        n = f"{c['attributed']:,}/{c['launches']:,}"
        for t in (f"{title} · {n} attributed", f"{title} · {n}", n):   # the first that fits
            if len(t) <= width:
                return t
        return title

    def empty_lines(self, width: int) -> list[str]:
        if self.doc is None:
            return [self.empty_text]
        hint = self.doc["hint"] or "no launch in this selection has a call site"
        lines = []
        for para in (f"({hint})", self.coverage() + "."):
            lines += textwrap.wrap(para, max(width, 20), break_on_hyphens=False)
        return lines

    def chosen(self, row: dict):
        return SiteChosen(row)
