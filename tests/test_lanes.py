"""Timeline binning (launchtui.analysis.lanes): exact against brute force, no Textual.

That a frame's cost is flat in the event count is wall-clock: bench/frame_cost.py measures it."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from launchtui.analysis import lanes
from launchtui.tui import format as tfmt


def _brute_cover(starts, ends, edges):
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        cov = np.zeros(b - a, bool)
        for s, e in zip(starts, np.maximum(ends, starts + 1)):
            lo, hi = max(s, a), min(e, b)
            if hi > lo:
                cov[lo - a:hi - a] = True
        out.append(int(cov.sum()))
    return np.array(out)


def test_intervals_busy_and_any_match_brute_force():
    rng = np.random.default_rng(1)
    s = np.sort(rng.integers(0, 5000, 150))
    e = s + rng.integers(0, 200, 150)           # overlapping and zero-length intervals included
    iv = lanes.Intervals(s, e)
    edges = np.arange(-50, 5300, 37)
    ref = _brute_cover(s, e, edges)
    assert (iv.busy(edges) == ref).all()
    assert (iv.any(edges) == (ref > 0)).all()


@pytest.mark.parametrize("n", [0, 1, 7, 31, 32, 33, 64, 65, 1000, 4099])
def test_range_max_matches_brute_force(n):
    rng = np.random.default_rng(n)
    v = rng.integers(0, 10_000, n)
    rm = lanes.RangeMax(v, block=8)
    lo = rng.integers(0, n + 1, 400)
    hi = rng.integers(0, n + 1, 400)
    ref = np.array([v[a:b].max() if b > a else 0 for a, b in zip(lo, hi)])
    assert (rm.query(lo, hi) == ref).all()


def test_ticks_and_formats():
    tk, step = tfmt.ticks(1_000, 1_000_000_000, 10)
    assert step == 100_000_000 and tk[0] == 100_000_000 and len(tk) == 10
    assert tfmt.nice_step(7_300, 5) == 2_000
    assert tfmt.fmt_tick(1_500_000_000, 500_000_000, None) == "1.5"
    assert tfmt.fmt_tick(1_200_000, 200_000, 1_000_000) == "+200µs"
    assert tfmt.fmt_tick(3_000_000, 1_000_000, 1_000_000) == "+2ms"
    assert tfmt.fmt_tick(1_500_000_000, 500_000_000, 0) == "+1.5s"
    assert tfmt.fmt_duration(4_600) == "4.60 µs"
    assert tfmt.fmt_duration(30_000_000) == "30.0 ms"


def test_lanes_module_does_not_import_textual():
    code = ("import sys; import launchtui.analysis.lanes, launchtui.tui.state, launchtui.tui.loader; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
