"""The case record's level, self-checks and conclusion (docs/definitions.md §V9), from the record's
own evidence only: the document built by `analysis/record.py`.

The level comes from what the GPU waited for (idle_causes.py): host-bound time (launch calls and
host work between launches) is what CUDA graphs and torch.compile remove. It makes a trace
*host-bound* (or *launch-bound* when the calls themselves dominate) only when it is a material
share of the step **and** the queue runs dry, i.e. the CPU cannot keep ahead; host-bound gaps
behind a queue that keeps work are local host bubbles of one phase. Checks that fail lower the
level to what the evidence supports, and the conclusion says why.
"""
from __future__ import annotations

from launchtui.analysis import iterations as itr
from launchtui.analysis.config import CONFIG
from launchtui.analysis.prose import dur, phase_place, short

LEVEL_LAUNCH, LEVEL_HOST, LEVEL_NOT = "launch-bound", "host-bound", "not launch-bound"
BOUND_LEVELS = (LEVEL_LAUNCH, LEVEL_HOST)
GPU_BOUND_BUSY = 0.95       # busy at least this share of the step: the GPU sets the pace
DRY_PHASE = 0.5             # a phase whose launches run dry this often sets its own pace (§V3's launch test)
SUB_MS_DIGITS = 3           # cross_checks' sub-ms gap figure is stored to 1 µs ...
SUB_MS_STEP = 10.0 ** -SUB_MS_DIGITS   # ... so the check comparing it allows half a step
CAUSE_WORDS = {
    "launch": "launch calls (call cost and submission)",
    "host": "host work between launches (Python, dispatch)",
    "host_stall": "host stalls between GPU bursts (data loading, Python work, logging)",
    "sync": "host syncs and blocking copies",
    "dependency": "dependencies (queued work starting late: events, other streams, collectives, unrecorded work)",
    "cold_start": "cold start (first launches loading code)",
    "migration": "unified-memory migrations (pages moved on demand)",
    "unattributed": "ops whose launch the trace does not hold",
}


def verdict_lines(doc: dict) -> list[str]:
    """One line for the page's head, then one per stream."""
    pi = doc["per_iteration"]
    it = doc["iterations"]
    if doc.get("too_little"):
        return [f"too little activity to judge: {doc['too_little']}"] + [
            f"device {s['device_id']} stream {s['stream_id']}: {s['queue_class']}" for s in doc["streams"]]
    ib = doc["idle_by_cause"]
    hb = ib["host_bound"]
    lines = [f"{pi['launches']['median']:,.0f} launches/iteration; host-bound "
             f"{hb['mean_per_iteration_ms']:.3f} ms/iteration (mean) = {hb['share']:.1%} of the iteration "
             f"(launch calls {hb['launch_share']:.1%}, host between "
             f"launches {hb['host_share']:.1%}; at most {_amdahl(doc)})"
             + (" [iterations: heuristic]" if it["heuristic"] else "")
             + (" [no iteration marks: whole window]" if it["source"] == itr.SOURCE_NONE else "")]
    for s in doc["streams"]:
        lines.append(f"device {s['device_id']} stream {s['stream_id']}: {s['queue_class']}{class_mix(s)}")
    return lines


SHORT_CAUSE = {"launch": "launch", "host": "host", "host_stall": "host stalls", "sync": "sync",
               "dependency": "dependency", "cold_start": "cold start", "migration": "migration",
               "unattributed": "unattributed"}


def cause_line(doc: dict, limit: int = 4, marks: dict | None = None) -> str:
    """'idle 42.4 %: host 31.5 · launch 5.5 · host stalls 3.3 · sync 1.0' (% of the iteration),
    largest first: the split every screen leads with. `marks`: a symbol per cause before its word
    (the TUI's idle row)."""
    ib = doc["idle_by_cause"]
    parts = sorted(((v, c) for c, v in ib["share"].items() if v >= 0.0005), key=lambda x: (-x[0], x[1]))[:limit]
    return f"idle {ib['idle_share'] * 100:.1f} %: " + " · ".join(
        f"{marks[c] + ' ' if marks else ''}{SHORT_CAUSE[c]} {v * 100:.1f}" for v, c in parts)


def _amdahl(doc: dict) -> str:
    return f"{doc['amdahl_bound']:.3f}x" if doc.get("amdahl_bound") is not None else "n/a"


