"""One verdict for the job from its ranks' case records (docs/definitions.md §R, *Job verdict*).

Ranks of one job run one program; what differs between their records is mostly where each rank
waited (the rank that enters a step first waits longest in its collectives, a long collective kernel
on the GPU, so its host-bound time is a smaller share of a longer step). A level per rank therefore
flips between identical ranks whose shares sit near the line. The job gets one level: the records' common level when they agree, else §V9's rule on the
job's evidence — the median rank's host-bound share, the main stream dry on most ranks, and no
self-check failing on most ranks — with the spread across ranks shown beside it.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from launchtui.analysis.config import CONFIG
from launchtui.analysis.prose import short
from launchtui.analysis.record_conclusion import BOUND_LEVELS, LEVEL_HOST, LEVEL_LAUNCH, LEVEL_NOT, main_stream
from launchtui.analysis.record_idle import gain

MAX_FIXES = 6


def rank_evidence(rec: dict) -> dict:
    """The per-rank row's verdict fields, copied from its case record (§V2, §V9)."""
    out = {"launch_bound_level": rec.get("launch_bound_level"), "host_bound_share": None,
           "host_bound_launch_share": None, "host_bound_host_share": None, "dominant_idle_cause": None,
           "main_stream_dry": None, "checks_failed": [], "conclusion": rec.get("conclusion")}
    ib = rec.get("idle_by_cause")
    if rec.get("empty") or not ib:
        return out
    hb, share = ib["host_bound"], ib["share"]
    top = max(share, key=lambda k: (share[k], k))
    ms = main_stream(rec)
    out.update(host_bound_share=hb["share"], host_bound_launch_share=hb["launch_share"],
               host_bound_host_share=hb["host_share"],
               dominant_idle_cause={"cause": top, "share": share[top]} if share[top] > 0 else None,
               main_stream_dry=None if ms is None else ms["queue_class"] == "dry",
               checks_failed=[c["name"] for c in rec.get("checks", []) if not c["ok"]])
    return out


def _own_why(row: dict, share_min: float) -> str:
    """Why a rank's own record reached another level than the job (its evidence, in words)."""
    if row["launch_bound_level"] is None:
        return row["conclusion"] or "cannot judge"
    parts = []
    if row["host_bound_share"] is not None and row["host_bound_share"] < share_min:
        parts.append(f"host-bound {row['host_bound_share'] * 100:.1f} % is under {share_min * 100:.0f} %")
    if row["main_stream_dry"] is False:
        parts.append("its main stream keeps work queued")
    if row["checks_failed"]:
        parts.append("a check fails: " + ", ".join(row["checks_failed"]))
    if parts:
        return "; ".join(parts)
    return (f"host-bound {row['host_bound_share'] * 100:.1f} % >= {share_min * 100:.0f} %, its main stream runs dry "
            "and every check holds")


def merged_fixes(records: list[dict]) -> list[dict]:
    """The ranks' ranked fixes (§V6) merged by phase (by rule where a fix has no phase): the time each
    addresses per iteration as its mean over the ranks (0 where a rank lacks it), min and max, ranked
    by the mean; the fix text most ranks give."""
    n = len(records)
    ms: dict[tuple, list[float]] = {}
    texts: dict[tuple, dict[tuple, list[float]]] = {}
    for rec in records:
        for f in rec.get("fixes") or []:
            key = (f["phase"], None) if f.get("phase") is not None else (None, f["rule"])
            t = float(f["ms_per_iteration"])
            ms.setdefault(key, []).append(t)
            texts.setdefault(key, {}).setdefault((f["rule"], f["fix"]), []).append(t)
    out = []
    for key, v in ms.items():
        # the fix most ranks give for this phase; ties: the one addressing more time
        rule, fix = max(texts[key], key=lambda rf: (len(texts[key][rf]), sum(texts[key][rf]), rf))
        full = np.array(v + [0.0] * (n - len(v)))
        out.append({"phase": key[0], "rule": rule, "fix": fix, "ranks": len(v),
                    "ms_per_iteration": {"mean": round(float(full.mean()), 3), "min": round(float(full.min()), 3),
                                         "max": round(float(full.max()), 3)}})
    out.sort(key=lambda f: (-f["ms_per_iteration"]["mean"], f["phase"] or "", f["rule"]))
    return out[:MAX_FIXES]


def _spread(judged: list[dict]) -> dict | None:
    have = sorted(((r["host_bound_share"], r["rank"]) for r in judged if r["host_bound_share"] is not None))
    if not have:
        return None
    v = np.array([s for s, _ in have])
    return {"min": have[0][0], "median": round(float(np.median(v)), 4), "max": have[-1][0],
            "min_rank": have[0][1], "max_rank": have[-1][1], "ranks": len(have)}


