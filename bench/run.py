#!/usr/bin/env python
"""launchtui benchmark suite: one command, fresh processes, ratios taken in the same run.

    python bench/run.py                      # full run -> bench/RESULTS.md, bench/results.json
    python bench/run.py --quick --skip-peers # 200k only: the smoke check
    python bench/run.py --sizes 200k 1m --skip-tui

See bench/README.md for what is measured and how. The parts: measure.py (fresh-process runs),
prepare.py (data, peers' venvs, machine facts), per_file.py (one file's measurements), peers.py,
derived.py (targets, growth), results_markdown.py (RESULTS.md); issue24.py and ab_gate.py (issue 24's rows
and gate).
"""
from __future__ import annotations

import argparse
import compileall
import datetime as _dt
import json
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

import ab_gate     # bench/ is the script's directory, first on sys.path
import issue24
from derived import growth, targets
from measure import BENCH, DATA, PY, log, rel, run_child
from per_file import bench_file
from prepare import (HTA_VENV, NSYSAI_VENV, TUI_SCRIPT, ensure_data, ensure_hta, ensure_nsysai, machine_info,
                     source_hash, venv_versions)
from results_markdown import write_markdown

DEFAULT_SIZES = {"nsys": ["200k", "1m", "5m", "20m"], "kineto": ["200k", "1m", "2m"]}


def write_results(res: dict, previous: dict | None, previous_name: str, outdir: Path) -> tuple[bool, str]:
    """The tables derived from a run's measurements, then results.json and RESULTS.md in `outdir`:
    (gate passed, its line)."""
    res["growth"] = growth(res)
    res["targets"] = targets(res)
    res["issue24"] = issue24.rows(res, previous)
    gate_ok, gate_line = issue24.gate(res, previous)
    res["gate"] = {"passed": gate_ok, "line": gate_line, "previous": previous_name}
    (outdir / "results.json").write_text(json.dumps(res, indent=1, default=str))
    write_markdown(res, outdir / "RESULTS.md")
    with open(outdir / "RESULTS.md", "a") as f:
        f.write(issue24.markdown(res, previous, rel(previous_name)))
    return gate_ok, gate_line


def render(stored: Path, previous: dict | None, outdir: Path) -> int:
    """RESULTS.md and results.json again from a stored run, its measurements untouched: for a change
    to the derived tables, shown on the run that was measured. The previous pass keeps its name."""
    res = json.loads(stored.read_text())
    name = (res.get("gate") or {}).get("previous") or str(stored)
    ok, line = write_results(res, previous, name, outdir)
    log(f"rendered {rel(stored)} -> {rel(outdir / 'RESULTS.md')}; " + line)
    return 0 if ok else 1


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="launchtui benchmark suite")
    p.add_argument("--quick", action="store_true", help="200k only (smoke run)")
    p.add_argument("--sizes", nargs="+", help="size labels for both formats, e.g. 200k 1m (default: nsys 200k 1m 5m, "
                                              "kineto 200k 1m 2m)")
    p.add_argument("--formats", nargs="+", choices=("nsys", "kineto"), default=["nsys", "kineto"])
    p.add_argument("--skip-peers", action="store_true")
    p.add_argument("--skip-tui", action="store_true")
    p.add_argument("--repeat", type=int, default=3, help="most repeats of a quick (< 10 s) measure; best-of is reported")
    p.add_argument("--peer-timeout", type=float, default=600, help="seconds before a peer run is skipped (600)")
    p.add_argument("--tui-timeout", type=float, default=180, help="seconds per TUI latency run (180); one retry")
    p.add_argument("--profile-sizes", nargs="*", default=["1m", "5m"], help="sizes to cProfile (default 1m 5m)")
    p.add_argument("--regen", action="store_true", help="regenerate the cached data")
    p.add_argument("--gate-rounds", type=int, default=7,
                   help="interleaved pairs of the +20 %% gate's A/B against the previous pass's commit (7; 0: "
                        "judge by the ratio of the two runs' ratios, which moves with the host)")
    p.add_argument("--previous", default=str(BENCH / "results.json"),
                   help="the previous pass's results.json: issue 24's targets beside it, and the +20 %% gate")
    p.add_argument("--out", help="where RESULTS.md / results.json go (default: bench/ for a full run, "
                                 "bench/data/partial/ otherwise, so a smoke run never overwrites the full results)")
    p.add_argument("--render", metavar="RESULTS_JSON",
                   help="measure nothing: write RESULTS.md again from this stored results.json (into --out, "
                        "default its folder), beside --previous")
    a = p.parse_args(argv)
    a.repeat = max(1, a.repeat)
    return a


