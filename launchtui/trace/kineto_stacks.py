"""Kineto call stacks (docs/kineto.md §3-§4; definitions.md §S1).

Three sources, tried in this order for each API call:
- `python_function` events (`with_stack=True`): one event per Python frame call; their nesting on
  the thread is the stack. The innermost frame enclosing the call's start is its stack.
- legacy (2021-2022) operators with a `Call stack` string: "file(line): fn;..." innermost first.
- backward: a call on the autograd thread inside an operator with `Sequence number` and a non-zero
  `Fwd thread id` takes the stack of the forward operator with the same sequence number (the
  first one, on another thread), found through the two sources above at that operator's start.
  2021 traces record backward nodes as zero-length markers before their work, so a call that no
  backward operator encloses takes the latest one that started before it on its thread.
"""
from __future__ import annotations

from itertools import compress
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from launchtui.trace.arrays import unique_sorted
from launchtui.trace.stacks import (Carriers, StackTrie, attach, attach_nvtx_sites, forest_parents,
                                    innermost_at)
from launchtui.trace.grouping import distinct_runs
from launchtui.trace.model import Trace
from launchtui.trace.order import time_order

_PY, _OP = 1, 2
_KIND = {"python_function": _PY, "cpu_op": _OP, "operator": _OP}


class _OpArgs(msgspec.Struct, gc=False):
    seq: int = msgspec.field(default=-1, name="Sequence number")
    fwd: int = msgspec.field(default=0, name="Fwd thread id")
    stack: str = msgspec.field(default="", name="Call stack")


class _LooseOpArgs(msgspec.Struct):  # only for a chunk whose operator args carry unexpected types
    seq: Any = msgspec.field(default=-1, name="Sequence number")
    fwd: Any = msgspec.field(default=0, name="Fwd thread id")
    stack: Any = msgspec.field(default="", name="Call stack")


def _int_or(v, default: int = -1) -> int:
    try:
        x = int(v)
    except (TypeError, ValueError, OverflowError):
        return default
    return x if -2**62 <= x <= 2**62 else default


def extract(events: list, skipped=None) -> dict:
    """The stack-related columns of one decoded chunk (python frames; operators with a sequence
    number or a call stack). Cheap when absent: one category lookup per event. Events with bad
    times or args are dropped and counted in `skipped` (kineto's reasons)."""
    from collections import Counter
    from launchtui.trace.kineto_events import ids, timed, timed_with_args
    skipped = Counter() if skipped is None else skipped
    cats = list(map(attrgetter("cat"), events))
    kind_of = {c: _KIND.get(str(c).lower(), 0) for c in set(cats)}
    if not any(kind_of.values()):
        return {}
    kind = np.fromiter(map(kind_of.__getitem__, cats), np.int8, len(cats))
    out = {}
    py = _complete(_select(events, kind == _PY), skipped)
    if py:
        py, s, e, _ = timed(py, skipped)
    if py:
        out["py"] = {"start": s, "end": e, "name": list(map(str, map(attrgetter("name"), py))),
                     "pid": ids(list(map(attrgetter("pid"), py))), "tid": ids(list(map(attrgetter("tid"), py)))}
    ops = _complete(_select(events, kind == _OP), skipped)
    if ops and not _any_link_args(ops):
        ops = []  # no operator carries a sequence number or call stack: skip decoding their args
    if ops:
        ops, t_start, t_end, _, args = timed_with_args(ops, _OpArgs, _LooseOpArgs, skipped)
    if ops:
        if type(args[0]) is _OpArgs:  # one batch decode gives one type for all
            seq = np.fromiter(map(attrgetter("seq"), args), np.int64, len(args))
            fwd = np.fromiter(map(attrgetter("fwd"), args), np.int64, len(args))
            stack = list(map(attrgetter("stack"), args))
        else:
            seq = np.fromiter((_int_or(a.seq) for a in args), np.int64, len(args))
            fwd = np.fromiter((_int_or(a.fwd, 0) for a in args), np.int64, len(args))
            stack = [a.stack if isinstance(a.stack, str) else "" for a in args]
        keep = np.nonzero((seq >= 0) | np.fromiter(map(bool, stack), bool, len(stack)))[0]
        if len(keep):
            ops = [ops[i] for i in keep.tolist()]
            s, e = t_start[keep], t_end[keep]
            out["op"] = {"start": s, "end": e, "seq": seq[keep], "fwd": fwd[keep],
                         "stack": [stack[i] for i in keep.tolist()],
                         "pid": ids(list(map(attrgetter("pid"), ops))),
                         "tid": ids(list(map(attrgetter("tid"), ops)))}
    return out


