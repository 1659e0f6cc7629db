"""scripts/tui_latency.py's event-loop stall figure: a handler or a GIL-holding worker that stops
the loop shows in `loop_stalls_until_complete`, which the key timings cannot see."""
from __future__ import annotations

import asyncio
import importlib.util
import time

import pytest

from conftest import ROOT


def _script():
    spec = importlib.util.spec_from_file_location("tui_latency", ROOT / "scripts" / "tui_latency.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_stalls_summarise_the_gaps_between_ticks():
    s = _script()
    tick = s.TICK_S
    assert s.stalls([]) == {"longest_ms": 0.0, "over_100ms": 0, "seconds_in_those": 0}
    assert s.stalls([tick, tick + 0.0004, 0.25 + tick, 0.1, 0.099]) == \
        {"longest_ms": 250.0, "over_100ms": 2, "seconds_in_those": round(0.255 + 0.1, 3)}


@pytest.mark.tui
@pytest.mark.slow
def test_a_handler_that_blocks_the_loop_shows_as_a_stall(monkeypatch):
    from launchtui import heap
    from launchtui.tui.fill_progress import FillView
    s = _script()
    real = FillView.start

    def blocking_start(self):
        time.sleep(0.4)          # on the event loop's thread: nothing else runs meanwhile
        return real(self)
    monkeypatch.setattr(FillView, "start", blocking_start)
    try:
        out = asyncio.run(s.measure(str(ROOT / "fixtures" / "demo" / "demo.sqlite"), (120, 40), 0, True))
    finally:
        heap.default_large_blocks()      # the script sets the arena as cli.main does
    st = out["loop_stalls_until_complete"]
    assert st["longest_ms"] >= 390 and st["over_100ms"] >= 1 and st["seconds_in_those"] >= 0.4
    assert st["seconds_in_those"] < out["complete_s"]
