"""Cached outputs (launchtui/result_cache.py): a warm report recomputes nothing and loads no model, yet
prints exactly what a fresh run prints; any change of options, model entry or code misses."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from launchtui import result_cache
from launchtui.cli import main
from launchtui.trace import cache

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo" / "demo.sqlite"


def run(argv, capsys):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def demo(tmp_path):
    p = tmp_path / "demo.sqlite"
    shutil.copy(DEMO, p)
    return p


def forbid_model_load(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the model was loaded on a result-cache hit")
    monkeypatch.setattr(cache, "load", boom)
    monkeypatch.setattr("launchtui.trace.load.read_trace", boom)


@pytest.mark.parametrize("argv", [["report", "--json"], ["report"], ["record", "--json"], ["record"],
                                  ["info", "--json"], ["report", "--json", "--limit", "1", "--device", "0"]])
def test_warm_output_equals_fresh_and_loads_nothing(argv, demo, capsys, monkeypatch):
    cmd, opts = argv[0], argv[1:]
    rc, fresh, _ = run([cmd, demo, *opts, "--no-cache"], capsys)
    assert rc == 0 and not result_cache.results_dir().exists(), "--no-cache writes no result"
    rc, first, _ = run([cmd, demo, *opts], capsys)        # computes, caches model and result
    assert rc == 0 and first == fresh
    assert len(list(result_cache.results_dir().glob("*.txt"))) == 1
    with monkeypatch.context() as m:
        forbid_model_load(m)
        rc, warm, err = run([cmd, demo, *opts], capsys)
    assert rc == 0 and err == "" and warm == fresh


def test_each_option_set_has_its_own_result(demo, capsys, monkeypatch):
    outs = {}
    for opts in ([], ["--limit", "1"], ["--names", "full"], ["--thresholds", "2", "4"]):
        rc, outs[tuple(opts)], _ = run(["report", demo, "--json", *opts], capsys)
        assert rc == 0
    assert json.loads(outs[("--limit", "1")])["options"]["limit"] == 1
    forbid_model_load(monkeypatch)
    for opts, text in outs.items():
        assert run(["report", demo, "--json", *opts], capsys)[1] == text
    assert len(list(result_cache.results_dir().glob("*.txt"))) == 4


def test_output_file_is_written_from_the_cached_text(demo, tmp_path, capsys, monkeypatch):
    rc, text, _ = run(["report", demo, "--json"], capsys)
    forbid_model_load(monkeypatch)
    rc, out, err = run(["report", demo, "--json", "-o", tmp_path / "r.json"], capsys)
    assert rc == 0 and out == "" and (tmp_path / "r.json").read_text() == text
    assert run(["report", demo, "--json", "-o", tmp_path / "r.json"], capsys)[0] == 2, "still no overwrite"


def test_a_rebuilt_model_entry_or_new_code_misses(demo, capsys, monkeypatch):
    rc, text, _ = run(["report", demo, "--json"], capsys)
    calls = []
    real = cache.load
    monkeypatch.setattr(cache, "load", lambda *a: calls.append(1) or real(*a))
    (entry,) = cache.models_dir().glob("*.model")
    entry.write_bytes(b"garbage")                      # the entry is no longer what the result came from
    assert run(["report", demo, "--json"], capsys)[1] == text
    assert entry.stat().st_size > 1000, "the model entry was rebuilt"
    monkeypatch.setattr(result_cache, "code_fingerprint", lambda: b"other code")
    calls.clear()
    assert run(["report", demo, "--json"], capsys)[1] == text
    assert calls == [1], "new code recomputes from the model"


def test_touching_the_trace_misses(demo, capsys):
    rc, text, _ = run(["info", demo, "--json"], capsys)
    import os
    os.utime(demo, ns=(1, 1))
    rc, again, _ = run(["info", demo, "--json"], capsys)
    assert json.loads(text)["source"]["mtime_ns"] != 1 and json.loads(again)["source"]["mtime_ns"] == 1


def test_results_are_bounded(demo, capsys, monkeypatch):
    monkeypatch.setattr(result_cache, "MAX_RESULTS", 2)
    for n in range(1, 5):
        assert run(["report", demo, "--json", "--limit", str(n)], capsys)[0] == 0
    d = result_cache.results_dir()
    # each report stores its text and, for the TUI, its record and backpressure (.pkl): 2 files in all
    assert len([*d.glob("*.txt"), *d.glob("*.pkl")]) == 2
    assert len(list(d.glob("*.txt"))) == 1   # the newest: the last report's text


def test_cache_clear_removes_results(demo, capsys):
    run(["info", demo], capsys)
    assert run(["cache", "clear"], capsys)[1].startswith("launchtui: removed 1 cache entries")
    assert not result_cache.results_dir().exists()


@pytest.mark.parametrize("cmd", ["report", "record", "info", "export"])
def test_headless_commands_do_not_import_textual(cmd, tmp_path):
    """Cold and warm: the TUI toolkit is never loaded by a headless command."""
    code = ("import sys, io, contextlib\n"
            "from launchtui.cli import main\n"
            "for _ in range(2):\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            f"        assert main([{cmd!r}, {str(DEMO)!r}]) == 0\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'rich', 'pandas'}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"XDG_CACHE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_code_fingerprint_walks_the_package_once_per_process(monkeypatch):
    """Every stored result's key names the code; a TUI open asks for ten keys from four threads, so
    the package is walked once and the same fingerprint reused."""
    import os
    result_cache.code_fingerprint.cache_clear()
    walked = []
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda d: walked.append(d) or real(d))
    first = result_cache.code_fingerprint()
    n = len(walked)
    assert n >= 4, "launchtui and its subpackages were walked"
    assert result_cache.code_fingerprint() == first
    assert len(walked) == n
    result_cache.code_fingerprint.cache_clear()
    assert result_cache.code_fingerprint() == first, "the walk gives the same fingerprint again"
