"""CUDA / HIP graphs: what was captured and how each graph replayed (docs/definitions.md §12).

- *Capture*: a `cudaStreamBeginCapture` … `cudaStreamEndCapture` pair (HIP and driver forms too) on
  one thread. A launch call inside it that launched no GPU op was recorded into the graph, not run:
  it is *captured*. The runtime records such calls and nothing on the GPU, so a reader that counts
  only calls with a GPU op loses them; here they are counted per capture, never dropped.
- *Replay*: one graph-launch call (`cudaGraphLaunch`, `cuGraphLaunch`, `hipGraphLaunch`) and the GPU
  ops sharing its correlation id (definitions §1). Replays are grouped by the graph id their ops
  carry (Nsight node mode, Kineto `graph id`), else by the graph's op sequence (the ops' names in GPU
  start order): no trace records a graph id on the launch call.
- *Integrity*: a graph launch whose replay recorded no op, in a trace that records GPU ops, is a
  replay the trace did not keep (a sampled or trimmed trace); one that recorded fewer ops than its
  graph's median replay kept only part of it. The GPU idle around either is not measurable. A
  graph-level replay (Nsight's default mode: a span, no node ops) is recorded; its span is busy
  (graph_busy.py).
"""
from __future__ import annotations

import functools
import re
import zlib
from dataclasses import dataclass

import numpy as np

from launchtui.analysis.select import Selection
from launchtui.trace.arrays import median_of, unique_sorted
from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, Trace

CAPTURE_TRACE_SHARE = 0.5   # captured calls >= this share of the launched work (definitions §12): a capture trace
_BEGIN, _END, _INSTANTIATE = "StreamBeginCapture", "StreamEndCapture", "GraphInstantiate"
_NUMBER = re.compile(r"(?<![0-9A-Za-z])(\d+)(?![0-9])")


def _name_masks(trace: Trace, words: tuple[str, ...]) -> list[np.ndarray]:
    """Per word: the API rows whose name contains it (None: no name does); one pass over the
    interned strings, and none over the calls unless some name matches."""
    api = trace.api
    ids: list[list[int]] = [[] for _ in words]
    for i, s in enumerate(trace.strings.values):   # per distinct string
        if "apture" in s or "nstantiate" in s:
            for k, w in enumerate(words):
                if w in s:
                    ids[k].append(i)
    return [np.isin(api.name, np.array(x, np.int64)) if x and len(api) else None for x in ids]


def window_mask(t: np.ndarray, sel: Selection) -> np.ndarray:
    m = np.ones(len(t), bool)
    if sel.t0 is not None:
        m &= t >= sel.t0
    if sel.t1 is not None:
        m &= t <= sel.t1
    return m


def has_op(trace: Trace) -> np.ndarray:
    """Per API row: whether any GPU op joined it."""
    mark = np.zeros(len(trace.api) + 1, bool)
    mark[trace.ops.api] = True   # unmatched ops (-1) land in the spare last slot
    return mark[:-1]


@dataclass
class Captures:
    thread: np.ndarray        # per capture: the thread index of its begin call
    start: np.ndarray         # begin call start (the trace's first API time when begun before it)
    end: np.ndarray           # end call end (the trace's last API time when still open)
    captured: np.ndarray      # per capture: launch calls inside it with no GPU op
    eager: np.ndarray         # per capture: launch calls inside it that did run a GPU op
    other_thread: np.ndarray  # per capture: of `captured`, those made on another thread of its process
    label: list               # per capture: the enclosing range naming the capture, or ""
    batch: list               # per capture: the batch size the label names, or None
    captured_calls: np.ndarray   # API indices of the captured launch calls
    captured_in: np.ndarray      # per captured call: its capture (its thread's, else its process's)
    open_ended: int           # begin calls with no end in the trace, end calls with no begin
    instantiated: int         # cudaGraphInstantiate* / hipGraphInstantiate* calls

    def __len__(self) -> int:
        return len(self.start)


def _pairs(b_t: np.ndarray, e_t: np.ndarray, b_end: np.ndarray, e_end: np.ndarray, lo: int, hi: int):
    """One thread's begin and end calls (start times, end times) -> capture intervals, and how many
    had no partner. Nested captures on one thread pair innermost first (a stack)."""
    ev = sorted([(int(t), 1, int(x)) for t, x in zip(b_t, b_end)] + [(int(t), 0, int(x)) for t, x in zip(e_t, e_end)])
    stack, out, lost = [], [], 0
    for t, is_begin, _x in ev:   # per capture call: a handful per graph
        if is_begin:
            stack.append(t)
        elif stack:
            out.append((stack.pop(), _x))
        else:
            out.append((lo, _x))
            lost += 1
    lost += len(stack)
    out += [(s, hi) for s in stack]
    return out, lost


