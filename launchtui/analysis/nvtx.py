"""NVTX / annotation ranges: attribution of kernels, search, summaries (definitions.md §7).

A GPU op belongs to the innermost push/pop range (Kineto: user annotation) that encloses the start
of its launch call on the same thread: range.start <= api.start < range.end.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from launchtui.analysis.index import trace_index
from launchtui.analysis.prose import marker_name
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.grouping import dense_groups
from launchtui.trace.model import Trace
from launchtui.trace.order import string_ranks

OPTIMIZER_PATTERN = "optim"


def innermost_at(trace: Trace, thread: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Innermost push/pop range index enclosing each (thread, time), -1 when none."""
    return trace_index(trace).nvtx.lookup(np.asarray(thread), np.asarray(t, np.int64))


def op_ranges(trace: Trace) -> np.ndarray:
    """Per GPU op: its innermost enclosing range at launch (-1: unmatched op or no range)."""
    return trace_index(trace).op_ranges


def range_name(trace: Trace, i: int, shown: bool = False) -> str:
    """`domain:text`; `shown`: the text as prose shows it (a pyprof / DLProf marker by its op and
    line, definitions.md §V5), where JSON and matching keep it whole."""
    rg = trace.ranges
    text = trace.strings[int(rg.text[i])]
    text = marker_name(text) if shown else text
    dom = int(rg.domain[i])
    return f"{trace.strings[dom]}:{text}" if dom >= 0 else text


def range_path(trace: Trace, i: int) -> list[int]:
    """Enclosing ranges of range i on its thread, outermost first, ending with i."""
    rg = trace.ranges
    s, e, th = rg.start[i], rg.end[i], rg.thread[i]
    m = (rg.thread == th) & (rg.start <= s) & (rg.end >= e) & (rg.depth <= rg.depth[i])
    cand = np.nonzero(m)[0]
    cand = cand[np.lexsort((-rg.end[cand], rg.start[cand]))]
    # keep one range per depth, the innermost candidate at each level
    out = {}
    for c in cand.tolist():
        out[int(rg.depth[c])] = c
    out[int(rg.depth[i])] = i
    return [out[d] for d in sorted(out)]


def path_text(trace: Trace, i: int, shown: bool = False) -> str:
    return " > ".join(range_name(trace, j, shown) for j in range_path(trace, i)) if i >= 0 else ""


def search(trace: Trace, text: str) -> np.ndarray:
    """Ranges whose name contains `text`, case-insensitively, in time order."""
    rg = trace.ranges
    if not len(rg) or not text:
        return np.zeros(0, np.int64)
    needle = text.lower()
    uniq = unique_sorted(rg.text)
    hit_ids = [u for u in uniq.tolist() if needle in trace.strings[u].lower()]
    dom_hits = [d for d in unique_sorted(rg.domain).tolist() if d >= 0 and needle in trace.strings[d].lower()]
    m = np.isin(rg.text, hit_ids) | np.isin(rg.domain, dom_hits)
    idx = np.nonzero(m)[0]
    return idx[np.lexsort((rg.thread[idx], -rg.end[idx], rg.start[idx]))]


@dataclass
class RangeName:
    name: str
    text_id: int
    count: int
    total_ns: int
    first: int       # index of the first occurrence


