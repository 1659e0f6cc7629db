"""The case record's idle section: GPU idle by cause per iteration, host-bound time and where it
sits (by phase), the steady-state iterations, the gain from removing host-bound time and the
record's self-checks (docs/definitions.md §V2, §V7, §V9)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from launchtui.analysis import intervals as iv
from launchtui.analysis import iterations as itr
from launchtui.analysis import idle_causes as ic
from launchtui.analysis.idle_causes import CAUSES, HOST_BOUND, GapCauses, Latency
from launchtui.analysis.phases import attributed_phase_keys, main_thread
from launchtui.trace.arrays import median_of, nonzero_index, unique_sorted

UNATTRIBUTED_MAX = 0.25     # an iteration more idle than this for unseen launches is not steady state
TAIL_LAUNCHES = 0.5         # a last iteration with fewer launches than this x the others' median
MAX_PHASES = 5
GAP_BLOCK = 1 << 20         # gaps whose causes exist at a time
LANE_PIECES = 6             # blocks of the gaps with a helper lane: shared out between threads


@dataclass
class IdleFacts:
    per_it: dict[str, np.ndarray]       # cause -> ns per iteration
    steady: np.ndarray                  # bool per iteration: counted in shares and medians
    excluded: list[dict]                # {"iteration", "reason"} for the others
    latency: Latency                    # the submission latency the causes were cut with

    def pooled(self, iteration_ns: np.ndarray) -> dict[str, float]:
        """Each cause's share of the steady iterations' time."""
        total = float(iteration_ns[self.steady].sum())
        return {c: (float(v[self.steady].sum()) / total if total > 0 else 0.0) for c, v in self.per_it.items()}

    def host_bound_ns(self) -> np.ndarray:
        return sum(self.per_it[c] for c in HOST_BOUND)


def steady_iterations(per_it: dict[str, np.ndarray], idle_ns: np.ndarray, launches: np.ndarray):
    """(mask, excluded): iterations whose idle is mostly for unseen launches (ops launched before
    the capture) and an almost empty last step are left out of shares and medians; all are kept
    when that would leave none (definitions.md §V2)."""
    n = len(idle_ns)
    keep = np.ones(n, bool)
    why = {}
    unatt = per_it["unattributed"] > UNATTRIBUTED_MAX * np.maximum(idle_ns, 1)
    for k in np.flatnonzero(unatt).tolist():
        keep[k] = False
        why[k] = "its GPU idle is mostly unattributed (ops launched before the capture)"
    if n >= 3 and keep[-1] and launches[-1] < TAIL_LAUNCHES * median_of(launches[:-1]):
        keep[-1] = False
        why[n - 1] = f"a tail step: {int(launches[-1])} launches against a median of {median_of(launches[:-1]):g}"
    if not keep.any():
        return np.ones(n, bool), []
    return keep, [{"iteration": k, "reason": r} for k, r in sorted(why.items())]


@dataclass
class GapFigures:
    """What the record reads from the device's gaps: idle by cause, §V7's launch-limit figures and
    by_phase's gaps."""
    facts: IdleFacts
    launch_limit: dict
    phase_gaps: PhaseGaps


def steady_of(trace, it: itr.Iterations, g0: np.ndarray, g1: np.ndarray, nxt: np.ndarray, idle_ns: np.ndarray,
              launches: np.ndarray) -> tuple[np.ndarray, list[dict]]:
    """steady_iterations of the gaps [g0, g1) with their ending ops `nxt`: which iterations are
    steady depends on their unattributed idle only, measured before any other cause."""
    un = ic.unattributed(trace, nxt)
    return steady_iterations({"unattributed": iv.measure_in(g0[un], g1[un], it.start, it.end)}, idle_ns, launches)


@dataclass
class _BlockFigures:
    """One block of gaps' part of GapFigures: sums over its gaps, and its gaps by_phase reads."""
    per: dict[str, np.ndarray]     # cause -> ns per iteration
    in_flight: np.ndarray          # ns per iteration of launch calls in flight in the gaps
    tails: int
    copy_ns: int
    phase_cols: tuple              # (host-bound, launch) ns of its steady gaps ended by an op