def class_mix(s: dict) -> str:
    """' (3 of 4 iterations; 1 saturated)' when the stream's iterations fall in several classes."""
    ic = s.get("iteration_classes") or {}
    if sum(1 for n in ic.values() if n) < 2:
        return ""
    others = ", ".join(f"{n} {c}" for c, n in ic.items() if n and c != s["queue_class"])
    return f" ({ic[s['queue_class']]} of {sum(ic.values())} iterations; {others})"


def main_stream(doc: dict) -> dict | None:
    """The judged device's stream with most launches: whether *it* runs dry says whether the CPU
    keeps ahead."""
    mine = [s for s in doc["streams"] if s["device_id"] == doc["device_id"] and s["launches"]]
    return max(mine, key=lambda s: (s["launches"], -s["stream_id"])) if mine else None


def checks(doc: dict, share_min: float = CONFIG.launch_bound_share) -> list[dict]:
    """The record's self-checks: do its own figures agree? Each {name, ok, detail}; a failed one
    lowers the level (bound_level)."""
    ib = doc["idle_by_cause"]
    hb = ib["host_bound"]
    out = [{"name": "idle adds up", "ok": ib["sum_ok"],
            "detail": "the causes add up to the GPU idle time in every iteration" if ib["sum_ok"] else
                      "the causes do not add up to the GPU idle time: a defect, please report it"}]
    lim = ib["launch_limit"]
    ok = lim["launch_ms"] <= lim["bound_ms"] + 1e-6
    out.append({"name": "launch time within the launch calls", "ok": ok,
                "detail": f"exposed launch time {dur(lim['launch_ms'])} <= launch calls in flight in the gaps "
                          f"{dur(lim['in_flight_ms'])} + {lim['tails']:,} launches x L {dur(lim['latency_ms'])}"})
    rt = doc["rule_of_thumb"]
    bound = hb["share"] >= share_min
    out.append({"name": "rule of thumb", "ok": True,
                "detail": (f"{rt['launches']:,.0f} launches x {rt['launch_cost_us']:g} µs = {dur(rt['estimate_ms'])} "
                           f"{'>=' if rt['flag'] else '<'} 10 % of the iteration ({dur(rt['ten_percent_ms'])}); "
                           + ("agrees with the measured host-bound share" if rt["flag"] == bound else
                              "the launch calls overlap GPU work that keeps the queue busy" if rt["flag"] else
                              "the host work between launches, not the calls, makes the share"))})
    sub = doc["cross_checks"]["idle_gaps"].get(str(doc["device_id"]), {}).get("sub_ms_per_iteration_ms", 0)
    hb_ms = hb["per_iteration_ms"]["median"]
    # `sub` is stored to SUB_MS_STEP: a host-bound time below half a step must not fail on its rounding
    ok = not bound or sub + SUB_MS_STEP / 2 >= 0.5 * hb_ms
    out.append({"name": "small gaps hold the host-bound time", "ok": ok,
                "detail": f"gaps under 1 ms {dur(sub) if sub else '< ' + dur(SUB_MS_STEP / 2)}/iteration against "
                          f"host-bound {dur(hb_ms)}/iteration"
                          + ("" if ok else ": the host-bound time sits in long gaps, not in per-launch overhead")})
    idle = max(ib["idle_share"], 1e-12)
    un = ib["share"]["unattributed"] / idle
    ok = un <= 0.25
    out.append({"name": "idle is measurable", "ok": ok,
                "detail": f"{un:.0%} of the GPU idle ends at ops without a launch row"
                          + ("" if ok else ": GPU idle not measurable here (ops launched before the capture, or a "
                                           "sampled trace)")})
    return out


def _host_traced(doc: dict) -> bool:
    """The trace ran its host code under the Python tracer (limits.host_tracing, §V13)."""
    return bool((doc.get("limits") or {}).get("host_tracing"))