def captures(trace: Trace) -> Captures:
    """Every capture interval in the trace and the launch calls recorded into it (§12)."""
    api = trace.api
    begin, endm, instm = _name_masks(trace, (_BEGIN, _END, _INSTANTIATE))
    inst = int(instm.sum()) if instm is not None else 0
    if begin is None and endm is None:
        z = np.zeros(0, np.int64)
        return Captures(z.astype(np.int32), z, z, z, z, z, [], [], z, z, 0, inst)
    begin = np.zeros(len(api), bool) if begin is None else begin
    endm = np.zeros(len(api), bool) if endm is None else endm
    lo, hi = int(api.start.min()), int(api.end.max())
    rows, lost = [], 0
    for th in unique_sorted(api.thread[begin | endm]).tolist():   # per capturing thread
        b = np.flatnonzero(begin & (api.thread == th))
        e = np.flatnonzero(endm & (api.thread == th))
        got, n_lost = _pairs(api.start[b], api.start[e], api.end[b], api.end[e], lo, hi)
        rows += [(th, s, x) for s, x in got]
        lost += n_lost
    rows.sort(key=lambda r: (r[1], r[2], r[0]))
    thread = np.array([r[0] for r in rows], np.int32)
    start = np.array([r[1] for r in rows], np.int64)
    end = np.array([r[2] for r in rows], np.int64)
    launch = np.flatnonzero(api.kind == API_LAUNCH)
    which = _capture_of(api.thread[launch], api.start[launch], thread, start, end)
    ran = has_op(trace)[launch]
    # a launch with no op on another thread of the process while a capture is open went into the
    # capturing stream (the capture mode only limits *unsafe* calls on other threads)
    other = (which < 0) & ~ran
    if other.any():
        pid = trace.threads.pid
        w2 = _capture_of(pid[api.thread[launch[other]]], api.start[launch[other]], pid[thread], start, end)
        which[np.flatnonzero(other)] = w2
        other[np.flatnonzero(other)] = w2 >= 0
    inside = which >= 0
    cap = inside & ~ran
    n = len(start)
    labels, batches = _labels(trace, thread, start, end)
    count = lambda m: np.bincount(which[m], minlength=n)   # noqa: E731 (per capture)
    return Captures(thread, start, end, count(cap), count(inside & ran), count(other), labels, batches, launch[cap],
                    which[cap], lost, inst)


def _capture_of(th: np.ndarray, t: np.ndarray, c_th: np.ndarray, c_s: np.ndarray, c_e: np.ndarray) -> np.ndarray:
    """Per call (thread, start): the capture on its thread holding it (the latest begun), -1 when none."""
    out = np.full(len(t), -1, np.int64)
    for x in unique_sorted(c_th).tolist():   # per capturing thread
        ci = np.flatnonzero(c_th == x)
        ci = ci[np.argsort(c_s[ci], kind="stable")]
        calls = np.flatnonzero(th == x)
        k = np.searchsorted(c_s[ci], t[calls], side="right") - 1
        ok = k >= 0
        ok[ok] = t[calls[ok]] < c_e[ci[k[ok]]]
        out[calls[ok]] = ci[k[ok]]
    return out


def _labels(trace: Trace, thread: np.ndarray, start: np.ndarray, end: np.ndarray):
    """Per capture: the innermost range on its thread enclosing it whose name says capture
    (`capture_8192_PIECEWISE`), and the batch size that name gives (its number), else ("", None)."""
    rg = trace.ranges
    n = len(start)
    labels, batches = [""] * n, [None] * n
    if not len(rg) or not n:
        return labels, batches
    ids = unique_sorted(rg.text[rg.text >= 0])
    says = ids[np.array(["captur" in trace.strings[int(i)].lower() for i in ids.tolist()], bool)] if len(ids) else ids
    cand = np.flatnonzero(np.isin(rg.text, says))
    for c in range(n):   # per capture
        r = cand[(rg.thread[cand] == thread[c]) & (rg.start[cand] <= start[c]) & (rg.end[cand] >= end[c])]
        if not len(r):
            continue
        r = r[np.lexsort((rg.start[r], -rg.depth[r]))][0]   # deepest, then the earliest
        text = trace.strings[int(rg.text[r])]
        labels[c] = text
        m = _NUMBER.findall(text)
        batches[c] = int(m[0]) if m else None
    return labels, batches


