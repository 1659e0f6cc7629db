#!/usr/bin/env python3
"""`python -m launchtui ARGS` for the fuzz campaign, forked from an interpreter that has imported
launchtui already: a run pays its command, not the interpreter's start and the imports (~0.3 s of
the ~0.45 s of CPU a small case's run took).

    runner = ForkRunner()                 # starts the server: `python scripts/fork_runner.py`
    rc, out, err, hung = runner.run(args, env, cwd, timeout)
    runner.close()

Each run is a child forked from the server, which has only imported modules and done nothing else,
so the child starts where `python -m launchtui` would after its imports. The child takes the run's
environment, working directory and argv, reads stdin from /dev/null, writes stdout and stderr to
files, and exits as that process would: `SystemExit(main())`, an uncaught exception's traceback
and exit status 1, atexit handlers and non-daemon threads at interpreter exit. What differs: an
environment variable read while a module is imported takes the server's value (launchtui reads
every one it uses when called: XDG_CACHE_HOME, LAUNCHTUI_CACHE_MAX_MB, LAUNCHTUI_NSYS_TIMEOUT_S,
PATH), and a failure to import cannot happen in a run. `scripts/fuzz.py --runner spawn` runs real
processes instead.

The server is one-request-at-a-time and single-threaded (forking from a threaded process can leave
a lock held in the child): one server per campaign job.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAIN = str(ROOT / "launchtui" / "__main__.py")   # sys.argv[0] of `python -m launchtui`
# what `info`, `report`, `record` and `export` import on their way (launchtui.cli imports lazily)
PRELOAD = ("launchtui.cli", "launchtui.session", "launchtui.trace.load", "launchtui.trace.registry",
           "launchtui.analysis.report", "launchtui.analysis.record", "launchtui.analysis.info",
           "launchtui.analysis.chrome_export", "launchtui.output")


# --- the server (its own process) ------------------------------------------------------------
def serve() -> None:
    import importlib
    for name in PRELOAD:
        importlib.import_module(name)
    from launchtui.trace import native_columns
    native_columns.status()   # loads the C reader, as the first read would
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    while True:   # one request per line, one reply per line
        line = requests.readline()
        if not line:
            return
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(req)   # never returns
        rc, hung = _wait(pid, req["timeout"])
        replies.write(json.dumps({"rc": rc, "hung": hung}).encode() + b"\n")
        replies.flush()


def _wait(pid: int, timeout: float) -> tuple[int | None, bool]:
    deadline, pause = time.monotonic() + timeout, 0.001
    while True:   # polls with a growing pause (at most 20 ms)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), False
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None, True
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


def _child(req: dict) -> None:
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                            (1, req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                            (2, req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
        f = os.open(path, flags, 0o600)
        os.dup2(f, fd)
        os.close(f)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    sys.argv = [MAIN, *req["args"]]
    from launchtui.cli import main
    raise SystemExit(main())   # the interpreter exits as `python -m launchtui` does


# --- the client (the campaign's side) --------------------------------------------------------
class ForkRunner:
    """One server; `run` as `subprocess.run([python, -m, launchtui, *args], ...)` would report it."""

    def __init__(self) -> None:
        self._files = Path(tempfile.mkdtemp(prefix="launchtui-fork-runner-"))
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self._server = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        env=env, cwd=ROOT)

    def run(self, args: list[str], env: dict, cwd: Path, timeout: float) -> tuple[int | None, str, str, bool]:
        out, err = self._files / "stdout", self._files / "stderr"
        req = {"args": list(args), "env": dict(env), "cwd": str(cwd), "timeout": timeout,
               "stdout": str(out), "stderr": str(err)}
        self._server.stdin.write(json.dumps(req).encode() + b"\n")
        self._server.stdin.flush()
        reply = self._server.stdout.readline()
        if not reply:
            raise RuntimeError(f"the fork runner's server exited (status {self._server.wait()})")
        r = json.loads(reply)
        return r["rc"], _text(out), _text(err), r["hung"]

    def close(self) -> None:
        """Stop the server (a run still in flight, after an interrupted campaign, is killed with it)."""
        try:
            self._server.stdin.close()
            self._server.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self._server.kill()
            self._server.wait()
        shutil.rmtree(self._files, ignore_errors=True)


def _text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "replace") if path.exists() else ""


if __name__ == "__main__":
    serve()
