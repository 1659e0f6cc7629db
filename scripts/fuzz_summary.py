"""The fuzz campaign's summary (scripts/fuzz.py): counts per family and class, defect signatures
deduplicated, each with its first case's reproducer under OUT/repro/, and the merge of the summaries
of one campaign run in parts.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter, defaultdict
from pathlib import Path


OK_CLASSES = {"ok", "clean-error"}


def save_repro(result: dict, run: dict, repro_root: Path, seed: int) -> str:
    key = hashlib.sha1(f"{run['class']}|{run['sig']}".encode()).hexdigest()[:10]
    d = repro_root / key
    if d.exists():
        return str(d)
    d.mkdir(parents=True)
    inp = Path(result["input"])
    try:
        if inp.is_file() and not inp.is_symlink() and inp.stat().st_size < 20_000_000:
            shutil.copyfile(inp, d / ("input" + "".join(inp.suffixes[-2:])))
    except OSError:
        pass
    (d / "case.json").write_text(json.dumps({
        "replay": f"scripts/fuzz.py --seed {seed} --families {result['families']} --case {result['index']} --keep"
                  + (" --cover" if result.get("kind") else ""),
        "family": result["family"], "mutation": result["desc"], "seed_file": result["seed_file"],
        "env": result["env"], "args": run["args"], "class": run["class"], "signature": run["sig"],
        "stderr": run["stderr"]}, indent=1, ensure_ascii=True))
    return str(d)


def summarize(results: list[dict], out: Path, seed: int, elapsed: float) -> dict:
    per = defaultdict(Counter)
    sigs: dict[tuple, dict] = {}
    n_runs = 0
    for r in results:
        for run in r["runs"]:
            n_runs += run["args"][0] not in ("<input>", "<cache>")
            per[r["family"]][run["class"]] += 1
            if run["class"] not in OK_CLASSES:
                k = (run["class"], run["sig"])
                if k not in sigs:
                    sigs[k] = {"class": run["class"], "signature": run["sig"], "count": 0,
                               "first_case": r["index"], "family": r["family"],
                               "repro": save_repro(r, run, out / "repro", seed)}
                sigs[k]["count"] += 1
    defects = sum(s["count"] for s in sigs.values())
    bad_cases = sum(any(run["class"] not in OK_CLASSES for run in r["runs"]) for r in results)
    summary = {"seed": seed, "cases": len(results), "indices": _ranges([r["index"] for r in results]), "runs": n_runs, "elapsed_s": round(elapsed, 1),
               "defect_runs": defects, "defect_cases": bad_cases,
               "by_family": {f: dict(c) for f, c in sorted(per.items())},
               "kinds": sorted({f"{r['family']}/{r['kind']}" for r in results if r.get("kind")}),
               "signatures": sorted(sigs.values(), key=lambda s: -s["count"])}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, ensure_ascii=True))
    return summary


def _ranges(ix: list[int]) -> list[list[int]]:
    """Sorted indices as [first, last] runs: which cases a (partial) summary covers."""
    out = []
    for i in sorted(set(ix)):  # parts may overlap
        if out and i == out[-1][1] + 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def merge_summaries(parts: list[dict]) -> dict:
    """One campaign's summary from the summaries of its parts (same seed, disjoint indices); ValueError
    when they are not parts of one campaign: their sum would count cases twice or mix campaigns."""
    seeds = sorted({p["seed"] for p in parts})
    if len(seeds) != 1:
        raise ValueError(f"the parts come from different seeds ({', '.join(map(str, seeds))}): "
                         "one campaign's parts share its seed")
    seen = [i for p in parts for a, b in p.get("indices", []) for i in range(a, b + 1)]
    if len(seen) != len(set(seen)):
        raise ValueError(f"the parts overlap: {len(seen) - len(set(seen))} case indices are in more than one")
    fam: dict = defaultdict(Counter)
    sigs: dict = {}
    for p in parts:
        for f, c in p["by_family"].items():
            fam[f].update(c)
        for s in p["signatures"]:
            k = (s["class"], s["signature"])
            if k in sigs:
                sigs[k]["count"] += s["count"]
                sigs[k]["first_case"] = min(sigs[k]["first_case"], s["first_case"])
            else:
                sigs[k] = dict(s)
    idx = [i for p in parts for a, b in p.get("indices", []) for i in range(a, b + 1)]
    return {"seed": parts[0]["seed"], "cases": sum(p["cases"] for p in parts), "indices": _ranges(idx),
            "runs": sum(p["runs"] for p in parts), "elapsed_s": round(max(p["elapsed_s"] for p in parts), 1),
            "defect_runs": sum(p["defect_runs"] for p in parts), "defect_cases": sum(p["defect_cases"] for p in parts),
            "by_family": {f: dict(c) for f, c in sorted(fam.items())},
            "kinds": sorted({k for p in parts for k in p.get("kinds", [])}),
            "signatures": sorted(sigs.values(), key=lambda s: -s["count"])}


def print_summary(s: dict) -> None:
    classes = sorted({c for f in s["by_family"].values() for c in f}, key=lambda c: (c not in OK_CLASSES, c))
    print(f"seed {s['seed']}: {s['cases']} cases {s.get('indices')}, {s['runs']} runs in {s['elapsed_s']} s; "
          f"{s['defect_cases']} cases with defects ({s['defect_runs']} defect runs, "
          f"{len(s['signatures'])} signatures)")
    print(f"{'family':<8} " + " ".join(f"{c:>13}" for c in classes))
    for f, c in s["by_family"].items():
        print(f"{f:<8} " + " ".join(f"{c.get(k, 0):>13}" for k in classes))
    for sig in s["signatures"]:
        print(f"  {sig['count']:>4} × {sig['class']}: {sig['signature']}  (case {sig['first_case']}, "
              f"{sig['family']}; {sig['repro']})")
