"""Time formatting for the TUI: durations, tick steps and tick labels (int ns in, text out)."""
from __future__ import annotations

import math

import numpy as np

_UNITS = ((1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "µs"), (1, "ns"))


def nice_step(span_ns: float, max_ticks: int) -> int:
    """Tick step from the 1-2-5 series giving at most max_ticks ticks over span_ns."""
    if span_ns <= 0 or max_ticks <= 0:
        return 1
    raw = span_ns / max_ticks
    p = 10 ** math.floor(math.log10(max(raw, 1)))
    for m in (1, 2, 5, 10):
        if m * p >= raw:
            return int(m * p)
    return int(10 * p)


def ticks(t0: int, t1: int, max_ticks: int) -> tuple[np.ndarray, int]:
    """Tick times (int ns, exact on epoch clocks) at a 1-2-5 step, at most ~max_ticks of them."""
    t0, t1 = int(t0), int(t1)
    step = nice_step(t1 - t0, max_ticks)
    first = -(-t0 // step) * step
    n = max(0, (t1 - first) // step + 1)
    return np.int64(first) + step * np.arange(n, dtype=np.int64), step


def fmt_duration(ns: float) -> str:
    """Compact human duration: 1.5 s, 12.3 ms, 4.6 µs, 800 ns."""
    a = abs(ns)
    for div, unit in _UNITS:
        if a >= div or div == 1:
            v = ns / div
            if abs(v) >= 100 or div == 1:
                return f"{v:.0f} {unit}"
            if abs(v) >= 10:
                return f"{v:.1f} {unit}"
            return f"{v:.2f} {unit}"
    return f"{ns} ns"


def fmt_tick(t: int, step: int, origin: int | None, ref: float | None = None) -> str:
    """Tick label. With origin: relative ('+12.5ms'), in the unit of `ref` (the largest offset shown,
    so one axis uses one unit) with as many decimals as the step needs; else absolute seconds."""
    if origin is not None:
        rel = t - origin
        mag = max(abs(ref) if ref is not None else abs(rel), step)
        for div, unit in _UNITS:
            if mag >= div or div == 1:
                q = step / div
                dec = 0 if q >= 1 and step % div == 0 else min(9, int(math.ceil(-math.log10(q) - 1e-9)))
                return f"{rel / div:+.{dec}f}{unit}"
    dec = max(0, min(9, int(math.ceil(9 - math.log10(step))))) if step < 1_000_000_000 else 0
    t = int(t)
    sec, frac = divmod(t, 1_000_000_000)
    if dec == 0:
        return f"{sec + (1 if frac >= 500_000_000 else 0)}"
    q = 10 ** (9 - dec)
    f = (frac + q // 2) // q
    if f >= 10 ** dec:
        sec, f = sec + 1, 0
    return f"{sec}.{f:0{dec}d}"
