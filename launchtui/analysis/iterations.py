"""Iterations: where each training / inference step starts and ends (docs/definitions.md §V1).

Sources, in order: `ProfilerStep#N` ranges; a range the user names (`--iter NAME`, substring,
case-insensitive) or a step-like range name found automatically, even one that occurs once; a
repeating period of the launch sequence (a heuristic, flagged); else the whole window, said plainly.
Iteration k spans [start_k, end_k) on the trace clock (CPU time: that of the marking ranges, or
of the launch calls that open each period); a single marking range runs on to the end of the GPU
work launched inside it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from launchtui.analysis.intervals import in_windows
from launchtui.analysis.phases import normalise
from launchtui.analysis.prose import dur, short
from launchtui.trace.arrays import median_of, unique_sorted
from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, OP_KERNEL, RANGE_PUSHPOP, Trace

SOURCE_PROFILER_STEP = "ProfilerStep"
SOURCE_NAMED = "named range"
SOURCE_STEP_LIKE = "step-like range"
SOURCE_PERIODIC = "periodic launch sequence"
SOURCE_NONE = "none"

_PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")
# whole-word step / iteration / batch, as in train_step, step_12, Iteration 3; not Optimizer.step
_STEP_LIKE = re.compile(r"(?:^|[^a-z])(?:step|iter|iteration|batch)(?:[^a-z]|$)", re.I)
# a serving step: vLLM's execute_model, execute_context_1(...)_generation_0(0); not ExecutionContext
_EXECUTE = re.compile(r"^(?i:execute)(?![a-z])")
# a forward pass: `forward` alone or ending a dotted / `::` path (Model.forward, ## forward ##); not
# FSDP::pre_forward, _flash_attn_forward, layer_0_forward (a part of a model, not its pass), nor a
# call path that passes through a forward (DLProf's funcStack markers)
_FORWARD = re.compile(r"(?:\w+(?:\.|::))*forward", re.I)
_BACKWARD = re.compile(r"\bbackward\b", re.I)
_WORDS = ("step", "iter", "batch", "execute", "forward", "backward")     # a cheap first filter
# a range occurring once marks the step when it holds at least this share of the launch calls
SINGLE_MIN_LAUNCH_SHARE = 0.5
_DIGITS = re.compile(r"\d+")

# periodic detection: launches in segments identical to the modal one must cover this share
PERIOD_MIN_COVERAGE = 0.8
PERIOD_MIN_LAUNCHES = 4
PERIOD_MAX_CANDIDATES = 64
PERIOD_MIN_SHARE = 0.5   # periods holding fewer of the device's launches leave the whole window instead


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
                "median_ns": int(median_of(d)) if len(d) else 0, "min_ns": int(d.min()) if len(d) else 0,
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
    masked gathers, which cost far more than index gathers."""
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


def _step_like_patterns(trace: Trace) -> dict[int, str]:
    """Per distinct range name that is step-like: its pattern (normalised, digits folded). A whole-word
    `forward` counts only in a trace without a `backward` range: there it is one pass of inference,
    while in training it is a phase of the step."""
    rg = trace.ranges
    texts = {}
    for u in unique_sorted(rg.text).tolist():  # once per distinct name; most hold none of the words
        raw = trace.strings[u]
        low = raw.lower()
        if any(w in low for w in _WORDS):
            texts[u] = normalise(raw)
    training = any(_BACKWARD.search(s) for s in texts.values())
    out = {}
    for u, s in texts.items():
        if "optim" in s.lower():
            continue
        if _STEP_LIKE.search(s) or _EXECUTE.search(s) or (not training and _FORWARD.fullmatch(s.strip("# "))):
            out[u] = _DIGITS.sub("#", s)
    return out


def step_like(trace: Trace, device: int | None = None) -> Iterations | None:
    """The step-like name pattern (docs/definitions.md §V1) that marks the steps: of the patterns
    with at least 2 occurrences on one thread, or with one holding at least half the launch calls,
    and not lying inside another such pattern's ranges, the one with most occurrences (then the
    longest in total, then the pattern). A single range runs on to the end of its GPU work."""
    rg = trace.ranges
    if not len(rg):
        return None
    pattern = _step_like_patterns(trace)
    if not pattern:
        return None
    cands = []
    starts = None    # launch-call starts, for a range occurring once
    for pat in sorted(set(pattern.values())):  # once per distinct pattern (few)
        ids = [u for u, p in pattern.items() if p == pat]
        idx = _outermost_on_one_thread(trace, np.nonzero(np.isin(rg.text, ids))[0], device)
        if len(idx) == 1 and starts is None:
            starts = trace.api.start[launch_sequence(trace, device)[0]]
        if len(idx) >= 2 or (len(idx) == 1 and _share_inside(starts, rg.start[idx[0]], rg.end[idx[0]])
                             >= SINGLE_MIN_LAUNCH_SHARE):
            cands.append((pat, ids, idx))
    # a part of another candidate's step drops out (of two on the very same ranges, the later pattern)
    cands = [c for c in cands if not any(_inside(trace, c[2], o[2])
                                         and (not _inside(trace, o[2], c[2]) or o[0] < c[0])
                                         for o in cands if o is not c)]
    if not cands:
        return None
    pat, ids, idx = min(cands, key=lambda c: (-len(c[2]), -int((rg.end[c[2]] - rg.start[c[2]]).sum()), c[0]))
    once = (" (it occurs once: the iteration runs to the end of the GPU work launched inside it)"
            if len(idx) == 1 else "")
    return _from_ranges(trace, np.nonzero(np.isin(rg.text, ids))[0], SOURCE_STEP_LIKE, pat,
                        f"step-like ranges {pat!r} found automatically{once}", device)


