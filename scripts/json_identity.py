#!/usr/bin/env python3
"""Byte-identity check of every JSON output across a code change (issue 15: "moves code, changes no results").

Runs `info --json`, `report --json` (defaults and a few option sets) and `export` on every shared sample
(../shared/samples: nsys *.sqlite, kineto *) and on fixtures/demo, once with `--no-cache` and once warm
from the cache (filled by a first run), and writes one file per case: stdout, exit status and stderr.

    python scripts/json_identity.py run OUTDIR [--plan PLAN]      # this tree's code
    python scripts/json_identity.py baseline REV OUTDIR --plan P  # REV's code, in a temporary worktree
    python scripts/json_identity.py diff BASE_DIR NEW_DIR         # case by case
    python scripts/json_identity.py check [REV]                   # plan + baseline (kept) + run + diff
    ... diff|check --allow launches.graph_launched_ops           # a deliberate change: counted apart

`--allow KEY` (repeatable) names a deliberate change: a case whose only differences are at keys ending
in KEY (dotted, e.g. `launches.graph_launched_ops`) counts as `allowed`, not `different`.

The plan (which files, which options, e.g. an NVTX name present in each trace and a --trim inside its
window) is computed once with this tree's code and reused for the baseline, so both sides run the same
command lines. The baseline runs REV's code with the same Python environment (PYTHONPATH points at the
temporary worktree). `check` exits 1 when any case differs.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "samples"
STATE = Path(os.environ.get("JSON_IDENTITY_DIR", Path(tempfile.gettempdir()) / "launchtui-json-identity"))


def sample_files() -> list[Path]:
    files = []
    if (SHARED / "nsys").is_dir():
        files += sorted((SHARED / "nsys").glob("*.sqlite"))
    if (SHARED / "kineto").is_dir():
        files += sorted(p for p in (SHARED / "kineto").iterdir() if p.is_file() and p.suffix != ".md")
    files += [ROOT / "fixtures" / "demo" / "demo.sqlite", ROOT / "fixtures" / "demo" / "demo.json.gz"]
    return files


# ---- plan: the command lines ----------------------------------------------------------------------------
def file_options(path: Path) -> dict:
    """Per-file parameters from this tree's code: an NVTX name present, a trim window inside the GPU window."""
    from collections import Counter

    from launchtui.trace.load import open_trace
    try:
        trace = open_trace(path, use_cache=False)
    except Exception as e:  # an unreadable sample still gets its (error) cases
        return {"error": f"{type(e).__name__}: {e}"}
    out: dict = {}
    rg = trace.ranges
    if len(rg):
        counts = Counter(rg.text.tolist())
        text = next((trace.strings[t] for t, _ in counts.most_common() if trace.strings[t].strip()), None)
        if text:
            out["nvtx"] = text
    w = trace.window()
    if w and len(trace.ops):
        # around the op that starts in the middle, so the window holds at least that op
        ops = trace.ops
        mid = ops.start.argsort(kind="stable")[len(ops) // 2]
        span = w[1] - w[0]
        t0 = max(w[0], int(ops.start[mid]) - span // 4)
        t1 = min(w[1], int(ops.end[mid]) + span // 4)
        out["trim"] = [repr(t0 / 1e9), repr(t1 / 1e9)]
        present = sorted(int(d) for d in set(ops.device.tolist()) if d >= 0)
        if present and present[0] != 0:
            out["device"] = str(present[0])
    return out


def make_plan() -> dict:
    cases = []
    for path in sample_files():
        opt = file_options(path)
        p = str(path)
        tag = path.parent.name + "__" + path.name
        sets = [("info", ["info", p, "--json"]),
                ("report", ["report", p, "--json"]),
                ("report-names-full", ["report", p, "--json", "--names", "full"]),
                ("report-device0", ["report", p, "--json", "--device", "0"]),
                ("report-all-rows", ["report", p, "--json", "--min-launches", "1", "--max-avg-us", "1e12",
                                     "--limit", "0"]),
                ("export", ["export", p])]
        if "device" in opt:
            sets.append(("report-device", ["report", p, "--json", "--device", opt["device"]]))
        if "nvtx" in opt:
            sets.append(("report-nvtx", ["report", p, "--json", "--nvtx", opt["nvtx"]]))
        if "trim" in opt:
            sets.append(("report-trim", ["report", p, "--json", "--trim", *opt["trim"]]))
            sets.append(("export-trim", ["export", p, "--trim", *opt["trim"]]))
        if "nvtx" in opt and "trim" in opt:
            sets.append(("report-nvtx-trim", ["report", p, "--json", "--nvtx", opt["nvtx"], "--trim", *opt["trim"]]))
        for name, argv in sets:
            cases.append({"id": f"{tag}__{name}", "argv": argv})
    return {"cases": cases}


# ---- run: execute every case in this process ------------------------------------------------------------
def run_cases(plan: dict, out: Path) -> None:
    """Each case with --no-cache, then fill the cache once per file, then each case warm."""
    out.mkdir(parents=True, exist_ok=True)
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="json-identity-cache-")
    from launchtui import cli
    (out / "_code.txt").write_text(str(Path(cli.__file__).resolve()) + "\n")
    filled = set()
    for mode in ("nocache", "warm"):
        for case in plan["cases"]:
            argv = list(case["argv"])
            if mode == "nocache":
                argv.append("--no-cache")
            elif argv[1] not in filled:
                filled.add(argv[1])
                _invoke(cli, ["report", argv[1], "--json"])     # fills the cache entry
            rc, stdout, stderr = _invoke(cli, argv)
            doc = {"argv": argv, "rc": rc, "stderr": stderr, "stdout": stdout}
            (out / f"{case['id']}__{mode}.json").write_text(json.dumps(doc, ensure_ascii=False))


def _invoke(cli, argv):
    so, se = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        try:
            rc = cli.main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 2
        except Exception:
            rc = "crash"
            se.write(traceback.format_exc())
    return rc, so.getvalue(), se.getvalue()


# ---- baseline: REV's code in a temporary worktree -------------------------------------------------------
def rev_id(rev: str) -> str:
    return subprocess.check_output(["git", "-C", str(ROOT), "rev-parse", rev], text=True).strip()


def plan_hash(plan_path: Path) -> str:
    return hashlib.sha256(plan_path.read_bytes()).hexdigest()[:12]


def baseline(rev: str, out: Path, plan_path: Path) -> None:
    sha = rev_id(rev)
    tmp = Path(tempfile.mkdtemp(prefix="json-identity-wt-"))
    wt = tmp / "wt"
    subprocess.check_call(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(wt), sha])
    try:
        # This script runs from the current tree; the launchtui it imports comes from the worktree.
        env = dict(os.environ, PYTHONPATH=str(wt))
        subprocess.check_call([sys.executable, str(Path(__file__).resolve()), "_run", str(out), str(plan_path)],
                              env=env, cwd=str(wt))
        code = (out / "_code.txt").read_text().strip()
        if not code.startswith(str(wt)):
            raise SystemExit(f"baseline imported launchtui from {code}, not from the worktree {wt}")
    finally:
        subprocess.call(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(wt)])


