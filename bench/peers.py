"""The peers run side by side with launchtui on the same file (docs/peers.md): nsys-ai's
kernel_launch_overhead skill on Nsight exports, HTA's trace analysis on Kineto traces, each from a
scratch venv on a fresh copy of the file."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from measure import DATA, Measure, last_json, run_round_robin, warm_page_cache
from prepare import HTA_VENV, NSYSAI_VENV, PEER_WORK


def dir_state(d: Path) -> dict:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in d.iterdir()} if d.exists() else {}

NSYSAI_KEYS = ("kernel_name", "device_id", "launch_count", "total_api_ms", "avg_api_us", "max_api_us",
               "queue_count", "total_queue_ms", "avg_queue_us", "total_kernel_ms", "avg_kernel_us",
               "span_start_ns", "span_end_ns")


def compare_rows(nsysai_rows, lt_doc) -> dict:
    """nsys-ai's device-0 rows vs launchtui's device-0 small-kernel rows, on nsys-ai's 13 keys."""
    if not isinstance(nsysai_rows, list) or not isinstance(lt_doc, dict):
        return {"comparable": False}
    ours = {r["kernel_name"]: r for r in lt_doc.get("small_kernels", []) if r.get("device_id") == 0}
    theirs = {r.get("kernel_name"): r for r in nsysai_rows if isinstance(r, dict) and "kernel_name" in r}
    diffs = []
    for name in sorted(set(ours) | set(theirs)):
        a, b = ours.get(name), theirs.get(name)
        if a is None or b is None:
            diffs.append({"kernel_name": name, "only_in": "launchtui" if b is None else "nsys-ai"})
            continue
        for k in NSYSAI_KEYS:
            if a.get(k) != b.get(k):
                diffs.append({"kernel_name": name, "key": k, "launchtui": a.get(k), "nsys-ai": b.get(k)})
    order_ours = [r["kernel_name"] for r in lt_doc.get("small_kernels", []) if r.get("device_id") == 0]
    order_theirs = [r.get("kernel_name") for r in nsysai_rows if isinstance(r, dict)]
    return {"comparable": True, "rows_launchtui": len(ours), "rows_nsys_ai": len(theirs),
            "equal": not diffs and order_ours == order_theirs, "same_order": order_ours == order_theirs,
            "differences": diffs[:20], "n_differences": len(diffs)}


def bench_nsysai(label: str, path: Path, lt_doc, a, peer_state) -> dict:
    if peer_state.get("nsysai_error"):
        return {"status": f"skipped: {peer_state['nsysai_error']}"}
    work = PEER_WORK / f"nsysai_{label}"
    copy = work / path.name
    env = {"NSYS_AI_DUCKDB_THREADS": "1", "HOME": str(NSYSAI_VENV / "home")}
    before: dict = {}

    def fresh_copy():
        nonlocal before
        # nsys-ai writes indexes / caches beside the file it reads: give every run a fresh copy
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        shutil.copy2(path, copy)
        warm_page_cache(copy)
        before = dir_state(work)

    argv = [NSYSAI_VENV / "bin" / "nsys-ai", "skill", "run", "kernel_launch_overhead", copy, "--format", "json",
            "--no-cache"]
    m = Measure("nsys_ai_skill", argv, env, timeout=a.peer_timeout, prepare=fresh_copy, keep_stdout=True,
                check=lambda r: None if isinstance(last_json(r["stdout"]), list) else "no JSON rows on stdout",
                max_repeat=min(a.repeat, 2))
    run_round_robin([m])
    out = m.summary()
    out["status"] = "ok" if out["ok"] else f"skipped: {out['error']}"
    after = dir_state(work)
    out["wrote_beside_file"] = sorted(k for k in after if k not in before or after[k] != before[k])
    rows = last_json(m.runs[0]["stdout"]) if m.runs and not m.failed else None
    if rows is not None:
        (DATA / "out" / f"nsysai_{label}.json").write_text(json.dumps(rows, indent=1))
        out["rows_vs_launchtui_device0"] = compare_rows(rows, lt_doc)
    shutil.rmtree(work, ignore_errors=True)
    return out


def bench_hta(label: str, path: Path, a, peer_state) -> dict:
    if peer_state.get("hta_error"):
        return {"status": f"skipped: {peer_state['hta_error']}"}
    work = PEER_WORK / f"hta_{label}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    shutil.copy2(path, work / path.name)   # HTA reads every trace in the directory: one file only
    argv = [HTA_VENV / "bin" / "python", "bench/peer_hta.py", work]
    m = Measure("hta_load_summary", argv, timeout=a.peer_timeout, keep_stdout=True,
                check=lambda r: None if isinstance(last_json(r["stdout"]), dict) else "no JSON on stdout",
                max_repeat=min(a.repeat, 2))
    run_round_robin([m])
    out = m.summary()
    out["status"] = "ok" if out["ok"] else f"skipped: {out['error']}"
    doc = last_json(m.runs[0]["stdout"]) if m.runs and not m.failed else None
    if isinstance(doc, dict):
        out["inner"] = doc
    shutil.rmtree(work, ignore_errors=True)
    return out
