"""A fixed-height text panel drawn with the Line API: updating it repaints its lines only, with no
layout pass (Static.update() re-runs the screen layout, which costs a frame on every cursor move)."""
from __future__ import annotations

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

from launchtui.tui.state import cut_words

PLAIN = Style()   # every segment carries a Style: Textual's NO_COLOR filter fails on None


class TextPanel(Widget):
    DEFAULT_CSS = """
    TextPanel { height: 4; }
    """

    def __init__(self, lines: list[str] | None = None, styles: list[Style] | None = None, **kw):
        super().__init__(**kw)
        self.lines: list[str] = list(lines or [])
        self.line_styles: list[Style] = list(styles or [])

    def set_lines(self, lines: list[str], styles: list[Style] | None = None) -> None:
        lines = list(lines)
        styles = list(styles) if styles is not None else self.line_styles
        if lines == self.lines and styles == self.line_styles:
            return
        self.lines = lines
        self.line_styles = styles
        self.refresh()

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y >= len(self.lines):
            return Strip.blank(width, PLAIN)
        text = self.lines[y]
        if cell_len(text) > width:     # at a word boundary, never mid-word
            text = set_cell_size(cut_words(text, width), width)
        style = self.line_styles[y] if y < len(self.line_styles) else Style()
        return Strip([Segment(text, style)]).adjust_cell_length(width, PLAIN)
