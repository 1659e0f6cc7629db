"""The case record's verdict lines and conclusion (docs/definitions.md §V9), from the record's own
evidence only: the document built by `analysis/record.py`."""
from __future__ import annotations

from launchtui.analysis import iterations as itr
from launchtui.analysis.config import CONFIG
from launchtui.analysis.prose import dur, short


def verdict_lines(doc: dict) -> list[str]:
    """One line for the page's head, then one per stream."""
    pi = doc["per_iteration"]
    it = doc["iterations"]
    share = doc["overhead_share"]
    if doc.get("too_little"):
        return [f"too little activity to judge: {doc['too_little']}"] + [
            f"device {s['device_id']} stream {s['stream_id']}: {s['queue_class']}" for s in doc["streams"]]
    lines = [f"{pi['launches']['median']:,.0f} launches/iteration; exposed launch overhead "
             f"{pi['exposed_overhead_ms']['median']:.3f} ms/iteration = {share:.1%} of "
             f"{pi['iteration_ms']['median']:.3f} ms (Amdahl bound {doc['amdahl_bound']:.3f}x)"
             + (" [iterations: heuristic]" if it["heuristic"] else "")
             + (" [no iteration marks: whole window]" if it["source"] == itr.SOURCE_NONE else "")]
    for s in doc["streams"]:
        lines.append(f"device {s['device_id']} stream {s['stream_id']}: {s['queue_class']}{class_mix(s)}")
    return lines


def class_mix(s: dict) -> str:
    """' (3 of 4 iterations; 1 saturated)' when the stream's iterations fall in several classes."""
    ic = s.get("iteration_classes") or {}
    if sum(1 for n in ic.values() if n) < 2:
        return ""
    others = ", ".join(f"{n} {c}" for c, n in ic.items() if n and c != s["queue_class"])
    return f" ({ic[s['queue_class']]} of {sum(ic.values())} iterations; {others})"


LEVEL_BOUND, LEVEL_PARTLY, LEVEL_NOT = "launch-bound", "partly launch-bound", "not launch-bound"


def _waiting_stream(doc: dict) -> dict | None:
    """The dry stream with most launches: the evidence that the GPU waits on launches (§V3)."""
    dry = [s for s in doc["streams"] if s["queue_class"] == "dry"]
    return max(dry, key=lambda s: (s["launches"], -s["device_id"], -s["stream_id"])) if dry else None


def bound_level(doc: dict, share_min: float = CONFIG.launch_bound_share,
                partly_min: float = CONFIG.partly_bound_share) -> str | None:
    """launch-bound (share >= share_min), partly launch-bound (partly_min <= share < share_min with
    evidence: a dry stream or the rule of thumb's flag), else not; None when too little to judge
    (docs/definitions.md §V9)."""
    if doc.get("too_little"):
        return None
    share = doc["overhead_share"]
    if share >= share_min:
        return LEVEL_BOUND
    if share >= partly_min and (_waiting_stream(doc) is not None or doc["rule_of_thumb"]["flag"]):
        return LEVEL_PARTLY
    return LEVEL_NOT


def conclusion(doc: dict, share_min: float = CONFIG.launch_bound_share,
               partly_min: float = CONFIG.partly_bound_share) -> tuple[bool | None, str]:
    """(launch_bound, one line the user should take away), from the record's own evidence
    (docs/definitions.md §V9): the exposed share against `share_min` (a middle band from
    `partly_min` when the queue or the rule of thumb backs it), the rule of thumb as a second
    opinion, what the queues say in words that agree with the level, and unless not launch-bound
    the top row's fix and the Amdahl gain."""
    if doc.get("too_little"):
        return None, f"cannot judge: too little activity ({doc['too_little']})"
    share, rt = doc["overhead_share"], doc["rule_of_thumb"]
    level = bound_level(doc, share_min, partly_min)
    bound = level == LEVEL_BOUND
    flagged = level != LEVEL_NOT     # the rule of thumb agrees when its flag matches
    band = (f">= {share_min * 100:g} %" if bound else
            f">= {partly_min * 100:g} %, < {share_min * 100:g} %" if level == LEVEL_PARTLY else f"< {share_min * 100:g} %")
    parts = [f"{level}: exposed launch overhead is {share * 100:.1f} % of the iteration ({band})"
             + ("; the rule of thumb agrees" if rt["flag"] == flagged else
                f"; the rule of thumb disagrees ({rt['launches']:,.0f} launches × {rt['launch_cost_us']:g} µs = "
                f"{dur(rt['estimate_ms'])} {'<' if flagged else '>='} 10 % of the iteration)")]
    sat = [s for s in doc["streams"] if s["queue_class"] == "saturated"]
    if sat:
        known = [s["observed_limit"] for s in sat if s["observed_limit"] is not None]
        # an unknown limit (ops launched before a sliced capture were pending): the seen depth is a lower bound
        where = f"at depth {max(known)}" if known else f"at a depth of at least {max(s['max_depth'] for s in sat)}"
        parts.append(f"the CPU is ahead and back-pressured: {sum(s['blocked_launches'] for s in sat):,} launch calls "
                     f"blocked {where} — fewer launches free CPU time, not GPU time")
    # a stream that saturates in some iterations but not most: said, never counted as backpressure
    for s in doc["streams"]:
        n_sat = (s.get("iteration_classes") or {}).get("saturated", 0)
        if s["queue_class"] != "saturated" and n_sat:
            parts.append(f"device {s['device_id']} stream {s['stream_id']} is back-pressured in {n_sat} of "
                         f"{sum(s['iteration_classes'].values())} iterations")
    s = _waiting_stream(doc)
    if s is not None:
        pct, at = f"{s['dry_launch_share'] * 100:.0f} %", f"device {s['device_id']} stream {s['stream_id']}"
        # not launch-bound: the GPU waits on launches, but the waits are too short to matter
        parts.append(f"the GPU waits on launches: {pct} of launches start as their call returns ({at})" if flagged
                     else f"launches start as their call returns ({pct}, {at}) but the waits add up to only "
                          f"{share * 100:.1f} % of the iteration")
    if flagged:
        if doc["top"]:
            r = doc["top"][0]
            parts.append(f"first fix: {r['fix']} (`{short(r['kernel_name'], 40)}`)")
        if doc["amdahl_bound"] is not None:
            parts.append(f"removing all exposed launch overhead would make the iteration at most "
                         f"{doc['amdahl_bound']:.2f}× faster")
    return bound, "; ".join(parts)


# --- Markdown ---------------------------------------------------------------------------