def _pooled_level(judged: list[dict], spread: dict | None, share_min: float) -> tuple[str, list[str]]:
    """§V9's rule on the job's evidence; (level, the evidence in words)."""
    n = len(judged)
    dry = sum(r["main_stream_dry"] is True for r in judged)
    failing = Counter(c for r in judged for c in r["checks_failed"])
    most = sorted(c for c, k in failing.items() if k > n / 2)
    med = spread["median"] if spread else 0.0
    why = [f"median host-bound share {med * 100:.1f} % {'>=' if med >= share_min else '<'} {share_min * 100:.0f} %",
           f"main stream dry on {dry} of {n} ranks"]
    why += [f"check '{c}' fails on {failing[c]} of {n} ranks" for c in most]
    if med >= share_min and dry > n / 2 and not most:
        launch = float(np.median([r["host_bound_launch_share"] or 0 for r in judged]))
        host = float(np.median([r["host_bound_host_share"] or 0 for r in judged]))
        return (LEVEL_LAUNCH if launch >= host else LEVEL_HOST), why
    return LEVEL_NOT, why


def job_verdict(rows: list[dict], records: dict[int, dict], share_min: float = CONFIG.launch_bound_share) -> dict:
    """The `job` section: level, how it was reached, the spread of host-bound share, the ranks whose
    own record says otherwise, the merged first fixes and the gain at the median share."""
    ok = [r for r in rows if r["status"] == "ok"]
    judged = [r for r in ok if r["launch_bound_level"] is not None]
    out = {"level": None, "rule": None, "evidence": [], "ranks": len(ok), "judged": len(judged),
           "levels": {}, "host_bound_share": _spread(judged), "differ": [], "fixes": [], "gain": None, "line": ""}
    if not ok:
        return out
    if len(judged) * 2 <= len(ok):
        why = Counter(_own_why(r, share_min) for r in ok if r["launch_bound_level"] is None).most_common(1)[0][0]
        out["line"] = f"cannot judge the job: {len(ok) - len(judged)} of {len(ok)} ranks cannot be judged ({why})"
        return out
    levels = Counter(r["launch_bound_level"] for r in judged)
    out["levels"] = {lv: [r["rank"] for r in judged if r["launch_bound_level"] == lv] for lv in sorted(levels)}
    if len(levels) == 1:
        level, rule = next(iter(levels)), "the records agree"
        _, evidence = _pooled_level(judged, out["host_bound_share"], share_min)
    else:
        level, evidence = _pooled_level(judged, out["host_bound_share"], share_min)
        rule = "the median rank's evidence"
    out.update(level=level, rule=rule, evidence=evidence,
               differ=[{"rank": r["rank"], "level": r["launch_bound_level"], "why": _own_why(r, share_min)}
                       for r in ok if r["launch_bound_level"] != level],
               fixes=merged_fixes([records[r["rank"]] for r in judged]))
    sp = out["host_bound_share"]
    if level in BOUND_LEVELS and sp:
        out["gain"] = gain(sp["median"])["realistic"]
    out["line"] = job_line(out)
    return out


def fix_head(fix: str) -> str:
    """A fix's words before its explanation: the text up to the first ': ' outside parentheses."""
    depth = 0
    for i, ch in enumerate(fix):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and fix.startswith(": ", i):
            return fix[:i]
    return fix


def job_line(job: dict) -> str:
    """'host-bound job: the GPU waits on the host 29.2–62.7 % of the step (median 47.5 %; …); first fixes …'."""
    sp, n = job["host_bound_share"], job["judged"]
    other = [d for d in job["differ"] if d["level"] is not None]
    agree = (f"all {n} records agree" if not other else
             f"{n - len(other)} of {n} records say {job['level']}; the level from " + ", ".join(job["evidence"]))
    if job["ranks"] > n:
        agree += f"; {job['ranks'] - n} cannot be judged"
    parts = [f"{job['level']} job ({agree})"]
    if sp:
        parts.append(f"the GPU waits on the host {sp['min'] * 100:.1f}–{sp['max'] * 100:.1f} % of the step across "
                     f"ranks (median {sp['median'] * 100:.1f} %; rank {sp['min_rank']} least, "
                     f"rank {sp['max_rank']} most)")
    if job["fixes"]:
        groups: dict[str, list[str]] = {}      # the first three, same fix together, in rank order
        for f in job["fixes"][:3]:
            where = f"`{short(f['phase'], 30)}`" if f["phase"] else f["rule"]
            groups.setdefault(fix_head(f["fix"]), []).append(f"{where} {f['ms_per_iteration']['mean']:,.2f}")
        parts.append("first fixes: " + "; then ".join(f"{fix} ({', '.join(w)} ms/step)" for fix, w in groups.items()))
    if job["gain"]:
        lo, hi = job["gain"]
        parts.append(f"removing host-bound time would make the median rank {lo:.2f}–{hi:.2f}× faster")
    return "; ".join(parts)