@dataclass
class Replays:
    call: np.ndarray          # graph-launch API rows in the window with a recorded op, in start order
    n_ops: np.ndarray         # per replay: its recorded GPU ops
    first: np.ndarray         # per replay: its first op's start
    last: np.ndarray          # per replay: its last op end
    busy: np.ndarray          # per replay: the union of its ops' intervals
    gaps: np.ndarray          # per replay: the idle between its nodes (span - busy)
    max_gap: np.ndarray       # per replay: the longest idle between two of its nodes
    graph: np.ndarray         # per replay: its graph (0-based, numbered by first replay)
    head_name: np.ndarray     # per replay: the string id of its first op's name
    unrecorded: np.ndarray    # graph-launch API rows in the window that recorded no op
    graph_id: np.ndarray      # per replay: the trace's graph id of its ops, -1 when none recorded
    under: np.ndarray         # per replay: fewer ops than its graph's median (under-recorded)
    level: np.ndarray         # per replay: traced at graph level (a GPU span, no node ops; §12.2)

    def __len__(self) -> int:
        return len(self.call)


@functools.cache
def _position_weights() -> np.ndarray:
    """Fixed odd 64-bit weights of an op's position in its replay: SplitMix64's outputs, the same in
    every process, made with uint64 arithmetic (wrapping) rather than `numpy.random`, whose import
    alone costs more than the report's graph analysis."""
    z = np.arange(1, 4097, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x4C54)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return (z ^ (z >> np.uint64(31))) | np.uint64(1)


def _name_hash(trace: Trace, name: np.ndarray) -> np.ndarray:
    """A stable 64-bit value per op name from its text, never its string id (ids follow read order);
    a lookup table over the names present, no sort. A name that was not valid UTF-8 (surrogate
    escapes) hashes by its code points too."""
    present = np.zeros(len(trace.strings), bool)
    present[name] = True
    ids = np.flatnonzero(present)
    table = np.zeros(len(trace.strings), np.uint64)
    texts = (trace.strings[int(i)].encode("utf-8", "surrogatepass") for i in ids.tolist())
    table[ids] = np.array([zlib.crc32(t) * 2654435761 + 1 for t in texts], np.uint64)
    return table[name]


