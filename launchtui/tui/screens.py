"""Modal screens: help, NVTX range picker, export dialog, overwrite confirmation, trace info."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

# not scoped: the rules name the screen types themselves
MODAL_CSS = """
ModalScreen { align: center middle; }
ModalScreen > Vertical { width: 90%; max-width: 110; height: auto; max-height: 90%;
                         border: round $accent; background: $panel; padding: 0 1; }
ModalScreen Label { width: 100%; }
ModalScreen #title { text-style: bold; }
ModalScreen #hint { color: $text-muted; }
ModalScreen OptionList { height: auto; max-height: 20; }
ModalScreen VerticalScroll { height: auto; max-height: 30; }
"""


def fuzzy_score(query: str, text: str) -> float:
    """Case-insensitive fuzzy match: substring hits rank first (earlier is better), then in-order
    subsequences (tighter is better); 0 means no match."""
    if not query:
        return 1.0
    q, t = query.lower(), text.lower()
    i = t.find(q)
    if i >= 0:
        return 1000.0 - i - 0.01 * len(t)
    pos, first, last = 0, -1, -1
    for ch in q:
        j = t.find(ch, pos)
        if j < 0:
            return 0.0
        if first < 0:
            first = j
        last = j
        pos = j + 1
    return 100.0 / (1 + (last - first) - len(q) + 1) - 0.001 * len(t)


class HelpScreen(ModalScreen):
    """Every key, grouped, as currently mapped."""

    DEFAULT_CSS = MODAL_CSS
    SCOPED_CSS = False
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close", id="help.close")]

    def __init__(self, sections: list[tuple[str, list[tuple[str, str]]]], note: str = ""):
        super().__init__()
        self.sections = sections
        self.note = note

    def compose(self) -> ComposeResult:
        from rich.text import Text
        text = Text()
        for title, keys in self.sections:
            text.append(f"{title}\n", style="bold underline")
            for k, d in keys:
                text.append(f"  {k:<18}", style="bold")
                text.append(f" {d}\n")
            text.append("\n")
        if self.note:
            text.append(self.note)
        with Vertical():
            yield Label("launchtui keys (Esc closes)", id="title")
            with VerticalScroll():
                yield Static(text, id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)


class NvtxPicker(ModalScreen):
    """Fuzzy picker of NVTX range names with counts and total time."""

    DEFAULT_CSS = MODAL_CSS
    SCOPED_CSS = False
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="picker.cancel"),
                Binding("down", "down", "Down", show=False, id="picker.down"),
                Binding("up", "up", "Up", show=False, id="picker.up")]
    LIMIT = 200

    def __init__(self, entries: list, fmt_duration):
        super().__init__()
        self.entries = entries          # nvtx.RangeName
        self.fmt = fmt_duration
        self.shown: list = []

    PLACEHOLDER = "range name"
    HINT = "[ / ] then step through the occurrences of the chosen name"

    def title_text(self) -> str:
        return f"NVTX ranges ({len(self.entries)} names) — type to filter, Enter zooms to the first occurrence"

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text(), id="title")
            yield Input(placeholder=self.PLACEHOLDER, id="picker-input")
            yield OptionList(id="picker-list")
            yield Label(self.HINT, id="hint")

    def on_mount(self) -> None:
        if not self.query(OptionList):   # dismissed / app closing before compose finished
            return
        self._fill("")
        self.query_one(Input).focus()

    def _fill(self, q: str) -> None:
        scored = [(fuzzy_score(q, e.name), i) for i, e in enumerate(self.entries)]
        scored = [s for s in scored if s[0] > 0]
        if q:
            scored.sort(key=lambda s: (-s[0], s[1]))
        self.shown = [self.entries[i] for _, i in scored[: self.LIMIT]]
        ol = self.query_one(OptionList)
        ol.clear_options()
        w = max((len(e.name) for e in self.shown), default=10)
        w = min(w, 60)
        ol.add_options([Option(f"{e.name[:w]:<{w}}  {e.count:>6,}×  {self.fmt(e.total_ns):>10}") for e in self.shown])
        if self.shown:
            ol.highlighted = 0

    def on_input_changed(self, event: Input.Changed) -> None:
        self._fill(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        ol = self.query_one(OptionList)
        i = ol.highlighted if ol.highlighted is not None else 0
        self.dismiss(self.shown[i] if self.shown else None)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.shown[event.option_index])

    def action_down(self) -> None:
        ol = self.query_one(OptionList)
        if self.shown:
            ol.highlighted = min(len(self.shown) - 1, (ol.highlighted or 0) + 1)

    def action_up(self) -> None:
        ol = self.query_one(OptionList)
        if self.shown:
            ol.highlighted = max(0, (ol.highlighted or 0) - 1)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ExportDialog(ModalScreen):
    """Edit the export file name; Ctrl+T switches between launchtui's range document and a Chrome trace
    (Perfetto, chrome://tracing, HTA); Enter writes, Esc cancels. Dismisses with (path, format)."""

    DEFAULT_CSS = MODAL_CSS
    SCOPED_CSS = False
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="export.cancel"),
                Binding("ctrl+t", "toggle_format", "Format", id="export.format")]
    TITLES = {"launchtui": "Export to JSON (the same document as `launchtui export`)",
              "chrome": "Export a Chrome trace for Perfetto / chrome://tracing / HTA (`launchtui export --format chrome`)"}

    def __init__(self, default_name: str, window_text: str, command: str, chrome_name: str | None = None,
                 chrome_command: str | None = None):
        super().__init__()
        self.names = {"launchtui": default_name, "chrome": chrome_name or default_name}
        self.commands = {"launchtui": command, "chrome": chrome_command or command}
        self.fmt = "launchtui"
        self.window_text = window_text

    @property
    def default_name(self) -> str:
        return self.names[self.fmt]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.TITLES[self.fmt], id="title")
            yield Label(self.window_text)
            yield Input(value=self.default_name, id="export-path")
            yield Label(f"same as: {self.commands[self.fmt]}", id="hint")
            yield Label("Enter writes (atomically; never overwrites without asking) · Ctrl+T: launchtui JSON / "
                        "Chrome trace · Esc cancels", id="hint2")

    def on_mount(self) -> None:
        for inp in self.query(Input):
            inp.focus()

    def action_toggle_format(self) -> None:
        inp = self.query_one("#export-path", Input)
        typed = inp.value.strip()
        self.fmt = "chrome" if self.fmt == "launchtui" else "launchtui"
        if typed in self.names.values():   # a default name follows the format; a typed one stays
            inp.value = self.default_name
        self.query_one("#title", Label).update(self.TITLES[self.fmt])
        self.query_one("#hint", Label).update(f"same as: {self.commands[self.fmt]}")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        path = event.value.strip()
        self.dismiss((path, self.fmt) if path else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmScreen(ModalScreen):
    DEFAULT_CSS = MODAL_CSS
    SCOPED_CSS = False
    BINDINGS = [Binding("y", "yes", "Yes", id="confirm.yes"),
                Binding("n,escape", "no", "No", id="confirm.no")]

    def __init__(self, question: str):
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question, id="title")
            yield Label("y: yes   n / Esc: no", id="hint")

    def action_yes(self) -> None:
        self.dismiss(True)

    def action_no(self) -> None:
        self.dismiss(False)


class InfoScreen(ModalScreen):
    DEFAULT_CSS = MODAL_CSS
    SCOPED_CSS = False
    BINDINGS = [Binding("escape,q,i", "close", "Close", id="info.close")]

    def __init__(self, text: str, title: str = "Trace info (`launchtui info`)"):
        super().__init__()
        self.text = text
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"{self.title_text} — Esc closes", id="title")
            with VerticalScroll():
                yield Static(self.text, markup=False, id="info-text")

    def action_close(self) -> None:
        self.dismiss(None)
