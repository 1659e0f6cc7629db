"""How the timeline draws its rows (a mixin of tui/widgets/timeline.py, which holds the state): a
row's strip from the strip cache or binned afresh, NVTX rows, the marks over the queue rows, and the
time axis."""
from __future__ import annotations


import numpy as np
from rich.segment import Segment
from textual.strip import Strip

from launchtui.analysis.prose import marker_name
from launchtui.tui import format as tfmt
from launchtui.tui import lane_view as lanes_fn
from launchtui.tui.state import elide
from launchtui.tui.widgets import idle_row
from launchtui.tui.widgets.timeline_style import (
    PLAIN, CACHE_SIZE, BLOCKS, HW_GLYPHS, SPARK, HIGHLIGHT_GLYPH, SPIKE_GLYPH, FULL_GLYPH, S_NONE,
    S_API, S_SPIKE, S_HIGHLIGHT, S_QUEUE, S_QFULL, S_TICK, S_RULER, S_EP_FULL, S_EP_NEAR,
    S_EP_SPIKE, S_SEL, S_MARK, S_DIM, S_MULTI, S_NVTX0, NVTX_BG, STYLES, HW_STYLE, cells_to_strip)


class TimelineRender:
    """The rows' and the axis's strips; `self` is the Timeline."""

    def _row_strip(self, row) -> Strip:
        hl = self.highlight_gen if row.kind in ("hw", "api") else 0
        key = (row.key, self.view.key(), hl)
        s = self._cache.get(key)
        if s is not None:
            self._cache.move_to_end(key)
            return s
        s = self._render_row(row, self.edges())
        self._cache[key] = s
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return s

    def _render_row(self, row, edges: np.ndarray) -> Strip:
        w = len(edges) - 1
        if row.kind == "api":
            c = lanes_fn.api_cells(row.lane, edges)
            glyph = BLOCKS[c.level]
            codes = np.where(c.level > 0, S_API, S_NONE).astype(np.int16)
            if c.spike.any():
                glyph = np.where(c.spike, SPIKE_GLYPH, glyph)
                codes[c.spike] = S_SPIKE
            # the launch calls of the highlighted ops (a call site's or a graph's launches)
            calls = self.highlight.by_api_lane.get((row.lane.device, row.lane.thread)) if self.highlight else None
            glyph = _highlighted(glyph, codes, calls, edges)
            return cells_to_strip("".join(glyph.tolist()), codes)
        if row.kind == "hw":
            c = lanes_fn.hw_cells(row.lane, edges)
            glyph = HW_GLYPHS[c.cat, c.level]
            codes = np.where(c.level > 0, HW_STYLE[c.cat], S_NONE).astype(np.int16)
            inst = self.highlight.by_stream.get((row.lane.device, row.lane.stream)) if self.highlight else None
            glyph = _highlighted(glyph, codes, inst, edges)
            return cells_to_strip("".join(glyph.tolist()), codes)
        if row.kind == "idle":
            text, codes = idle_row.cells(row.lane, edges)
            return cells_to_strip(text, codes, idle_row.STYLES)
        if row.kind == "queue":
            lane = row.lane
            v = lane.bin_max(edges)
            scale = self.threshold if lane.peak >= self.threshold else max(lane.peak, 1)
            lv = np.clip(np.ceil(v / scale * 7), 1, 7).astype(np.int64)
            lv = np.where(v > 0, lv, 0)
            full = v >= self.threshold
            glyph = np.where(full, FULL_GLYPH, SPARK[lv])
            codes = np.where(full, S_QFULL, np.where(v > 0, S_QUEUE, S_NONE)).astype(np.int16)
            return cells_to_strip("".join(glyph.tolist()), codes)
        if row.kind == "nvtx":
            return self._render_nvtx(row.lane, edges)
        if row.kind == "dev":
            t = ("━" * w)
            return Strip([Segment(t, STYLES[S_DIM])], w)
        return Strip([Segment(" " * w, PLAIN)], w)

    def _render_nvtx(self, lane, edges: np.ndarray) -> Strip:
        c = lanes_fn.nvtx_cells(lane, edges)
        rid = c.range_idx
        w = len(rid)
        text_ids = self.trace.ranges.text
        cut = np.nonzero(rid[1:] != rid[:-1])[0] + 1
        bounds = [0, *cut.tolist(), w]
        segs = []
        strings = self.trace.strings
        for a, b in zip(bounds[:-1], bounds[1:]):     # one step per run of equal range (≤ width)
            r = int(rid[a])
            n = b - a
            if r < 0:
                multi = c.multi[a:b]
                if multi.any():
                    segs.append(Segment("".join(np.where(multi, "┆", " ").tolist()), STYLES[S_MULTI]))
                else:
                    segs.append(Segment(" " * n, PLAIN))
                continue
            tid = int(text_ids[r])
            name = marker_name(strings[tid])     # a pyprof / DLProf marker by its op and line (§V5)
            if n == 1:
                txt = "┆" if c.multi[a] else "▌"
            elif n == 2:
                txt = "[]"
            else:
                # the name elided in the middle; a bar too narrow for a readable name stays a plain bar
                body = elide(name, n - 2) if n - 2 >= min(5, len(name)) else ""
                txt = "[" + body.ljust(n - 2, "─" if not body else " ") + "]"
            segs.append(Segment(txt, STYLES[S_NVTX0 + tid % len(NVTX_BG)]))
        return Strip(segs, w)

    # ---- axis ---------------------------------------------------------------------------------
    def _mark_sets(self):
        """Episode / spike intervals for the shown devices (rebuilt when the device changes)."""
        key = self.device
        m = self._marks_cache.get(key)
        if m is None:
            eps = [e for e in self.marks if self.device is None or e.device == self.device]
            sat = [e for e in eps if e.kind == "queue" and e.level == "saturated"]
            near = [e for e in eps if e.kind == "queue" and e.level != "saturated"]
            spk = [e for e in eps if e.kind == "spike" and e.worst_api not in self.stall_apis]
            stall = [e for e in eps if e.kind == "spike" and e.worst_api in self.stall_apis]

            def iv(lst):
                return lanes_fn.Intervals(np.array([e.start for e in lst], np.int64), np.array([e.end for e in lst], np.int64))
            m = self._marks_cache[key] = (iv(sat), iv(near), iv(spk), iv(stall))
        return m

    def forget_marks(self) -> None:
        """The marks or their classification changed: rebuild the axis sets on the next paint."""
        self._marks_cache = {}

    def _axis_strips(self) -> tuple[Strip, Strip]:
        v = self.view
        w = v.width
        edges = self.edges()
        origin = self.origin_ns if self.relative else None
        # tick labels
        tks, step = tfmt.ticks(v.start, v.end, max(1, w // 14))
        label = [" "] * w
        ruler = np.array(["─"] * w, dtype=object)
        rcode = np.full(w, S_RULER, np.int16)
        next_free = 0
        ref = max(abs(v.start - origin), abs(v.end - origin)) if origin is not None else None
        for t in tks.tolist():                            # ≤ width/14 ticks
            col = int((t - v.start) // v.ns_per_col)
            if 0 <= col < w:
                ruler[col] = "┬"
                txt = tfmt.fmt_tick(t, step, origin, ref)
                if col >= next_free and col + len(txt) <= w:
                    label[col:col + len(txt)] = list(txt)
                    next_free = col + len(txt) + 2
        sat, near, spk, stall = self._mark_sets()
        for iv, glyph, code in ((near, "━", S_EP_NEAR), (sat, "━", S_EP_FULL), (spk, "▲", S_EP_SPIKE),
                                (stall, "△", S_EP_NEAR)):
            if len(iv):
                hit = iv.any(edges)
                ruler[hit] = glyph
                rcode[hit] = code
        if len(self.iteration_marks):
            cols = ((self.iteration_marks - v.start) // v.ns_per_col).astype(np.int64)
            cols = cols[(cols >= 0) & (cols < w)]
            ruler[cols] = "╎"
            rcode[cols] = S_TICK
        if self.sel_range is not None:
            for t, g in ((self.sel_range[0], "["), (self.sel_range[1], "]")):
                col = v.col_of(t)
                if 0 <= col < w:
                    ruler[col] = g
                    rcode[col] = S_SEL
        if self.pending_mark is not None:
            col = v.col_of(self.pending_mark)
            if 0 <= col < w:
                ruler[col] = "┃"
                rcode[col] = S_MARK
        c = v.cursor_col
        if 0 <= c < w:
            ruler[c] = "▼"
            rcode[c] = S_SEL
        top = Strip([Segment("".join(label), STYLES[S_TICK])], w)
        return top, cells_to_strip("".join(ruler.tolist()), rcode)

    # ---- Line API ------------------------------------------------------------------------------


def _highlighted(glyph: np.ndarray, codes: np.ndarray, marks, edges: np.ndarray) -> np.ndarray:
    """`glyph` with the columns that hold a highlighted instance (`marks.any(edges)`) drawn as the
    highlight; `codes` is marked in place. `marks` None: nothing highlighted on this row."""
    if marks is None:
        return glyph
    hit = marks.any(edges)
    if not hit.any():
        return glyph
    codes[hit] = S_HIGHLIGHT
    return np.where(hit, HIGHLIGHT_GLYPH, glyph)
