"""The headless core never imports Textual (harlequin-style boundary check in a fresh interpreter)."""
from __future__ import annotations

import pkgutil
import subprocess
import sys

import launchtui.analysis
import launchtui.trace
from conftest import ROOT


def _modules(pkg):
    return [f"{pkg.__name__}.{m.name}" for m in pkgutil.iter_modules(pkg.__path__)]


def test_core_imports_no_textual():
    mods = _modules(launchtui.trace) + _modules(launchtui.analysis) + ["launchtui.cli", "launchtui.output"]
    code = ("import sys\n" + "".join(f"import {m}\n" for m in mods) +
            "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
            "print(len(bad))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0", "launchtui.trace / launchtui.analysis must not import Textual"
    assert len(mods) >= 15


def test_headless_commands_do_not_import_textual(tmp_path):
    code = ("import sys\nfrom launchtui.cli import main\n"
            "rc = main(['report', sys.argv[1], '--json'])\n"
            "assert not any(m.startswith('textual') for m in sys.modules)\n")
    demo = ROOT / "fixtures" / "demo" / "demo.sqlite"
    if not demo.exists():
        import pytest
        pytest.skip("bundled demo trace not generated yet")
    r = subprocess.run([sys.executable, "-c", code, str(demo)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