def _segment_max(values: np.ndarray, seg: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """Running maximum of `values` restarted at every segment head (`seg`: segment of each row)."""
    base = values[heads][seg]
    rel = values - base            # >= 0 inside a segment sorted by start, when values are ends
    top = int(rel.max()) + 1 if len(rel) else 1
    if len(heads) * top < 2**62:
        lifted = np.maximum(rel, 0) + seg.astype(np.int64) * top
        return np.maximum.accumulate(lifted) - seg.astype(np.int64) * top + base
    out = values.copy()   # spans too long to lift: one pass per segment
    bounds = np.append(heads, len(values))
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        out[a:b] = np.maximum.accumulate(values[a:b])
    return out


def replays(trace: Trace, sel: Selection) -> Replays:
    """Every graph launch whose call starts in the selection's window, with its recorded ops."""
    api, ops = trace.api, trace.ops
    gl = np.flatnonzero(api.kind == API_GRAPH_LAUNCH)
    gl = gl[window_mask(api.start[gl], sel)]
    has = has_op(trace)[gl] if len(gl) else np.zeros(0, bool)
    lv = _level_rows(trace, gl[~has], sel)   # graph-level replays: a span, no node ops
    unrec = np.setdiff1d(gl[~has], trace.graph_spans.api[lv], assume_unique=True) if len(lv) else gl[~has]
    gl = gl[has]
    mark = np.zeros(len(api) + 1, bool)   # unmatched ops (-1) read the spare last slot
    mark[gl] = True
    sel_ops = np.flatnonzero(mark[ops.api]) if len(gl) else np.zeros(0, np.int64)
    del mark
    if sel.devices is not None and len(sel_ops):
        keep_calls = unique_sorted(ops.api[sel_ops[np.isin(ops.device[sel_ops], sel.devices)]])
        gl = gl[np.isin(gl, keep_calls)]
        sel_ops = sel_ops[np.isin(ops.api[sel_ops], gl)]
    # ops are in the model's total order (start, then their other columns: §9), so a stable sort by
    # call keeps each replay's ops in GPU start order
    a = ops.api[sel_ops]
    idx = sel_ops if not len(a) or (a[1:] >= a[:-1]).all() else sel_ops[np.argsort(a, kind="stable")]
    del a
    hsh = _name_hash(trace, ops.name[idx]) if len(idx) else np.zeros(0, np.uint64)
    call = ops.api[idx]
    heads = np.flatnonzero(np.r_[True, call[1:] != call[:-1]]) if len(idx) else np.zeros(0, np.int64)
    seg = np.cumsum(np.r_[False, call[1:] != call[:-1]]) if len(idx) else np.zeros(0, np.int64)
    n_ops = np.diff(np.append(heads, len(idx)))
    start, end = ops.start[idx], ops.end[idx]
    run_end = _segment_max(end, seg, heads)
    gap = np.zeros(len(idx), np.int64)
    follow = np.ones(len(idx), bool)
    follow[heads] = False
    gap[follow] = np.maximum(start[follow] - run_end[np.flatnonzero(follow) - 1], 0)
    first = start[heads]
    last = np.maximum.reduceat(end, heads) if len(heads) else np.zeros(0, np.int64)
    gaps = np.add.reduceat(gap, heads) if len(heads) else np.zeros(0, np.int64)
    max_gap = np.maximum.reduceat(gap, heads) if len(heads) else np.zeros(0, np.int64)
    weights = _position_weights()
    pos = (np.arange(len(idx)) - heads[seg]) % len(weights)
    sig = np.add.reduceat(hsh * weights[pos], heads) if len(heads) else np.zeros(0, np.uint64)
    gid = (np.maximum.reduceat(trace.op_graph[idx], heads) if len(trace.op_graph) and len(heads)
           else np.full(len(heads), -1, np.int64))
    gs = trace.graph_spans
    lv_span = gs.end[lv] - gs.start[lv]
    cat = lambda a, b: np.concatenate([a, b])   # noqa: E731 (op replays, then graph-level ones)
    calls, n_ops = cat(call[heads], gs.api[lv].astype(np.int64)), cat(n_ops, np.zeros(len(lv), np.int64))
    first, last, gid = cat(first, gs.start[lv]), cat(last, gs.end[lv]), cat(gid, gs.graph[lv])
    busy, gaps = cat(last[:len(heads)] - first[:len(heads)] - gaps, lv_span), cat(gaps, np.zeros(len(lv), np.int64))
    max_gap, head = cat(max_gap, np.zeros(len(lv), np.int64)), cat(ops.name[idx[heads]], np.full(len(lv), -1))
    level = np.r_[np.zeros(len(heads), bool), np.ones(len(lv), bool)]
    sig = cat(sig, np.zeros(len(lv), np.uint64))
    order = np.lexsort((calls, api.start[calls]))
    # a recorded graph id keys the replay (-1, id), a graph-level one (-2, id); else its op
    # sequence (ops >= 1, hash)
    keys = [(-2 if lvl else -1, g) if g >= 0 or lvl else k
            for g, lvl, k in zip(gid[order].tolist(), level[order].tolist(),
                                 zip(n_ops[order].tolist(), sig[order].tolist()))]
    number: dict = {}
    graph = np.array([number.setdefault(k, len(number)) for k in keys], np.int64)   # per replay: dict lookups
    n_sorted = n_ops[order]
    return Replays(calls[order], n_sorted, first[order], last[order], busy[order], gaps[order], max_gap[order],
                   graph, head[order], unrec, gid[order], _under(graph, n_sorted), level[order])


def _level_rows(trace: Trace, calls: np.ndarray, sel: Selection) -> np.ndarray:
    """Timed rows of `trace.graph_spans` joined to one of `calls` (graph launches with no op), on
    the selection's devices. An untimed row leaves its launch unrecorded (§12.3 says why)."""
    gs = trace.graph_spans
    if not len(gs) or not len(calls):
        return np.zeros(0, np.int64)
    keep = np.isin(gs.api, calls) & (gs.end > gs.start)
    if sel.devices is not None:
        keep &= np.isin(gs.device, sel.devices)
    return np.flatnonzero(keep)


def _under(graph: np.ndarray, n_ops: np.ndarray) -> np.ndarray:
    """Per replay: whether it recorded fewer ops than its graph's median replay (§12.3). A graph
    keyed by op sequence has one op count, so only graphs keyed by id can be short."""
    out = np.zeros(len(graph), bool)
    for g in unique_sorted(graph).tolist():   # per graph
        m = graph == g
        out[m] = n_ops[m] < median_of(n_ops[m])
    return out


def overlaps_capture(start: np.ndarray, end: np.ndarray, graphs: dict | None) -> np.ndarray:
    """Per window [start, end): whether it overlaps a capture of the record's `graphs` key."""
    out = np.zeros(len(start), bool)
    for c in (graphs or {}).get("capture", {}).get("captures", []):   # per capture
        out |= (start < c["end_ns"]) & (end > c["start_ns"])
    return out


def replayed_beyond_calls(trace: Trace, calls: np.ndarray, index_of) -> int:
    """Ops replayed by the graph launches among `calls` (start inside an iteration: `index_of`),
    beyond one per launch: what a graph launch absorbed, for judging how much activity a step has."""
    g = calls[trace.api.kind[calls] == API_GRAPH_LAUNCH]
    g = g[index_of(trace.api.start[g]) >= 0] if len(g) else g
    if not len(g):
        return 0
    mark = np.zeros(len(trace.api) + 1, bool)
    mark[g] = True
    return int(mark[trace.ops.api].sum()) - len(g)