def gap_figures(trace, it: itr.Iterations, calls: np.ndarray, g0: np.ndarray, g1: np.ndarray, nxt: np.ndarray,
                latency: Latency, cold_calls: np.ndarray, blocking: np.ndarray,
                steady_excluded: tuple[np.ndarray, list[dict]], block: int = GAP_BLOCK, defer=None) -> GapFigures:
    """The gaps [g0, g1) of the device (disjoint, sorted), `nxt` their ending ops
    (idle_causes.ending_ops), `calls` its launch calls, taken a block of gaps at a time: one
    block's causes exist at once (20M: ten million gaps, eight columns each, were the record's
    peak); every figure is a sum over gaps, so the blocks add up to the whole. `steady_excluded`:
    the steady iterations and the excluded ones (steady_of); each block keeps what they need.
    `defer` (analysis/shared.py `Shared.defer`, with a helper lane): the gaps in LANE_PIECES
    blocks, each computed by whichever thread is free first, this one taking those not begun in
    order, so the record's longest stage is not left to one CPU while the other idles. The sums are
    exact and the blocks' gaps kept in gap order: the same figures whoever computes which block."""
    api = trace.api
    steady, excluded = steady_excluded
    flight = iv.union(api.start[calls], api.end[calls])

    def one(i: int) -> _BlockFigures:
        return _gap_block(trace, it, g0[i:i + block], g1[i:i + block], nxt[i:i + block], flight, latency,
                          cold_calls, blocking, steady)
    if defer is None:   # one block at a time, summed before the next is computed (20M: the peak)
        results = (one(i) for i in range(0, len(g0), block))
    else:
        block = max(-(-len(g0) // LANE_PIECES), 1)
        pending = [defer(lambda i=i: one(i)) for i in range(0, len(g0), block)]
        results = (pending.pop(0).result() for _ in range(len(pending)))   # each let go once summed
    per = {c: np.zeros(len(it.start), np.int64) for c in CAUSES}
    in_flight = np.zeros(len(it.start), np.int64)
    tails = copy_ns = n = 0
    # by_phase's gaps, filled block by block (pages untouched past the steady gaps cost nothing)
    hb, lp = np.empty(len(g0), np.int64), np.empty(len(g0), np.int64)
    for f in results:
        for cause, v in f.per.items():
            per[cause] += v
        in_flight += f.in_flight
        tails, copy_ns = tails + f.tails, copy_ns + f.copy_ns
        m = len(f.phase_cols[0])
        for out, col in zip((hb, lp), f.phase_cols):
            out[n:n + m] = col
        n += m
    facts = IdleFacts(per, steady, excluded, latency)
    return GapFigures(facts, _launch_limit(facts, in_flight, tails, copy_ns),
                      PhaseGaps(hb[:n], lp[:n]))


def _gap_block(trace, it: itr.Iterations, b0: np.ndarray, b1: np.ndarray, nxt: np.ndarray, flight: tuple,
               latency: Latency, cold_calls: np.ndarray, blocking: np.ndarray, steady: np.ndarray) -> _BlockFigures:
    """gap_figures' figures of one block of gaps [b0, b1) with ending ops `nxt`."""
    a = np.searchsorted(flight[1], b0[0], side="right")     # the flight over the block's span
    z = np.searchsorted(flight[0], b1[-1], side="left")
    f = (flight[0][a:z], flight[1][a:z])
    c = ic.causes_of(trace, nxt, b0, b1, latency, f, cold_calls, blocking)
    per = c.measure_in(it.start, it.end)
    in_flight = iv.measure_both_in(f, (b0, b1), it.start, it.end)
    k = it.index_of(b0)
    tails, copy_ns = _limit_tails(trace, c, k, steady)
    inside = _steady_ended(k, c.op, steady)
    cols = (c.host_bound_per_gap()[inside], c.launch_per_gap()[inside])
    return _BlockFigures(per, in_flight, tails, copy_ns, cols)


def _limit_tails(trace, c: GapCauses, k: np.ndarray, steady: np.ndarray) -> tuple[int, int]:
    """(launch tails, ns of asynchronous copy calls in flight in them) of a block of gaps `c`
    inside the steady iterations (`k`: each gap's iteration)."""
    from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH
    tails = (c.tail == CAUSES.index("launch")) & (c.cut_dep > c.cut_tail) & (c.call >= 0) & ~c.sync & (k >= 0)
    tails[tails] = steady[k[tails]]
    api = trace.api
    call = c.call[tails]
    kind = api.kind[call]
    other = (kind != API_LAUNCH) & (kind != API_GRAPH_LAUNCH)   # copy / memset calls: not in flight
    return int(tails.sum()), int(np.maximum(np.minimum(c.cut_dep[tails], api.end[call]) - c.cut_tail[tails], 0)[other].sum())


def _launch_limit(facts: IdleFacts, in_flight: np.ndarray, tails: int, copy_ns: int) -> dict:
    """The figures of the check 'exposed launch time <= the launch calls in flight in the gaps (and
    the asynchronous copy calls whose ops ended a gap) + launches x L' over the steady iterations
    (definitions.md §V7): by construction it holds; a breach is a defect."""
    st, lat, copy_ns = facts.steady, facts.latency.ns, float(copy_ns)
    return {"launch_ms": round(float(facts.per_it["launch"][st].sum()) / 1e6, 6),
            "in_flight_ms": round((float(in_flight[st].sum()) + copy_ns) / 1e6, 6), "tails": tails,
            "latency_ms": lat / 1e6,
            "bound_ms": round((float(in_flight[st].sum()) + copy_ns + tails * lat) / 1e6, 6)}


def _stats(v: np.ndarray) -> dict:
    if not len(v):
        return {"median": 0, "min": 0, "max": 0}
    return {"median": round(float(median_of(v)) / 1e6, 6), "min": round(float(v.min()) / 1e6, 6),
            "max": round(float(v.max()) / 1e6, 6)}


def gain(share: float) -> dict:
    """Removing host-bound time: at most 1 / (1 - s) (all of it); a realistic range from half of it
    to all of it, since graphs and compile remove most but not all host work (definitions §V9)."""
    if share >= 1:
        return {"amdahl_bound": None, "realistic": None}
    return {"amdahl_bound": round(1 / (1 - share), 3), "realistic": [round(1 / (1 - share / 2), 3), round(1 / (1 - share), 3)]}


@dataclass
class PhaseGaps:
    """The gaps by_phase reads (ended by an op, inside a steady iteration, in gap order: those of
    `steady_gap_ops`): per gap its host-bound ns and its launch ns."""
    host_bound: np.ndarray
    launch: np.ndarray


@dataclass
class PhaseKeys:
    """by_phase's phases (phases.attributed_phase_keys, one key space): the key of each steady gap's
    ending op (`steady_gap_ops`) and of each steady launched op, the keys' texts, and per launch
    whether it ran dry."""
    gap: np.ndarray
    launch: np.ndarray
    texts: list
    dry: np.ndarray


def steady_gap_ops(it: itr.Iterations, g0: np.ndarray, nxt: np.ndarray, steady: np.ndarray) -> np.ndarray:
    """The ops ending the gaps by_phase reads (gaps starting at `g0`, ending ops `nxt`, -1 none):
    those ended by an op inside a steady iteration, in gap order."""
    return nxt[_steady_ended(it.index_of(g0), nxt, steady)]


def _steady_ended(k: np.ndarray, op: np.ndarray, steady: np.ndarray) -> np.ndarray:
    """Per gap (`k`: its iteration, -1 none; `op`: its ending op, -1 none): ended by an op inside a
    steady iteration, the gaps by_phase reads."""
    inside = (k >= 0) & (op >= 0)
    inside[inside] = steady[k[inside]]
    return inside


def phase_keys(trace, ending: list, it: itr.Iterations, steady: np.ndarray, calls: np.ndarray, level: int,
               latency_ns: int) -> PhaseKeys:
    """The phase of each steady gap's ending op (`ending`: [steady_gap_ops], taken from the list so
    that nothing else holds it while the keys, the peak, are built) and of each kernel launch
    inside a steady iteration. Reads no gap figure: it may compute beside gap_figures."""
    from launchtui.analysis.stream_calls import DRY_SLACK_NS
    ops_ending = ending.pop()
    launched = _steady_launched_ops(trace, calls, it, steady)
    a = trace.ops.api[launched]
    dry = (trace.ops.start[launched] - trace.api.end[a]) <= latency_ns + DRY_SLACK_NS
    del a
    # one array of both op sets, nothing else per op held while the phase keys (the peak) are built
    ops = np.concatenate([ops_ending, launched], dtype=launched.dtype)   # op indices: they fit the narrow one
    n_ending = len(ops_ending)
    del ops_ending, launched
    main = main_thread(trace, ops, it.base_depth, it.start)
    keys, texts, _ = attributed_phase_keys(trace, ops, it.base_depth, level, main)
    del ops
    return PhaseKeys(keys[:n_ending], keys[n_ending:], texts, dry)


def by_phase(gaps: PhaseGaps, keys: Callable[[], PhaseKeys], steady: np.ndarray) -> list[dict]:
    """Host-bound time per phase (§V5) of the op each gap waited for, inside the steady iterations
    (`gaps`: phase_gaps; `keys()`: their phases, asked for only when there is host-bound time):
    the fixes are ranked by the time they address, not taken from the top kernel row. Each phase
    also says how many of its kernel launches ran dry (the op started within L + DRY_SLACK_NS of
    its call's return): a phase whose launches run dry sets its own pace on the CPU (§V9)."""
    hb, launch_part = gaps.host_bound, gaps.launch
    if not len(hb) or not hb.sum():
        return []
    pk = keys()
    gk, lk, texts = pk.gap, pk.launch, pk.texts
    n_steady = max(int(steady.sum()), 1)
    width = len(texts) + 1
    total = np.bincount(gk + 1, weights=hb, minlength=width)
    launch = np.bincount(gk + 1, weights=launch_part, minlength=width)
    n_launch = np.bincount(lk + 1, minlength=width)
    n_dry = np.bincount(lk + 1, weights=pk.dry, minlength=width)
    names = [None] + list(texts)
    all_hb = float(hb.sum())
    order = sorted(range(len(total)), key=lambda i: (-total[i], names[i] or ""))
    return [{"phase": names[i], "host_bound_ms_per_iteration": round(total[i] / n_steady / 1e6, 3),
             "launch_ms_per_iteration": round(launch[i] / n_steady / 1e6, 3),
             "share_of_host_bound": round(total[i] / all_hb, 4),
             "launches_per_iteration": round(n_launch[i] / n_steady, 1),
             "dry_launch_share": round(n_dry[i] / n_launch[i], 4) if n_launch[i] else None}
            for i in order[:MAX_PHASES] if total[i] > 0]


def _steady_launched_ops(trace, calls: np.ndarray, it: itr.Iterations, steady: np.ndarray) -> np.ndarray:
    """The ops launched by the device's kernel launch calls that start inside a steady iteration."""
    from launchtui.trace.model import API_LAUNCH
    ops, api = trace.ops, trace.api
    calls = calls[api.kind[calls] == API_LAUNCH]
    k = it.index_of(api.start[calls])
    ok = k >= 0
    ok[ok] = steady[k[ok]]
    mark = np.zeros(len(api) + 1, bool)
    mark[calls[ok]] = True
    return nonzero_index(mark[ops.api])   # int32 while it fits: by_phase's per-op arrays are its peak


def sync_blocked_while_busy(trace, calls: np.ndarray, busy, it: itr.Iterations, blocking: np.ndarray) -> np.ndarray:
    """Per iteration: ns the launching threads spent in host syncs while the GPU was busy. A sync
    that waits on busy GPU work caps how far the CPU runs ahead, even when the GPU never idles.
    `blocking`: cpu_busy.host_blocking_calls(trace)."""
    api = trace.api
    threads = unique_sorted(api.thread[calls]) if len(calls) else np.zeros(0, np.int64)
    b = np.flatnonzero(blocking)
    b = b[np.isin(api.thread[b], threads)]
    if not len(b) or busy is None:
        return np.zeros(len(it), np.int64)
    b = b[np.argsort(api.start[b], kind="stable")]
    syncs = iv.union(api.start[b], api.end[b])
    return iv.measure_both_in(syncs, busy, it.start, it.end)


def idle_json(facts: IdleFacts, it: itr.Iterations, iteration_ns: np.ndarray, idle_ns: np.ndarray,
              device: int, phases: list[dict], sync_busy: np.ndarray) -> dict:
    st = facts.steady
    share = facts.pooled(iteration_ns)
    hb = facts.host_bound_ns()
    hb_share = sum(share[c] for c in HOST_BOUND)
    total = float(iteration_ns[st].sum())
    return {
        "device_id": device,
        "latency": facts.latency.to_json(),
        "per_iteration_ms": {c: _stats(facts.per_it[c][st]) for c in CAUSES},
        "mean_per_iteration_ms": {c: round(float(facts.per_it[c][st].mean()) / 1e6, 6) for c in CAUSES},
        "share": {c: round(share[c], 4) for c in CAUSES},
        "idle_share": round(float(idle_ns[st].sum()) / total, 4) if total > 0 else 0.0,
        "host_bound": {"per_iteration_ms": _stats(hb[st]), "mean_per_iteration_ms": round(float(hb[st].mean()) / 1e6, 6),
                       "share": round(hb_share, 4),
                       "launch_share": round(share["launch"], 4), "host_share": round(share["host"], 4),
                       "dominant": "launch" if share["launch"] >= share["host"] else "host"},
        "by_phase": phases,
        "sync_blocked_while_busy_ms": _stats(sync_busy[st]),
        "steady_iterations": int(st.sum()),
        "excluded_iterations": facts.excluded,
    }
