#!/usr/bin/env python3
"""Seeded mutation fuzzer for launchtui's promise on bad input (issue 12).

Every case mutates one seed trace (real samples under ../shared/samples, or traces from the
`fixtures/` generator) or the command line around it, then runs `info`, `report --json` and/or
`export` as subprocesses with a timeout, and classes each run:

  ok            exit 0, clean stdout (strict JSON where JSON is asked for), quiet stderr
  clean-error   exit 2, stdout empty, exactly one stderr line `launchtui: ...`
  defect        traceback, hang, other exit status, invalid JSON, NaN/Infinity in JSON, noisy
                stderr, more than one line on error, input modified, file written beside the input

Families: bytes (flips, truncation), sqlite (schema and value surprises, WAL / hot journal),
kineto (wrong types, huge numbers, deep nesting, surrogates), cli (odd option values, `-o`
targets, env limits), special (FIFO, directory, device node, symlink, odd names, cache entries
replaced, fake nsys).

A case is reproducible from (seed, index) alone: `scripts/fuzz.py --seed S --case N --keep`.
`--cover` runs one case per family and mutation kind instead of random draws (the CI campaign,
tests/test_fuzz.py); the random campaign (`--cases N` or `--minutes M`) is the long one.
The summary (summary.json + a printed table) lists defect signatures, deduplicated, each with
its first case's command line and saved input under OUT/repro/.

The parts, beside this file: fuzz_kinds.py (the families and the kinds each draws from),
fuzz_mutations.py (bytes, SQLite and Kineto mutations), fuzz_options.py (odd options and `-o`
targets), fuzz_special_files.py (special inputs, damaged cache entries, fake nsys),
fuzz_classify.py (how a run is classed) and fuzz_summary.py (the summary and its merge).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from fuzz_classify import classify, fingerprint
from fuzz_kinds import FAMILIES, cover_plan
from fuzz_mutations import mut_bytes, mut_kineto, mut_sqlite
from fuzz_options import odd_options
from fuzz_special_files import damage_cache, special_input
from fuzz_summary import OK_CLASSES, merge_summaries, print_summary, summarize

# re-exported: tests/test_fuzz.py reaches them through this module
from fuzz_mutations import _side_file_state  # noqa: F401
from fuzz_special_files import FAKE_NSYS_GARBAGE, FAKE_NSYS_HANG  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
SHARED_SAMPLES = Path(os.environ.get("LAUNCHTUI_SHARED") or ROOT.parent / "shared") / "samples"
SMALL_BYTES = 3_000_000  # seeds above this are used only by the byte family with --big


# --- seeds --------------------------------------------------------------------------------
def collect_seeds(work: Path, samples: Path | None, big: bool, max_bytes: int = SMALL_BYTES) -> dict[str, list[Path]]:
    """{'sqlite': [...], 'kineto': [...], 'rep': [...]} from the generator and the shared samples."""
    sys.path.insert(0, str(ROOT))
    from fixtures import synth
    gen = work / "generated"
    gen.mkdir(parents=True, exist_ok=True)
    cfg = synth.default_config(iterations=1, layers=2, params=8, burst_launches=60, eval_steps=1)
    paths = synth.make_trace_files(gen, variants="all", cfg=cfg)
    seeds: dict[str, list[Path]] = {"sqlite": [], "kineto": [], "rep": []}
    for (fmt, _), p in sorted(paths.items()):
        seeds["sqlite" if fmt == "nsys" else "kineto"].append(Path(p))
    if samples and samples.is_dir():
        for p in sorted(samples.rglob("*")):
            if not p.is_file() or p.name.endswith(".md"):
                continue
            if p.suffix == ".nsys-rep":
                seeds["rep"].append(p)
            elif p.stat().st_size <= max_bytes or big:
                seeds["sqlite" if p.suffix == ".sqlite" else "kineto"].append(p)
    return seeds


# --- cases and runs -----------------------------------------------------------------------
class Case:
    """Case `index` of campaign `seed`; `family` and `kind` fixed by the cover plan, else drawn."""
    def __init__(self, seed: int, index: int, family: str | None = None, kind: str | None = None):
        self.seed, self.index, self.family, self.kind = seed, index, family, kind
        self.rng = random.Random(f"launchtui-fuzz:{seed}:{index}")


def build_case(case: Case, seeds: dict, families: tuple, case_dir: Path, max_runs: int = 3) -> dict:
    rng, kind = case.rng, case.kind
    fam = case.family or rng.choice(families)
    d = case_dir / "in"
    d.mkdir(parents=True)
    env, pre, opts, opts_env = {}, None, [], {}
    if fam == "bytes":
        pool = seeds["sqlite"] + seeds["kineto"]
        if kind == "flip-inner":  # a flip inside the JSON needs a gzip seed
            pool = [p for p in pool if p.name.endswith(".gz")] or pool
        src = rng.choice(pool)
        path, desc = mut_bytes(rng, src, d, kind)
    elif fam == "sqlite":
        src = rng.choice(seeds["sqlite"])
        path, desc = mut_sqlite(rng, src, d, kind)
    elif fam == "kineto":
        src = rng.choice(seeds["kineto"])
        path, desc = mut_kineto(rng, src, d, kind)
    elif fam == "cli":
        src = rng.choice(seeds["sqlite"] + seeds["kineto"])
        path = d / src.name
        shutil.copyfile(src, path)
        desc = "odd options"
    else:
        path, desc, env, pre = special_input(rng, seeds, d, case_dir, kind)
        src = None
    cmds = []
    # a cli kind is an option: a covering case runs a command that takes it (info takes none)
    runs = ["report", "export"] if fam == "cli" and kind else ["info", "report", "export"]
    for cmd in rng.sample(runs, min(max_runs, len(runs), rng.choice([1, 2, 2, 3]))):
        args = [cmd, str(path)]
        if cmd == "info":
            args.append("--json") if rng.random() < 0.6 else None
        elif cmd == "report":
            args.append("--json") if rng.random() < 0.7 else None
        if fam == "cli" and cmd != "info":
            o, e = odd_options(rng, cmd, case_dir, kind)
            args += o
            opts_env.update(e)
        elif fam == "cli":
            _, e = odd_options(rng, cmd, case_dir, kind)
            opts_env.update(e)
        cmds.append(args)
    return {"family": fam, "kind": kind, "families": ",".join(families), "seed_file": str(src) if src else None,
            "input": str(path), "desc": desc, "env": {**env, **opts_env}, "pre": pre, "cmds": cmds, "input_dir": str(d)}


_RUNNERS = threading.local()   # --runner fork: one preloaded server per campaign thread
_OPEN_RUNNERS: list = []
RUNNER = {"kind": "spawn"}     # main() sets it from --runner


def run_one(args: list[str], env: dict, cwd: Path, timeout: float):
    if RUNNER["kind"] == "fork":
        runner = getattr(_RUNNERS, "runner", None)
        if runner is None:
            from fork_runner import ForkRunner
            runner = _RUNNERS.runner = ForkRunner()
            _OPEN_RUNNERS.append(runner)
        return runner.run(args, env, cwd, timeout)
    try:
        p = subprocess.run([sys.executable, "-m", "launchtui"] + args, capture_output=True, cwd=cwd, env=env,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), False
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b"").decode("utf-8", "replace"), (e.stderr or b"").decode("utf-8", "replace"), True


def execute(case: Case, seeds: dict, families: tuple, work: Path, timeout: float, max_runs: int = 3) -> dict:
    case_dir = work / f"case-{case.index}"
    if case_dir.exists():
        shutil.rmtree(case_dir)
    case_dir.mkdir(parents=True)
    spec = build_case(case, seeds, families, case_dir, max_runs)
    cache = case_dir / "cache"
    cwd = case_dir / "cwd"
    cwd.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(cache), **spec["env"]}
    env.pop("COLUMNS", None)
    if spec["pre"]:
        run_one(["info", spec["input"]], {**env, "LAUNCHTUI_CACHE_MAX_MB": "2048"}, cwd, timeout)
        run_one(["report", spec["input"]], {**env, "LAUNCHTUI_CACHE_MAX_MB": "2048"}, cwd, timeout)
        damage_cache(spec["pre"], cache)
    before = fingerprint(Path(spec["input_dir"]))
    runs = []
    for args in spec["cmds"]:
        t0 = time.monotonic()
        rc, out, err, hung = run_one(args, env, cwd, timeout)
        to_file = "-o" in args
        wants_json = args[0] == "export" or "--json" in args
        cls, sig = classify(rc, out, err, hung, wants_json, to_file)
        runs.append({"args": args, "rc": rc, "class": cls, "sig": sig, "s": round(time.monotonic() - t0, 2),
                     "stderr": err[-2000:]})
    after = fingerprint(Path(spec["input_dir"]))
    if spec["pre"] == "stale-tmp":
        stale = cache / "launchtui" / "models" / ".tmp-stale123.model"
        if stale.exists():
            runs.append({"args": ["<cache>"], "rc": None, "class": "stale-temporary-kept",
                         "sig": "stale .tmp-* not swept", "s": 0, "stderr": ""})
    changed = [p for p in before if p in after and before[p] != after[p]]
    added = [p for p in after if p not in before and not p.endswith(("-shm",))]
    added += [p for p in after if p not in before and p.endswith("-shm")]
    if changed:
        runs.append({"args": ["<input>"], "rc": None, "class": "input-modified", "sig": "input modified",
                     "s": 0, "stderr": repr(changed[:3])})
    if added:
        runs.append({"args": ["<input>"], "rc": None, "class": "written-beside-input",
                     "sig": "file written beside the input", "s": 0, "stderr": repr(added[:3])})
    return {"index": case.index, **spec, "runs": runs}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=200, help="number of cases (default 200)")
    ap.add_argument("--minutes", type=float, help="run until this many minutes have passed (overrides --cases)")
    ap.add_argument("--case", type=int, help="run only this case index (a reproducer)")
    ap.add_argument("--cover", action="store_true", help="one case per family and mutation kind (the CI "
                    "campaign: the kinds that find defect classes, without the random repeats); ignores --cases")
    ap.add_argument("--start", type=int, default=0, help="first case index (split one campaign over processes)")
    ap.add_argument("--merge", nargs="+", type=Path, metavar="SUMMARY", help="add up summary.json files of one "
                    "campaign run in parts, print the total and exit")
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma-separated subset of " + ",".join(FAMILIES))
    ap.add_argument("--samples", type=Path, default=SHARED_SAMPLES, help="real samples (default ../shared/samples, or $LAUNCHTUI_SHARED/samples)")
    ap.add_argument("--no-samples", action="store_true", help="generated traces only")
    ap.add_argument("--big", action="store_true", help="also mutate samples over 3 MB (slow)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds before a run counts as a hang (30)")
    ap.add_argument("--jobs", type=int, default=1, help="cases run in parallel (1)")
    ap.add_argument("--runner", choices=("fork", "spawn"), default="fork",
                    help="fork: each run forked from a preloaded interpreter (scripts/fork_runner.py); "
                         "spawn: a new `python -m launchtui` process per run (fork)")
    ap.add_argument("--runs-per-case", type=int, default=3, help="at most this many commands per case (3)")
    ap.add_argument("--max-seed-bytes", type=int, default=SMALL_BYTES, help="largest shared sample used (3 MB)")
    ap.add_argument("--out", type=Path, help="summary and reproducers (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep every case's files")
    ap.add_argument("--quiet", action="store_true")
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    a = ap.parse_args(argv)
    RUNNER["kind"] = a.runner
    if a.merge:
        try:
            total = merge_summaries([json.loads(p.read_text()) for p in a.merge])
        except (OSError, ValueError, KeyError, TypeError) as e:   # a missing, foreign or mismatched summary
            ap.error(f"--merge: {e}")
        print_summary(total)
        return 1 if total["defect_runs"] else 0
    families = tuple(f for f in a.families.split(",") if f)
    if not set(families) <= set(FAMILIES):
        ap.error(f"--families: choose from {', '.join(FAMILIES)}")
    plan = cover_plan(families) if a.cover else []
    if a.case is not None and a.cover and not 0 <= a.case < len(plan):
        ap.error(f"--case: a --cover campaign has cases 0-{len(plan) - 1}")
    out = a.out or Path(tempfile.mkdtemp(prefix=f"launchtui-fuzz-{a.seed}-"))
    out.mkdir(parents=True, exist_ok=True)
    seeds = collect_seeds(out / "seeds", None if a.no_samples else a.samples, a.big, a.max_seed_bytes)
    t0 = time.monotonic()
    results = run_campaign(a, plan, families, seeds, out / "cases", t0)
    for runner in _OPEN_RUNNERS:
        runner.close()
    _OPEN_RUNNERS.clear()
    results.sort(key=lambda r: r["index"])
    summary = summarize(results, out, a.seed, time.monotonic() - t0)
    summary["out"] = str(out)
    print_summary(summary)
    print(f"summary: {out / 'summary.json'}")
    return 1 if summary["defect_runs"] else 0


def run_campaign(a: argparse.Namespace, plan: list, families: tuple, seeds: dict, work: Path,
                 t0: float) -> list[dict]:
    """Run the cases `a` asks for, at most a.jobs at a time, and return their results in the order
    they finish. --case and --cover name their cases; the random campaign runs a.cases cases from
    a.start, or until a.minutes have passed since t0. SIGTERM/Ctrl-C stop it early: the results then
    hold the cases finished so far."""
    deadline = t0 + a.minutes * 60 if a.minutes else None
    indices = [a.case] if a.case is not None else list(range(len(plan))) if a.cover else None

    def job(i):
        r = execute(Case(a.seed, i, *(plan[i] if plan else ())), seeds, families, work, a.timeout, a.runs_per_case)
        if not a.keep:
            shutil.rmtree(work / f"case-{i}", ignore_errors=True)
        return r

    results = []
    # SIGTERM/Ctrl-C stop the campaign early: the summary then covers the finished cases
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    pool = ThreadPoolExecutor(max_workers=max(1, a.jobs))
    todo = iter(indices) if indices is not None else (i for i in range(a.start, 10**9))

    def more(i) -> bool:
        return indices is not None or (time.monotonic() < deadline if deadline else a.start + i < a.cases)
    try:
        pending, submitted = set(), 0
        while True:
            while len(pending) < max(1, a.jobs) and more(submitted):
                k = next(todo, None)
                if k is None:
                    break
                pending.add(pool.submit(job, k))
                submitted += 1
            if not pending:
                break
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:  # a slow case does not hold the others back
                _record_case(f.result(), results, t0, a.quiet)
    except KeyboardInterrupt:
        print(f"stopped early: {len(results)} cases finished", flush=True)
    pool.shutdown(wait=False, cancel_futures=True)
    return results


def _record_case(done: dict, results: list[dict], t0: float, quiet: bool) -> None:
    """Add a finished case to `results`; print progress every 100 cases and, unless quiet, the
    case's defects."""
    results.append(done)
    if len(results) % 100 == 0:
        print(f"{len(results)} cases done in {time.monotonic() - t0:.0f} s", flush=True)
    bad = [r for r in done["runs"] if r["class"] not in OK_CLASSES]
    if bad and not quiet:
        print(f"case {done['index']} {done['family']} ({done['desc']}): "
              + "; ".join(f"{r['class']} {r['sig']}" for r in bad), flush=True)


if __name__ == "__main__":
    sys.exit(main())

