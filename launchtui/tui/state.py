"""View state of the timeline: the time cursor, zoom and pan (pure Python, no Textual).

The cursor sits in the middle column of the plot; the view is centred on it (nsys-ai's model), so
panning moves the cursor and zooming keeps it fixed. The cursor's cell is
[cursor, cursor + ns_per_col).

Times are Python ints: Kineto traces on the Unix-epoch clock hold ~1.7e18 ns, beyond float64's exact
integers (2**53), so a float cursor would drift by up to 128 ns.
"""
from __future__ import annotations

from dataclasses import dataclass

MIN_NS_PER_COL = 1.0


def elide(text: str, width: int) -> str:
    """`text` in at most `width` cells, cut in the middle (kernel and range names differ at both ends:
    `void at::native::…elementwise_kernel<…>`)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:max(width, 0)]
    head = (width - 1 + 1) // 2
    tail = width - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def cut_words(text: str, width: int) -> str:
    """`text` in at most `width` cells, cut at a word boundary with "…" (never mid-word when a space
    lies in the last third)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:max(width, 0)]
    cut = text[: width - 1]
    sp = max(cut.rfind(" "), cut.rfind(";"))
    if sp >= (width * 2) // 3:
        cut = cut[:sp].rstrip(" ;,")
    return cut + "…"


@dataclass
class View:
    cursor: int = 0              # ns, left edge of the cursor's cell
    ns_per_col: float = 1e6
    width: int = 100             # plot columns
    lo: int = 0                  # extent the view may wander in (with a margin)
    hi: int = 1
    min_ns_per_col: float = MIN_NS_PER_COL   # the trace's clock tick: no zooming past its resolution

    @property
    def cursor_col(self) -> int:
        return self.width // 2

    @property
    def start(self) -> int:
        return self.cursor - int(round(self.cursor_col * self.ns_per_col))

    @property
    def end(self) -> int:
        return self.start + int(round(self.width * self.ns_per_col))

    @property
    def max_ns_per_col(self) -> float:
        return max(self.min_ns_per_col, 4.0 * (self.hi - self.lo) / max(self.width, 1))

    def key(self) -> tuple:
        """Identity of the binning (for strip caches)."""
        return (self.start, self.ns_per_col, self.width)

    def _clamp(self) -> None:
        self.ns_per_col = min(max(self.ns_per_col, self.min_ns_per_col), self.max_ns_per_col)
        span = self.hi - self.lo
        self.cursor = int(min(max(int(self.cursor), self.lo - span // 2), self.hi + span // 2))

    _fit: tuple | None = None    # the last fit() while nothing else moved the view: redone on resize

    def resize(self, width: int) -> None:
        width = max(1, int(width))
        if width != self.width:
            self.width = width
            if self._fit is not None:
                self.fit(*self._fit)
            self._clamp()

    def fit(self, lo: int, hi: int, margin: float = 0.02) -> None:
        """Show [lo, hi] whole, with the cursor in its middle."""
        span = max(hi - lo, 1)
        self.ns_per_col = span * (1 + 2 * margin) / max(self.width, 1)
        self.cursor = int(lo) + span // 2
        self._clamp()
        self._fit = (lo, hi, margin)

    def pan(self, cols: float) -> None:
        self._fit = None
        self.cursor += int(round(cols * self.ns_per_col))
        self._clamp()

    def zoom(self, factor: float) -> None:
        """factor < 1 zooms in; the cursor stays put."""
        self._fit = None
        self.ns_per_col *= factor
        self._clamp()

    def goto(self, t: int) -> None:
        self._fit = None
        self.cursor = int(t)
        self._clamp()

    def col_of(self, t: int) -> int:
        return int((int(t) - self.start) // self.ns_per_col)
