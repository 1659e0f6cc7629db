"""Capture ↔ replay join (docs/definitions.md §12.6): every GPU op replayed from a graph in an
execution trace, labelled with the captured launch call it came from in a capture trace (the kernel
the call named, the CPU op that made it, its range and its user call site).

- *Captured side*: the captured launch calls of each capture (§12.1), in call order, with the
  kernel each one names (trace/launch_names.py: only ROCm's Kineto writes it on the call).
- *Replayed side*: each replay's ops (§12.2) in GPU start order; its kernels are its node sequence.
- *Match by node id* (graphs_join_ids.py): in one Nsight recording with node lineage, each op whose
  captured node was created inside a captured call pairs with it; a replay with any such op is done.
- *Match by kernels*, for the other replays (Kineto never records a node on the capture side): a
  replay matches the captures whose
  captured kernel sequence equals its kernel sequence, text for text; failing that, the same kernels
  in another order (a multi-stream graph: the k-th launch of a kernel pairs with its k-th run);
  a subsequence of a capture's kernels (a replay the file kept only part of, §12.3); and, only when
  the capture trace names no kernel at all, the same number of nodes. Among several captures with
  the replay's key (identical pieces), it pairs with the first one captured after the capture of the
  previous matched replay (graphs replay in capture order), else the first. Copy and memset nodes,
  and every op of a replay with no candidate, stay unmatched, counted by reason.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np

from launchtui.analysis import graphs as gr
from launchtui.analysis.graphs_join_ids import node_id_sources
from launchtui.analysis import nvtx, sources
from launchtui.analysis.select import WHOLE
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.launch_names import LaunchNames, read_launch_names
from launchtui.trace.model import OP_KERNEL, Trace

BY_SEQUENCE, BY_SET, BY_COUNT = "kernel sequence", "kernel set", "node count"
BY_SUBSEQUENCE = "kernel subsequence (nodes missing from the replay)"
BY_NODE_ID = "graph node id"
MATCHED = 0
R_NOT_KERNEL, R_NO_CAPTURE, R_NO_COUNT, R_NODE_UNRESOLVED = 1, 2, 3, 4
REASONS = {R_NOT_KERNEL: "copy or memset node (a captured copy names no kernel)",
           R_NO_CAPTURE: "no capture holds this replay's kernel sequence",
           R_NO_COUNT: "no capture has this replay's node count (the capture trace names no kernel)",
           R_NODE_UNRESOLVED: "its node id leads to no captured launch call, while other nodes of its replay do "
                              "(node_ids.unresolved says why)"}


@dataclass
class CapturedCalls:
    """The capture trace's captured launch calls, by capture then call order (§12.1)."""
    call: np.ndarray        # API row in the capture trace
    capture: np.ndarray     # its capture (0-based, in the captures' time order)
    bounds: np.ndarray      # capture c's calls are rows bounds[c]:bounds[c + 1]
    kernel: list            # the kernel the call names, None where it names none
    op: list                # the CPU op that made the call ("" none)
    range: list             # the innermost range on its thread at the call ("" none)
    site: list              # its user call site, file:line function ("" none)
    labels: list            # per capture: its capture range's text (§12.1), "" none


@dataclass
class GraphJoin:
    """Per replayed op of the execution trace (`op`, in replay then GPU order): its replay, node
    number among its replay's kernels (-1 not a kernel), the captured call it came from (`source`:
    a row of `captured`, -1 none) and `reason` (MATCHED or an R_* code)."""
    op: np.ndarray
    replay: np.ndarray
    node: np.ndarray
    source: np.ndarray
    reason: np.ndarray
    replays: gr.Replays
    captured: CapturedCalls
    n_captures: int
    matched_by: list        # per replay: BY_* or "" (unmatched)
    replay_capture: np.ndarray   # per replay: the capture it paired with, -1 none
    capture_path: str = ""       # the capture trace's path as given
    node_ids: dict = field(default_factory=dict)   # the id rule's facts (graphs_join_ids.node_id_sources)

    def source_of_ops(self, n_ops: int) -> np.ndarray:
        """Per op of the execution trace: its row of `captured`, -1 none."""
        out = np.full(n_ops, -1, np.int64)
        out[self.op] = self.source
        return out


