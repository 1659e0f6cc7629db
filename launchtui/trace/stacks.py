"""Call stacks into the model, per distinct stack (docs/definitions.md §S1).

Readers hand over *stack carriers*: intervals on CPU threads that hold a stack (a Kineto
`python_function` frame, an operator with a legacy `Call stack` string) or a stack per API call
(an Nsight callchain). Stacks are interned into one trie (`StackFrames`), so many launches share
one node; each API call gets the innermost carrier enclosing its start on its own thread.
Backward launches run on the autograd thread, which has no Python frames: their operator's
`Sequence number` leads to the forward operator, whose stack they take (`STACK_BACKWARD`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from launchtui.trace.arrays import unique_sorted
from launchtui.trace.grouping import dense_groups
from launchtui.trace.markers import TRACE_MARKER
from launchtui.trace.model import STACK_BACKWARD, STACK_DIRECT, ApiStacks, StackFrames, StringTable, Trace
from launchtui.trace.nesting import InnermostIndex, _groups, _parents


class StackTrie:
    """Interns stacks as (parent node, frame string id) pairs; parents always get lower ids."""

    def __init__(self, strings: StringTable):
        self.strings = strings
        self.parent: list[int] = []
        self.frame: list[int] = []
        self._index: dict[tuple[int, int], int] = {}

    def node(self, parent: int, frame: int) -> int:
        key = (parent, frame)
        i = self._index.get(key)
        if i is None:
            i = self._index[key] = len(self.parent)
            self.parent.append(parent)
            self.frame.append(frame)
        return i

    def add_chain(self, frames_outer_first) -> int:
        """Node of one stack given as frame strings, outermost first (-1 for an empty stack)."""
        n = -1
        for f in frames_outer_first:
            n = self.node(n, self.strings.intern(f))
        return n

    def add_tree(self, parent: np.ndarray, frame: np.ndarray) -> np.ndarray:
        """Node per event of a forest (event `parent` index, -1 for roots), one level at a time:
        the work per level is vectorised, the dict sees only distinct (parent node, frame) pairs."""
        n = len(parent)
        node = np.full(n, -1, np.int64)
        if n == 0:
            return node
        depth = np.zeros(n, np.int64)
        anc = parent.astype(np.int64)
        while (live := anc >= 0).any():  # one round per nesting level
            depth += live
            anc = np.where(live, parent[np.maximum(anc, 0)], -1)
        width = int(frame.max()) + 1 if n else 1
        order = np.argsort(depth, kind="stable")
        bounds = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2))
        for a, b in zip(bounds[:-1], bounds[1:]):
            idx = order[a:b]
            pnode = np.where(parent[idx] >= 0, node[np.maximum(parent[idx], 0)], -1)
            pairs, inv = unique_sorted((pnode + 1) * width + frame[idx], return_inverse=True)  # one int64 key
            ids = np.array([self.node(int(p) - 1, int(f)) for p, f in zip(*np.divmod(pairs, width))], np.int64)
            node[idx] = ids[inv.reshape(-1)]
        return node

    def table(self) -> StackFrames:
        return StackFrames(parent=np.asarray(self.parent, np.int32), frame=np.asarray(self.frame, np.int32))


@dataclass
class Carriers:
    """Intervals on (local) threads that each carry one stack node."""
    thread: np.ndarray
    start: np.ndarray
    end: np.ndarray
    node: np.ndarray
    _index: InnermostIndex | None = None

    def index(self) -> InnermostIndex:
        if self._index is None:
            self._index = InnermostIndex(self.thread, self.start, self.end)
        return self._index


def forest_parents(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Enclosing interval (global index) of each interval on its thread, -1 for outermost ones."""
    parent = np.full(len(start), -1, np.int64)
    if not len(start):
        return parent
    order, bounds = _groups(thread)
    for a, b in zip(bounds[:-1], bounds[1:]):  # one iteration per thread
        idx = order[a:b]
        o = np.lexsort((-end[idx], start[idx]))
        idx = idx[o]
        p = _parents(start[idx], end[idx])
        parent[idx] = np.where(p >= 0, idx[np.maximum(p, 0)], -1)
    return parent


