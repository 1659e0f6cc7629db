"""The small-and-frequent kernel table: a virtualised Line-API table over numpy sort keys.

Only visible lines are rendered; sorting is one argsort over the (few thousand at most) rows.
Keys: j/k move, 1-9 sort by the shown column of that number, p by Phase, s/S cycle/reverse, ←/→ scroll
the columns sideways, Enter highlights the kernel on the timeline; clicking a header sorts.

Layout at any width: the kernel name and the columns that rank and explain a row (launches, API avg,
kernel avg, total API ms) always show; the others follow as width allows and scroll sideways. When
the Dev column is not shown on a multi-GPU trace, the device leads the name cell (`GPU1 name`).
See definitions.md §T5.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from launchtui.analysis.prose import marker_name
from launchtui.tui.messages import KernelChosen, TableRowMoved
from launchtui.tui.state import elide

PLAIN = Style()   # every segment carries a Style: Textual's NO_COLOR filter fails on None

NCCL_MARK = "⇄ "


@dataclass(frozen=True)
class Col:
    key: str
    title: str
    width: int
    numeric: bool = True
    fmt: str = "{:,.1f}"

    @property
    def cells(self) -> int:
        """Width with room for the sort arrow after the title."""
        return max(self.width, len(self.title) + 1)


COLUMNS = (
    Col("kernel_name", "Kernel", 0, numeric=False),
    # always shown: what ranks a row and reads it (domain.md §5)
    Col("launch_count", "Launches", 9, fmt="{:,d}"),
    Col("avg_api_us", "API avg", 8),
    Col("avg_kernel_us", "Kernel avg", 10, fmt="{:,.3f}"),
    Col("total_api_ms", "total API ms", 12, fmt="{:,.3f}"),
    # as width allows, in this order; ← / → scroll through them
    Col("avg_queue_us", "Queue avg", 10),
    Col("max_api_us", "max API", 9),
    Col("queue_count", "queue count", 11, fmt="{:,d}"),
    Col("device_id", "Dev", 3, fmt="{:d}"),
    Col("nvtx_range", "Phase", 0, numeric=False),
)
PINNED = frozenset(("kernel_name", "launch_count", "avg_api_us", "avg_kernel_us", "total_api_ms"))
MIN_NAME = 24
MIN_NAME_FLOOR = 16
MIN_PHASE = 12

HEADER_STYLE = Style(bold=True, color="#ffffff", bgcolor="#303030")
HEADER_SORT_STYLE = Style(bold=True, color="#000000", bgcolor="#87d7ff")
ROW_STYLE = Style(color="#d0d0d0")
NCCL_STYLE = Style(color="#d787d7")
CURSOR_STYLE = Style(color="#000000", bgcolor="#87d7ff", bold=True)
CURSOR_BLUR_STYLE = Style(color="#ffffff", bgcolor="#444444")
HOT_STYLE = Style(color="#ffaf00", bold=True)
EMPTY_STYLE = Style(color="#8a8a8a", italic=True)


class KernelTable(Widget, can_focus=True):
    """The kernel table. Subclasses (the call-site pane) set COLUMNS, PINNED, NAME_KEY (the name
    column), FLEX_KEY (the optional text column that takes the spare width) and `chosen`."""

    COLUMNS = COLUMNS
    PINNED = PINNED
    NAME_KEY = "kernel_name"
    FLEX_KEY = "nvtx_range"
    MIN_NAME = MIN_NAME
    FLEX_MIN = MIN_PHASE   # the FLEX_KEY column shows only with at least this width
    MAX_NAME = 0           # the name column grows at most to this (0: to its longest name)
    NAME_SHARE = 1.0       # of the spare width, the share the name takes before the FLEX_KEY column

    BINDINGS = [
        Binding("j,down", "cursor_down", "Down", id="table.cursor_down", show=False),
        Binding("k,up", "cursor_up", "Up", id="table.cursor_up", show=False),
        Binding("pagedown", "page_down", "Page down", id="table.page_down", show=False),
        Binding("pageup", "page_up", "Page up", id="table.page_up", show=False),
        Binding("home", "top", "Top", id="table.top", show=False),
        Binding("end", "bottom", "Bottom", id="table.bottom", show=False),
        Binding("enter", "choose", "Highlight kernel", id="table.choose"),
        Binding("s", "sort_next", "Sort column", id="table.sort_next"),
        Binding("S", "sort_reverse", "Reverse sort", id="table.sort_reverse", show=False),
        *[Binding(str(i + 1), f"sort_col({i})", f"Sort by shown column {i + 1}", id=f"table.sort_{i + 1}",
                  show=False) for i in range(9)],
        Binding("p", "sort_phase", "Sort by Phase", id="table.sort_phase", show=False),
        Binding("left", "scroll_cols(-1)", "Columns left", id="table.cols_left", show=False),
        Binding("right", "scroll_cols(1)", "Columns right", id="table.cols_right", show=False),
    ]

    DEFAULT_CSS = """
    KernelTable { height: 12; }
    """

    # View state: assigning one reorders or repaints the table.
    filter_text: reactive[str] = reactive("", init=False)
    hide_nccl: reactive[bool] = reactive(False, init=False)
    multi_device: reactive[bool] = reactive(False, init=False)
    empty_text: reactive[str] = reactive("(No small-and-frequent kernel launch data found)", init=False)
    col_offset: reactive[int] = reactive(0, init=False)       # first optional column shown
    cols_scrolled: reactive[bool] = reactive(False, init=False)  # → pressed: optional columns before names

    def __init__(self, **kw):
        super().__init__(**kw)
        self.rows: list[dict] = []
        self.order = np.zeros(0, np.int64)      # indices into rows, in display order
        self.sort_key: str | None = None        # None: the engine's ranking
        self.descending = True
        self.cursor = 0
        self.top = 0
        self.hidden_cols = 0                    # optional columns not shown at this width
        self._keys: dict = {}
        self._colcache = None
        self._need = (self.MIN_NAME, 0)         # widths the names and phases need

    def watch_filter_text(self) -> None:
        self._apply(self.selected_row())

    def watch_hide_nccl(self) -> None:
        self._apply(self.selected_row())

    def watch_multi_device(self) -> None:
        self._colcache = None

    def validate_col_offset(self, v: int) -> int:
        return max(0, min(int(v), len(self._optional()) - 1))

    def watch_col_offset(self) -> None:
        self._colcache = None

    def watch_cols_scrolled(self) -> None:
        self._colcache = None

    # ---- data -----------------------------------------------------------------------------
    def set_rows(self, rows: list[dict], multi_device: bool | None = None) -> None:
        keep = self.selected_row()
        self.rows = rows
        if multi_device is not None:
            self.multi_device = multi_device
        n = len(rows)
        self._keys = {}
        for c in self.COLUMNS:
            vals = [r.get(c.key) for r in rows]
            if c.numeric:
                self._keys[c.key] = np.array([v if v is not None else -1 for v in vals], np.float64)
            else:
                s = np.array([self._text(c.key, v) for v in vals], dtype=object)
                self._keys[c.key] = np.argsort(np.argsort(s, kind="stable"), kind="stable").astype(np.float64) \
                    if n else np.zeros(0)
        self._colcache = None
        prefix = 5 if self.multi_device else 0
        need = max([len(r[self.NAME_KEY]) + 2 for r in rows] + [self.MIN_NAME]) + prefix
        self._need = (min(need, max(self.MAX_NAME, self.MIN_NAME)) if self.MAX_NAME else need,
                      max([len(self._text(self.FLEX_KEY, r.get(self.FLEX_KEY))) for r in rows] + [0]))
        self._apply(keep)

    def _text(self, key: str, v) -> str:
        """A text cell as shown, sorted and sized: the phase by its shown name (a pyprof / DLProf
        marker by its op and line, definitions.md §V5)."""
        text = str(v or "")
        return marker_name(text) if key == self.FLEX_KEY else text

    def _apply(self, keep: dict | None = None) -> None:
        n = len(self.rows)
        idx = np.arange(n)
        if self.filter_text:
            f = self.filter_text.lower()
            idx = np.array([i for i in idx.tolist() if f in self.rows[i][self.NAME_KEY].lower()], np.int64)
        if self.hide_nccl and len(idx):
            idx = np.array([i for i in idx.tolist() if not self.rows[i].get("is_nccl")], np.int64)
        if self.sort_key is not None and len(idx):
            k = self._keys[self.sort_key][idx]
            # stable: ties keep the engine's ranking; descending flips the key, not the order of ties
            o = np.argsort(-k if self.descending else k, kind="stable")
            idx = idx[o]
        self.order = idx.astype(np.int64)
        self.cursor = 0
        if keep is not None:
            for pos, i in enumerate(self.order.tolist()):
                r = self.rows[i]
                if r[self.NAME_KEY] == keep[self.NAME_KEY] and r.get("device_id") == keep.get("device_id"):
                    self.cursor = pos
                    break
        self.top = 0
        self._ensure_visible()
        self.refresh()
        self.post_message(TableRowMoved(self.selected_row()))

    def selected_row(self) -> dict | None:
        if not len(self.order):
            return None
        return self.rows[int(self.order[min(self.cursor, len(self.order) - 1)])]

    def visible_rows(self) -> list[dict]:
        return [self.rows[i] for i in self.order.tolist()]

    def set_filter(self, text: str) -> None:
        self.filter_text = text

    def toggle_nccl(self) -> None:
        self.hide_nccl = not self.hide_nccl

    def sort_by(self, key: str | None, descending: bool | None = None) -> None:
        if key is not None and key not in self._keys and self.rows:
            raise ValueError(key)
        col = next((c for c in self.COLUMNS if c.key == key), None)
        if descending is None:
            if key == self.sort_key and key is not None:
                descending = not self.descending
            else:
                descending = bool(col.numeric) if col else True
        self.sort_key = key
        self.descending = descending
        self._apply(self.selected_row())

    # ---- layout ----------------------------------------------------------------------------
    def _has_phase(self) -> bool:
        return self._need[1] > 0

    def _optional(self) -> list[Col]:
        return [c for c in self.COLUMNS if c.key not in self.PINNED and (c.key != "device_id" or self.multi_device)
                and (c.key != self.FLEX_KEY or self._has_phase())]

    def columns(self, width: int) -> list[tuple[Col, int]]:
        """(column, cells) shown at `width`: the pinned columns, then optional ones from col_offset as
        they fit; the name, then Phase, get the cells they need from what is left."""
        ck = (width, self.multi_device, self._need, self.col_offset, self.cols_scrolled)
        if self._colcache and self._colcache[0] == ck:
            return self._colcache[1]
        pinned = [c for c in self.COLUMNS if c.key in self.PINNED and c.width]
        opt = self._optional()
        # scrolled sideways, the name gives up a few cells so that an optional column shows (80 columns)
        name_min = self.MIN_NAME
        if opt and self.cols_scrolled:
            first = opt[min(self.col_offset, len(opt) - 1)]
            room = width - (self.MIN_NAME + 1 + sum(c.cells + 1 for c in pinned))
            need = (self.FLEX_MIN if first.key == self.FLEX_KEY else first.cells) + 1
            if need > room:
                name_min = max(MIN_NAME_FLOOR, self.MIN_NAME - (need - room))
        used = name_min + 1 + sum(c.cells + 1 for c in pinned)
        shown = []
        for c in opt[self.col_offset:]:
            w = self.FLEX_MIN if c.key == self.FLEX_KEY else c.cells
            if used + w + 1 > width:
                break
            shown.append(c)
            used += w + 1
        self.hidden_cols = len(opt) - len(shown)
        spare = max(0, width - used)
        flex = any(c.key == self.FLEX_KEY for c in shown)
        share = spare if not flex else int(spare * self.NAME_SHARE)   # what the name may take first
        name_w = name_min + min(share, max(0, self._need[0] - name_min))
        spare -= name_w - name_min
        out = [(self.COLUMNS[0], name_w)] + [(c, c.cells) for c in pinned]
        for c in shown:
            if c.key == self.FLEX_KEY:
                w = self.FLEX_MIN + min(spare, max(0, self._need[1] - self.FLEX_MIN))
                spare -= w - self.FLEX_MIN
                out.append((c, w))
            else:
                out.append((c, c.cells))
        if spare > 0:                      # the rest to the name: the row fills the width
            out[0] = (out[0][0], out[0][1] + spare)
        self._colcache = (ck, out)
        return out

    def shows(self, key: str) -> bool:
        return any(c.key == key for c, _ in self.columns(self.size.width))

    @property
    def body_height(self) -> int:
        return max(1, self.size.height - 1)

    def _ensure_visible(self) -> None:
        h = self.body_height
        if self.cursor < self.top:
            self.top = self.cursor
        elif self.cursor >= self.top + h:
            self.top = self.cursor - h + 1

    # ---- Line API ----------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self.size.width
        cols = self.columns(width)
        if y == 0:
            segs = []
            for c, w in cols:
                title = c.title
                style = HEADER_STYLE
                if c.key == self.sort_key:
                    title = title + ("▼" if self.descending else "▲")
                    style = HEADER_SORT_STYLE
                if c.key == self.NAME_KEY:
                    title = self.name_title(title, w)
                    if self.multi_device and not self.shows("device_id"):
                        title += " (GPUn=dev)"
                    if self.hidden_cols:
                        more = f" ←/→ {self.hidden_cols} more col{'s' if self.hidden_cols > 1 else ''}"
                        if len(title) + len(more) + 1 <= w:
                            title += more
                txt = elide(title, w).ljust(w) if not c.numeric else title[-w:].rjust(w)
                segs.append(Segment(txt, style))
                segs.append(Segment(" ", HEADER_STYLE))
            return Strip(segs).adjust_cell_length(width, HEADER_STYLE)
        i = self.top + y - 1
        if not len(self.order):
            msg = self.empty_lines(width)
            if 1 <= y <= len(msg):
                return Strip([Segment(msg[y - 1][:width], EMPTY_STYLE)]).adjust_cell_length(width, PLAIN)
            return Strip.blank(width, PLAIN)
        if i >= len(self.order):
            return Strip.blank(width, PLAIN)
        r = self.rows[int(self.order[i])]
        base = NCCL_STYLE if r.get("is_nccl") else ROW_STYLE
        if i == self.cursor:
            base = CURSOR_STYLE if self.has_focus else CURSOR_BLUR_STYLE
        segs = []
        dev_in_name = self.multi_device and not any(c.key == "device_id" for c, _ in cols)
        for c, w in cols:
            v = r.get(c.key)
            if c.key == self.NAME_KEY:
                lead = f"GPU{r['device_id']} " if dev_in_name else ""
                lead += NCCL_MARK if r.get("is_nccl") else ""
                txt = lead + self.fit_name(str(v), w - len(lead))
                txt = txt.ljust(w)
            elif not c.numeric:
                txt = elide(self._text(c.key, v), w).ljust(w)
            else:
                txt = c.fmt.format(v) if v is not None else "-"
                txt = txt[-w:].rjust(w)
            style = base
            if c.key == "avg_kernel_us" and i != self.cursor and v is not None and v < r.get("avg_api_us", 0):
                style = HOT_STYLE   # kernel shorter than its launch call: a fusion candidate
            segs.append(Segment(txt, style))
            segs.append(Segment(" ", base))
        return Strip(segs).adjust_cell_length(width, base)

    def fit_name(self, name: str, width: int) -> str:
        """A name in `width` cells (kernel names differ at both ends: cut in the middle)."""
        return elide(name, width)

    def name_title(self, title: str, width: int) -> str:
        """The name column's header in `width` cells (the call-site pane adds its coverage)."""
        return title

    def empty_lines(self, width: int) -> list[str]:
        """What an empty table says, one line per body line."""
        if self.filter_text or self.hide_nccl:
            return [f"(no row matches the filter {self.filter_text!r}{' with NCCL hidden' if self.hide_nccl else ''})"]
        return [self.empty_text]

    def chosen(self, row: dict):
        """The message Enter on a row posts."""
        return KernelChosen(row)

    # ---- actions -------------------------------------------------------------------------------
    def _move(self, to: int) -> None:
        n = len(self.order)
        if not n:
            return
        to = max(0, min(n - 1, to))
        if to == self.cursor:
            return
        self.cursor = to
        self._ensure_visible()
        self.refresh()
        self.post_message(TableRowMoved(self.selected_row()))

    def action_cursor_down(self) -> None:
        self._move(self.cursor + 1)

    def action_cursor_up(self) -> None:
        self._move(self.cursor - 1)

    def action_page_down(self) -> None:
        self._move(self.cursor + self.body_height)

    def action_page_up(self) -> None:
        self._move(self.cursor - self.body_height)

    def action_top(self) -> None:
        self._move(0)

    def action_bottom(self) -> None:
        self._move(len(self.order) - 1)

    def action_choose(self) -> None:
        r = self.selected_row()
        if r is not None:
            self.post_message(self.chosen(r))

    def action_sort_next(self) -> None:
        cycle = (None,) + tuple(c.key for c in self.COLUMNS)
        i = cycle.index(self.sort_key) if self.sort_key in cycle else 0
        self.sort_by(cycle[(i + 1) % len(cycle)])

    def action_sort_reverse(self) -> None:
        if self.sort_key is not None:
            self.sort_by(self.sort_key, not self.descending)

    def action_sort_col(self, i: int) -> None:
        """Digit i+1: the (i+1)-th column on screen, never a hidden one."""
        cols = self.columns(self.size.width)
        if int(i) < len(cols):
            self.sort_by(cols[int(i)][0].key)
        else:
            self.notify(f"Only {len(cols)} columns are shown at this width: → scrolls to the others.")

    def action_sort_phase(self) -> None:
        if not self._has_phase():
            self.notify("No Phase column: no NVTX range encloses these launches.")
            return
        self.sort_by("nvtx_range")
        if not self.shows("nvtx_range"):   # sorted on a column off screen: say so and where it is
            self.notify(f"Sorted by Phase ({'descending' if self.descending else 'ascending'}), a column off "
                        "screen at this width: → scrolls to it.")

    def action_scroll_cols(self, step: int) -> None:
        """→ / ←: scroll the optional columns. The first → on a narrow table first makes room for one
        by shortening the names; ← back at the first column gives the names their room again."""
        step = int(step)
        self.columns(self.size.width)
        right_hidden = self.hidden_cols - self.col_offset
        if step > 0:
            if not self.cols_scrolled and right_hidden > 0:
                self.cols_scrolled = True
                self.columns(self.size.width)
                if self.hidden_cols - self.col_offset < right_hidden:
                    self.refresh()
                    return                        # the names made room: that was this step
            if right_hidden <= 0:
                self.notify("Every column is shown: ← scrolls back." if self.col_offset else
                            "Every column is shown at this width.")
                return
            self.col_offset += 1
        elif self.col_offset > 0:
            self.col_offset -= 1
        else:
            self.cols_scrolled = False
        self.refresh()

    def on_click(self, event) -> None:
        y = event.y
        if y == 0:
            x = 0
            for c, w in self.columns(self.size.width):
                if x <= event.x < x + w + 1:
                    self.sort_by(c.key)
                    return
                x += w + 1
        elif len(self.order):
            self._move(self.top + y - 1)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def on_resize(self) -> None:
        self._colcache = None
        self._ensure_visible()
