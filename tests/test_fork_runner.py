"""scripts/fork_runner.py: a run forked from the preloaded server reports what a `python -m launchtui`
process reports (exit status, stdout, stderr, files written, a hang) for each outcome the fuzz
campaign classes, in the run's own environment and working directory."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
from fork_runner import ForkRunner  # noqa: E402

DEMO = ROOT / "fixtures" / "demo" / "demo.sqlite"


def _spawn(args, env, cwd, timeout):
    try:
        p = subprocess.run([sys.executable, "-m", "launchtui", *args], capture_output=True, cwd=cwd, env=env,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), False
    except subprocess.TimeoutExpired:
        return None, "", "", True


@pytest.fixture(scope="module")
def runner():
    r = ForkRunner()
    yield r
    r.close()


def _both(runner, tmp_path, args, timeout=60.0, env=None):
    """(spawned, forked) results of one command line, each in a fresh cwd and cache folder."""
    out = []
    for name, run in (("spawn", _spawn), ("fork", runner.run)):
        cwd, cache = tmp_path / name / "cwd", tmp_path / name / "cache"
        cwd.mkdir(parents=True)
        e = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(cache), **(env or {})}
        out.append((run(args, e, cwd, timeout), cwd, cache))
    return out


@pytest.mark.parametrize("args", [
    ["report", "--json", str(DEMO)],
    ["info", str(DEMO)],
    ["report", "--trim", "abc", str(DEMO)],             # an argument error: one line, exit 2
    ["report", "--thresholds", "1", str(DEMO)],
    ["no-such-command-or-file"],
], ids=["report", "info", "bad-trim", "bad-thresholds", "missing"])
def test_a_forked_run_reports_what_a_process_does(runner, tmp_path, args):
    (a, _, cache_a), (b, _, cache_b) = _both(runner, tmp_path, args)
    assert a == b
    assert a[0] in (0, 2) and (a[0] == 0) == bool(a[1])
    # the run's environment is its own: each wrote its cache where its XDG_CACHE_HOME says, or neither did
    assert (cache_a / "launchtui").exists() == (cache_b / "launchtui").exists()


def test_bad_input_and_outputs_relative_to_the_runs_cwd(runner, tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"SQLite format 3\x00" + b"\x01" * 200)
    (a, _, _), (b, _, _) = _both(runner, tmp_path / "junk", ["report", str(junk)])
    assert a == b and a[0] == 2 and a[2].count("\n") == 1 and a[2].startswith("launchtui: ")
    (a, cwd_a, _), (b, cwd_b, _) = _both(runner, tmp_path / "export", ["export", str(DEMO), "-o", "out.json"])
    assert a[0] == b[0] == 0 and a[1:] == b[1:]
    assert (cwd_a / "out.json").read_bytes() == (cwd_b / "out.json").read_bytes()
    (cwd_b / "taken.json").write_text("{}")
    rc, out, err, hung = runner.run(["export", str(DEMO), "-o", "taken.json"],
                                    {**os.environ, "PYTHONPATH": str(ROOT)}, cwd_b, 60.0)
    assert (rc, out, hung) == (2, "", False) and "--force" in err and (cwd_b / "taken.json").read_text() == "{}"


def test_a_run_past_its_timeout_is_killed_and_called_a_hang(runner, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert runner.run(["report", "--json", "--no-cache", str(DEMO)], env, tmp_path, 0.01)[0::3] == (None, True)
    rc, out, _, hung = runner.run(["info", "--json", str(DEMO)], env, tmp_path, 60.0)   # the server goes on
    assert (rc, hung) == (0, False) and out.startswith("{")
