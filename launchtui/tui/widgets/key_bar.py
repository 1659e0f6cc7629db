"""The key bar: the screen's shown bindings on one line at the bottom, as Textual's Footer shows them
(" q Quit  ? Help …", the command palette's key at the right end, unavailable keys dim; a click
presses the key).

Why not the Footer: it mounts one widget per key and recomposes them all whenever the bindings
change, which is every focus move, and each of those widgets is styled by the whole stylesheet as
it mounts. This bar renders the same keys as one line of text and only repaints when the bindings
change (the figures are in the commit that brought it)."""
from __future__ import annotations

from typing import NamedTuple

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.strip import Strip
from textual.widget import Widget


class KeyHint(NamedTuple):
    key: str          # the binding's key, as `App.simulate_key` takes it
    display: str      # as the app shows the key ("?", "^p")
    description: str
    enabled: bool


def shown_hints(screen) -> tuple[list[KeyHint], KeyHint | None]:
    """The keys the bar shows, in the screen's binding order: one per action (its first key), only
    bindings with `show`; and the command palette's key (shown at the right end whatever its
    `show`), or None when the app has no palette or the key is not active here."""
    app = screen.app
    active = screen.active_bindings

    def hint(binding, enabled: bool) -> KeyHint:
        return KeyHint(binding.key, app.get_key_display(binding), binding.description, enabled)
    hints, actions = [], set()
    for _node, binding, enabled, _tooltip in active.values():
        if binding.show and binding.action not in actions:
            actions.add(binding.action)
            hints.append(hint(binding, enabled))
    palette = None
    if app.ENABLE_COMMAND_PALETTE and app.COMMAND_PALETTE_BINDING in active:
        _node, binding, enabled, _tooltip = active[app.COMMAND_PALETTE_BINDING]
        palette = hint(binding, enabled)
    return hints, palette


class KeyBar(Widget, can_focus=False):
    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"key-bar--key", "key-bar--description"}
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
        & > .key-bar--key { color: $footer-key-foreground; background: $footer-key-background; text-style: bold; }
        & > .key-bar--description { color: $footer-description-foreground; background: $footer-description-background; }
    }
    """

    def __init__(self, **kw):
        super().__init__(**kw)
        self._spans: list[tuple[int, int, KeyHint]] = []   # the cells [x0, x1) of each key drawn last

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen) -> None:
        if screen is self.screen:
            self.refresh()

    @property
    def text(self) -> str:
        """The bar as plain text (what a screenshot shows)."""
        return "".join(s.text for s in self.render_line(0))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        key_style = base + self.get_component_rich_style("key-bar--key")
        desc_style = base + self.get_component_rich_style("key-bar--description")
        hints, palette = shown_hints(self.screen)
        right = [Segment("▏", base + Style(dim=True)), *self._item(palette, key_style, desc_style)] if palette else []
        room = width - sum(cell_len(s.text) for s in right)
        left, spans, x = [], [], 0
        for h in hints:
            item = self._item(h, key_style, desc_style)
            n = sum(cell_len(s.text) for s in item)
            if x + n > room:
                break                      # whole keys only: a cut-off key would read as another
            left += item
            spans.append((x, x + n, h))
            x += n
        if palette:
            spans.append((room + 1, width, palette))
        self._spans = spans
        pad = [Segment(" " * max(room - x, 0), base)]
        return Strip(left + pad + right, width).crop(0, width)

    @staticmethod
    def _item(h: KeyHint, key_style: Style, desc_style: Style) -> list[Segment]:
        dim = Style(dim=True) if not h.enabled else Style()
        item = [Segment(f" {h.display} ", key_style + dim)]
        if h.description:
            item.append(Segment(f"{h.description} ", desc_style + dim))
        return item

    def on_click(self, event: events.Click) -> None:
        for x0, x1, h in self._spans:
            if x0 <= event.x < x1:
                if h.enabled:
                    self.app.simulate_key(h.key)
                else:
                    self.app.bell()
                event.stop()
                return
