"""The +20 % gate as a same-run A/B: the previous pass's commit and this tree, cold `report` at 1M
in interleaved fresh processes, each tree byte-compiled first.

Why not the ratio of two runs' ratios (issue24.gate's fallback): on this VM the C scan and launchtui
do not slow alike when the host does. Code of equal speed read 2.08x the C scan in one run and
2.71x in another (bench/MISSED.md), so a ratio across runs can fail, or pass, by the minute it was
taken. Two trees timed in turn, in one stretch, see the same host.
"""
from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
C_SOURCES = ["launchtui/trace/_sqlite_scan.c", "setup.py"]


def _git(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def baseline_commit(previous: dict | None) -> str | None:
    """The previous pass's commit (its `machine.git`, without a note of uncommitted changes), when
    this checkout has it."""
    rev = ((previous or {}).get("machine") or {}).get("git") or ""
    rev = rev.split()[0] if rev.strip() else ""
    if not rev or _git("cat-file", "-e", f"{rev}^{{commit}}").returncode != 0:
        return None
    return rev


def _prepare(rev: str, where: Path, py: str) -> str | None:
    """A worktree of `rev` at `where` with the C reader as this tree's (copied when its sources are
    those of this working tree, which built it; else built there) and byte-compiled (bench/run.py
    compiles this tree before it measures); None when ready, else why not."""
    r = _git("worktree", "add", "--detach", str(where), rev)
    if r.returncode != 0:
        return f"git worktree add failed: {r.stderr.strip()[-200:]}"
    changed = _git("diff", "--quiet", rev, "--", *C_SOURCES).returncode != 0   # rev against the working tree
    if changed:
        b = subprocess.run([py, "setup.py", "-q", "build_ext", "--inplace"], cwd=where, capture_output=True, text=True)
        if b.returncode != 0:
            return f"building {rev}'s C reader failed: {b.stderr.strip()[-200:]}"
    else:
        for so in (ROOT / "launchtui" / "trace").glob("_sqlite_scan*.so"):
            shutil.copy2(so, where / "launchtui" / "trace" / so.name)
    # without byte-code, every run of the baseline would compile the package from source (~0.25 s)
    subprocess.run([py, "-m", "compileall", "-q", str(where / "launchtui")], capture_output=True)
    return None


def measure(previous: dict | None, trace: Path, run_child, rounds: int = 7, py: str = sys.executable) -> dict:
    """Cold `report --json --no-cache` of `trace` by the previous pass's commit and by this tree,
    `rounds` pairs, the order alternating each round; `run_child` is bench/run.py's (wall and user
    time of one fresh process). The gate's figure: median wall of this tree / median wall of the
    baseline."""
    rev = baseline_commit(previous)
    if rev is None:
        return {"status": "not measured: the previous pass names no commit this checkout has"}
    tmp = Path(tempfile.mkdtemp(prefix="launchtui-ab-gate-"))
    tree = tmp / "baseline"
    try:
        why = _prepare(rev, tree, py)
        if why:
            return {"status": f"not measured: {why}", "baseline": rev}
        sides = {"baseline": tree, "this tree": ROOT}
        walls: dict[str, list[float]] = {k: [] for k in sides}
        users: dict[str, list[float]] = {k: [] for k in sides}
        argv = [py, "-m", "launchtui", "report", str(trace), "--json", "--no-cache"]
        for i in range(rounds):
            order = list(sides) if i % 2 == 0 else list(reversed(sides))
            for side in order:
                r = run_child(argv, {"PYTHONPATH": str(sides[side]), "XDG_CACHE_HOME": str(tmp / "cache")},
                              timeout=600, cwd=sides[side], keep_stdout=False)
                if r["rc"] != 0:
                    return {"status": f"not measured: {side} exited {r['rc']}: {r['stderr_tail'][-200:]}",
                            "baseline": rev}
                walls[side].append(round(r["wall_s"], 3))
                users[side].append(round(r["user_s"], 3))
        med = {k: statistics.median(v) for k, v in walls.items()}
        return {"status": "ok", "baseline": rev, "rounds": rounds, "wall_s": walls, "user_s": users,
                "median_wall_s": med, "ratio": round(med["this tree"] / med["baseline"], 3)}
    finally:
        _git("worktree", "remove", "--force", str(tree))
        shutil.rmtree(tmp, ignore_errors=True)
