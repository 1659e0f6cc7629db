"""The layer contracts in pyproject.toml ([tool.importlinter]) hold: trace -> analysis -> store ->
session -> tui / cli, the views never import the store's internals, no Textual in trace, analysis
or the timeline's lane view, no import cycle between sibling modules."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "import-linter is part of the test extra: pip install -e '.[test]'"
    r = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    n = (ROOT / "pyproject.toml").read_text().count("\n[[tool.importlinter.contracts]]\n")   # every contract ran
    assert n >= 6 and f"Contracts: {n} kept, 0 broken." in r.stdout
