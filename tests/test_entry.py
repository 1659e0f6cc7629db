"""The `launchtui` command's own process (launchtui/entry.py): it ends once its output is flushed
and its exit handlers ran, without Python's teardown and without putting glibc's policy back;
where a non-daemon thread is still alive, through the normal exit, which waits for it."""
from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT
from launchtui import heap
from launchtui.cli import main
from test_heap import RESTORED, SET, libc  # noqa: F401  (libc: the fake glibc fixture)

DEMO = ROOT / "fixtures" / "demo" / "demo.sqlite"


def _python(code: str, *args, env=None, **kw) -> subprocess.CompletedProcess:
    env = env or dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=120, **kw)


def test_exit_now_flushes_the_output_runs_the_handlers_and_keeps_the_status(tmp_path):
    marker = tmp_path / "handler"
    done = _python("""
        import atexit, sys
        from launchtui.entry import exit_now
        atexit.register(lambda: open(sys.argv[1], "w").write("ran"))
        atexit.register(lambda: print("from a handler", file=sys.stderr))
        sys.stdout.write("no newline, still buffered")
        exit_now(3)
        print("never")
        """, marker)
    assert done.returncode == 3
    assert done.stdout == "no newline, still buffered"
    assert done.stderr == "from a handler\n" and marker.read_text() == "ran"


def test_a_live_worker_thread_is_waited_for(tmp_path):
    """A non-daemon thread still working (a pool's worker, a writer) is never cut short: the
    process takes the normal exit, which joins it."""
    marker = tmp_path / "worker"
    done = _python("""
        import sys, threading, time
        from launchtui.entry import exit_now
        def work():
            time.sleep(0.3)
            open(sys.argv[1], "w").write("finished")
        threading.Thread(target=work).start()
        exit_now(4)
        """, marker)
    assert done.returncode == 4 and marker.read_text() == "finished"


def test_the_command_prints_what_the_in_process_run_prints(capsys):
    """`python -m launchtui` (and the console script: both call entry.main): the whole JSON,
    byte for byte as `cli.main` writes it, and its status."""
    assert main(["report", str(DEMO), "--json", "--no-cache"]) == 0
    in_process = capsys.readouterr().out
    done = _python("import runpy; runpy.run_module('launchtui', run_name='__main__')",
                   "report", DEMO, "--json", "--no-cache")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout == in_process and json.loads(done.stdout)["launches"]


def test_a_refusal_keeps_its_one_line_and_status_2(tmp_path):
    missing = tmp_path / "nope.sqlite"
    done = _python("import runpy; runpy.run_module('launchtui', run_name='__main__')", "info", missing)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("launchtui: ") and "nope.sqlite" in done.stderr


@pytest.mark.skipif(not hasattr(fcntl, "F_SETPIPE_SZ"), reason="needs Linux's pipe sizes")
def test_a_reader_that_goes_away_is_no_error():
    """`launchtui record X --json | head -c 100`: the command stops writing, exits 0, says nothing.
    The pipe holds one page, so the record's JSON (~18 KB) outgrows it and the write meets a
    closed pipe."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "launchtui", "record", str(DEMO), "--json", "--no-cache"],
                            stdout=write_end, stderr=subprocess.PIPE, env=env, cwd=str(ROOT))
    os.close(write_end)
    head = os.read(read_end, 100)
    os.close(read_end)
    _, err = proc.communicate(timeout=120)
    assert len(head) == 100 and proc.returncode == 0 and err == b""


def test_the_command_leaves_glibc_as_it_ends_and_in_process_runs_put_it_back(libc):  # noqa: F811
    """The command's own process skips the restore (it ends next); a run in a process that goes on
    (tests, scripts: the default) restores."""
    try:
        assert main(["report", str(DEMO), "--json", "--no-cache"], restore_heap=False) == 0
        assert libc.calls == SET and heap.recycling()
    finally:
        heap.default_large_blocks()
    del libc.calls[:]
    assert main(["report", str(DEMO), "--json", "--no-cache"]) == 0
    assert libc.calls == SET + RESTORED and not heap.recycling()


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through Linux's /proc")
def test_the_command_process_starts_no_blas_workers():
    """OpenBLAS would start a worker per core with numpy, each busy-waiting ~0.1 s of CPU once started,
    for BLAS calls no analysis makes: the command's process loads numpy with one BLAS thread."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    probe = """
        import os, sys
        import launchtui.entry, numpy
        print(os.environ["OPENBLAS_NUM_THREADS"], len(os.listdir("/proc/self/task")))
        """
    done = _python(probe, env=dict(env, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1"]   # the setting, and no thread but the main one
    kept = _python(probe, env=dict(env, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="2"))
    assert kept.stdout.split()[0] == "2"       # a user's own setting stays
