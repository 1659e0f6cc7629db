"""`launchtui TRACE --capture CAPTURE`: the details line of a replayed kernel says what it was captured
from (definitions.md §12.6); a capture file with no capture fails the load with its one line."""
from __future__ import annotations

import pytest

from fixtures import graph_join_cases as gjc
from tui_helpers import make_app, run, settle, wait_ready

pytestmark = [pytest.mark.tui]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return gjc.write("partial", tmp_path_factory.mktemp("graph_join_tui"))


def test_details_line_of_a_replayed_kernel_names_its_capture(pair):
    cap, ex, _ = pair

    async def go():
        from launchtui.tui.search import search
        app = make_app(ex, capture=str(cap))
        async with app.run_test(size=(200, 45)) as pilot:
            await wait_ready(app, pilot)
            scr = app.main
            scr.timeline.view.cursor = int(app.loaded.trace.ops.start.min()) - 1
            search(scr, "attn_fwd")                # the first replay of a piece: capture 2, piece_1
            await settle(app, pilot)
            lines = scr.details.lines
            assert lines[1].startswith("kernel attn_fwd")
            assert lines[3].startswith("captured from: vllm::unified_attention at layers/attn.py:103 forward · "
                                       "in piece_1 (capture 2, capture_512_PIECEWISE)   │ ")
            search(scr, "sampler_topk")            # a graph no capture holds
            await settle(app, pilot)
            assert scr.details.lines[3].startswith(
                "captured from: unmatched (no capture holds this replay's kernel sequence)")
            search(scr, "reshape_and_cache")       # no eager op in the execution trace: nothing found
            await settle(app, pilot)
            search(scr, "sampler_kernel")          # an eager kernel: no captured-from line
            await settle(app, pilot)
            assert scr.details.lines[1].startswith("kernel sampler_kernel")
            assert "captured from" not in "\n".join(scr.details.lines)
    run(go())


def test_capture_file_without_captures_fails_the_load(pair):
    cap, ex, _ = pair

    async def go():
        app = make_app(cap, capture=str(ex))
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_ready(app, pilot)
        assert app.error_message.startswith(f"{ex}: no graph capture in this trace")
        assert app.return_code == 2
    run(go())
