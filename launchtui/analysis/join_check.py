"""Why no GPU op of a selection joined a launch call (definitions.md §1, §V8 `launch_join`).

A trace whose GPU ops exist but joined no launch call is not an empty trace: a capture that mixed
processes or runs, a reader that mis-read ids, or launch calls whose names are unknown all look
like "no launched GPU ops". This says which, with the rows on each side, so that the record and the
report never just say "cannot judge".
"""
from __future__ import annotations

import numpy as np

from launchtui.analysis.select import WHOLE, Selection, op_mask
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, OP_KIND_NAMES, Trace

TOP_NAMES = 3   # API names shown for ops joined to calls that are not launches


def launch_join(trace: Trace, sel: Selection = WHOLE) -> dict | None:
    """When the selection's GPU ops exist, none was launched by a launch call, and something failed
    (an op joined no API row, or API names have no StringIds row): the two sides' row counts, what
    the ops did join, and the reason in words. None otherwise: no GPU op, a launched one, or ops
    that all joined calls of other kinds (copies and memsets of a trace without kernel launches)."""
    ops, api = trace.ops, trace.api
    idx = np.flatnonzero(op_mask(trace, sel))
    if not len(idx):
        return None
    is_launch = (api.kind == API_LAUNCH) | (api.kind == API_GRAPH_LAUNCH)
    a = ops.api[idx]
    joined = a >= 0
    if is_launch[a[joined]].any() or (joined.all() and not _unresolved_api_names(trace)):
        return None
    calls = np.flatnonzero(is_launch & _calls_in_window(trace, sel))
    kinds = np.bincount(ops.kind[idx], minlength=len(OP_KIND_NAMES))
    names, counts = unique_sorted(api.name[a[joined]], return_counts=True)   # per distinct API name
    other = sorted(((trace.strings[int(n)], int(c)) for n, c in zip(names.tolist(), counts.tolist())),
                   key=lambda x: (-x[1], x[0]))
    out = {"launch_calls": int(len(calls)), "gpu_ops": int(len(idx)),
           "gpu_ops_by_kind": {k: int(n) for k, n in zip(OP_KIND_NAMES, kinds.tolist()) if n},
           "joined": 0, "unmatched_ops": int((~joined).sum()),
           "joined_other_calls": [{"api_name": n, "ops": c} for n, c in other]}
    out["reason"] = _reason(trace, idx[~joined], calls, out)
    return out


def _calls_in_window(trace: Trace, sel: Selection) -> np.ndarray:
    """API rows inside the selection's window (any device: a call names no device before the join)."""
    api = trace.api
    m = np.ones(len(api), bool)
    if sel.t0 is not None:
        m &= api.start >= sel.t0
    if sel.t1 is not None:
        m &= api.end <= sel.t1
    return m


def _reason(trace: Trace, unmatched: np.ndarray, calls: np.ndarray, out: dict) -> str:
    ops, api = trace.ops, trace.api
    parts = []
    if not len(api):
        parts.append("the trace has no CUDA API rows (launch calls were not captured)")
    elif not len(calls):
        parts.append("no API call is a launch call (cudaLaunch*/cuLaunch*, definitions.md §2)")
        unresolved = _unresolved_api_names(trace)
        if unresolved:
            parts.append(f"{_n(unresolved, 'API row')} {'has' if unresolved == 1 else 'have'} a name id with no "
                         "StringIds row")
    elif len(unmatched):
        corr = ops.corr[unmatched]
        shared = np.isin(corr, api.corr[calls])
        if (corr == -1).all():
            parts.append("the unjoined GPU ops carry no correlation id (NULL)")
        elif not shared.any():
            parts.append("the correlation ids of the two sides do not overlap (launch calls "
                         f"{_span(api.corr[calls])}, unjoined GPU ops {_span(corr)})")
        else:
            parts.append(f"{_n(int(shared.sum()), 'GPU op')} share{'s' if shared.sum() == 1 else ''} a correlation "
                         "id with a launch call but not its "
                         f"process (GPU ops in {_processes(trace, ops.pid[unmatched[shared]])}, launch calls in "
                         f"{_processes(trace, api.pid[calls])})")
    if out["joined_other_calls"]:
        top = out["joined_other_calls"][:TOP_NAMES]
        parts.append(f"{_n(sum(r['ops'] for r in out['joined_other_calls']), 'GPU op')} joined calls that are not "
                     "launches (" + ", ".join(f"{r['api_name']} ×{r['ops']:,}" for r in top)
                     + (", …" if len(out["joined_other_calls"]) > TOP_NAMES else "") + ")")
    return "; ".join(parts)


def _unresolved_api_names(trace: Trace) -> int:
    """API rows whose name id has no StringIds row (the reader's count, definitions.md §H)."""
    return sum(n for r, n in (trace.source.extra.get("skipped") or {}).items()
               if r.startswith("CUPTI_ACTIVITY_KIND_RUNTIME") and "has no StringIds row" in r)


def _n(n: int, what: str) -> str:
    return f"{n:,} {what}{'s' if n != 1 else ''}"


def _span(v: np.ndarray) -> str:
    return f"{int(v.min()):,}–{int(v.max()):,}" if len(v) else "none"


def _processes(trace: Trace, codes: np.ndarray) -> str:
    """`process 123` / `processes 1, 2, …` (Nsight: the pid bits of globalPid), `no process` (-1)."""
    keys = unique_sorted(trace.os_pids(trace.process_keys(codes)))
    shown = [str(k) if k >= 0 else "unknown" for k in keys.tolist()[:4]]
    return ("process " if len(keys) == 1 else "processes ") + ", ".join(shown) + (", …" if len(keys) > 4 else "")


def join_line(lj: dict) -> str:
    """One line: what failed to join, the rows on each side, and why."""
    kinds = ", ".join(f"{k} {n:,}" for k, n in lj["gpu_ops_by_kind"].items())
    return f"{_n(lj['launch_calls'], 'launch call')} and {_n(lj['gpu_ops'], 'GPU op')} ({kinds}), 0 joined: {lj['reason']}"