def summary(trace: Trace) -> list[RangeName]:
    """Distinct range names with occurrence counts and total time, by total time descending."""
    rg = trace.ranges
    if not len(rg):
        return []
    uniq, first, inv = unique_sorted(rg.text, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    counts = np.bincount(inv)
    total = np.bincount(inv, weights=(rg.end - rg.start).astype(np.float64))
    # first occurrence in time order (ranges are sorted by start already)
    out = [RangeName(trace.strings[int(u)], int(u), int(c), int(t), int(f))
           for u, c, t, f in zip(uniq, counts, total, first)]
    out.sort(key=lambda r: (-r.total_ns, r.name))
    return out


def occurrences(trace: Trace, text_id: int) -> np.ndarray:
    """All ranges with this exact text, in time order."""
    return np.nonzero(trace.ranges.text == text_id)[0]


DENSE_CELLS = 1 << 21   # (group, range text) counts held as one table up to this many cells (16 MB)
KEY_BLOCK = 1 << 20     # launches counted into that table at a time (bounded temporaries)


def top_range_per_group(trace: Trace, op_idx: np.ndarray, group: np.ndarray,
                        n_groups: int) -> dict[int, tuple[int, float]]:
    """For groups of ops, the most common innermost range text and its share of the group's ops
    (ties: the first text as a string, definitions.md §9), for the groups with any op in a range,
    in group order.

    Counted in one (group, text) table: a range's text is renumbered over the few distinct texts of
    the ranges table, so a launch costs two lookups and an int32 key, not a per-launch sort key."""
    rg = trace.ranges
    texts, dense_text = dense_groups(rg.text)
    nt = len(texts)
    if not len(op_idx) or n_groups * (nt + 1) > DENSE_CELLS:
        return _top_range_by_pairs(trace, op_idx, group, n_groups)
    text_of = np.empty(len(rg) + 1, np.int32)
    text_of[:-1] = dense_text
    text_of[-1] = nt                       # op range -1 (none) reads the last entry: column nt
    ranges_of, cells = op_ranges(trace), n_groups * (nt + 1)
    cnt = np.zeros(cells, np.int64)
    for i in range(0, len(op_idx), KEY_BLOCK):   # per block: no per-launch key (nor its int64 copy)
        key = text_of[ranges_of[op_idx[i:i + KEY_BLOCK]]]
        key += np.multiply(group[i:i + KEY_BLOCK], nt + 1, dtype=np.int32)
        cnt += np.bincount(key, minlength=cells)
    cnt = cnt.reshape(n_groups, nt + 1)
    tot = cnt.sum(axis=1)
    cnt = cnt[:, :nt]
    best = cnt.argmax(axis=1) if nt else np.zeros(n_groups, np.int64)
    hits = cnt[np.arange(n_groups), best] if nt else np.zeros(n_groups, np.int64)
    if nt:
        tied = np.flatnonzero(((cnt == hits[:, None]).sum(axis=1) > 1) & (hits > 0))
        for g in tied.tolist():  # once per group whose top count is shared: the first text wins
            best[g] = min(np.flatnonzero(cnt[g] == hits[g]).tolist(), key=lambda c: trace.strings[int(texts[c])])
    return {g: (int(texts[best[g]]), float(hits[g]) / float(tot[g])) for g in np.flatnonzero(hits > 0).tolist()}


def _top_range_by_pairs(trace: Trace, op_idx: np.ndarray, group: np.ndarray,
                        n_groups: int) -> dict[int, tuple[int, float]]:
    """`top_range_per_group` through the distinct (group, text) pairs: for more groups x texts than
    DENSE_CELLS."""
    rng = op_ranges(trace)[op_idx]
    has = rng >= 0
    if not has.any():
        return {}
    width = len(trace.strings) + 1
    tot = np.bincount(group, minlength=n_groups)
    # the (group, text) key built in place: each copy would be an int64 per launch
    key = group[has].astype(np.int64)
    key *= width
    key += trace.ranges.text[rng[has]]
    del rng, has
    uk, pair = dense_groups(key)
    del key
    cnt = np.bincount(pair, minlength=len(uk))
    del pair
    gk, tk = np.divmod(uk, width)   # uk ascending: each group's pairs are one run
    heads = np.flatnonzero(np.concatenate([[True], gk[1:] != gk[:-1]]))
    top = np.repeat(np.maximum.reduceat(cnt, heads), np.diff(np.append(heads, len(gk))))
    cand = np.flatnonzero(cnt == top)          # each group's texts at its top count
    o = np.lexsort((string_ranks(trace.strings, tk[cand]), gk[cand]))   # ties: the first text
    firsts = np.ones(len(o), bool)
    firsts[1:] = gk[cand[o]][1:] != gk[cand[o]][:-1]
    return {int(gk[j]): (int(tk[j]), float(cnt[j]) / float(tot[gk[j]])) for j in cand[o[firsts]]}
