"""A TUI left open does no work: once the main screen is up, no widget on any screen of the stack
redraws on a timer (the loading view's indeterminate bar did, 15 times a second, under it)."""
from __future__ import annotations

import pytest

from tui_helpers import ROOT, make_app, run, wait_ready

pytestmark = pytest.mark.tui


def test_nothing_redraws_on_a_timer_once_the_main_screen_is_up():
    async def go():
        app = make_app(ROOT / "fixtures" / "demo" / "demo.sqlite")
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_ready(app, pilot)
            assert app.screen is app.main
            ticking = [f"{type(s).__name__}: {type(w).__name__}" for s in app.screen_stack
                       for w in s.walk_children() if w.auto_refresh]
            assert ticking == []
            assert not app.query("#loading")
    run(go())
