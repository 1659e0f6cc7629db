"""The TUI on the shared real samples (skipped when ../shared is absent)."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import sample
from tui_helpers import make_app, run, screen_text, settle, wait_ready

pytestmark = [pytest.mark.samples, pytest.mark.tui]

V100 = "kineto/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
H100 = "nsys/nsys-ai__h100_2gpu_1s.sqlite"


def test_v100_kineto_saturated_stream_7():
    path = sample(V100)

    async def go():
        app = make_app(path)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_ready(app, pilot)
            txt = screen_text(app)
            assert "q s7" in txt and "1022!" in txt              # peak label, at/above threshold
            assert "API  1102" in txt and "HW   s7" in txt
            assert "computeOffsetsKernel" in txt                 # the small-kernel table
            await pilot.press("g")
            for _ in range(40):
                await pilot.press("b")
                if app.main.current_mark.kind == "queue":
                    break
            m = app.main.current_mark
            assert m.kind == "queue" and (m.device, m.stream) == (0, 7) and m.max_depth == 1022
            row = app.main.timeline.current_row
            assert row.kind == "queue" and row.lane.stream == 7
            assert int(row.lane.value_at(np.array([m.start]))[0]) >= 1000
            await pilot.press("plus", "plus", "plus")
            await settle(app, pilot)
            qline = [ln for ln in screen_text(app).splitlines() if ln.startswith(("q s7", "▶q s7"))][0]
            assert "█" in qline[16:] and "!" in qline[:16]          # cells ≥ threshold, flagged label
    run(go())


def test_h100_nsys_two_devices_and_no_optimizer():
    path = sample(H100)

    async def go():
        app = make_app(path)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_ready(app, pilot)
            devs = {r.device for r in app.main.timeline.rows if r.kind == "hw"}
            assert devs == {0, 1}
            await pilot.press("d")
            await settle(app, pilot)
            assert app.main.device == 0
            rows = {r["kernel_name"]: r for r in app.main.table.rows}
            v = rows["vectorized_elementwise_kernel"]             # definitions.md §4 reference values
            assert (v["launch_count"], v["avg_api_us"], v["max_api_us"], v["total_api_ms"]) == \
                (437, 282.2, 6196.0, 123.319)
            await pilot.press("d")
            await settle(app, pilot)
            assert app.main.device == 1 and {r.device for r in app.main.timeline.rows if r.kind == "hw"} == {1}
            await pilot.press("O")
            await pilot.pause()
            assert "no optimizer range" in screen_text(app)
    run(go())
