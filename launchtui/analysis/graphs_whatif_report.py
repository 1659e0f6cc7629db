"""What graphing would buy, per eager phase, in the record (docs/definitions.md §12.5; JSON
`graph_whatif`) and its Markdown table. The re-timing itself is graphs_whatif.py's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from launchtui.analysis import graphs_whatif as gw
from launchtui.analysis.config import CONFIG
from launchtui.analysis.cpu_busy import host_blocking_calls
from launchtui.analysis.iterations import Iterations
from launchtui.analysis.phases import attributed_phase_keys, main_thread
from launchtui.analysis.prose import UNNAMED_PHASE, short
from launchtui.trace.arrays import median_of, unique_sorted
from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, Trace

MAX_EAGER, MAX_GRAPHED = 5, 3


def _sampled(it: Iterations, excluded: list[dict]) -> np.ndarray:
    """At most CONFIG.whatif_iterations steady iterations, evenly spaced (all when fewer)."""
    steady = np.ones(len(it), bool)
    for x in excluded:
        steady[x["iteration"]] = False
    idx = np.flatnonzero(steady) if steady.any() else np.arange(len(it))
    n = min(len(idx), CONFIG.whatif_iterations)
    return idx[unique_sorted(np.linspace(0, len(idx) - 1, n).round().astype(np.int64))]


def _call_phases(trace: Trace, it: Iterations, calls: np.ndarray, level: int):
    """Per call: its phase key (§V5, of its first op; -1 none) and the phase texts."""
    ops = trace.ops
    mark = np.zeros(len(trace.api) + 1, bool)
    mark[calls] = True
    sel = np.flatnonzero(mark[ops.api])
    main = main_thread(trace, sel, it.base_depth, it.start)
    keys, texts, _ = attributed_phase_keys(trace, sel, it.base_depth, level, main)
    key_of = np.full(len(trace.api) + 1, -1, np.int64)
    key_of[ops.api[sel][::-1]] = keys[::-1]          # the call's first op decides
    n_ops = np.bincount(ops.api[sel], minlength=len(trace.api))
    return key_of[calls], texts, n_ops[calls]


def _graph_cost(doc: dict) -> tuple[int, int | None, str]:
    """(the median graph launch call, its median host cost per replayed node, source) over the
    replays of the record's selection (§12.2, weighted by replays); the default and None when it
    has none."""
    rows = [r for r in ((doc.get("graphs") or {}).get("replays") or {}).get("graphs", [])
            if r["launch_api_us"]["median"] is not None]
    if not rows:
        return int(CONFIG.graph_launch_us * 1e3), None, "default (definitions.md §14): the trace has no graph launch"
    n = [r["replays"] for r in rows]
    call = float(median_of(np.repeat([r["launch_api_us"]["median"] for r in rows], n)))
    per = float(median_of(np.repeat([r["launch_api_us"]["median"] / max(r["ops_per_replay"]["median"], 1)
                                     for r in rows], n)))
    return (int(round(call * 1e3)), int(round(per * 1e3)),
            f"measured: median of {sum(n):,} graph launch call{'s' if sum(n) != 1 else ''}, {per:.3g} µs per node")


def _node_gaps(doc: dict, queued: int | None) -> tuple[int, int, str]:
    """(low, high, source) of the GPU-side gap between graphed nodes."""
    rows = [r for r in ((doc.get("graphs") or {}).get("replays") or {}).get("graphs", [])
            if r["ops_per_replay"]["median"] > 1 and r["node_gaps_us"]["median"] is not None]
    said, vals = [], []
    if rows:
        per = np.repeat([r["node_gaps_us"]["median"] / (r["ops_per_replay"]["median"] - 1) for r in rows],
                        [r["replays"] for r in rows])
        vals.append(int(round(float(median_of(per)) * 1e3)))
        said.append(f"the trace's replays {vals[-1] / 1e3:g} µs")
    if queued is not None:
        vals.append(queued)
        said.append(f"its queued eager ops {queued / 1e3:g} µs")
    if not vals:
        g = int(CONFIG.graph_node_gap_us * 1e3)
        return g, g, "default (definitions.md §14): no replay and too few queued launches to measure"
    return min(vals), max(vals), "measured: " + ", ".join(said)


def _rank(texts: list, keys: np.ndarray, per_it: np.ndarray, by_phase: list[dict]) -> list[int]:
    hb = {p["phase"]: p["host_bound_ms_per_iteration"] for p in by_phase}
    name = lambda k: texts[k] if k >= 0 else None   # noqa: E731
    return sorted(keys.tolist(), key=lambda k: (-hb.get(name(k), 0.0), -per_it[keys.tolist().index(k)],
                                                 name(k) is None, name(k) or ""))


@dataclass
class Sampled:
    """What the what-if reads before the record's phases are ranked (whatif_inputs): the sampled
    iterations' launch calls with their phases, and their world, built and self-checked once."""
    n_it: int
    kind: np.ndarray            # per sampled call: its API kind
    key: np.ndarray             # its phase key (-1 none)
    texts: list
    n_ops: np.ndarray           # ops it launched
    k_of: np.ndarray            # its sampled iteration
    world: gw.World | None      # None: no phase has launches enough to re-time
    self_check_ms: float | None


