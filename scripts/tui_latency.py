#!/usr/bin/env python
"""Measure the TUI's responsiveness on a trace: time to first frame, to interactive (the timeline
drawn, keys work) and to complete (verdict, table, idle row filled; definitions.md §T10), key latency
while it fills, and key-to-repaint latency (median / p95) over a scripted pan/zoom/sort/jump sequence. Prints JSON.

    python scripts/tui_latency.py TRACE [--size 120x40] [--repeat 3] [--no-cache]

The app runs headless (Textual's Pilot driver) but every frame is still encoded to terminal bytes
(CompositorUpdate.render_segments), as a real terminal would receive it. A key press is timed from
the moment its event is posted to the app until

- `first_ms`: the first frame written after the key (what the user sees change), and
- `settled_ms`: the last frame before the screen has been quiet for 60 ms (details panel,
  footer, and for selection changes the table recomputed in its worker thread).

`loop_stalls_until_complete`: how long the event loop stopped between the app's start and the
complete fill (the longest gap between 5 ms ticks), which key timings cannot show.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

T_START = time.perf_counter()
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# a pan / zoom / row / jump / sort / selection sequence; keys as Textual names. The table is left
# with shift+tab, back to the timeline: a trace with Python call stacks has a third pane (the
# sources) after the table, and a second tab would start the next round there, where the timeline's
# keys change nothing
SEQUENCE = (
    ["l"] * 8 + ["h"] * 4 + ["plus"] * 4 + ["L", "H"] + ["minus"] * 2 + ["j", "j", "k"]
    + ["b", "b", "B", "0", "g", "G", "0"]
    + ["tab", "5", "2", "5", "s", "1", "shift+tab"]
    + ["O", "right_square_bracket", "left_square_bracket", "escape"]
    + ["t", "d", "d", "0"]
)
JUMP_KEYS = {"b", "B", "g", "G", "0", "O", "right_square_bracket", "left_square_bracket", "n", "N"}
SELECTION_KEYS = {"O", "right_square_bracket", "left_square_bracket", "escape", "d"}


def pct(values, q):
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(q / 100 * (len(s) - 1)))))
    return round(s[k], 2)


def summary(values):
    return {"n": len(values), "median_ms": round(statistics.median(values), 2) if values else None,
            "p95_ms": pct(values, 95), "max_ms": round(max(values), 2) if values else None}


async def _key_latency(app, frames: list, key: str, timeout: float = 10.0):
    """ms from posting `key` to the next frame written; None when nothing was redrawn."""
    from textual import events
    n0 = len(frames)
    t0 = time.perf_counter()
    app._driver.send_message(events.Key(key, key))
    while len(frames) == n0 and time.perf_counter() < t0 + timeout:
        await asyncio.sleep(0.0005)
    return (frames[n0] - t0) * 1e3 if len(frames) > n0 else None


async def _frame_after(frames: list, t: float, timeout: float = 1.0) -> float:
    """The first frame written after time `t`, waiting up to `timeout` s for one; else the last
    frame. An app at rest draws nothing (no animation runs under the main view), so a frame that
    was written in the same loop turn as `t` is the last one that comes: waiting for a later one
    without a limit would wait forever."""
    deadline = time.perf_counter() + timeout
    while (not frames or frames[-1] <= t) and time.perf_counter() < deadline:
        await asyncio.sleep(0.001)
    return next((f for f in frames if f > t), frames[-1])


TICK_S = 0.005
STALL_S = 0.1     # a gap between ticks this long is a stall a user sees: keys and frames wait


async def _loop_ticks(gaps: list) -> None:
    """Ticks the event loop every TICK_S and records each gap between ticks: the loop stalls while
    its own handlers run long or a worker thread holds the GIL in one C call (a whole-file
    `json.load`), and a key pressed then waits; the key timings above never see it, as the keys
    are sent by this same loop."""
    last = time.perf_counter()
    while True:
        await asyncio.sleep(TICK_S)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now


def stalls(gaps: list) -> dict:
    """The longest gap between ticks beyond the tick itself (ms), the stalls past STALL_S and the
    time lost in them (s)."""
    over = [g for g in gaps if g >= STALL_S]
    return {"longest_ms": round(max((g - TICK_S for g in gaps), default=0.0) * 1e3, 1),
            "over_100ms": len(over), "seconds_in_those": round(sum(over), 3)}


async def measure(path: str, size: tuple[int, int], repeat: int, no_cache: bool) -> dict:
    """The figures of this module's docstring for the app on `path` at `size` (columns, rows), with
    SEQUENCE pressed `repeat` times once the screen is complete."""
    from textual.app import App

    from launchtui import heap
    from launchtui.tui.app import LaunchApp

    frames: list[float] = []
    orig_display = App._display
    App._display = _recording_display(orig_display, frames)
    heap.one_arena()   # glibc's policy as `launchtui TRACE` sets it (cli.main); the app's load worker takes it over
    args = SimpleNamespace(trace=path, trim=None, device="all", nvtx=None, no_cache=no_cache)
    app = LaunchApp(args)
    out: dict = {"trace": path, "size": f"{size[0]}x{size[1]}"}
    t_app = time.perf_counter()
    try:
        async with app.run_test(size=size) as pilot:
            await _measure_fill(app, frames, t_app, out)
            await pilot.pause(0.2)
            await _measure_key_sequence(app, pilot, frames, repeat, out)
            await pilot.press("q")
    finally:   # an in-process caller gets Textual back as it was, even after a failed load
        App._display = orig_display
    return out


def _recording_display(orig_display, frames: list):
    """App._display that appends the time of each frame written to `frames`, after encoding it to the
    bytes a terminal would get, then draws as `orig_display` does."""
    def display(self, screen, renderable):
        if renderable is not None and not self._batch_count:
            if hasattr(renderable, "render_segments"):
                renderable.render_segments(self.console)   # the bytes a terminal would get
            frames.append(time.perf_counter())
        return orig_display(self, screen, renderable)
    return display


async def _measure_fill(app, frames: list, t_app: float, out: dict) -> None:
    """From the app's start to the complete screen: first frame, table rows, complete, the loop's
    stalls until then, interactive, the fill's stages, keys pressed during the fill, and the trace's
    size, into `out` (in that order: it is the order of the printed JSON)."""
    ticks = asyncio.get_running_loop().create_task(_loop_ticks(gaps := []))
    while not frames:
        await asyncio.sleep(0.001)
    out["first_frame_s"] = round(frames[0] - T_START, 3)
    out["first_frame_after_app_start_s"] = round(frames[0] - t_app, 3)
    fill_keys = await _keys_during_fill(app, frames, out)
    if app.error_message:   # the load failed before any worker ran: no frame is coming
        raise SystemExit(f"launchtui: {app.error_message}")
    done = await _frame_after(frames, time.perf_counter())   # the frame of the complete screen
    out["complete_s"] = round(done - T_START, 3)
    out["complete_after_app_start_s"] = round(done - t_app, 3)
    ticks.cancel()
    out["loop_stalls_until_complete"] = stalls(gaps)
    # the first frame written after the view was pushed with its lanes drawn
    shown = max(app.timings["loaded"], app.main.fill.times.get("lanes", app.timings["loaded"]))
    first = next((f for f in frames if f > shown), frames[-1])
    out["interactive_s"] = round(first - T_START, 3)
    out["interactive_after_app_start_s"] = round(first - t_app, 3)
    out["fill_stages_s"] = {k: round(v - T_START, 3) for k, v in app.main.fill.times.items()}
    out["keys_during_fill_first_repaint"] = summary(fill_keys)
    tr = app.loaded.trace
    out["gpu_ops"] = len(tr.ops)
    out["api_calls"] = len(tr.api)
    out["kernels"] = int((tr.ops.kind == 0).sum())
    out["load_timings_s"] = {k: round(v, 3) for k, v in app.loaded.timings.items()}


async def _keys_during_fill(app, frames: list, out: dict) -> list[float]:
    """Wait until the fill is complete, pressing l / h every 0.3 s from 0.2 s after the timeline is
    shown; their key-to-first-repaint latencies (ms). Sets out["table_rows_s"] when rows appear."""
    # interactive: the main view shows the timeline drawn from its lanes (keys pan and zoom it)
    # while the verdict and table still fill; complete: the table filled (its phase column too),
    # the verdict shown and the idle row done (definitions.md §T10). table_rows_s: the first
    # time the table shows rows; fill_stages_s: when each stage of the progress line landed.
    fill_keys: list[float] = []
    next_key, key_n, shown = None, 0, None
    while app.busy or any(w.group == "verdict" and not w.is_finished for w in app.workers):
        if app.error_message:
            raise SystemExit(f"launchtui: {app.error_message}")
        main = app.main if app.main is not None and app.main.is_mounted else None
        if main is not None and shown is None and "lanes" in main.fill.times:
            shown = max(app.timings["loaded"], main.fill.times["lanes"])
            await _frame_after(frames, shown)
            next_key = time.perf_counter() + 0.2
        if main is not None and "table_rows_s" not in out and main.table.rows:
            out["table_rows_s"] = round(time.perf_counter() - T_START, 3)
        if next_key is not None and time.perf_counter() >= next_key:   # a key during the fill
            lat = await _key_latency(app, frames, "l" if key_n % 2 == 0 else "h")
            if lat is not None:
                fill_keys.append(lat)
            key_n += 1
            next_key = time.perf_counter() + 0.3
        await asyncio.sleep(0.005)
    return fill_keys


async def _measure_key_sequence(app, pilot, frames: list, repeat: int, out: dict) -> None:
    """SEQUENCE pressed `repeat` times on the complete screen: first-repaint and settled latencies,
    overall, for the navigation keys and per key, and the timeline's full-repaint CPU cost."""
    per_key: dict[str, list] = {}
    first_all, settled_all, nav_first, nav_settled, unchanged = [], [], [], [], []
    for _ in range(repeat):
        for key in SEQUENCE:
            await pilot.pause(0.03)
            timed = await _time_key(app, frames, key)
            if timed is None:   # the key changed nothing on screen (e.g. no more marks): counted, not timed
                unchanged.append(key)
                continue
            first, settled = timed
            per_key.setdefault(key, []).append((first, settled))
            first_all.append(first)
            settled_all.append(settled)
            if key not in SELECTION_KEYS:
                nav_first.append(first)
                nav_settled.append(settled)
    tl = app.main.timeline
    tl_cpu = _timeline_render_cpu(tl)
    out["key_to_first_repaint"] = summary(first_all)
    out["key_to_settled"] = summary(settled_all)
    out["navigation_keys_first_repaint"] = summary(nav_first)
    out["navigation_keys_settled"] = summary(nav_settled)
    out["timeline_full_render_cpu"] = summary(tl_cpu)
    out["timeline_rows"] = len(tl.rows)
    out["keys_without_a_frame"] = {"n": len(unchanged), "of": repeat * len(SEQUENCE), "keys": unchanged}
    out["per_key_median_ms"] = {k: {"first": round(statistics.median(a for a, _ in v), 1),
                                    "settled": round(statistics.median(b for _, b in v), 1)}
                                for k, v in per_key.items()}