def cannot_judge(doc: dict) -> str | None:
    """Why the trace cannot show steady-state launch behaviour, or None."""
    if doc.get("too_little") and not _provably_not(doc):
        return f"too little activity ({doc['too_little']})"
    cold = doc.get("cold_start") or {}
    if cold.get("warm_up_capture") and not doc.get("too_little"):
        return (f"cold start / warm-up capture: {cold['distinct_first_launches']} of {cold['launches']} launches are "
                f"the first launch of their kernel ({cold['calls']} slow first launches, {dur(cold['total_ms'])}): the "
                "trace shows start-up (lazy module loading, JIT), not steady-state launch cost; profile after warm-up")
    lim = doc.get("limits") or {}
    integrity = (doc.get("graphs") or {}).get("integrity") or {}
    if not integrity.get("ok", True):   # replays the trace did not keep (definitions.md §12)
        return f"GPU idle not measurable here: {integrity['reason']}"
    if lim.get("sampled"):
        return f"GPU idle not measurable here: {lim['reason']}"
    failed = {c["name"] for c in doc.get("checks", []) if not c["ok"]}
    if "idle is measurable" in failed and doc["idle_by_cause"]["idle_share"] >= CONFIG.launch_bound_share:
        # idle under the line cannot make the GPU host-bound, whatever its causes: that is judged
        return "GPU idle not measurable here: most idle time ends at ops whose launch the trace does not hold"
    return None


PROVABLY_NOT = 0.01    # the launch calls alone bound launching under this share of the window


def _provably_not(doc: dict) -> bool:
    """Too few launches to judge, yet their calls and submission bound launching under 1 %."""
    b = doc.get("too_little_bound")
    return b is not None and b < PROVABLY_NOT


def bound_level(doc: dict, share_min: float = CONFIG.launch_bound_share) -> str | None:
    """launch-bound / host-bound when host-bound time is >= share_min of the steady iterations, the
    main stream runs dry and the checks hold; None when the trace cannot show it; else not."""
    if cannot_judge(doc):
        return None
    if doc.get("too_little"):
        return LEVEL_NOT
    hb = doc["idle_by_cause"]["host_bound"]
    failed = {c["name"] for c in doc["checks"] if not c["ok"]}
    if failed:
        return LEVEL_NOT
    ms = main_stream(doc)
    if hb["share"] >= share_min and ms is not None and ms["queue_class"] == "dry":
        return LEVEL_LAUNCH if hb["dominant"] == "launch" else LEVEL_HOST
    ph = bound_phase(doc, share_min)
    if ph is not None:
        return LEVEL_LAUNCH if 2 * ph["launch_ms_per_iteration"] >= ph["host_bound_ms_per_iteration"] else LEVEL_HOST
    return LEVEL_NOT


def bound_phase(doc: dict, share_min: float = CONFIG.launch_bound_share) -> dict | None:
    """The phase that is host- or launch-bound on its own: its host-bound time is >= share_min of
    the iteration and its launches run dry (>= half start as their call returns), while the rest of
    the step keeps the queue busy: the CPU sets that phase's pace (an unfused optimizer)."""
    hb = doc["idle_by_cause"]["host_bound"]
    for p in doc["idle_by_cause"]["by_phase"]:
        if p["share_of_host_bound"] * hb["share"] >= share_min and (p.get("dry_launch_share") or 0) >= DRY_PHASE:
            return p
    return None


def _dominant_idle(doc: dict) -> tuple[str, float] | None:
    share = doc["idle_by_cause"]["share"]
    c = max(share, key=lambda k: (share[k], k))
    return (c, share[c]) if share[c] > 0 else None


def _phase_note(doc: dict) -> str:
    ph = doc["idle_by_cause"]["by_phase"]
    if not ph:
        return ""
    p = ph[0]
    note = f", most of it {phase_place(p['phase'])} ({dur(p['host_bound_ms_per_iteration'])}/iteration"
    return note + ("; add NVTX / record_function ranges to split it)" if not p["phase"] else ")")


def _queue_parts(doc: dict) -> list[str]:
    parts = []
    sat = [s for s in doc["streams"] if s["queue_class"] == "saturated"]
    if sat:
        known = [s["observed_limit"] for s in sat if s["observed_limit"] is not None]
        where = f"at depth {max(known)}" if known else f"at a depth of at least {max(s['max_depth'] for s in sat)}"
        parts.append(f"the CPU is ahead and back-pressured: {sum(s['blocked_launches'] for s in sat):,} launch calls "
                     f"blocked {where} — fewer launches free CPU time, not GPU time")
    for s in doc["streams"]:
        n_sat = (s.get("iteration_classes") or {}).get("saturated", 0)
        if s["queue_class"] != "saturated" and n_sat:
            parts.append(f"device {s['device_id']} stream {s['stream_id']} is back-pressured in {n_sat} of "
                         f"{sum(s['iteration_classes'].values())} iterations")
    return parts