_LINK_KEYS = (b'"Sequence number"', b'"Call stack"')


def _any_link_args(ops: list) -> bool:
    """Does any operator's raw args mention a sequence number or a call stack? One C-level scan."""
    buf = b"".join(map(bytes, map(attrgetter("args"), ops)))
    return any(buf.find(k) >= 0 for k in _LINK_KEYS)


def _select(events: list, mask: np.ndarray) -> list:
    return list(compress(events, mask.tolist()))


SKIP_NOT_COMPLETE = "python_function or cpu_op event that is not a complete event (ph other than X)"


def _complete(events: list, skipped) -> list:
    """Only complete ('X') events: one C-level set of phases, a Python filter only when mixed (the
    others counted)."""
    if events and set(map(attrgetter("ph"), events)) != {"X"}:
        kept = [e for e in events if e.ph == "X"]
        skipped[SKIP_NOT_COMPLETE] += len(events) - len(kept)
        return kept
    return events


def build(trace: Trace, py: dict | None, op: dict | None) -> None:
    """Intern the stacks and give every API call its own (after `finalize`: API rows are sorted)."""
    if not py and not op:
        attach_nvtx_sites(trace)
        return
    # the events in a total order on their data (definitions.md §9): equal intervals on a thread
    # then nest by name (python frames) or by sequence number and call stack (operators), never
    # by their order in the file
    py = _total_order(py, ("pid", "tid"), ("name",))
    op = _total_order(op, ("pid", "tid", "seq", "fwd"), ("stack",))
    th = trace.threads
    api_key = _thread_key(th.pid[trace.api.thread], th.tid[trace.api.thread])
    parts = [api_key] + [_thread_key(x["pid"], x["tid"]) for x in (py, op) if x]
    _, inv = distinct_runs(np.concatenate(parts))  # a thread's events come in long runs
    api_thread = inv[:len(api_key)]
    off = len(api_key)
    trie = StackTrie(trace.strings)
    carriers, kinds = [], []
    ot = inv[len(inv) - len(op["start"]):] if op else None
    if py:
        n = len(py["start"])
        # the Python tracer's own events: the record says the host ran slowed by them (limits.py)
        trace.source.extra["python_frames"] = n
        pt = inv[off:off + n]
        carriers.append(_python_carriers(trace, trie, pt, py, api_thread, ot, op))
        kinds.append("python_function")
    backward = None
    if op:
        has = np.fromiter(map(bool, op["stack"]), bool, len(op["stack"]))
        if has.any():
            sid = trace.strings.intern_many([s for s, h in zip(op["stack"], has.tolist()) if h])
            lut = {}
            for i in unique_sorted(sid).tolist():  # once per distinct call-stack string
                frames = [f.strip() for f in trace.strings[i].split(";") if f.strip()]
                lut[i] = trie.add_chain(reversed(frames))
            node = np.fromiter(map(lut.__getitem__, sid.tolist()), np.int64, len(sid))
            carriers.append(Carriers(ot[has], op["start"][has], op["end"][has], node))
            kinds.append("Call stack")
        backward = _backward_linker(trace, api_thread, ot, op, carriers)
    if not carriers:  # operators without stacks (backward links lead nowhere): try annotations
        attach_nvtx_sites(trace)
        return
    attach(trace, trie, api_thread, carriers, backward)
    if len(trace.stacks):
        if (trace.api_stacks.via == 2).any():
            kinds.append("backward via Sequence number")
        trace.source.extra["stacks"] = ", ".join(kinds)