def _inside(trace: Trace, idx: np.ndarray, other: np.ndarray) -> bool:
    """Whether every range of `idx` lies inside a range of `other`. Both come from
    `_outermost_on_one_thread`: each on one thread, disjoint, in time order."""
    rg = trace.ranges
    if not len(idx) or not len(other) or rg.thread[idx[0]] != rg.thread[other[0]]:
        return False
    pos = np.searchsorted(rg.start[other], rg.start[idx], side="right") - 1
    return bool((pos >= 0).all() and (rg.end[other][np.maximum(pos, 0)] >= rg.end[idx]).all())


def _share_inside(t: np.ndarray, start: int, end: int) -> float:
    """The share of times `t` (launch-call starts) inside [start, end)."""
    return float(np.count_nonzero((t >= start) & (t < end))) / len(t) if len(t) else 0.0


def _through_gpu_work(trace: Trace, it: Iterations, device: int | None) -> Iterations:
    """A single marking range covers the GPU work launched inside it (definitions.md §V1): its
    iteration ends at the later of the range's end and the last end of the device's ops whose
    call (any thread) started inside it. A serving step's CPU range ends once its work is queued."""
    if len(it) != 1:
        return it
    ops, api = trace.ops, trace.api
    m = ops.api >= 0
    if device is not None:
        m &= ops.device == device
    k = np.flatnonzero(m)
    t = api.start[ops.api[k]]
    k = k[(t >= it.start[0]) & (t < it.end[0])]
    if len(k):
        it.end = np.maximum(it.end, int(ops.end[k].max()))
    return it


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
    held = int(pos[-1] - pos[0])
    if held < PERIOD_MIN_SHARE * n:   # the periods would judge a small part of the trace as all of it
        return None
    starts = api.start[calls[pos]].astype(np.int64)
    note = (f"heuristic: the launch sequence repeats every {L} launches "
            f"({equal} of {len(pos) - 1} periods identical; the periods hold {held:,} of the {n:,} launches)")
    it = Iterations(SOURCE_PERIODIC, starts[:-1], starts[1:], True, trace.strings[int(names[c])], None, 0, note)
    it.note += _enclosing_note(trace, it, unique_sorted(api.thread[calls]))
    return it


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
            return _through_gpu_work(trace, it, device)
        miss = f"no range name contains {name!r}; "
    for source in (profiler_steps, step_like, periodic):  # lazily: the first that yields wins
        it = source(trace, device)
        if it is not None and len(it):
            it.note = miss + it.note
            return _through_gpu_work(trace, it, device) if source is step_like else it
    it = whole(trace, window)
    it.note = miss + it.note
    return it


def _enclosing_note(trace: Trace, it: Iterations, threads: np.ndarray) -> str:
    """When a range on a launching thread (`threads`) holds two or more whole periods, the period is
    a part of something longer (a transformer layer inside one step): say so, naming the longest
    such range (definitions.md §V1)."""
    rg = trace.ranges
    if not len(rg):
        return ""
    pp = np.flatnonzero((rg.kind == RANGE_PUSHPOP) & np.isin(rg.thread, threads))
    if not len(pp):
        return ""
    # periods are contiguous and in time order: those inside [s, e) are a run of them
    first = np.searchsorted(it.start, rg.start[pp], side="left")
    last = np.searchsorted(it.end, rg.end[pp], side="right")
    pp = pp[last - first >= 2]
    if not len(pp):
        return ""
    span = rg.end[pp] - rg.start[pp]
    best = min(pp[span == span.max()].tolist(), key=lambda r: (int(rg.start[r]), trace.strings[int(rg.text[r])]))
    period = float(median_of(it.durations())) / 1e6
    return (f"; the launch period ({dur(period)}) is shorter than the enclosing range "
            f"{short(normalise(trace.strings[int(rg.text[best])]), 60)} ({dur(float(span.max()) / 1e6)}): "
            f"likely a layer, not a step")