async def _time_key(app, frames: list, key: str) -> tuple[float, float] | None:
    """(ms to the first frame after posting `key`, ms to the last frame before 60 ms of quiet with
    idle workers); None when no frame came within 10 s."""
    from textual import events
    char = key if len(key) == 1 else None
    n0 = len(frames)
    t0 = time.perf_counter()
    app._driver.send_message(events.Key(key, char))
    # wait for the first frame, then for 60 ms of quiet (and idle workers)
    deadline = t0 + 10
    while len(frames) == n0 and time.perf_counter() < deadline:
        await asyncio.sleep(0.0005)
    if len(frames) == n0:
        return None
    first = (frames[n0] - t0) * 1e3
    while True:
        last = len(frames)
        await asyncio.sleep(0.06)
        busy = app.busy or any(not w.is_finished for w in app.workers)
        if len(frames) == last and not busy:
            break
    return first, (frames[-1] - t0) * 1e3


def _timeline_render_cpu(tl) -> list[float]:
    """The timeline's CPU cost of one full uncached repaint (the per-frame binning + strips), ms, 20 times."""
    tl_cpu = []
    for _ in range(20):
        tl._cache.clear()
        t = time.perf_counter()
        for y in range(tl.size.height):
            tl.render_line(y)
        tl_cpu.append((time.perf_counter() - t) * 1e3)
    return tl_cpu


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--size", default="120x40")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--no-cache", action="store_true")
    a = p.parse_args(argv)
    w, h = (int(x) for x in a.size.lower().split("x"))
    out = asyncio.run(measure(a.trace, (w, h), a.repeat, a.no_cache))
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