def attach(trace: Trace, trie: StackTrie, api_thread: np.ndarray, carriers: list[Carriers],
           backward=None) -> None:
    """Give each API call the innermost carrier enclosing its start on its thread, trying the
    carrier kinds in order; then `backward(missing_api_indices) -> nodes` for the rest."""
    api = trace.api
    node = innermost_at(carriers, api_thread, api.start)
    via = np.where(node >= 0, STACK_DIRECT, 0).astype(np.int8)
    if backward is not None:
        miss = np.nonzero(node < 0)[0]
        if len(miss):
            got = backward(miss)
            node[miss] = got
            via[miss[got >= 0]] = STACK_BACKWARD
    trace.stacks = trie.table()
    trace.api_stacks = ApiStacks(node=node.astype(np.int32), via=via)


def innermost_at(carriers: list[Carriers], thread: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Stack node of the innermost carrier at (thread, t), trying carrier kinds in order."""
    node = np.full(len(t), -1, np.int64)
    for c in carriers:
        miss = np.nonzero(node < 0)[0]
        if not len(miss) or not len(c.start):
            continue
        hit = c.index().lookup(thread[miss], t[miss])
        node[miss] = np.where(hit >= 0, c.node[np.maximum(hit, 0)], -1)
    return node


def stack_frames(trace: Trace, node: int) -> list[str]:
    """One stack's frames, innermost first."""
    out = []
    st = trace.stacks
    while node >= 0:
        out.append(trace.strings[int(st.frame[node])])
        node = int(st.parent[node])
    return out


_NVTX_SITE_RE = re.compile(r"(?P<file>[\w./\\-]+\.py):(?P<line>\d+)")
_MARKER_ENTRY_RE = re.compile(r"'([^']+?):(\d+)'")


def nvtx_site_carriers(trace: Trace, trie: StackTrie) -> Carriers | None:
    """Ranges whose text names a `file.py:line` as one-frame stacks (e.g. "model.py:42 forward");
    None when no range does. Their threads are the trace's own thread indices."""
    rg = trace.ranges
    if not len(rg):
        return None
    texts, inv = dense_groups(rg.text)
    node_of = np.full(len(texts), -1, np.int64)
    for i, t in enumerate(texts.tolist()):  # once per distinct range text
        s = trace.strings[int(t)]
        # substring tests first: an emit_nvtx trace's texts are all distinct and name no file
        marker = TRACE_MARKER.search(s) if "'traceMarker'" in s else None
        if marker:  # pyprof / DLProf: the whole stack as 'file:line' strings, outermost first
            frames = [f"{f}({ln}): " for f, ln in _MARKER_ENTRY_RE.findall(marker[1])]
            node_of[i] = trie.add_chain(frames) if frames else -1
            continue
        m = _NVTX_SITE_RE.search(s) if ".py:" in s else None
        if m:
            rest = (s[:m.start()] + s[m.end():]).strip(" :-@()") or "range"
            node_of[i] = trie.add_chain([f"{m['file']}({m['line']}): {rest}"])
    node = node_of[inv]
    keep = np.nonzero(node >= 0)[0]
    if not len(keep):
        return None
    return Carriers(rg.thread[keep].astype(np.int64), rg.start[keep], rg.end[keep], node[keep])


def attach_nvtx_sites(trace: Trace) -> bool:
    """Stacks from `file.py:line` range texts, when a trace has no other stacks (§S1 rule 4)."""
    trie = StackTrie(trace.strings)
    c = nvtx_site_carriers(trace, trie)
    if c is None:
        return False
    attach(trace, trie, trace.api.thread.astype(np.int64), [c])
    if not (trace.api_stacks.node >= 0).any():
        trace.stacks, trace.api_stacks = StackFrames.empty(), ApiStacks.empty()
        return False
    trace.source.extra["stacks"] = "range text file:line"
    return True
