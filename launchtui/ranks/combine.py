"""One job from its ranks: per-rank rows, a cross-rank kernel table, stragglers, a verdict line.

Straggler rule (docs/definitions.md §Ranks): on each metric, a rank is flagged when it lies more than
3 MADs (median absolute deviation) from the ranks' median, and more than 5 % of the median — the
floor stops identical ranks (MAD 0) from flagging run-to-run noise. Needs at least 3 ranks.
"""
from __future__ import annotations

import numpy as np

SCHEMA = "launchtui-ranks/1"
MADS = 3.0
REL_FLOOR = 0.05
MIN_RANKS = 3
# (row field, label, unit); iteration metrics when the ranks mark ProfilerSteps, totals otherwise
ITER_METRICS = (("iteration_median_ms", "iteration time", "ms"), ("launches_per_iter", "launches/iter", ""),
                ("launch_api_ms_per_iter", "launch-API time/iter", "ms"))
TOTAL_METRICS = (("launches", "kernel launches", ""), ("launch_api_ms", "launch-API time", "ms"))


def rank_row(rank: int, rank_from: str, res: dict) -> dict:
    """The flat per-rank row of the JSON (`ranks[]`); the kernels go to the cross-rank table."""
    row = {"rank": rank, "file": res["file"], "rank_from": rank_from, "status": res["status"],
           "error": res["error"]}
    s = res.get("summary")
    if s is None:
        return row
    q, rec = s["queues"], s["record"]
    it = rec.get("iterations") or {}
    per = rec.get("per_iteration") or {}
    # per-iteration figures only with real iterations, and never from an empty record (a CPU-side one,
    # definitions.md §V11, counts any device's launches: not comparable with the other ranks)
    steps = it.get("source") not in (None, "none") and not rec.get("empty")

    def med(key, nd):
        v = (per.get(key) or {}).get("median") if steps else None
        return None if v is None else round(float(v), nd)
    deepest = max(rec.get("streams") or [], key=lambda x: (x["max_depth"], x["queue_class"] is not None),
                  default={})
    row.update({
        "devices": s["devices"],
        "iterations": it.get("count", 0) if steps else 0,
        "iteration_median_ms": round(it["median_ns"] / 1e6, 3) if steps else None,
        "launches_per_iter": med("launches", 1),
        "launch_api_ms_per_iter": med("launch_api_ms", 3),
        "exposed_overhead_ms": med("exposed_overhead_ms", 3),
        "exposed_share": rec.get("overhead_share"),
        "queue_class": deepest.get("queue_class"),
        # inside the iterations like the class beside it (§V3); the whole trace's is in `queues`
        "max_depth": deepest.get("max_depth", q["max_depth"]),
        "launches": s["launches"],
        "launch_api_ms": s["launch_api_ms"],
        "queues": q,
    })
    return row


def _kernel_table(ranks: list[int], summaries: list[dict]) -> list[dict]:
    """Per kernel name: launches and mean launch-API µs over the ranks that report it (mean, min,
    max, worst rank = the highest; ties go to the lowest rank)."""
    names = sorted({k["kernel_name"] for s in summaries for k in s["kernels"]})
    if not names:
        return []
    col = {n: i for i, n in enumerate(names)}
    nk, nr = len(names), len(ranks)
    launches = np.full((nk, nr), np.nan)
    api_us = np.full((nk, nr), np.nan)
    total_ms = np.zeros((nk, nr))
    for j, s in enumerate(summaries):
        for k in s["kernels"]:
            i = col[k["kernel_name"]]
            launches[i, j], api_us[i, j], total_ms[i, j] = k["launches"], k["avg_api_us"], k["total_api_ms"]
    rank_arr = np.asarray(ranks)
    out = []
    for i in np.lexsort((np.arange(nk), -total_ms.mean(axis=1))).tolist():
        have = ~np.isnan(launches[i])

        def stats(v, nd):
            x = v[have]
            return {"mean": round(float(x.mean()), nd), "min": round(float(x.min()), nd),
                    "max": round(float(x.max()), nd), "worst_rank": int(rank_arr[have][int(np.argmax(x))])}
        out.append({"kernel_name": names[i], "ranks": int(have.sum()),
                    "total_api_ms_mean": round(float(total_ms[i].mean()), 3),
                    "launches": stats(launches[i], 1), "avg_api_us": stats(api_us[i], 2)})
    return out


def stragglers(rows: list[dict]) -> list[dict]:
    """Ranks far from the others on any metric (the rule above), each with its reason(s)."""
    ok = [r for r in rows if r["status"] == "ok"]
    if len(ok) < MIN_RANKS:
        return []
    use_iter = all(r["iterations"] for r in ok)
    flagged: dict[int, list[dict]] = {}
    for field, label, unit in (ITER_METRICS if use_iter else TOTAL_METRICS):
        vals = [(r["rank"], r[field]) for r in ok if r[field] is not None]
        if len(vals) < MIN_RANKS:
            continue
        x = np.array([v for _, v in vals], dtype=np.float64)
        med = float(np.median(x))
        mad = float(np.median(np.abs(x - med)))
        limit = max(MADS * mad, REL_FLOOR * abs(med))
        for rank, v in vals:
            if abs(v - med) > limit:
                pct = (v - med) / med * 100 if med else float("inf")
                flagged.setdefault(rank, []).append({
                    "metric": field, "value": v, "median": round(med, 3), "mad": round(mad, 3),
                    "text": f"{label} {v:g}{unit and ' ' + unit} vs median {med:g}{unit and ' ' + unit} "
                            f"({pct:+.0f}%, {abs(v - med) / mad:.0f} MADs)" if mad else
                            f"{label} {v:g}{unit and ' ' + unit} vs median {med:g}{unit and ' ' + unit} "
                            f"({pct:+.0f}%; all other ranks equal)"})
    return [{"rank": r, "reason": "; ".join(m["text"] for m in ms),
             "metrics": [{k: v for k, v in m.items() if k != "text"} for m in ms]}
            for r, ms in sorted(flagged.items())]


def verdict(rows: list[dict], strag: list[dict]) -> str:
    n, ok = len(rows), sum(r["status"] == "ok" for r in rows)
    head = f"{ok} of {n} ranks read"
    if ok == 0:
        return head + "; nothing to compare"
    if ok < MIN_RANKS:
        return head + f"; too few to flag stragglers (needs {MIN_RANKS})"
    if not strag:
        return head + "; no stragglers: every rank within 3 MADs (and 5 %) of the median"
    first = strag[0]
    more = f" and {len(strag) - 1} more" if len(strag) > 1 else ""
    return head + f"; {len(strag)} straggler{'s' if len(strag) > 1 else ''}: rank {first['rank']} " \
                  f"({first['reason']}){more}"


def combine(assigned: list[tuple[int, str]], results: list[dict]) -> dict:
    """The `launchtui-ranks/1` document (without `run`): ranks sorted by rank number."""
    order = sorted(range(len(results)), key=lambda i: assigned[i][0])
    rows = [rank_row(*assigned[i], results[i]) for i in order]
    ok = [i for i in order if results[i]["status"] == "ok"]
    kernels = _kernel_table([assigned[i][0] for i in ok], [results[i]["summary"] for i in ok])
    strag = stragglers(rows)
    return {"schema": SCHEMA, "ranks": rows, "kernels": kernels, "stragglers": strag,
            "verdict": verdict(rows, strag)}
