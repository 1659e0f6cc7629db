"""The key bar (launchtui/tui/widgets/key_bar.py): the keys Textual's Footer would show, on one
line drawn by one widget, following focus, and a click presses the key under the mouse."""
from __future__ import annotations

import pytest

from tui_helpers import run

pytestmark = pytest.mark.tui


def _tiny_app():
    from textual.app import App
    from textual.binding import Binding
    from textual.widget import Widget

    from launchtui.tui.widgets.key_bar import KeyBar

    class Pane(Widget, can_focus=True):
        DEFAULT_CSS = "Pane { height: 1fr; }"
        BINDINGS = [Binding("s", "sort", "Sort")]

        def action_sort(self) -> None:
            self.app.ran.append("sort")

    class Tiny(App):
        ENABLE_COMMAND_PALETTE = True
        BINDINGS = [Binding("a", "alpha", "Alpha"), Binding("b", "beta", "Beta"),
                    Binding("c", "alpha", "Alpha again"),          # same action: the first key only
                    Binding("x", "hidden", "Hidden", show=False),
                    Binding("d", "off", "Off")]                    # disabled by check_action

        def __init__(self):
            super().__init__()
            self.ran: list[str] = []
            self.bells = 0

        def compose(self):
            yield Pane(id="one")
            yield KeyBar()

        def check_action(self, action, parameters):
            return None if action == "off" else True

        def bell(self) -> None:
            self.bells += 1

        def action_alpha(self) -> None:
            self.ran.append("alpha")

        def action_beta(self) -> None:
            self.ran.append("beta")

        def action_off(self) -> None:
            self.ran.append("off")

    return Tiny()


def test_the_bar_lists_shown_keys_once_per_action_with_the_palette_at_the_right():
    from launchtui.tui.widgets.key_bar import KeyBar

    async def go():
        app = _tiny_app()
        async with app.run_test(size=(70, 6)) as pilot:
            await pilot.pause()
            bar = app.query_one(KeyBar)
            assert app.focused is app.query_one("#one")
            assert bar.text.startswith(" s Sort  a Alpha  b Beta  d Off "), "the focused widget's keys lead"
            assert len(bar.text) == 70 and not bar.children, "one widget, no widget per key"
            app.set_focus(None)
            await pilot.pause()
            assert bar.text == " a Alpha  b Beta  d Off " + " " * 33 + "▏ ^p palette "
            app.query_one("#one").focus()
            await pilot.pause()
            await pilot.resize_terminal(36, 6)
            await pilot.pause()
            # whole keys only: "b Beta" would end past the palette's key; it and "d Off" are left out, not cut
            assert bar.text == " s Sort  a Alpha " + " " * 6 + "▏ ^p palette "
    run(go())


def test_a_click_presses_the_key_under_the_mouse_and_a_disabled_key_rings_the_bell():
    async def go():
        app = _tiny_app()
        async with app.run_test(size=(70, 6)) as pilot:
            await pilot.pause()
            text = app.query_one("KeyBar").text
            await pilot.click("KeyBar", offset=(text.index("Beta"), 0))
            await pilot.click("KeyBar", offset=(text.index("Off"), 0))
            await pilot.click("KeyBar", offset=(text.index("  ", text.index("Off")) + 5, 0))   # blank: nothing
            await pilot.pause()
            assert app.ran == ["beta"] and app.bells == 1
    run(go())
