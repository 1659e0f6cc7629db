"""Runs scripts/tmux_e2e.sh: the TUI in a real terminal (tmux) on the shared real samples."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.samples, pytest.mark.tui, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


def test_tmux_end_to_end(shared):
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed")
    env = dict(os.environ, PYTHON=sys.executable)
    r = subprocess.run(["bash", str(ROOT / "scripts" / "tmux_e2e.sh"), str(shared / "samples")],
                       capture_output=True, text=True, timeout=240, env=env)
    if r.returncode == 77:
        pytest.skip(r.stdout.strip())
    assert r.returncode == 0 and "ALL OK" in r.stdout, r.stdout + r.stderr