def whatif_inputs(trace: Trace, it: Iterations, device: int, calls: np.ndarray, excluded: list[dict],
                  latency_us: float, level: int = 1) -> Sampled | None:
    """The what-if's inputs (§12.5) from the steady iterations (`excluded`: the record's
    excluded_iterations) and the JSON latency: nothing here reads the phase ranking, so it may
    compute beside the record's gaps. None: no launch call in the sampled iterations."""
    if not len(it):
        return None
    pick = _sampled(it, excluded)
    it_s, it_e = it.start[pick], it.end[pick]
    api = trace.api
    cst = api.start[calls]            # in start order: each sampled iteration's calls are one slice
    lo, hi = np.searchsorted(cst, it_s, side="left"), np.searchsorted(cst, it_e, side="left")
    mine = np.concatenate([calls[a:b] for a, b in zip(lo.tolist(), hi.tolist())])   # per sampled iteration
    if not len(mine):
        return None
    key, texts, n_ops = _call_phases(trace, it, mine, level)
    kind = api.kind[mine]
    k_of = np.repeat(np.arange(len(pick)), hi - lo)
    world = check = None
    # unranked (no phases yet), the rows fall back to launches per iteration, so a phase with
    # launches enough to re-time is among them if any is; once ranked it may fall out of the cut,
    # and the world then goes unread: CPU spent, the same document
    if any(r["status"] == "estimate" for r in _phase_rows(kind, key, n_ops, k_of, len(pick), texts, [])):
        bl = np.flatnonzero(host_blocking_calls(trace))
        syncs = bl[np.isin(api.thread[bl], unique_sorted(api.thread[mine]))]
        world = gw.build_world(trace, it_s, it_e, device, mine, syncs, int(round(latency_us * 1e3)))
        if world is not None:
            check = round(float(np.abs(gw.retime(world, None, 0)[0] - (world.it_e - world.it_s)).max()) / 1e6, 6)
    return Sampled(len(pick), kind, key, texts, n_ops, k_of, world, check)


def graph_whatif(inputs: Callable[[], Sampled | None], doc: dict, defer=None) -> dict | None:
    """The record's `graph_whatif` (§12.5) from its inputs (`inputs()`: whatif_inputs' value, asked
    for only when the record has idle figures to re-time, else None) and the record's figures (idle
    by cause and its phases, the graphs' replays, the Amdahl bound). `defer` (Shared.defer, with a
    helper lane): each phase's re-timing on whichever thread is free (each fills its own row)."""
    ib = doc.get("idle_by_cause")
    if not ib or doc.get("too_little"):
        return None
    s = inputs()
    if s is None:
        return None
    rows = _phase_rows(s.kind, s.key, s.n_ops, s.k_of, s.n_it, s.texts, ib["by_phase"])
    out = {"iterations": s.n_it, "steady_iterations": ib["steady_iterations"], "amdahl_bound": doc["amdahl_bound"],
           "graph_launch_us": None, "graph_launch_source": None, "node_gap_us": None, "node_gap_source": None,
           "self_check_ms": None, "phases": rows}
    todo = [r for r in rows if r["status"] == "estimate"]
    if todo:
        _estimate_all(s, doc, out, todo, defer)
    for r in rows:
        r.pop("_key")
    return out