def conclusion(doc: dict, share_min: float = CONFIG.launch_bound_share) -> tuple[bool | None, str]:
    """(launch_bound, one line the user should take away) (docs/definitions.md §V9)."""
    why = cannot_judge(doc)
    if why:   # the queue's own evidence still holds: blocking is judged on the calls, not the idle
        return None, "; ".join([f"cannot judge: {why}"] + (_queue_parts(doc) if doc.get("streams") else []))
    level = bound_level(doc, share_min)
    if doc.get("too_little"):
        return False, (f"{LEVEL_NOT} (at most {doc['too_little_bound'] * 100:.2f} % of the window: the launch calls "
                       f"and their submission bound it); too little activity to say more ({doc['too_little']})")
    ib = doc["idle_by_cause"]
    hb = ib["host_bound"]
    busy = 1 - ib["idle_share"]
    waits = (f"the GPU waits on the host {hb['share'] * 100:.1f} % of the iteration "
             f"(launch calls {hb['launch_share'] * 100:.1f} %, host work between launches {hb['host_share'] * 100:.1f} %)")
    ms = main_stream(doc)
    if level in BOUND_LEVELS and ms is not None and ms["queue_class"] == "dry":
        parts = [f"{level}: {waits}{_phase_note(doc)}; the queue runs dry (device {ms['device_id']} "
                 f"stream {ms['stream_id']})"]
    elif level in BOUND_LEVELS:
        p = bound_phase(doc, share_min)
        parts = [f"{level} {phase_place(p['phase'])}: {dur(p['host_bound_ms_per_iteration'])}/iteration "
                 f"of GPU waiting on the host there ({p['share_of_host_bound'] * hb['share'] * 100:.1f} % of the "
                 f"iteration), and {p['dry_launch_share'] * 100:.0f} % of its launches start as their call returns; "
                 f"the rest of the step keeps the queue busy; over the step {waits}"]
    else:
        dom = _dominant_idle(doc)
        head = (f"GPU-bound (busy {busy * 100:.1f} %)" if busy >= GPU_BOUND_BUSY else
                f"most GPU idle is {CAUSE_WORDS[dom[0]]}, {dom[1] * 100:.1f} % of the iteration" if dom else "no idle")
        parts = [f"{LEVEL_NOT}: {head}; host-bound time {hb['share'] * 100:.1f} %"
                 + (f" in host bubbles{_phase_note(doc)} — the queue keeps work, so the CPU is ahead"
                    if hb["share"] >= share_min else "")]
        failed = [c for c in doc["checks"] if not c["ok"]]
        if failed and hb["share"] >= share_min:
            parts.append("checks lower the level: " + "; ".join(c["detail"] for c in failed))
    parts += _queue_parts(doc)
    fixes = doc.get("fixes") or []
    if level not in BOUND_LEVELS and busy >= GPU_BOUND_BUSY:
        parts.append("the GPU's own work sets the pace: fewer or cheaper launches would not shorten the step")
    elif fixes:
        f = fixes[0]
        parts.append(f"first fix: {f['fix']}" + (f" (`{short(f['phase'], 40)}`)" if f.get("phase") else ""))
    if level in BOUND_LEVELS and doc["gain"]["realistic"]:
        lo, hi = doc["gain"]["realistic"]
        parts.append(f"removing host-bound time would make the iteration {lo:.2f}–{hi:.2f}× faster"
                     + (" at most (Python tracing slowed the host)" if _host_traced(doc) else ""))
    return level in BOUND_LEVELS, "; ".join(parts)


def outside_notes(doc: dict, short: bool = False) -> list[str]:
    """What the timeline marks outside the iterations the record judges (§V3 `outside`): each
    stream whose queue reaches the backpressure threshold or blocks there, with the range it
    does it in, so no screen shows a full queue beside a verdict that is silent about it.
    `short`: the one-line panel's words."""
    out = []
    for s in doc.get("streams") or []:
        o = s.get("outside")
        if not o:
            continue
        where = f" in `{o['range']}`" if o.get("range") else ""
        if short:
            out.append(f"s{s['stream_id']} {o['max_depth']} outside the iterations")
            continue
        blocked = f", {o['blocked']} launch calls block" if o.get("blocked") else ""
        out.append(f"outside the iterations (not judged): GPU {s['device_id']} stream {s['stream_id']} "
                   f"reaches {o['max_depth']}{where}{blocked}")
    return out
