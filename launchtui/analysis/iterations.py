"""Iterations: where each training / inference step starts and ends (docs/definitions.md §V1).

Sources, in order: `ProfilerStep#N` ranges; a range the user names (`--iter NAME`, substring,
case-insensitive) or a step-like range name found automatically; a repeating period of the
launch sequence (a heuristic, flagged); else the whole window, said plainly.
Iteration k spans [start_k, end_k) on the trace clock (CPU time: that of the marking ranges, or
of the launch calls that open each period).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from launchtui.analysis.intervals import in_windows
from launchtui.analysis.phases import normalise
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, OP_KERNEL, RANGE_PUSHPOP, Trace

SOURCE_PROFILER_STEP = "ProfilerStep"
SOURCE_NAMED = "named range"
SOURCE_STEP_LIKE = "step-like range"
SOURCE_PERIODIC = "periodic launch sequence"
SOURCE_NONE = "none"

_PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")
# whole-word step / iteration / batch, as in train_step, step_12, Iteration 3; not Optimizer.step
_STEP_LIKE = re.compile(r"(?:^|[^a-z])(?:step|iter|iteration|batch)(?:[^a-z]|$)", re.I)
_DIGITS = re.compile(r"\d+")

# periodic detection: launches in segments identical to the modal one must cover this share
PERIOD_MIN_COVERAGE = 0.8
PERIOD_MIN_LAUNCHES = 4
PERIOD_MAX_CANDIDATES = 64


@dataclass
class Iterations:
    source: str
    start: np.ndarray          # int64 ns
    end: np.ndarray            # int64 ns (exclusive)
    heuristic: bool = False
    name: str = ""             # the range name (or pattern) that marks them
    range_idx: np.ndarray | None = None   # the marking ranges, when ranges mark them
    base_depth: int = 0        # the phase level-1 depth: first range depth inside an iteration
    note: str = ""             # one plain line on how they were found

    def __len__(self) -> int:
        return len(self.start)

    def durations(self) -> np.ndarray:
        return self.end - self.start

    def index_of(self, t: np.ndarray) -> np.ndarray:
        """Per time: the index of the iteration [start, end) holding it, -1 when none."""
        return in_windows(t, self.start, self.end)

    def to_json(self) -> dict:
        d = self.durations()
        return {"source": self.source, "count": len(self), "name": self.name, "heuristic": self.heuristic,
                "median_ns": int(np.median(d)) if len(d) else 0, "min_ns": int(d.min()) if len(d) else 0,
                "max_ns": int(d.max()) if len(d) else 0, "note": self.note, "base_depth": self.base_depth,
                "starts_ns": self.start.tolist(), "ends_ns": self.end.tolist()}


def _outermost_on_one_thread(trace: Trace, idx: np.ndarray, device: int | None = None) -> np.ndarray:
    """Of the matching ranges, those on the thread holding most of them (ties: the thread making
    most launch calls for `device`), dropping any enclosed by another match (so `step` never
    splits a step into its own sub-ranges); time order."""
    rg = trace.ranges
    idx = idx[rg.kind[idx] == RANGE_PUSHPOP]
    if not len(idx):
        return idx
    th, cnt = unique_sorted(rg.thread[idx], return_counts=True)
    tied = th[cnt == cnt.max()]
    pick = tied[0]
    if len(tied) > 1:
        launches = _calls_per_thread(trace, device, int(tied.max()) + 1)
        pick = tied[np.argmax(launches[tied])]
    idx = idx[rg.thread[idx] == pick]
    idx = idx[np.lexsort((-rg.end[idx], rg.start[idx]))]
    run_end = np.maximum.accumulate(rg.end[idx])
    keep = np.ones(len(idx), bool)
    keep[1:] = rg.start[idx][1:] >= run_end[:-1]
    return idx[keep]


def _calls_per_thread(trace: Trace, device: int | None, n: int) -> np.ndarray:
    """Per thread (at least `n` slots): the API calls that launched an op (on `device`; None: any).
    The device's ops by index and a spare last slot for the unmatched ops' -1: no full-length
    masked gathers (~10 ms at 1M when threads tie)."""
    ops, api = trace.ops, trace.api
    op_api = ops.api if device is None else ops.api[np.flatnonzero(ops.device == device)]
    mark = np.zeros(len(api) + 1, bool)
    mark[op_api] = True
    return np.bincount(api.thread[np.flatnonzero(mark[:-1])], minlength=n)


def _from_ranges(trace: Trace, idx: np.ndarray, source: str, name: str, note: str,
                 device: int | None = None) -> Iterations:
    rg = trace.ranges
    idx = _outermost_on_one_thread(trace, idx, device)
    base = int(rg.depth[idx].min()) + 1 if len(idx) else 0
    return Iterations(source, rg.start[idx].astype(np.int64), rg.end[idx].astype(np.int64), False, name,
                      idx, base, note)


def _text_matches(trace: Trace, pred) -> np.ndarray:
    """Ranges whose text satisfies pred, testing each distinct text once."""
    rg = trace.ranges
    if not len(rg):
        return np.zeros(0, np.int64)
    uniq = unique_sorted(rg.text)
    hits = [u for u in uniq.tolist() if pred(trace.strings[u])]
    return np.nonzero(np.isin(rg.text, hits))[0]


def profiler_steps(trace: Trace, device: int | None = None) -> Iterations | None:
    idx = _text_matches(trace, lambda s: bool(_PROFILER_STEP.match(s)))
    if not len(idx):
        return None
    return _from_ranges(trace, idx, SOURCE_PROFILER_STEP, "ProfilerStep#N", "torch.profiler step ranges", device)


def named(trace: Trace, name: str, device: int | None = None) -> Iterations | None:
    needle = name.lower()
    idx = _text_matches(trace, lambda s: needle in normalise(s).lower())
    if not len(idx):
        return None
    return _from_ranges(trace, idx, SOURCE_NAMED, name, f"ranges whose name contains {name!r}", device)


def step_like(trace: Trace, device: int | None = None) -> Iterations | None:
    """The step-like name pattern (digits folded) with the most occurrences (at least 2) on one
    thread; `optim` ranges are never steps."""
    rg = trace.ranges
    if not len(rg):
        return None
    uniq = unique_sorted(rg.text)
    pattern: dict[int, str] = {}
    for u in uniq.tolist():  # once per distinct name
        s = normalise(trace.strings[u])
        if _STEP_LIKE.search(s) and "optim" not in s.lower():
            pattern[u] = _DIGITS.sub("#", s)
    if not pattern:
        return None
    best = None
    for pat in sorted(set(pattern.values())):  # once per distinct pattern (few)
        ids = [u for u, p in pattern.items() if p == pat]
        idx = _outermost_on_one_thread(trace, np.nonzero(np.isin(rg.text, ids))[0], device)
        if len(idx) >= 2 and (best is None or len(idx) > best[0]):
            best = (len(idx), pat, ids)
    if best is None:
        return None
    _, pat, ids = best
    return _from_ranges(trace, np.nonzero(np.isin(rg.text, ids))[0], SOURCE_STEP_LIKE, pat,
                        f"step-like ranges {pat!r} found automatically", device)


def launch_sequence(trace: Trace, device: int | None = None):
    """(api index, kernel name id) of every launched kernel on `device` (all when None), in launch
    order: the sequence whose period the heuristic looks for."""
    ops, api = trace.ops, trace.api
    m = (ops.kind == OP_KERNEL) & (ops.api >= 0)
    if device is not None:
        m &= ops.device == device
    k = np.nonzero(m)[0]
    a = ops.api[k]
    is_launch = np.isin(api.kind[a], (API_LAUNCH, API_GRAPH_LAUNCH))
    k, a = k[is_launch], a[is_launch]
    # one entry per launch call: a graph launch feeds many ops
    a_u, first = unique_sorted(a, return_index=True)
    k = k[first]
    o = np.lexsort((a_u, api.start[a_u]))
    return a_u[o], ops.name[k[o]].astype(np.int64)


def periodic(trace: Trace, device: int | None = None) -> Iterations | None:
    """Find the shortest period of the launch sequence that tiles it.

    Candidate anchors are kernel names launched n times (n >= 3, smallest spacing first); their
    occurrences cut the sequence into n - 1 segments. The anchor passes when the segments equal
    to the most common segment hold >= 80 % of the launches between the first and last
    occurrence. A name once per layer fails: the segment spanning loss, backward and optimizer
    differs from the per-layer ones and holds most launches."""
    calls, seq = launch_sequence(trace, device)
    n = len(seq)
    if n < 2 * PERIOD_MIN_LAUNCHES:
        return None
    names, inv, counts = unique_sorted(seq, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    cand = np.nonzero((counts >= 3) & (counts <= n // PERIOD_MIN_LAUNCHES))[0]
    # fewest occurrences first: a once-per-step name is rare, per-layer names are common; equal
    # counts by name (definitions.md §9: strings, never intern ids)
    text = {c: trace.strings[int(names[c])] for c in cand.tolist()}
    cand = np.array(sorted(text, key=lambda c: (counts[c], text[c]))[:PERIOD_MAX_CANDIDATES], np.int64)
    api = trace.api
    best = None
    for c in cand.tolist():  # a few candidate anchors, each checked in O(n)
        pos = np.nonzero(inv == c)[0]
        lens = np.diff(pos)
        vals, lc = unique_sorted(lens, return_counts=True)
        L = int(vals[np.argmax(lc)])
        if L < PERIOD_MIN_LAUNCHES:
            continue
        same_len = pos[:-1][lens == L]
        ref = seq[same_len[0]:same_len[0] + L]
        # segments of the modal length equal to the first such segment
        seg = seq[same_len[:, None] + np.arange(L)[None, :]]
        equal = int((seg == ref[None, :]).all(axis=1).sum())
        coverage = equal * L / (pos[-1] - pos[0])
        if coverage < PERIOD_MIN_COVERAGE:
            continue
        # best: highest coverage (to the percent), then most launches covered, then shortest
        # period, then the anchor's name
        rank = (-round(coverage, 2), -equal * L, L, text[c])
        if best is None or rank < best[0]:
            best = (rank, c, pos, L, equal)
    if best is None:
        return None
    _, c, pos, L, equal = best
    starts = api.start[calls[pos]].astype(np.int64)
    note = (f"heuristic: the launch sequence repeats every {L} launches "
            f"({equal} of {len(pos) - 1} periods identical)")
    return Iterations(SOURCE_PERIODIC, starts[:-1], starts[1:], True, trace.strings[int(names[c])], None, 0, note)


def whole(trace: Trace, window: tuple[int, int] | None) -> Iterations:
    w = window or trace.window() or (0, 0)
    return Iterations(SOURCE_NONE, np.array([w[0]], np.int64), np.array([w[1]], np.int64), False, "", None, 0,
                      "no iteration marks: the whole window counts as one iteration")


def find(trace: Trace, name: str | None = None, device: int | None = None,
         window: tuple[int, int] | None = None) -> Iterations:
    """Iterations by the first source that yields any (see module docstring). A name the user
    gives that matches nothing falls through to the other sources, and the note says so."""
    miss = ""
    if name:
        it = named(trace, name, device)
        if it is not None:
            return it
        miss = f"no range name contains {name!r}; "
    for source in (profiler_steps, step_like, periodic):  # lazily: the first that yields wins
        it = source(trace, device)
        if it is not None and len(it):
            it.note = miss + it.note
            return it
    it = whole(trace, window)
    it.note = miss + it.note
    return it