def _estimate_all(s: Sampled, doc: dict, out: dict, todo: list, defer=None) -> None:
    """Re-time the sampled iterations' world for each phase to estimate: in turn, or each deferred
    (`defer`) and all awaited. The world is only read; each row is its own phase's."""
    W = s.world
    cost, per_node, cost_src = _graph_cost(doc)
    lo_gap, hi_gap, gap_src = _node_gaps(doc, W.queued_gap)
    now = W.it_e - W.it_s
    out.update({"graph_launch_us": round(cost / 1e3, 3), "graph_launch_source": cost_src,
                "node_gap_us": [round(lo_gap / 1e3, 3), round(hi_gap / 1e3, 3)], "node_gap_source": gap_src,
                "self_check_ms": s.self_check_ms})
    key = np.where(s.kind == API_LAUNCH, s.key, -2)
    jobs = [lambda r=r: _estimate(r, W, key == r["_key"], (cost, per_node), (lo_gap, hi_gap), now, doc["amdahl_bound"])
            for r in todo]
    if defer is None:
        for job in jobs:
            job()
    else:
        for pending in [defer(job) for job in jobs]:
            pending.result()


def _phase_rows(kind, key, n_ops, k_of, n_it: int, texts: list, by_phase: list[dict]) -> list[dict]:
    """Per phase with launches in the sampled iterations: its eager launches and graph replays per
    iteration (medians) and what the what-if can say about it."""
    eager = kind == API_LAUNCH
    graph = kind == API_GRAPH_LAUNCH
    uk, inv = np.unique(key, return_inverse=True)
    nk = len(uk)
    cnt = lambda m, w=None: median_of(np.bincount(k_of[m] * nk + inv[m], weights=None if w is None else w[m],   # noqa: E731
                                                  minlength=n_it * nk).reshape(n_it, nk), axis=0)
    e_it, g_it, r_it = cnt(eager), cnt(graph), cnt(graph, n_ops.astype(np.float64))
    rows = []
    for k in _rank(texts, uk, e_it, by_phase):
        i = int(np.searchsorted(uk, k))
        few = e_it[i] < CONFIG.whatif_min_launches
        status = "graphed" if few and r_it[i] > 0 else "too_few_launches" if few else "estimate"
        rows.append({"phase": texts[k] if k >= 0 else None, "status": status,
                     "launches_per_iteration": float(e_it[i]), "graph_launches_per_iteration": float(g_it[i]),
                     "replayed_ops_per_iteration": float(r_it[i]), "_key": int(k)})
    eager_rows = [r for r in rows if r["status"] != "graphed"][:MAX_EAGER]
    return eager_rows + [r for r in rows if r["status"] == "graphed"][:MAX_GRAPHED]


def _estimate(r: dict, W: gw.World, member: np.ndarray, cost: tuple, gaps: tuple, now: np.ndarray,
              amdahl: float | None) -> None:
    """Fill the phase's row: both ends re-timed, clamped to the Amdahl bound of the host-bound time."""
    lo_runs = gw.graphed_runs(W, member, *cost, low=True)
    hi_runs = gw.graphed_runs(W, member, *cost, low=False)
    if not len(hi_runs.k):
        r["status"] = "no_stretch"
        return
    (lo, lo_ok), (hi, hi_ok) = gw.retime(W, lo_runs, gaps[0]), gw.retime(W, hi_runs, gaps[1])
    ends = sorted([float(median_of(lo)), float(median_of(hi))])
    now_ms = float(median_of(now)) / 1e6
    floor = now_ms / amdahl if amdahl else 0.0
    est = [max(x / 1e6, floor) for x in ends]
    per_it = np.bincount(hi_runs.k, minlength=W.n_it)
    collapsed = np.bincount(W.c_k[member], minlength=W.n_it)
    r.update({"iteration_ms": round(now_ms, 3), "estimate_ms": [round(x, 3) for x in est],
              "speedup": [round(now_ms / est[1], 3), round(now_ms / est[0], 3)] if est[0] > 0 else None,
              "at_amdahl_bound": bool(ends[0] / 1e6 < floor), "converged": lo_ok and hi_ok,
              "graph_launches_if_graphed": float(median_of(per_it)),
              "graph_launch_us": [round(float(median_of(lo_runs.cost)) / 1e3, 3), round(float(median_of(hi_runs.cost)) / 1e3, 3)],
              "launches_collapsed_per_iteration": float(median_of(collapsed))})


