"""scripts/tui_latency.py's event-loop stall figure (a handler or a GIL-holding worker that stops
the loop shows in `loop_stalls_until_complete`, which the key timings cannot see), and its key
sequence, which must leave every round where it began."""
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


def test_the_wait_for_a_frame_ends_when_the_app_draws_nothing_more():
    """An app at rest draws no frame: the wait for one after `t` takes the last frame once its
    limit passes (it once waited for ever, and hung a test run), and a frame that does come ends it."""
    s = _script()

    async def late(frames):
        await asyncio.sleep(0.05)
        frames.append(time.perf_counter())

    async def go():
        t0 = time.perf_counter()
        quiet = await s._frame_after([1.0, 2.0], 3.0, timeout=0.05)
        frames = [1.0]
        task = asyncio.get_running_loop().create_task(late(frames))
        drawn = await s._frame_after(frames, t0, timeout=5)
        await task
        return quiet, drawn, frames, time.perf_counter() - t0
    quiet, drawn, frames, took = asyncio.run(go())
    assert quiet == 2.0 and drawn == frames[-1] > 1.0 and took < 2


@pytest.mark.tui
@pytest.mark.slow
def test_a_handler_that_blocks_the_loop_shows_as_a_stall_and_every_round_starts_on_the_timeline(monkeypatch):
    """The stall figure, and the key sequence's visit to the table: on a trace with Python call
    stacks (a third pane, the sources, after the table) it comes back to the timeline, so the next
    round's keys change the screen. Leaving the table with a second tab once started round 2 in the
    sources pane, where eight keys drew nothing and each waited out the 10 s limit."""
    from launchtui import heap
    from launchtui.tui.fill_progress import FillView
    s = _script()
    real = FillView.start

    def blocking_start(self):
        time.sleep(0.4)          # on the event loop's thread: nothing else runs meanwhile
        return real(self)
    monkeypatch.setattr(FillView, "start", blocking_start)
    table = s.SEQUENCE.index("tab")
    visit = s.SEQUENCE[table:s.SEQUENCE.index("shift+tab", table) + 1]
    assert "5" in visit and "tab" not in visit[1:]
    monkeypatch.setattr(s, "SEQUENCE", visit + ["j"])
    try:
        out = asyncio.run(s.measure(str(ROOT / "fixtures" / "demo" / "demo.json.gz"), (120, 40), 2, True))
    finally:
        heap.default_large_blocks()      # the script sets the arena as cli.main does
    st = out["loop_stalls_until_complete"]
    assert st["longest_ms"] >= 390 and st["over_100ms"] >= 1 and st["seconds_in_those"] >= 0.4
    assert st["seconds_in_those"] < out["complete_s"]
    assert out["keys_without_a_frame"] == {"n": 0, "of": 2 * len(visit + ["j"]), "keys": []}
    assert out["key_to_first_repaint"]["n"] == 2 * len(visit + ["j"])
