"""The suite's own rules (tests/conftest.py, pyproject.toml): a `samples` test skips when ../shared is
absent, and fails instead under LAUNCHTUI_REQUIRE_SHARED=1 (set by .ci/run); a test that reads
../shared without the marker fails; markers are strict. Each case runs pytest on a probe file in a
subprocess, with LAUNCHTUI_SHARED naming a folder made here."""
from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

from conftest import ROOT

PROBE = '''
import pytest
from conftest import optional_shared, sample


@pytest.mark.samples
def test_fixture(shared):
    assert (shared / "samples").is_dir()


@pytest.mark.samples
def test_sample():
    assert sample("nsys/t.sqlite").is_file()


@pytest.mark.samples
def test_sample_missing_from_shared():
    sample("nsys/not-there.sqlite")


def test_optional():
    s = optional_shared()
    assert s is None or (s / "samples").is_dir()


def test_unmarked_sample():
    sample("nsys/t.sqlite")


def test_unmarked_fixture(shared):
    pass
'''


def _probe(tmp_path, shared, require: bool, text: str = PROBE) -> tuple[subprocess.CompletedProcess, dict]:
    """(the run, {test name: (outcome, message)}) of pytest on `text` with the project's conftest and
    pyproject options."""
    (tmp_path / "test_probe.py").write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LAUNCHTUI_"))}
    env.update(PYTHONPATH=str(ROOT / "tests"), LAUNCHTUI_SHARED=str(shared), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    if require:
        env["LAUNCHTUI_REQUIRE_SHARED"] = "1"
    xml = tmp_path / "report.xml"
    r = subprocess.run([sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path),
                        "-p", "conftest", "-p", "no:cacheprovider", f"--junitxml={xml}",
                        "test_probe.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    outcomes = {}
    if xml.exists():
        for case in ET.parse(xml).iter("testcase"):
            child = next((c for c in case if c.tag in ("skipped", "failure", "error")), None)
            outcomes[case.get("name")] = ("passed", "") if child is None else (child.tag, child.get("message") or "")
    return r, outcomes


def _outcome(outcomes):
    return {name: o for name, (o, _) in outcomes.items()}


def test_absent_shared_skips_samples_tests(tmp_path):
    r, got = _probe(tmp_path, tmp_path / "missing", require=False)
    assert _outcome(got) == {"test_fixture": "skipped", "test_sample": "skipped",
                             "test_sample_missing_from_shared": "skipped", "test_optional": "passed",
                             "test_unmarked_sample": "failure", "test_unmarked_fixture": "error"}, r.stdout
    assert "../shared not found" in got["test_sample"][1]
    assert "not marked: add @pytest.mark.samples" in got["test_unmarked_sample"][1]
    assert "not marked: add @pytest.mark.samples" in got["test_unmarked_fixture"][1]
    assert f"shared: {tmp_path / 'missing'} (ABSENT; LAUNCHTUI_REQUIRE_SHARED=unset)" in r.stdout


def test_absent_shared_fails_samples_tests_when_required(tmp_path):
    r, got = _probe(tmp_path, tmp_path / "missing", require=True)
    assert _outcome(got) == {"test_fixture": "error", "test_sample": "failure",
                             "test_sample_missing_from_shared": "failure", "test_optional": "failure",
                             "test_unmarked_sample": "failure", "test_unmarked_fixture": "error"}, r.stdout
    for name in ("test_fixture", "test_sample", "test_optional"):
        assert "../shared not found" in got[name][1] and "LAUNCHTUI_REQUIRE_SHARED=1" in got[name][1], got[name]
    assert r.returncode == 1


def test_present_shared_runs_and_a_missing_sample_fails_when_required(tmp_path):
    shared = tmp_path / "shared"
    (shared / "samples" / "nsys").mkdir(parents=True)
    (shared / "samples" / "nsys" / "t.sqlite").write_bytes(b"")
    for require, missing in ((False, "skipped"), (True, "failure")):
        r, got = _probe(tmp_path, shared, require=require)
        assert _outcome(got) == {"test_fixture": "passed", "test_sample": "passed",
                                 "test_sample_missing_from_shared": missing, "test_optional": "passed",
                                 "test_unmarked_sample": "failure", "test_unmarked_fixture": "error"}, r.stdout
        assert "sample nsys/not-there.sqlite missing from ../shared" in got["test_sample_missing_from_shared"][1]


def test_markers_are_strict(tmp_path):
    r, got = _probe(tmp_path, tmp_path, require=False,
                    text="import pytest\n\n\n@pytest.mark.sample\ndef test_typo():\n    pass\n")
    assert r.returncode != 0 and "'sample' not found in `markers` configuration option" in r.stdout + r.stderr
