"""Nsight CPU scheduling and sampling rows (docs/definitions.md §V10): SCHED_EVENTS becomes on-CPU runs
per thread (a sched-in paired with the thread's next sched-out), COMPOSITE_EVENTS the CPU IP samples.
Vectorised: one sort, no per-event Python. Rows that pair with nothing are skipped and counted."""
from __future__ import annotations

from collections import Counter

import numpy as np

from launchtui.trace.model import CpuRuns, CpuSamples

SKIP_NO_THREAD = "SCHED_EVENTS rows without a thread (globalTid NULL)"
SKIP_OUT_UNPAIRED = "SCHED_EVENTS sched-outs without a sched-in before them (thread already running)"
SKIP_IN_UNPAIRED = "SCHED_EVENTS sched-ins without a sched-out after them (thread still running)"
SKIP_SAMPLE_NO_THREAD = "COMPOSITE_EVENTS samples without a thread (globalTid NULL)"


def pair_runs(gtid: np.ndarray, t: np.ndarray, is_in: np.ndarray, skipped: Counter) -> CpuRuns:
    """Pair each sched-in with the same thread's next event when that is a sched-out. At equal times
    a sched-out sorts first, so out-then-in at one instant (a thread switched back at once) pairs right."""
    gtid, t, is_in = (np.asarray(x, np.int64) for x in (gtid, t, is_in))
    ok = gtid >= 0
    if (~ok).any():
        skipped[SKIP_NO_THREAD] += int((~ok).sum())
        gtid, t, is_in = gtid[ok], t[ok], is_in[ok]
    is_in = is_in != 0
    o = np.lexsort((is_in, t, gtid))
    g, t, i = gtid[o], t[o], is_in[o]
    pair = np.zeros(len(g), bool)  # pair[k]: event k is a sched-in closed by event k + 1
    if len(g) > 1:
        pair[:-1] = (g[1:] == g[:-1]) & i[:-1] & ~i[1:]
    closes = np.r_[False, pair[:-1]]
    n_in_odd = int((i & ~pair).sum())
    n_out_odd = int((~i & ~closes).sum())
    if n_in_odd:
        skipped[SKIP_IN_UNPAIRED] += n_in_odd
    if n_out_odd:
        skipped[SKIP_OUT_UNPAIRED] += n_out_odd
    k = np.nonzero(pair)[0]
    return CpuRuns(thread=g[k], start=t[k], end=t[k + 1]).coerce()


def samples(gtid: np.ndarray, t: np.ndarray, state: np.ndarray, skipped: Counter) -> CpuSamples:
    gtid, t, state = (np.asarray(x, np.int64) for x in (gtid, t, state))
    ok = gtid >= 0
    if (~ok).any():
        skipped[SKIP_SAMPLE_NO_THREAD] += int((~ok).sum())
        gtid, t, state = gtid[ok], t[ok], state[ok]
    st = np.where((state >= 0) & (state < 128), state, -1)
    o = np.lexsort((st, t, gtid))   # a total order: samples at one time keep no file order
    return CpuSamples(thread=gtid[o], time=t[o], state=st[o]).coerce()


def read(r) -> tuple[CpuRuns, CpuSamples]:
    """From an open Nsight reader (`nsys_sqlite._Reader`): both tables, empty when absent."""
    skipped: Counter = Counter()
    runs, smp = CpuRuns.empty(), CpuSamples.empty()
    if r.has("SCHED_EVENTS") and {"start", "isSchedIn", "globalTid"} <= r.colset("SCHED_EVENTS"):
        c = r.ints("SCHED_EVENTS", {"start": "start", "in": "isSchedIn", "gtid": "globalTid"})
        runs = pair_runs(c["gtid"], c["start"], c["in"], skipped)
    if r.has("COMPOSITE_EVENTS") and {"start", "globalTid"} <= r.colset("COMPOSITE_EVENTS"):
        cs = r.colset("COMPOSITE_EVENTS")
        c = r.ints("COMPOSITE_EVENTS", {"start": "start", "gtid": "globalTid",
                                        "state": "threadState" if "threadState" in cs else "NULL"})
        smp = samples(c["gtid"], c["start"], c["state"], skipped)
    r.skipped.update(skipped)
    return runs, smp
