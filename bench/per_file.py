"""Everything measured on one data file: the floors, launchtui's cold, cache-fill and warm reports,
the in-process stages and profile, the TUI opens, and the peer."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import floors
from measure import (BENCH, DATA, PY, Measure, cmd_str, last_json, log, mb, parse_size, rel, run_child, run_round_robin,
                     warm_page_cache)
from peers import bench_hta, bench_nsysai
from prepare import TUI_SCRIPT, source_hash

# From this many kernels on, a file is "big" (issue 24's 20M): the naive Python fetch and the
# pure-Python reader are left out there (minutes each and tens of GB of row tuples), and its
# events are counted by SQL instead of the fetch.
BIG = 20_000_000


def lt_env(cache: Path) -> dict:
    return {"XDG_CACHE_HOME": rel(cache)}


def bench_file(fmt: str, label: str, path: Path, gen: dict, a, peer_state: dict, res_notes: list) -> dict:
    """Every measurement of one data file, as the run's `files` entry."""
    log(f"== {fmt} {label}: {rel(path)} ({path.stat().st_size / 1e6:.1f} MB)")
    warm_page_cache(path)
    out: dict = {"format": fmt, "label": label, "nominal": parse_size(label), "file": rel(path),
                 "file_bytes": path.stat().st_size, "generator": gen, "loadavg_before": os.getloadavg(),
                 "source_hash_before": source_hash()}
    cache = DATA / "cache" / f"{fmt}_{label}"
    env = lt_env(cache)
    (DATA / "out").mkdir(parents=True, exist_ok=True)
    ms, cold = _measures(fmt, label, path, cache, env, a, out)
    run_round_robin(ms)
    out["runs"] = {m.key: m.summary() for m in ms}
    _count_events(fmt, path, ms, out)
    lt_doc = last_json(cold.runs[0]["stdout"]) if cold.runs and not cold.failed else None
    _in_process(fmt, label, path, env, cache, a, lt_doc, out)
    out["tui"] = _tui(fmt, label, path, env, a, res_notes)
    if a.skip_peers:
        out["peer"] = {"status": "skipped (--skip-peers)"}
    elif fmt == "nsys":
        out["peer"] = bench_nsysai(label, path, lt_doc, a, peer_state)
    else:
        out["peer"] = bench_hta(label, path, a, peer_state)
    out["loadavg_after"] = os.getloadavg()
    out["source_hash_after"] = source_hash()
    if out["source_hash_after"] != out["source_hash_before"]:
        res_notes.append(f"launchtui's sources changed while {fmt} {label} was being measured (another engineer's "
                         "work in progress): its repeats may mix two versions")
        log("  note: launchtui sources changed during this file's measurements")
    return out


def _check_json(r) -> str | None:
    return None if last_json(r["stdout"]) is not None else "no JSON on stdout"