def captured_calls(trace: Trace, names: LaunchNames | None = None) -> tuple[CapturedCalls, int]:
    """(the captured calls with their labels, the number of captures) of a capture trace."""
    caps = gr.captures(trace)
    cc, which = caps.captured_calls, caps.captured_in
    order = np.lexsort((cc, which))
    cc, which = cc[order], which[order]
    names = read_launch_names(trace) if names is None else names
    kernel, op = names.lookup(trace, cc)
    api = trace.api
    rng = nvtx.innermost_at(trace, api.thread[cc], api.start[cc]) if len(trace.ranges) and len(cc) \
        else np.full(len(cc), -1)
    rtext = {int(r): nvtx.range_name(trace, int(r)) for r in unique_sorted(rng).tolist() if r >= 0}
    _node, user = sources.launch_sites(trace, cc)
    frames = trace.stacks.frame if len(trace.stacks) else np.zeros(0, np.int32)
    stext = {int(u): sources.site_label(trace.strings[int(frames[u])]) for u in unique_sorted(user).tolist() if u >= 0}
    bounds = np.searchsorted(which, np.arange(len(caps) + 1))
    return CapturedCalls(cc, which, bounds, kernel, op, [rtext.get(int(r), "") for r in rng.tolist()],
                         [stext.get(int(u), "") for u in user.tolist()], list(caps.label)), len(caps)


def _replayed_ops(trace: Trace, rp: gr.Replays):
    """(op indices, replay of each): the ops of every recorded replay, by replay then GPU order."""
    ops = trace.ops
    pos = np.full(len(trace.api) + 1, -1, np.int64)   # unmatched ops (-1) read the spare last slot
    pos[rp.call] = np.arange(len(rp))
    r = pos[ops.api]
    idx = np.flatnonzero(r >= 0)
    idx = idx[np.argsort(r[idx], kind="stable")]   # ops are in the model's total order (§9)
    return idx, r[idx]


class _Keys:
    """Lookups from a replay's kernels to the captures it may come from, tried in order (§12.6):
    the same sequence; the same kernels in another order; with fewer nodes recorded, a subsequence
    of a capture with at most twice its nodes (the shortest such, 2 kernels or more); and, only when
    no captured call names a kernel, the same node count. Captures of one key are in time order."""

    def __init__(self, cap: CapturedCalls, n: int) -> None:
        self.cap = cap
        self.seq, self.kset, self.count = {}, {}, {}
        self.named = any(k is not None for k in cap.kernel)
        for c in range(n):   # per capture
            a, b = int(cap.bounds[c]), int(cap.bounds[c + 1])
            if a == b:
                continue
            ks = tuple(cap.kernel[a:b])
            if self.named and None not in ks:
                self.seq.setdefault(ks, []).append(c)
                self.kset.setdefault(tuple(sorted(ks)), []).append(c)
            if not self.named:
                self.count.setdefault(b - a, []).append(c)
        self.by_len = sorted(self.seq, key=lambda k: (len(k), self.seq[k][0]))
        self._memo: dict = {}

    def match(self, rk: tuple) -> tuple[str, list]:
        """(how, captures) for a replay's kernel names; ("", []) when none holds them."""
        if rk not in self._memo:
            self._memo[rk] = self._match(rk)
        return self._memo[rk]

    def _match(self, rk: tuple) -> tuple[str, list]:
        if not rk:
            return "", []
        for how, table, key in ((BY_SEQUENCE, self.seq, rk), (BY_SET, self.kset, tuple(sorted(rk)))):
            if key in table:
                return how, table[key]
        if len(rk) >= 2:
            for ks in self.by_len:   # per distinct captured sequence, shortest first
                if len(rk) < len(ks) <= 2 * len(rk):
                    it = iter(ks)
                    if all(k in it for k in rk):
                        return BY_SUBSEQUENCE, self.seq[ks]
        if len(rk) in self.count:
            return BY_COUNT, self.count[len(rk)]
        return "", []

    def positions(self, how: str, rk: tuple, c: int) -> np.ndarray:
        """Per kernel of the replay: its node among capture c's captured calls."""
        a, b = int(self.cap.bounds[c]), int(self.cap.bounds[c + 1])
        ks = self.cap.kernel[a:b]
        if how == BY_SET:
            return _pair_by_set(rk, tuple(ks))
        if how == BY_SUBSEQUENCE:
            out, i = np.empty(len(rk), np.int64), 0
            for j, k in enumerate(rk):   # per recorded node: the next captured call naming it
                while ks[i] != k:
                    i += 1
                out[j], i = i, i + 1
            return out
        return np.arange(len(rk))


