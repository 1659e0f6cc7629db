"""One job from its ranks: per-rank rows, one job verdict, step skew, a cross-rank kernel table,
stragglers, a verdict line.

Straggler rule (docs/definitions.md §R): on each metric, a rank is flagged when it lies more than
3 MADs (median absolute deviation) from the ranks' median, and more than 5 % of the median — the
floor stops identical ranks (MAD 0) from flagging run-to-run noise — and, for a time per iteration,
more than 5 % of the median step: a difference the step does not feel is not a straggler. Needs at
least 3 ranks. Step entry or exit skew that explains the ranks' step-time differences (skew.py) is
a straggler reason of its own, listed first.
"""
from __future__ import annotations

import numpy as np

from launchtui.ranks.skew import job_skew
from launchtui.ranks.verdict import job_verdict, rank_evidence

SCHEMA = "launchtui-ranks/1"
MADS = 3.0
REL_FLOOR = 0.05
MIN_RANKS = 3
# (row field, label, unit); iteration metrics when the ranks mark ProfilerSteps, totals otherwise
ITER_METRICS = (("iteration_median_ms", "iteration time", "ms"), ("launches_per_iter", "launches/iter", ""),
                ("launch_api_ms_per_iter", "launch-API time/iter", "ms"))
STEP_TIMES = ("launch_api_ms_per_iter",)   # per-iteration times whose floor is also 5 % of the step
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
        **rank_evidence(rec),
        "step_entry_ms": None,
        "step_exit_ms": None,
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


def _step_ms(ok: list[dict]) -> float | None:
    v = [r["iteration_median_ms"] for r in ok if r["iteration_median_ms"] is not None]
    return float(np.median(v)) if v else None


def _mad_flags(ok: list[dict], step_ms: float | None) -> tuple[dict[int, list[dict]], list[dict]]:
    """(rank -> flagged metrics, differences beyond 3 MADs that the step does not feel)."""
    use_iter = all(r["iterations"] for r in ok)
    flagged: dict[int, list[dict]] = {}
    immaterial = []
    for field, label, unit in (ITER_METRICS if use_iter else TOTAL_METRICS):
        vals = [(r["rank"], r[field]) for r in ok if r[field] is not None]
        if len(vals) < MIN_RANKS:
            continue
        x = np.array([v for _, v in vals], dtype=np.float64)
        med = float(np.median(x))
        mad = float(np.median(np.abs(x - med)))
        limit = max(MADS * mad, REL_FLOOR * abs(med))
        step_floor = REL_FLOOR * step_ms if field in STEP_TIMES and step_ms else 0.0
        u = unit and " " + unit
        for rank, v in vals:
            if abs(v - med) <= limit:
                continue
            pct = (v - med) / med * 100 if med else float("inf")
            text = (f"{label} {v:g}{u} vs median {med:g}{u} ({pct:+.0f}%, {abs(v - med) / mad:.0f} MADs)" if mad else
                    f"{label} {v:g}{u} vs median {med:g}{u} ({pct:+.0f}%; all other ranks equal)")
            m = {"metric": field, "value": v, "median": round(med, 3), "mad": round(mad, 3), "text": text}
            if abs(v - med) <= step_floor:
                immaterial.append({"rank": rank, "metric": field, "text": (
                    f"rank {rank}: {text}, but {abs(v - med):,.3f} ms is under {REL_FLOOR:.0%} of the "
                    f"{step_ms:,.3f} ms step: not material")})
                continue
            flagged.setdefault(rank, []).append(m)
    return flagged, immaterial


def stragglers(rows: list[dict], skew: dict | None = None) -> tuple[list[dict], list[dict]]:
    """(ranks far from the others, each with its reason(s); MAD outliers under the step floor).
    A step skew that explains the step-time differences comes first, and an entry skew replaces the
    iteration-time flags: the ranks with long steps are the ones waiting for the late one."""
    ok = [r for r in rows if r["status"] == "ok"]
    out = []
    reason = (skew or {}).get("reason")
    if reason and reason["kind"] in ("entry", "exit"):
        out.append({"rank": reason["rank"], "kind": f"step {reason['kind']} skew", "reason": reason["text"],
                    "headline": reason["headline"],
                    "metrics": [{"metric": f"step_{reason['kind']}_skew_ms", "value": reason["skew_ms"],
                                 "first_rank": reason["first_rank"]}]})
    if len(ok) < MIN_RANKS:
        return out, []
    flagged, immaterial = _mad_flags(ok, _step_ms(ok))
    for r, ms in sorted(flagged.items()):
        if reason and reason["kind"] == "entry":
            ms = [m for m in ms if m["metric"] != "iteration_median_ms"]
        if ms:
            out.append({"rank": r, "kind": "metrics", "reason": "; ".join(m["text"] for m in ms),
                        "metrics": [{k: v for k, v in m.items() if k != "text"} for m in ms]})
    return out, immaterial


def verdict(rows: list[dict], strag: list[dict], job: dict | None = None) -> str:
    n, ok = len(rows), sum(r["status"] == "ok" for r in rows)
    head = f"{ok} of {n} ranks read"
    if ok == 0:
        return head + "; nothing to compare"
    if job and job.get("level"):
        sp = job["host_bound_share"]
        head += f"; {job['level']} job" + (f" (host-bound {sp['min'] * 100:.1f}–{sp['max'] * 100:.1f} % of the step, "
                                           f"median {sp['median'] * 100:.1f} %)" if sp else "")
    if not strag and ok < MIN_RANKS:
        return head + f"; too few to flag stragglers (needs {MIN_RANKS})"
    if not strag:
        return head + "; no stragglers: every rank within 3 MADs (and 5 %) of the median"
    first = strag[0]
    more = f" and {len(strag) - 1} more" if len(strag) > 1 else ""
    return head + f"; {len(strag)} straggler{'s' if len(strag) > 1 else ''}: rank {first['rank']} " \
                  f"({first.get('headline', first['reason'])}){more}"


def combine(assigned: list[tuple[int, str]], results: list[dict]) -> dict:
    """The `launchtui-ranks/1` document (without `run`): ranks sorted by rank number."""
    order = sorted(range(len(results)), key=lambda i: assigned[i][0])
    rows = [rank_row(*assigned[i], results[i]) for i in order]
    ok = [i for i in order if results[i]["status"] == "ok"]
    ok_ranks = [assigned[i][0] for i in ok]
    summaries = [results[i]["summary"] for i in ok]
    kernels = _kernel_table(ok_ranks, summaries)
    job = job_verdict(rows, {r: s["record"] for r, s in zip(ok_ranks, summaries)})
    skew = job_skew(ok_ranks, summaries, _step_ms([r for r in rows if r["status"] == "ok"]), REL_FLOOR)
    for r in rows:
        off = skew["offsets"].get(str(r["rank"]))
        if off:
            r["step_entry_ms"], r["step_exit_ms"] = off["entry_ms"], off["exit_ms"]
    skew = {k: v for k, v in skew.items() if k != "offsets"}
    strag, immaterial = stragglers(rows, skew)
    return {"schema": SCHEMA, "ranks": rows, "job": job, "skew": skew, "kernels": kernels, "stragglers": strag,
            "immaterial": immaterial, "verdict": verdict(rows, strag, job)}
