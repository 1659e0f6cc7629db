"""Fresh-process measurements for the benchmark: a child's wall time and peak RSS (`run_child`), a
command measured best of N (`Measure`) with repeats spread in time (`run_round_robin`), and the
small formatting helpers the tables share."""
from __future__ import annotations

import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
DATA = BENCH / "data"
PY = sys.executable


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_size(label: str) -> int:
    s = label.lower().strip()
    mult = {"k": 1_000, "m": 1_000_000}.get(s[-1:], 1)
    return int(float(s[:-1] if mult > 1 else s) * mult)


def mb(kb: int | None) -> float | None:
    return None if kb is None else round(kb / 1024, 1)


def ratio(a, b, nd=2):
    if a is None or b is None or not b:
        return None
    return round(a / b, nd)


def cmd_str(argv: list[str], env_extra: dict | None = None) -> str:
    """The command as a user would type it from the repository root (this interpreter = `python`)."""
    pre = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in (env_extra or {}).items())
    args = ["python" if str(a) == PY else str(a) for a in argv]
    return (pre + " " if pre else "") + shlex.join(args)


def rel(p: Path | str) -> str:
    try:
        return str(Path(p).resolve().relative_to(ROOT))
    except ValueError:
        return str(p)


class Result(dict):
    """One child-process run: wall_s, maxrss_kb, rc, timed_out, stdout, stderr_tail."""


def run_child(argv: list[str], env_extra: dict | None = None, timeout: float | None = None,
              cwd: Path = ROOT, keep_stdout: bool = True) -> Result:
    """Run argv in a fresh process; wall time from the parent, peak RSS from wait4's rusage.

    os.wait4 returns the rusage of exactly this child (and the grandchildren it waited for), so
    sequential runs do not contaminate each other as getrusage(RUSAGE_CHILDREN) would.
    """
    env = dict(os.environ)
    env.update({k: str(v) for k, v in (env_extra or {}).items()})
    out_f = tempfile.TemporaryFile()
    err_f = tempfile.TemporaryFile()
    timed_out = threading.Event()
    t0 = time.perf_counter()
    p = subprocess.Popen([str(a) for a in argv], stdout=out_f, stderr=err_f, stdin=subprocess.DEVNULL,
                         cwd=str(cwd), env=env, start_new_session=True)

    def _kill():
        timed_out.set()
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout, _kill) if timeout else None
    if timer:
        timer.start()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if timer:
        timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    try:  # leftovers of a killed group
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    out_f.seek(0)
    err_f.seek(0)
    out = out_f.read().decode(errors="replace")
    err = err_f.read().decode(errors="replace")
    out_f.close()
    err_f.close()
    r = Result(wall_s=round(wall, 3), maxrss_kb=int(ru.ru_maxrss), rc=p.returncode,
               timed_out=timed_out.is_set(), stderr_tail=err[-2000:], user_s=round(ru.ru_utime, 3),
               sys_s=round(ru.ru_stime, 3), minflt=int(ru.ru_minflt))
    r["stdout"] = out if keep_stdout else out[-2000:]
    return r


def last_json(text: str):
    """The last top-level JSON document in a process's stdout (tools may print other lines first)."""
    text = text.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    for i in range(len(text) - 1, -1, -1):   # find the start of the last document
        if text[i] in "{[" and (i == 0 or text[i - 1] == "\n"):
            try:
                return json.loads(text[i:])
            except ValueError:
                continue
    return None


def warm_page_cache(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


class Measure:
    """A named command measured N times (N from the first run's wall time), best-of reported."""

    def __init__(self, key: str, argv: list[str], env: dict | None = None, timeout: float = 600,
                 prepare=None, check=None, keep_stdout: bool = False, max_repeat: int = 3,
                 display: str | None = None):
        self.key, self.argv, self.env, self.timeout = key, argv, env or {}, timeout
        self.display = display
        self.prepare, self.check, self.keep_stdout = prepare, check, keep_stdout
        self.max_repeat = max_repeat
        self.runs: list[Result] = []
        self.wanted = 1
        self.failed: str | None = None

    def run_once(self) -> None:
        if self.failed:
            return
        if self.prepare:
            self.prepare()
        r = run_child(self.argv, self.env, self.timeout, keep_stdout=True)
        if r["timed_out"]:
            self.failed = f"timed out after {self.timeout:.0f} s (skipped)"
        elif r["rc"] != 0:
            self.failed = f"exit {r['rc']}: {r['stderr_tail'][-600:].strip()}"
        elif self.check:
            msg = self.check(r)
            if msg:
                self.failed = msg
        if not self.runs:  # repeat policy from the first run
            w = r["wall_s"]
            self.wanted = self.max_repeat if w < 10 else (min(2, self.max_repeat) if w < 60 else 1)
        if not self.keep_stdout or self.runs:
            r["stdout"] = r["stdout"][-2000:]
        self.runs.append(r)
        log(f"  {self.key:<22} {r['wall_s']:8.3f} s  {mb(r['maxrss_kb']):8.1f} MB"
            + (f"  FAILED: {self.failed[:120]}" if self.failed else ""))

    def summary(self) -> dict:
        ok = [r for r in self.runs if r["rc"] == 0 and not r["timed_out"]]
        walls = [r["wall_s"] for r in ok]
        best = min(ok, key=lambda r: r["wall_s"]) if ok else {}
        return {
            "command": self.display or cmd_str(self.argv, self.env),
            "ok": not self.failed and bool(ok),
            "error": self.failed,
            "wall_s": min(walls) if walls else None,          # best of N
            "wall_median_s": round(statistics.median(walls), 3) if walls else None,
            "walls_s": [r["wall_s"] for r in self.runs],
            "peak_rss_mb": mb(max(r["maxrss_kb"] for r in ok)) if ok else None,
            "user_s": best.get("user_s"), "sys_s": best.get("sys_s"),      # CPU times of the best run
            "minor_faults": best.get("minflt"),
            "runs": len(self.runs),
        }


def run_round_robin(measures: list[Measure]) -> None:
    """Round r runs every measure that wants more than r runs: repeats are spread in time, so a
    burst of load from elsewhere on the machine does not hit one measure's repeats only."""
    r = 0
    while True:
        todo = [m for m in measures if len(m.runs) == r and (r == 0 or r < m.wanted) and not m.failed]
        if not todo:
            break
        for m in todo:
            m.run_once()
        r += 1