def _pair_by_set(rep: tuple, capk: tuple) -> np.ndarray:
    """Positions in `capk` of each of `rep`'s kernels: the k-th run of a name pairs with its k-th launch."""
    where: dict = {}
    for i, k in enumerate(capk):   # per node of one capture
        where.setdefault(k, []).append(i)
    seen: dict = {}
    out = np.empty(len(rep), np.int64)
    for j, k in enumerate(rep):
        n = seen.get(k, 0)
        seen[k] = n + 1
        out[j] = where[k][n]
    return out


def _next_capture(cands: list, prev: int) -> int:
    """Of the captures holding a replay's key (time order), the first after the capture the previous
    matched replay came from, else the first: graphs replay in the order they were captured, so a
    replay lost from the file shifts no later pairing past the next distinct graph."""
    k = bisect_right(cands, prev)
    return cands[k] if k < len(cands) else cands[0]


def join(exec_trace: Trace, cap_trace: Trace, names: LaunchNames | None = None) -> GraphJoin:
    """Label every replayed op of `exec_trace` from the captures of `cap_trace` (§12.6)."""
    cap, n_caps = captured_calls(cap_trace, names)
    rp = gr.replays(exec_trace, WHOLE)
    idx, rep = _replayed_ops(exec_trace, rp)
    ops = exec_trace.ops
    is_k = ops.kind[idx] == OP_KERNEL
    heads = np.searchsorted(rep, np.arange(len(rp) + 1))
    kcount = np.concatenate([[0], np.cumsum(is_k)])
    node = np.where(is_k, kcount[:-1] - kcount[heads[rep]], -1) if len(idx) else np.zeros(0, np.int64)
    source = np.full(len(idx), -1, np.int64)
    keys = _Keys(cap, n_caps)
    reason = np.where(is_k, R_NO_CAPTURE if keys.named else R_NO_COUNT, R_NOT_KERNEL).astype(np.int8)
    fid = ops.full_name[idx]
    by_id, ids = node_id_sources(exec_trace, cap_trace, cap.call, idx)
    text: dict = {}
    prev = -1
    by = [""] * len(rp)
    paired = np.full(len(rp), -1, np.int64)
    for r in range(len(rp)):   # per replay: its ops' node ids, else a tuple of its kernels' name ids
        a, b = int(heads[r]), int(heads[r + 1])
        hit = np.flatnonzero(by_id[a:b] >= 0) + a
        if len(hit):
            reason[a:b][is_k[a:b]] = R_NODE_UNRESOLVED
            source[hit], reason[hit] = by_id[hit], MATCHED
            by[r] = BY_NODE_ID
            paired[r] = prev = int(cap.capture[by_id[hit[0]]])
            continue
        kid = tuple(fid[a:b][is_k[a:b]].tolist())
        if kid not in text:
            text[kid] = tuple(exec_trace.strings[i] for i in kid)
        rk = text[kid]
        how, cands = keys.match(rk)
        if not cands:
            continue
        c = prev = _next_capture(cands, prev)
        kk = np.flatnonzero(is_k[a:b]) + a
        source[kk] = int(cap.bounds[c]) + keys.positions(how, rk, c)
        reason[kk] = MATCHED
        by[r], paired[r] = how, c
    return GraphJoin(idx, rep, node, source, reason, rp, cap, n_caps, by, paired, str(cap_trace.source.path), ids)


def require_captures(trace: Trace, path) -> None:
    """A capture trace must hold a capture: else one line naming the file (exit status 2)."""
    from launchtui.errors import TraceError
    caps = gr.captures(trace)
    if not len(caps):
        raise TraceError(path, "no graph capture in this trace (no …StreamBeginCapture … …StreamEndCapture "
                               "calls): nothing to label the replays from (--capture)")