def _measures(fmt: str, label: str, path: Path, cache: Path, env: dict, a, out: dict) -> tuple[list, Measure]:
    """The file's fresh-process measures (floors, launchtui's reports, the numpy yardstick), and the
    cold report among them; notes in `out` what a big file leaves out and the C scan's SQL."""
    def clear_cache():
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True, exist_ok=True)

    report = [PY, "-m", "launchtui", "report", rel(path), "--json"]
    ms: list[Measure] = []
    big = parse_size(label) >= BIG
    if big:
        out["left_out"] = ["py_sqlite_numpy", "launchtui_cold_pyreader"]
    if fmt == "nsys":
        sql = run_child([PY, BENCH / "floors.py", "scan-sql", path])["stdout"].strip()
        out["scan_sql"] = sql
        ms.append(Measure("c_scan", ["sqlite3", "-readonly", rel(path), sql], max_repeat=a.repeat,
                          display=f'sqlite3 -readonly {rel(path)} "$(python bench/floors.py scan-sql {rel(path)})"'))
        if not big:
            ms.append(Measure("py_sqlite_numpy", [PY, "bench/floors.py", "sqlite-numpy", rel(path)],
                              check=_check_json, max_repeat=a.repeat))
    else:
        ms.append(Measure("msgspec_typed", [PY, "bench/floors.py", "msgspec", rel(path)], check=_check_json,
                          max_repeat=a.repeat))
        ms.append(Measure("json_loads", [PY, "bench/floors.py", "json", rel(path)], check=_check_json,
                          max_repeat=a.repeat))
    clear_cache()
    cold = Measure("launchtui_cold", report + ["--no-cache"], env, check=_check_json, keep_stdout=True,
                   max_repeat=a.repeat)
    fill = Measure("launchtui_cache_fill", report, env, prepare=clear_cache, check=_check_json, max_repeat=a.repeat)
    warm = Measure("launchtui_warm", report, env, check=_check_json, max_repeat=a.repeat)
    # the warm target's yardstick: interpreter start-up + numpy's import (issue 11)
    np_import = Measure("import_numpy", [PY, "-c", "import numpy"], max_repeat=a.repeat)
    ms += [cold, fill, warm, np_import]
    if fmt == "nsys" and not big:   # the same cold report on the pure-Python column reader, interleaved
        ms.append(Measure("launchtui_cold_pyreader", report + ["--no-cache"], {**env, "LAUNCHTUI_NATIVE_READER": "0"},
                          check=_check_json, max_repeat=a.repeat))
    return ms, cold


def _count_events(fmt: str, path: Path, ms: list, out: dict) -> None:
    """out["file_events"]: events in the file (the unit of load work): Nsight rows read, Kineto
    traceEvents entries."""
    first = {m.key: last_json(m.runs[0]["stdout"]) for m in ms if m.runs}
    if fmt == "nsys" and isinstance(first.get("py_sqlite_numpy"), dict):
        out["file_events"] = sum(v for k, v in first["py_sqlite_numpy"]["rows"].items() if k != "StringIds")
    elif fmt == "nsys":
        out["file_events"] = sum(v for k, v in floors.row_counts(path).items() if k != "StringIds")
    elif fmt == "kineto" and isinstance(first.get("msgspec_typed"), dict):
        out["file_events"] = first["msgspec_typed"]["events"]


def _inproc(argv: list, env: dict | None = None) -> tuple[dict, object]:
    """(bench/inproc.py's JSON or {"error": its stderr's tail}, the child's run)."""
    r = run_child([PY, "bench/inproc.py", *argv], env, timeout=900 if argv[0] in ("model", "stages", "profile") else 300)
    return (last_json(r["stdout"]) if r["rc"] == 0 else {"error": r["stderr_tail"][-600:]}), r


def _in_process(fmt: str, label: str, path: Path, env: dict, cache: Path, a, lt_doc, out: dict) -> None:
    """The in-process measurements (bench/inproc.py) into `out`: the JSON writer on the cold report's
    document, the warm model open, the cache entry's size, the model, the stages and the profile."""
    outdir = DATA / "out"
    if lt_doc is not None:
        rep = outdir / f"report_{fmt}_{label}.json"
        rep.write_text(json.dumps(lt_doc, indent=1))
        out["json_output"] = _inproc(["dumps", rel(rep)])[0]
    # the warm model open (memory-mapped cache entry + restored index; no result cache), in process
    out["warm_open"] = _inproc(["open", rel(path)], env)[0]
    # the cache entry the warm runs used
    out["cache_entry_mb"] = round(sum(p.stat().st_size for p in cache.rglob("*") if p.is_file()) / 1e6, 1)
    out["model"], r = _inproc(["model", rel(path)])   # in-process model size
    if isinstance(out["model"], dict):
        out["model"]["process_peak_rss_mb"] = mb(r["maxrss_kb"])
    if fmt == "nsys":   # the cold report's stages: peak RSS, minor faults and CPU per stage (issue 11)
        out["stages"], r = _inproc(["stages", rel(path)])
        if isinstance(out["stages"], dict):
            out["stages"]["process_peak_rss_mb"] = mb(r["maxrss_kb"])
    if label in a.profile_sizes:
        prof_txt = outdir / f"profile_{fmt}_{label}.txt"
        out["profile"] = _inproc(["profile", rel(path), rel(prof_txt)])[0]
        if isinstance(out["profile"], dict):
            out["profile"]["listing"] = rel(prof_txt)
        log(f"  profile -> {rel(prof_txt)}")


