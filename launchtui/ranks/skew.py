"""Step entry and exit skew across ranks (docs/definitions.md §R, *Step skew*).

Each rank's iterations are on its own trace's clock. They are set side by side only when every rank's
clock converts to Unix-epoch time (`summary._clock`) and each step overlaps in time on all ranks (a
synchronous job's step holds collectives every rank takes part in; steps that do not overlap mean
clocks that disagree, captures of different steps, or ranks that do not synchronise). Steps are
matched by their ProfilerStep number when every rank has one, else by position when every rank holds
as many.

Per matched step: entry skew = latest start − earliest start, exit skew = latest end − earliest end.
A rank's step time differs from another's by at most the entry skew plus the exit skew, so when the
entry skew is material and at least `DOMINATES` times the exit skew, the step-time differences are
ranks waiting (inside the step, in its collectives) for the rank that entered last: that rank is the
straggler, and the cause lies before the step. The mirror case (entered together, left apart) is a
rank slow inside the step.
"""
from __future__ import annotations

import numpy as np

MIN_RANKS = 2
DOMINATES = 2.0        # one skew at least this many times the other decides which end explains
MAX_ITERATIONS = 200   # per-iteration rows kept in the JSON (the medians use every step)


def _not(why: str, ranks: list[int]) -> dict:
    return {"comparable": False, "why": why, "ranks": ranks, "aligned_by": None, "iterations": [],
            "entry_skew_ms": None, "exit_skew_ms": None, "offsets": {}, "reason": None}


def _align(ranks: list[int], steps: list[dict]) -> tuple[str, list, np.ndarray, np.ndarray] | str:
    """(aligned_by, step labels, starts [rank, step], ends [rank, step]) in wall ns, or why not."""
    if all(s["numbers"] is not None for s in steps):
        common = sorted(set.intersection(*(set(s["numbers"]) for s in steps)))
        if not common:
            return "the ranks hold no common ProfilerStep number"
        where = [{n: i for i, n in enumerate(s["numbers"])} for s in steps]
        cols = [[w[n] for n in common] for w in where]
        by, labels = "step number", [f"ProfilerStep#{n}" for n in common]
    else:
        counts = {len(s["starts_ns"]) for s in steps}
        if len(counts) > 1:
            return (f"the ranks hold {min(counts)}–{max(counts)} iterations without step numbers: which step is "
                    "which cannot be told")
        n = counts.pop()
        cols = [list(range(n))] * len(steps)
        by, labels = "position", [f"iteration {k}" for k in range(n)]
    start = np.array([[s["wall_starts"][c] for c in col] for s, col in zip(steps, cols)], dtype=np.int64)
    end = np.array([[s["wall_ends"][c] for c in col] for s, col in zip(steps, cols)], dtype=np.int64)
    return by, labels, start, end


def _reason(entry: float, exit_: float, step_ms: float, floor_share: float, ranks: np.ndarray,
            entry_off: np.ndarray, exit_off: np.ndarray, durations: np.ndarray) -> dict | None:
    """Which end of the step explains the ranks' step-time differences, when one does materially."""
    floor = floor_share * step_ms
    spread = f"{durations.min():,.2f}–{durations.max():,.2f} ms"
    if entry >= floor and entry >= DOMINATES * exit_:
        last, first = int(ranks[np.argmax(entry_off)]), int(ranks[np.argmin(entry_off)])
        return {"kind": "entry", "rank": last, "first_rank": first, "skew_ms": round(entry, 3),
                "headline": f"enters the step {entry:,.2f} ms after rank {first} and the ranks leave it within "
                            f"{exit_:,.2f} ms: the others wait for it",
                "text": f"step entry skew {entry:,.2f} ms against exit skew {exit_:,.2f} ms: rank {last} enters the "
                        f"step last (rank {first} first) and the ranks leave it together, so the others wait for "
                        f"rank {last} inside the step; the step-time differences ({spread}) are that wait, not "
                        f"slower work on the ranks with longer steps: look at what rank {last} does before the step"}
    if exit_ >= floor and exit_ >= DOMINATES * entry:
        last, first = int(ranks[np.argmax(exit_off)]), int(ranks[np.argmin(exit_off)])
        return {"kind": "exit", "rank": last, "first_rank": first, "skew_ms": round(exit_, 3),
                "headline": f"leaves the step {exit_:,.2f} ms after rank {first}, entered within {entry:,.2f} ms: "
                            "slower inside the step",
                "text": f"step exit skew {exit_:,.2f} ms against entry skew {entry:,.2f} ms: the ranks enter the "
                        f"step together and rank {last} leaves it last (rank {first} first): it is slower inside "
                        "the step"}
    if entry >= floor and exit_ >= floor:
        return {"kind": "shifted", "rank": None, "first_rank": None, "skew_ms": round(max(entry, exit_), 3),
                "text": f"the ranks' steps are shifted: entry skew {entry:,.2f} ms and exit skew {exit_:,.2f} ms "
                        "(pipeline stages, or hosts whose clocks disagree)"}
    return None