# --- Markdown ----------------------------------------------------------------------------------

_WORDS = {"graphed": "already graphed", "too_few_launches": "too few launches to graph",
          "no_stretch": "no two launches in a row: nothing to capture"}


def _span(a, b, fmt: str) -> str:
    """'a–b', or one number when both ends read the same."""
    x, y = fmt.format(a), fmt.format(b)
    return x if x == y else f"{x}–{y}"


def whatif_md(doc: dict, out: list[str]) -> None:
    """The page's 'What graphing would buy' table (§12.5), when the record has one."""
    w = doc.get("graph_whatif")
    if not w or not w["phases"]:
        return
    out += ["", f"## What graphing would buy ({w['iterations']} of {w['steady_iterations']} steady iterations "
                "re-timed)", ""]
    if w["graph_launch_us"] is not None:
        out.append(f"Each phase's stretches of launches as one graph launch each: graph launch {w['graph_launch_us']:g} µs "
                   f"({w['graph_launch_source']}); GPU-side gap between graphed nodes "
                   f"{_span(*w['node_gap_us'], '{:g}')} µs ({w['node_gap_source']}). Low end: the host "
                   "time before each stretch goes too, and the smaller gap; never beyond the Amdahl bound "
                   f"({w['amdahl_bound']:.3f}×).")
        out.append("")
    out += ["| phase | launches/iter | graph launches/iter if graphed | iteration now (ms) | if graphed (ms) | speed-up |",
            "|---|---:|---:|---:|---:|---:|"]
    for r in w["phases"]:
        name = f"`{short(r['phase'], 40)}`" if r["phase"] else UNNAMED_PHASE
        if r["status"] != "estimate":
            n = r["replayed_ops_per_iteration"] if r["status"] == "graphed" else r["launches_per_iteration"]
            what = f"{_WORDS[r['status']]} ({n:g} {'ops replayed' if r['status'] == 'graphed' else 'launches'}/iter)"
            out.append(f"| {name} | {r['launches_per_iteration']:g} | | | {what} | |")
            continue
        e, s = r["estimate_ms"], r["speedup"]
        out.append(f"| {name} | {r['launches_per_iteration']:g} | {r['graph_launches_if_graphed']:g} | "
                   f"{r['iteration_ms']:,.3f} | {_span(*e, '{:,.3f}')} | {_span(*s, '{:.2f}')}×"
                   + (" (Amdahl bound)" if r["at_amdahl_bound"] else "") + ("" if r["converged"] else " *") + " |")
    _costlier_md(w, out)
    if any(r["status"] == "estimate" and not r["converged"] for r in w["phases"]):
        out.append(f"\n\\* the re-timing had not settled after {gw.MAX_PASSES} passes (long chains of cross-stream "
                   "waits): slightly on the optimistic side")


def _costlier_md(w: dict, out: list[str]) -> None:
    """A phase whose slow end is slower than now is said in words: the range alone reads as a gain
    at a glance, while graphing may cost more than it saves (graph launches dearer than the launch
    calls they replace)."""
    for r in w["phases"]:
        if r["status"] != "estimate" or r["speedup"] is None or r["speedup"][0] >= 1:
            continue
        name = f"`{short(r['phase'], 40)}`" if r["phase"] else UNNAMED_PHASE
        out.append(f"\n{name}: graphing could cost more than it saves: at its slow end the iteration takes "
                   f"{r['estimate_ms'][1] - r['iteration_ms']:,.3f} ms longer than now "
                   f"({r['graph_launches_if_graphed']:g} graph launches/iter at up to {r['graph_launch_us'][1]:g} µs "
                   f"each, replacing {r['launches_per_iteration']:g} launches/iter).")
