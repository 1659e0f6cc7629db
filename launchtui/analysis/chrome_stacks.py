"""Call stacks in a chrome export (docs/definitions.md §13b, §S1), in the form Kineto's reader takes
them back (`trace/kineto_stacks.py`): a `cpu_op` with a `Call stack` string (frames innermost first,
`;`-separated) spanning each launch call that has a stack, named by its innermost frame; and, for
a backward launch whose stack came from its forward op by `Sequence number`, that link again: a
`cpu_op` with the sequence number and a non-zero `Fwd thread id` spanning the call, and a 1 ns
forward `cpu_op` with the same number and the stack on a thread of its own (no launch starts there,
so it carries the stack to nothing else).
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from launchtui.analysis import chrome_events as ce
from launchtui.trace.model import STACK_BACKWARD, Trace
from launchtui.trace.stacks import stack_frames

NVTX_SITES = "range text file:line"   # trace/stacks.attach_nvtx_sites: the stacks' source
FWD_TID = 2**31 - 3         # the thread of the forward ops that carry backward launches' stacks


def stack_events(trace: Trace, api_rows: np.ndarray, pid_tid) -> Iterator[bytes]:
    """`pid_tid(thread indices) -> (pid, tid)`; `api_rows`: the exported API rows."""
    st = trace.api_stacks
    if not len(st) or not len(api_rows) or trace.source.extra.get("stacks") == NVTX_SITES:
        return   # stacks read from range texts: the reader finds them there again
    a = api_rows[st.node[api_rows] >= 0]
    if not len(a):
        return
    nodes, inv = np.unique(st.node[a], return_inverse=True)
    inv = inv.reshape(-1)
    frames = [stack_frames(trace, int(n)) for n in nodes.tolist()]   # per distinct stack
    stack = np.array([ce.json_string(";".join(f)) for f in frames], dtype=object)
    first = np.array([ce.json_string(f[0] if f else "") for f in frames], dtype=object)
    back = st.via[a] == STACK_BACKWARD
    for sl in ce.chunks(len(a)):   # direct stacks: one carrier per call
        k, i = a[sl], inv[sl]
        m = ~back[sl]
        if m.any():
            yield _ops(trace, pid_tid, k[m], b'"Call stack":%s', first[i[m]].tolist(), stack[i[m]].tolist())
    if back.any():
        yield from _backward(trace, pid_tid, a[back], inv[back], stack, first)


def _ops(trace: Trace, pid_tid, calls: np.ndarray, args: bytes, names: list, *args_cols) -> bytes:
    api = trace.api
    pid, tid = pid_tid(api.thread[calls])
    s = api.start[calls]
    e = np.maximum(api.end[calls], s + 1)    # a carrier encloses its call's start: [s, e) with e > s
    return ce.complete_events(b"cpu_op", pid, tid, s, e, names, args, *args_cols)


def _backward(trace: Trace, pid_tid, calls: np.ndarray, inv: np.ndarray, stack, first) -> Iterator[bytes]:
    """The backward link: sequence number k per distinct stack (0, 1, ...)."""
    api = trace.api
    u, seq = np.unique(inv, return_inverse=True)
    seq = seq.reshape(-1)
    for sl in ce.chunks(len(calls)):
        yield _ops(trace, pid_tid, calls[sl], b'"Sequence number":%d,"Fwd thread id":%d',
                   [b'"autograd::engine::evaluate_function"'] * len(calls[sl]), seq[sl], FWD_TID)
    # the forward ops: 1 ns each, one after another from the first backward call, on FWD_TID of the
    # first backward call's process
    pid, _ = pid_tid(api.thread[calls[:1]])
    t = int(api.start[calls].min()) + np.arange(len(u), dtype=np.int64)
    yield ce.complete_events(b"cpu_op", int(pid[0]), FWD_TID, t, t + 1, first[u].tolist(),
                             b'"Sequence number":%d,"Fwd thread id":0,"Call stack":%s', np.arange(len(u)),
                             stack[u].tolist())
