"""The TUI opens a graph-capture trace and shows its capture line as the verdict (definitions §12.1)."""
from __future__ import annotations

import pytest

from conftest import sample
from tui_helpers import make_app, run, screen_text, settle, wait_ready

pytestmark = [pytest.mark.samples, pytest.mark.tui]


def test_capture_trace_verdict_panel():
    path = sample("kineto/mi300x_vllm_piecewise_graph_capture.pt.trace.json.gz")

    async def go():
        app = make_app(path)
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_ready(app, pilot)
            for _ in range(60):
                await settle(app, pilot)
                if "graph-capture trace" in screen_text(app):
                    break
            txt = screen_text(app)
            assert "graph-capture trace: 361 launches captured into 25 graphs" in txt
    run(go())