def job_skew(ranks: list[int], summaries: list[dict], step_ms: float | None, floor_share: float) -> dict:
    """The `skew` section over the readable ranks (`summaries` in rank order): per matched step the
    entry and exit skew with the earliest and latest rank, each rank's median offsets, the reason."""
    have = [(r, s) for r, s in zip(ranks, summaries) if s.get("steps") and s["steps"]["starts_ns"]]
    if len(have) < MIN_RANKS:
        return _not(f"needs marked steps on at least {MIN_RANKS} ranks ({len(have)} have them)", [r for r, _ in have])
    used = [r for r, _ in have]
    own = [(r, s["clock"]["why"]) for r, s in have if not s["clock"]["wall"]]
    if own:
        r, why = own[0]
        more = f" (and {len(own) - 1} more ranks)" if len(own) > 1 else ""
        return _not(f"clocks cannot be compared: rank {r}{more}: {why}", used)
    steps = [{**s["steps"], "wall_starts": [t + s["clock"]["offset_ns"] for t in s["steps"]["starts_ns"]],
              "wall_ends": [t + s["clock"]["offset_ns"] for t in s["steps"]["ends_ns"]]} for _, s in have]
    got = _align(used, steps)
    if isinstance(got, str):
        return _not(got, used)
    by, labels, start, end = got
    apart = np.flatnonzero(start.max(axis=0) >= end.min(axis=0))
    if len(apart):
        k = int(apart[0])
        a, b = used[int(np.argmin(end[:, k]))], used[int(np.argmax(start[:, k]))]
        return _not(f"steps cannot be set side by side: {labels[k]} does not overlap in time across the ranks "
                    f"(rank {a} ends it before rank {b} starts it): clocks that disagree, captures of different "
                    "steps, or ranks that do not synchronise within a step", used)
    rk = np.asarray(used)
    e_skew = (start.max(axis=0) - start.min(axis=0)) / 1e6
    x_skew = (end.max(axis=0) - end.min(axis=0)) / 1e6
    e_off = np.median((start - start.min(axis=0)) / 1e6, axis=1)    # per rank, after the first in
    x_off = np.median((end - end.min(axis=0)) / 1e6, axis=1)
    dur = (end - start) / 1e6
    rows = [{"step": labels[k], "ranks": len(used), "entry_skew_ms": round(float(e_skew[k]), 3),
             "exit_skew_ms": round(float(x_skew[k]), 3),
             "step_time_spread_ms": round(float(dur[:, k].max() - dur[:, k].min()), 3),
             "first_in": int(rk[np.argmin(start[:, k])]), "last_in": int(rk[np.argmax(start[:, k])]),
             "first_out": int(rk[np.argmin(end[:, k])]), "last_out": int(rk[np.argmax(end[:, k])])}
            for k in range(min(len(labels), MAX_ITERATIONS))]
    entry, exit_ = float(np.median(e_skew)), float(np.median(x_skew))
    step = step_ms if step_ms else float(np.median(dur))
    return {"comparable": True, "why": None, "ranks": used, "aligned_by": by,
            "clock": sorted({s["clock"]["kind"] for _, s in have}),
            "steps": len(labels), "iterations": rows,
            "entry_skew_ms": {"median": round(entry, 3), "max": round(float(e_skew.max()), 3)},
            "exit_skew_ms": {"median": round(exit_, 3), "max": round(float(x_skew.max()), 3)},
            "offsets": {str(r): {"entry_ms": round(float(e), 3), "exit_ms": round(float(x), 3)}
                        for r, e, x in zip(used, e_off, x_off)},
            "reason": _reason(entry, exit_, step, floor_share, rk, e_off, x_off, np.median(dur, axis=1))}