def _tui(fmt: str, label: str, path: Path, env: dict, a, res_notes: list) -> dict:
    """The TUI opens (scripts/tui_latency.py): cold, first open after `report`, warm reopen."""
    if a.skip_tui:
        return {"status": "skipped (--skip-tui)"}
    if not TUI_SCRIPT.exists():
        return {"status": "pending: scripts/tui_latency.py does not exist yet"}
    big = parse_size(label) >= BIG
    tui: dict = {}
    # first_open: the first TUI open after `report` filled the model cache (it computes the lanes,
    # verdict and table and stores them beside the model); warm: a reopen, which maps them
    for mode, extra in (("cold", ["--no-cache"]), ("first_open", []), ("warm", [])):
        argv = [PY, rel(TUI_SCRIPT), rel(path)] + extra
        # best of N up to 5M, as every quick measure here: one cold open on this VM varies by a
        # fifth between runs of the same code, and a warm reopen by 0.3 s against the 0.1 s its
        # flatness target allows (bench/MISSED.md); the first open after `report` happens once
        runs = 1 if big or mode == "first_open" else (2 if mode == "cold" else max(1, a.repeat))
        r, doc, failures, tries = _tui_open(argv, env, max(a.tui_timeout, 900) if big else a.tui_timeout,
                                            mode, runs)
        if r["rc"] != 0 or not isinstance(doc, dict):
            tui[mode] = {"status": "pending: tui_latency.py failed twice", "failures": failures,
                         "command": cmd_str(argv, env)}
        else:
            doc.update(command=cmd_str(argv, env), process_wall_s=r["wall_s"], peak_rss_mb=mb(r["maxrss_kb"]),
                       status="ok", failed_attempts=failures, runs=len(tries),
                       runs_interactive_s=[t.get("interactive_s") for t in tries])
            if failures:
                res_notes.append(f"{fmt} {label} TUI {mode}: first attempt failed ({failures[0][:160]}); "
                                 "the retry's numbers are shown")
            tui[mode] = doc
        t = tui[mode]
        log(f"  tui_{mode:<18} {r['wall_s']:8.3f} s  {mb(r['maxrss_kb']):8.1f} MB  "
            f"interactive {t.get('interactive_s')} s, key->repaint "
            f"{(t.get('key_to_first_repaint') or {}).get('median_ms')} ms median")
    return tui


def _tui_open(argv: list, env: dict, limit: float, mode: str, runs: int):
    """`runs` successful runs of tui_latency.py, each with one retry (a failed or hung attempt is
    recorded, not hidden); (the run with the least interactive time, its JSON, the failures, every
    successful run's JSON). A run that fails twice ends the series."""
    failures, tries, best = [], [], None
    for _ in range(runs):
        for attempt in range(2):
            r = run_child(argv, env, timeout=limit)
            doc = last_json(r["stdout"])
            if r["rc"] == 0 and isinstance(doc, dict):
                break
            why = f"timed out after {limit:.0f} s" if r["timed_out"] else f"exit {r['rc']}"
            failures.append(f"{why}: {r['stderr_tail'][-300:].strip()}")
            log(f"  tui_{mode} attempt {attempt + 1} failed ({why})")
        if r["rc"] != 0 or not isinstance(doc, dict):
            return (r, doc, failures, tries) if best is None else (*best, failures, tries)
        tries.append(doc)
        if best is None or (doc.get("interactive_s") or 1e9) < (best[1].get("interactive_s") or 1e9):
            best = (r, doc)
    return (*best, failures, tries)