def _start(argv, a, compiled: bool) -> dict:
    """The run's record before any measurement: its command, machine and notes."""
    given = argv if argv is not None else sys.argv[1:]
    res: dict = {"command": "python bench/run.py" + (" " + shlex.join(given) if given else ""),
                 "started": _dt.datetime.now().isoformat(timespec="seconds"), "loadavg_start": os.getloadavg(),
                 "machine": machine_info(), "files": {}, "notes": [], "source_hash_start": source_hash(),
                 "byte_compiled": bool(compiled)}
    if not shutil.which("sqlite3"):
        res["notes"].append("the sqlite3 shell is not installed: the C-level floor is missing")
    if not TUI_SCRIPT.exists() and not a.skip_tui:
        res["notes"].append("scripts/tui_latency.py did not exist at run time: TUI rows are pending")
    return res


def _prepare_peers(a, res: dict) -> dict:
    """The peers' venvs set up (unless --skip-peers) and their versions noted in `res`: {peer: error
    or None}."""
    peer_state: dict = {}
    if a.skip_peers:
        return peer_state
    if "nsys" in a.formats:
        peer_state["nsysai_error"] = ensure_nsysai()
    if "kineto" in a.formats:
        peer_state["hta_error"] = ensure_hta()
    res["peer_versions"] = {
        "nsys-ai venv": venv_versions(NSYSAI_VENV / "bin" / "python", ["nsys-ai", "duckdb", "duckdb-ext-sqlite"]),
        "HTA venv": venv_versions(HTA_VENV / "bin" / "python", ["HolisticTraceAnalysis", "pandas", "numpy"])}
    return peer_state


def main(argv=None) -> int:
    a = parse_args(argv)
    previous = issue24.load_previous(Path(a.previous))   # read before a full run overwrites it
    if a.render:
        return render(Path(a.render), previous, Path(a.out) if a.out else Path(a.render).parent)
    full = not (a.quick or a.sizes or a.skip_peers or a.skip_tui or set(a.formats) != {"nsys", "kineto"})
    outdir = Path(a.out) if a.out else (BENCH if full else DATA / "partial")
    outdir.mkdir(parents=True, exist_ok=True)
    plan = [(fmt, lb.lower()) for fmt in a.formats for lb in (["200k"] if a.quick else (a.sizes or DEFAULT_SIZES[fmt]))]
    # Byte-compile the package first, as `pip install .` does: with PYTHONDONTWRITEBYTECODE set (as on
    # this machine) an editable checkout would otherwise recompile every changed module in every run.
    compiled = compileall.compile_dir(str(BENCH.parent / "launchtui"), quiet=1, workers=1)
    t_start = time.perf_counter()
    res = _start(argv, a, compiled)
    peer_state = _prepare_peers(a, res)
    # generate first (so generation never overlaps a measurement), then measure
    data = {(fmt, label): ensure_data(fmt, label, a.regen) for fmt, label in plan}
    for fmt, label in plan:
        path, gen = data[(fmt, label)]
        res["files"][f"{fmt}_{label}"] = bench_file(fmt, label, path, gen, a, peer_state, res["notes"])
        res["growth"] = growth(res)
        res["targets"] = targets(res)
        (outdir / "results.json").write_text(json.dumps(res, indent=1, default=str))  # partial progress
    if data.get(("nsys", "1m")) and a.gate_rounds > 0 and previous is not None:
        log(f"gate: cold report 1M, the previous pass's commit against this tree, {a.gate_rounds} interleaved pairs")
        res["ab_gate"] = ab_gate.measure(previous, data[("nsys", "1m")][0], run_child, a.gate_rounds, PY)
        log(f"  {res['ab_gate'].get('status')}: median wall {res['ab_gate'].get('median_wall_s')}")
    res["loadavg_end"] = os.getloadavg()
    res["source_hash_end"] = source_hash()
    res["total_s"] = round(time.perf_counter() - t_start, 1)
    gate_ok, gate_line = write_results(res, previous, a.previous, outdir)
    log(f"done in {res['total_s'] / 60:.1f} min -> {rel(outdir / 'RESULTS.md')}, {rel(outdir / 'results.json')}")
    for t in res["targets"]:
        log(f"  {t['status']:<8} {t['target']}: {t['measured']}  {t['detail']}")
    for t in res["issue24"]:
        log(f"  {t['status']:<8} {t['target']}: {t['measured']} (previous pass {t['previous']})  {t['detail']}")
    log(("" if gate_ok else "FAILED: ") + gate_line)
    return 0 if gate_ok else 1

if __name__ == "__main__":
    raise SystemExit(main())