# ---- diff ------------------------------------------------------------------------------------------------
def first_difference(a, b, path="$"):
    """Key path of the first difference between two JSON values (None when equal)."""
    if type(a) is not type(b):
        return f"{path} ({type(a).__name__} vs {type(b).__name__})"
    if isinstance(a, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{path}.{k} (only in {'new' if k not in a else 'base'})"
            d = first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        if list(a) != list(b):
            return f"{path} (key order)"
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None if len(a) == len(b) else f"{path} (length {len(a)} vs {len(b)})"
    return None if a == b else f"{path}: {json.dumps(a)[:80]} vs {json.dumps(b)[:80]}"


def _drop(doc, allow: tuple[str, ...], path: str = ""):
    """`doc` without the keys whose dotted path ends with one of `allow`."""
    if isinstance(doc, dict):
        return {k: _drop(v, allow, f"{path}.{k}") for k, v in doc.items()
                if not any(f"{path}.{k}".endswith("." + a) for a in allow)}
    if isinstance(doc, list):
        return [_drop(v, allow, path) for v in doc]
    return doc


def diff(base: Path, new: Path, verbose: bool = True, allow: tuple[str, ...] = ()) -> dict:
    counts = {"identical": 0, "identical_error_outcome": 0, "allowed": 0, "different": 0, "error": 0}
    names = sorted({p.name for p in base.glob("*.json")} | {p.name for p in new.glob("*.json")})
    for name in names:
        pa, pb = base / name, new / name
        if not pa.exists() or not pb.exists():
            counts["error"] += 1
            print(f"ERROR     {name}: only in {'new' if pb.exists() else 'base'}")
            continue
        a, b = json.loads(pa.read_text()), json.loads(pb.read_text())
        if "crash" in (a["rc"], b["rc"]):
            counts["error"] += 1
            print(f"ERROR     {name}: crashed ({'base' if a['rc'] == 'crash' else 'new'}): "
                  f"{(a['stderr'] if a['rc'] == 'crash' else b['stderr']).strip().splitlines()[-1]}")
            continue
        if a["stdout"] == b["stdout"] and a["rc"] == b["rc"] and a["stderr"] == b["stderr"]:
            counts["identical"] += 1
            if a["rc"] != 0:
                counts["identical_error_outcome"] += 1
            continue
        if allow and a["rc"] == b["rc"] and a["stderr"] == b["stderr"]:
            try:
                if _drop(json.loads(a["stdout"]), allow) == _drop(json.loads(b["stdout"]), allow):
                    counts["allowed"] += 1
                    continue
            except ValueError:
                pass
        counts["different"] += 1
        if a["rc"] != b["rc"] or a["stderr"] != b["stderr"]:
            where = f"rc {a['rc']} vs {b['rc']}; stderr {a['stderr'].strip()[:120]!r} vs {b['stderr'].strip()[:120]!r}"
        else:
            try:
                where = first_difference(json.loads(a["stdout"]), json.loads(b["stdout"])) or "bytes (formatting)"
            except ValueError:
                where = "non-JSON stdout"
        if verbose:
            print(f"DIFFERENT {name}: {where}")
    print(" ".join(f"{k}={v}" for k, v in counts.items()), f"(of {len(names)} cases)")
    return counts


def check(rev: str, allow: tuple[str, ...] = ()) -> int:
    STATE.mkdir(parents=True, exist_ok=True)
    plan_path = STATE / "plan.json"
    if not plan_path.exists():
        plan_path.write_text(json.dumps(make_plan(), indent=1))
    sha = rev_id(rev)
    base = STATE / f"base-{sha[:12]}-{plan_hash(plan_path)}"
    if not (base / "_code.txt").exists():
        print(f"building baseline at {sha[:12]} in {base}", file=sys.stderr)
        baseline(sha, base, plan_path)
    new = Path(tempfile.mkdtemp(prefix="json-identity-new-"))
    subprocess.check_call([sys.executable, str(Path(__file__).resolve()), "_run", str(new), str(plan_path)],
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=str(ROOT))
    print(f"baseline {base}\nnew      {new}")
    c = diff(base, new, allow=allow)
    return 1 if c["different"] or c["error"] else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan"); p.add_argument("out")
    p = sub.add_parser("run"); p.add_argument("out"); p.add_argument("--plan")
    p = sub.add_parser("_run"); p.add_argument("out"); p.add_argument("plan")
    p = sub.add_parser("baseline"); p.add_argument("rev"); p.add_argument("out"); p.add_argument("--plan", required=True)
    p = sub.add_parser("diff"); p.add_argument("base"); p.add_argument("new")
    p.add_argument("--allow", action="append", default=[])
    p = sub.add_parser("check"); p.add_argument("rev", nargs="?", default="main")
    p.add_argument("--allow", action="append", default=[])
    a = ap.parse_args(argv)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    if a.cmd == "plan":
        Path(a.out).write_text(json.dumps(make_plan(), indent=1))
    elif a.cmd in ("run", "_run"):
        sys.path.insert(0, os.environ.get("PYTHONPATH", str(ROOT)).split(os.pathsep)[0])
        plan = json.loads(Path(a.plan).read_text()) if a.plan else make_plan()
        run_cases(plan, Path(a.out))
    elif a.cmd == "baseline":
        baseline(a.rev, Path(a.out), Path(a.plan))
    elif a.cmd == "diff":
        c = diff(Path(a.base), Path(a.new), allow=tuple(a.allow))
        return 1 if c["different"] or c["error"] else 0
    elif a.cmd == "check":
        return check(a.rev, tuple(a.allow))
    return 0


if __name__ == "__main__":
    sys.exit(main())
