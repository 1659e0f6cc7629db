"""The `launchtui` command's own process (`python -m launchtui` too): `cli.main`, then the process
ends as soon as what it owes is done.

`cli.main` leaves its process as it found it (glibc's policy restored, the heap's free pages
returned), as tests and scripts run it in process. A command's own process needs none of that:
once main returns, Python's teardown frees every array, module and string one by one, and the
kernel then reclaims the whole address space anyway. At 1M Nsight kernels that teardown and the
heap's trim cost ~0.1 s after the output is out (bench/MISSED.md, issue 24), while the user waits
for the prompt.

What a process owes at exit is kept: its output flushed, its exit handlers run (`atexit`: a Dask
client's close, a temporary directory's removal, logging's flush), in that order, as the normal
exit does them. The normal exit is taken instead where a thread other than a daemon is still alive:
its work must finish first (the interpreter joins it), and no such thread is cut short.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading

# Set before numpy loads (through cli's imports): OpenBLAS otherwise starts a worker per core that
# busy-waits ~2^28 cycles once started (its thread timeout), ~0.1 s of one core taken from the read's
# scans, for BLAS calls no analysis makes (bench/MISSED.md). A user's own setting is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from launchtui.cli import main as cli_main  # noqa: E402 - after the setting above


def _flush_output() -> None:
    """Flush stdout and stderr; a reader that went away (`launchtui report X | head`) is no error,
    as in `cli._guard`."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (BrokenPipeError, OSError, ValueError):   # ValueError: closed by the command
            pass


def _only_daemons_left() -> bool:
    """Whether every live thread but the main one is a daemon: one that is not still owes work
    (a pool's worker, a writer) that the normal exit waits for."""
    main_thread = threading.main_thread()
    return all(t.daemon for t in threading.enumerate() if t is not main_thread)


def exit_now(status: int) -> None:
    """End the process with `status` once its output is flushed and its exit handlers ran;
    through the normal exit (`SystemExit`) where a non-daemon thread is alive or this Python
    cannot run the handlers itself."""
    run_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_handlers is None or not _only_daemons_left():
        raise SystemExit(status)
    _flush_output()
    run_handlers()
    _flush_output()    # what the handlers wrote
    os._exit(status)


def main() -> None:
    """The console script's entry point (pyproject `[project.scripts]`)."""
    exit_now(cli_main(restore_heap=False))
