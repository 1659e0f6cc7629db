"""TUI call sites: the details line names the launch's site, `c` shows its whole stack, `C` lists the
selection's sites and Enter highlights the chosen site's launches (definitions.md §S)."""
from __future__ import annotations

import pytest

from fixtures import stacks_synth
from tui_helpers import make_app, run, screen_text, settle, wait_ready

pytestmark = pytest.mark.tui

SIZE = (140, 45)


@pytest.fixture(scope="module")
def chains(tmp_path_factory):
    from launchtui.trace.load import open_trace
    path = tmp_path_factory.mktemp("tui-src") / "chains.sqlite"
    truth = stacks_synth.write_nsys(path)
    return path, truth, open_trace(path, use_cache=False)


def test_site_picker_highlights_launches_and_stack_key(chains):
    from launchtui.analysis.sources import source_table
    from launchtui.tui.screens import InfoScreen
    from launchtui.tui.site_picker import SitePicker
    path, truth, trace = chains
    top = source_table(trace, limit=0)["sites"][0]

    async def go():
        app = make_app(path, trace=trace)
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(app, pilot)
            await pilot.press("C")
            await settle(app, pilot)
            assert isinstance(app.screen, SitePicker)
            assert top["site"] in screen_text(app)
            await pilot.press("enter")
            await settle(app, pilot)
            main = app.main
            assert len(main.timeline.highlight) == top["launches"]
            assert main.context.startswith(top["site"])
            # the cursor now sits on the site's first launch: the details name it, c shows the stack
            assert f"from {top['site']}" in screen_text(app)
            await pilot.press("c")
            await settle(app, pilot)
            assert isinstance(app.screen, InfoScreen)
            text = screen_text(app)
            assert f"call site: {top['site']}" in text and "cudaLaunchKernel [" in text
    run(go())
