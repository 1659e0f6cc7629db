"""A stream's blocking depth from where its slow launch calls cluster (docs/definitions.md §6, §V3).

A launch call blocks when its stream's queue is full: it waits for a slot and returns as a pending
op starts and frees one. The queue's size is not a constant (1022 on a V100, about 960 or 1139
elsewhere, and graph replays, event records and waits take entries the trace does not show), so
the ceiling is read from the calls that waited:

- candidates: slow kernel launch calls (launch spikes, §6; graph launches left out, their ops
  count one entry each in the depth) made at depth >= DEEP_DEPTH, the depth counting the call's
  own entry and the stream's pre-capture backlog (queue.backlog_starts);
- the ceiling is their median depth; the band is ceiling ± max(BAND_MIN, 1 %);
- they are *blocked* when at least MIN_SLOW exist, at least BAND_SHARE of them sit in the band,
  and of those in the band at least RETURN_SHARE return within RETURN_SLACK_NS + L of a pending
  op on the stream starting, at least BASELINE_FACTOR times as often as the stream's normal
  launch calls do (dense streams have an op starting every few µs, so that signature alone
  proves nothing);
- or Nsight's 'command buffer full' rows flag them (direct proof).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from launchtui.trace.arrays import median_of, unique_sorted

DEEP_DEPTH = 64          # a queue this deep is far from the few entries a CPU stall happens at
MIN_SLOW = 5             # fewer slow deep calls are too little to find a ceiling from
BAND_MIN = 4             # the band's half-width at least this many entries
BAND_SHARE = 0.8         # this share of the slow deep calls must sit in the band
RETURN_SHARE = 0.5       # and this share of those in the band return as a pending op starts
BASELINE_FACTOR = 2.0    # ... at least this many times as often as the stream's normal calls
RETURN_SLACK_NS = 10_000 # a return this close (plus L) to an op's start is "as it starts"
BASELINE_CALLS = 4096    # the baseline rate from at most this many normal calls, evenly spaced
                         # (a rate near 0.5 to within about 1 %: its binomial standard error)
DEPTH_COUNTS = "pending (own entry included) + pre-capture backlog still pending"


@dataclass
class Ceiling:
    """One scope's (the iterations, or the time outside them) evidence on one stream."""
    depth: int | None = None            # the candidate ceiling: median depth of the slow deep calls
    band: tuple[int, int] | None = None
    slow_deep: int = 0                  # slow kernel launch calls at depth >= DEEP_DEPTH
    in_band: int = 0
    returns_share: float | None = None  # of those in the band: returned as a pending op started
    baseline: float | None = None       # the same rate over the stream's normal launch calls
    command_buffer_full: int = 0        # calls Nsight flagged
    clustered: bool = False             # the cluster test passed
    blocked: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # positions, sorted
    why_not: str = ""

    @property
    def found(self) -> bool:
        return len(self.blocked) > 0

    def to_json(self, backlog_ops: int, latency_ns: int) -> dict:
        r = lambda x: None if x is None else round(x, 4)   # noqa: E731
        return {"depth": self.depth, "band": list(self.band) if self.band else None, "blocked": self.found,
                "slow_deep_calls": self.slow_deep, "in_band": self.in_band,
                "returns_on_op_start": r(self.returns_share), "baseline_returns_on_op_start": r(self.baseline),
                "command_buffer_full": self.command_buffer_full, "why_not": self.why_not or None,
                "return_within_us": round((RETURN_SLACK_NS + latency_ns) / 1e3, 3),
                "depth_counts": DEPTH_COUNTS, "backlog_ops": backlog_ops}


def band_of(c: int) -> tuple[int, int]:
    half = max(BAND_MIN, c // 100)
    return c - half, c + half


def find(depth: np.ndarray, slow: np.ndarray, cbf: np.ndarray, normal: Callable[[], np.ndarray],
         returns: Callable[[np.ndarray], np.ndarray]) -> Ceiling:
    """The ceiling over one scope of a stream's launch calls. `depth`: per call of the stream (the
    §V3 depth); `slow`: positions of the scope's slow kernel launch calls (spikes); `cbf`: positions
    of those Nsight flagged; `normal()`: positions of its other kernel launch calls; `returns(p)`:
    per call, did it return as a pending op started. The last two are asked only when a cluster
    exists (the normal calls are most of a trace). Without a cluster, the calls Nsight flagged are
    the blocked ones, at their median depth. Positions in `blocked` are sorted."""
    cand = slow[depth[slow] >= DEEP_DEPTH]
    out = Ceiling(slow_deep=len(cand), command_buffer_full=len(cbf))
    inb = cand[:0]
    if len(cand) >= MIN_SLOW:
        out.depth = int(median_of(depth[cand]))
        out.band = band_of(out.depth)
        inb = cand[(depth[cand] >= out.band[0]) & (depth[cand] <= out.band[1])]
        out.in_band = len(inb)
        out.returns_share = float(returns(inb).mean()) if len(inb) else 0.0
        base = normal()
        out.baseline = float(returns(base).mean()) if len(base) else 0.0
        out.clustered = (len(inb) >= BAND_SHARE * len(cand) and out.returns_share >= RETURN_SHARE
                         and out.returns_share >= BASELINE_FACTOR * out.baseline)
        if not out.clustered:
            out.why_not = _why_not(out, len(cand))
    elif len(cand):
        out.why_not = f"{len(cand)} slow launch calls at depth >= {DEEP_DEPTH} (fewer than {MIN_SLOW})"
    if out.clustered:
        out.blocked = unique_sorted(np.concatenate([cbf, inb])).astype(np.int64)   # np.union1d
    elif len(cbf):
        out.depth = int(median_of(depth[cbf]))
        out.band = band_of(out.depth)
        out.blocked = np.sort(cbf).astype(np.int64)
    return out


def _why_not(c: Ceiling, n: int) -> str:
    if c.in_band < BAND_SHARE * n:
        return f"only {c.in_band} of {n} slow deep calls within {c.band[0]}-{c.band[1]}: no common depth"
    if c.returns_share < RETURN_SHARE:
        return f"only {c.returns_share:.0%} of those in the band return as a pending op starts"
    return (f"{c.returns_share:.0%} of those in the band return as a pending op starts, as "
            f"{c.baseline:.0%} of normal calls do: chance, not a wait for a slot")


def returns_on_op_start(starts: np.ndarray, pos: np.ndarray, c0: np.ndarray, c1: np.ndarray,
                        slack_ns: int) -> np.ndarray:
    """Per call: did an op pending on the stream when the call began (launched before it, i.e.
    before the call's own op in the stream's launch order, and not started yet) start within
    `slack_ns` of the call's return? `starts`: the stream's op starts in start order (= launch
    order, a stream being FIFO); `pos`: each call's first op's position there."""
    lo = np.maximum(c0, c1 - slack_ns)
    q = np.searchsorted(starts, lo, side="left")
    hit = q < pos
    hit[hit] = starts[q[hit]] <= c1[hit] + slack_ns
    return hit
