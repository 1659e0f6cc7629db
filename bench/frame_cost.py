#!/usr/bin/env python
"""Timeline frame cost against event count: binning one 200-column frame of a hardware lane must
stay O(width · log N), so 1M events may cost at most a few times what 1k events cost.

    python bench/frame_cost.py          # prints both costs and their ratio; exit 1 above the bound

Wall-clock, so it lives here and not in the tests (a loaded CI machine makes timings meaningless).
"""
from __future__ import annotations

import sys
import time

import numpy as np

from launchtui.analysis import lanes
from launchtui.tui import lane_view


def lane_of(n: int) -> lanes.HwLane:
    rng = np.random.default_rng(0)
    s = np.cumsum(rng.integers(1, 2000, n)).astype(np.int64)
    e = s + rng.integers(1, 1500, n)
    cats = [lanes.Intervals(s[i::4], e[i::4], presorted=True) for i in range(4)]
    return lanes.HwLane(0, 7, lanes.ArrayEvents(np.arange(n), s, e), cats, lanes.Intervals(s, e, presorted=True))


def cost(lane: lanes.HwLane) -> float:
    """Best of 5 averages of 20 frames, seconds per frame."""
    edges = lane_view.bin_edges(float(lane.start[0]), (lane.end[-1] - lane.start[0]) / 200, 200)
    best = 1e9
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(20):
            lane_view.hw_cells(lane, edges)
        best = min(best, (time.perf_counter() - t) / 20)
    return best


def main() -> int:
    small, big = cost(lane_of(1_000)), cost(lane_of(1_000_000))
    ok = big < small * 4 + 2e-4
    print(f"frame cost: 1k events {small * 1e6:.1f} µs, 1M events {big * 1e6:.1f} µs, "
          f"ratio {big / small:.2f} ({'ok' if ok else 'ABOVE the 4x bound'})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