def _total_order(cols: dict | None, ints: tuple, names: tuple) -> dict | None:
    """The event columns in order of (start, end, *ints, *names as strings); as they are when
    already in it."""
    if not cols:
        return cols
    order, _ = time_order(cols["start"], cols["end"], *(cols[k] for k in ints),
                          names=tuple(cols[k] for k in names))
    if order is None:
        return cols
    return {k: ([v[i] for i in order.tolist()] if isinstance(v, list) else v[order]) for k, v in cols.items()}


def _python_carriers(trace: Trace, trie: StackTrie, pt, py: dict, api_thread, ot, op) -> Carriers:
    """Python frames as carriers. Only the frames some lookup can land on (the innermost frame at an
    API call or at a forward operator's start) and their callers are interned: most frames of a
    `with_stack` trace never enclose a launch innermost."""
    c = Carriers(pt, py["start"], py["end"], np.full(len(pt), -1, np.int64))
    q_thread, q_t = [api_thread], [trace.api.start]
    if op is not None:
        fw = (op["seq"] >= 0) & (op["fwd"] == 0)
        q_thread.append(ot[fw])
        q_t.append(op["start"][fw])
    hit = c.index().lookup(np.concatenate(q_thread), np.concatenate(q_t))
    parent = forest_parents(pt, py["start"], py["end"])
    need = np.zeros(len(pt), bool)
    cur = unique_sorted(hit[hit >= 0])
    while len(cur):  # one round per stack level: mark the callers
        need[cur] = True
        cur = parent[cur]
        cur = unique_sorted(cur[cur >= 0])
        cur = cur[~need[cur]]
    sub = np.nonzero(need)[0]
    pos = np.full(len(pt), -1, np.int64)
    pos[sub] = np.arange(len(sub))
    sub_parent = np.where(parent[sub] >= 0, pos[np.maximum(parent[sub], 0)], -1)
    names = [py["name"][i] for i in sub.tolist()]
    c.node[sub] = trie.add_tree(sub_parent, trace.strings.intern_many(names))
    return c


def _thread_key(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """(pid, tid) as one int64; tids are 32-bit OS ids (negative ones wrap, staying distinct)."""
    return (np.asarray(pid, np.int64) << 32) | (np.asarray(tid, np.int64) & 0xFFFFFFFF)


def _backward_linker(trace: Trace, api_thread, ot, op, carriers):
    seq, fwd = op["seq"], op["fwd"]
    bw = np.nonzero((seq >= 0) & (fwd != 0))[0]
    fw = np.nonzero((seq >= 0) & (fwd == 0))[0]
    if not len(bw) or not len(fw):
        return None
    fw = fw[np.lexsort((op["start"][fw], seq[fw]))]  # by sequence number, then start
    bw_carrier = Carriers(ot[bw], op["start"][bw], op["end"][bw], bw)

    def link(miss: np.ndarray) -> np.ndarray:
        out = np.full(len(miss), -1, np.int64)
        j = innermost_at([bw_carrier], api_thread[miss], trace.api.start[miss])  # backward op index
        j = np.where(j >= 0, j, _latest_before(ot[bw], op["start"][bw], bw, api_thread[miss],
                                               trace.api.start[miss]))
        ok = np.nonzero(j >= 0)[0]
        if not len(ok):
            return out
        want = seq[j[ok]]
        k = np.searchsorted(seq[fw], want)  # the first forward op with this sequence number
        k = np.minimum(k, len(fw) - 1)
        f = fw[k]
        good = (seq[f] == want) & (ot[f] != ot[j[ok]])
        out[ok[good]] = innermost_at(carriers, ot[f[good]], op["start"][f[good]])
        return out
    return link


def _latest_before(thread, start, value, q_thread, q_t) -> np.ndarray:
    """Per query: `value` of the latest interval on the same thread starting at or before q_t."""
    out = np.full(len(q_t), -1, np.int64)
    for t in unique_sorted(q_thread).tolist():  # one iteration per thread
        m = np.nonzero(thread == t)[0]
        if not len(m):
            continue
        m = m[np.argsort(start[m], kind="stable")]
        q = np.nonzero(q_thread == t)[0]
        pos = np.searchsorted(start[m], q_t[q], side="right") - 1
        out[q] = np.where(pos >= 0, value[m[np.maximum(pos, 0)]], -1)
    return out

