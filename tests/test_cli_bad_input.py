"""Bad input: one line naming the file and the problem, exit status 2, no traceback, nothing written."""
from __future__ import annotations

import gzip
import os
import sqlite3
import subprocess
import sys

import pytest

from conftest import ROOT, cover_part, sample, snapshot
from launchtui.cli import main


def _files_under(*dirs):
    out = set()
    for d in dirs:
        for root, _, files in os.walk(d):
            out.update(os.path.join(root, f) for f in files)
    return out


def run_cli(args, capsys, tmp_path, monkeypatch):
    """Run in-process from an empty cwd; return (rc, stdout, stderr, files written anywhere we watch)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    monkeypatch.chdir(cwd)
    cache = os.environ["XDG_CACHE_HOME"]
    before = _files_under(cwd, cache)
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err, _files_under(cwd, cache) - before


def assert_one_line_error(rc, err, path, needle):
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(path) in lines[0] and needle in lines[0], lines[0]
    assert "Traceback" not in err


def _bad_files(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    empty = d / "empty.sqlite"
    empty.write_bytes(b"")
    junk = d / "junk.bin"
    junk.write_bytes(b"\x00\x01not a trace at all" * 10)
    trunc_gz = d / "t.json.gz"
    body = ",".join(f'{{"ph":"X","cat":"kernel","ts":{i * 7919 % 100003}.{i % 997:03d}}}' for i in range(5000))
    full = gzip.compress(('{"traceEvents": [' + body + "]}").encode())
    trunc_gz.write_bytes(full[: len(full) // 2])
    trunc_json = d / "t.json"
    trunc_json.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1.5')
    other_sqlite = d / "other.sqlite"
    con = sqlite3.connect(other_sqlite)
    con.execute("CREATE TABLE people(name TEXT)")
    con.commit()
    con.close()
    no_events = d / "plain.json"
    no_events.write_text('{"hello": 1}')
    return {"missing": (d / "nope.sqlite", "no such file"), "directory": (d, "is a directory"),
            "empty": (empty, "empty file"), "junk": (junk, "not a supported trace"),
            "truncated gzip": (trunc_gz, "truncated or corrupt gzip"),
            "truncated json": (trunc_json, "invalid or truncated JSON"),
            "foreign sqlite": (other_sqlite, "not an Nsight Systems export"),
            "json without events": (no_events, "no traceEvents"),
            "file as directory": (empty / "x.sqlite", "")}


@pytest.mark.parametrize("case", ["missing", "directory", "empty", "junk", "truncated gzip", "truncated json",
                                  "foreign sqlite", "json without events", "file as directory"])
@pytest.mark.parametrize("cmd", ["info", "report", "export"])
def test_bad_files(case, cmd, tmp_path, capsys, monkeypatch):
    path, needle = _bad_files(tmp_path)[case]
    if (cmd, case) == ("report", "directory"):  # a directory is a job of ranks (issue 14); none readable
        needle = "0 of 5 ranks read"
    rc, out, err, written = run_cli([cmd, path], capsys, tmp_path, monkeypatch)
    assert_one_line_error(rc, err, path, needle)
    assert out == "" and not written


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files regardless of permissions")
def test_unreadable_file(tmp_path, capsys, monkeypatch):
    p = tmp_path / "secret.sqlite"
    p.write_bytes(b"SQLite format 3\x00")
    p.chmod(0)
    rc, out, err, written = run_cli(["info", p], capsys, tmp_path, monkeypatch)
    assert_one_line_error(rc, err, p, "permission denied")


@pytest.mark.samples
def test_no_cuda_export_info_describes_report_refuses(tmp_path, capsys, monkeypatch):
    p = sample("nsys/D-W-Chiang__JACC.jl__cg_trace.sqlite")
    rc, out, err, written = run_cli(["info", p], capsys, tmp_path, monkeypatch)
    assert rc == 0 and "no CUDA tables at all" in out and "2026.2.1.210" in out
    rc, out, err, written = run_cli(["report", p], capsys, tmp_path, monkeypatch)
    assert_one_line_error(rc, err, p, "no CUDA activity")
    assert not written


@pytest.mark.samples
def test_trim_outside_and_unknown_device_write_nothing(tmp_path, capsys, monkeypatch):
    p = sample("nsys/nsys-ai__h100_2gpu_1s.sqlite")
    rc, out, err, written = run_cli(["report", p, "--trim", "0", "1"], capsys, tmp_path, monkeypatch)
    assert_one_line_error(rc, err, p, "whose window is 155.360 s to 156.321 s")
    assert not written, "a failed command leaves no cache entry either"
    rc, out, err, written = run_cli(["export", p, "--device", "7", "-o", tmp_path / "x.json"], capsys,
                                    tmp_path, monkeypatch)
    assert_one_line_error(rc, err, p, "--device 7: no such device")
    assert not written and not (tmp_path / "x.json").exists()


def test_subprocess_error_has_no_traceback(tmp_path):
    p = tmp_path / "junk.json"
    p.write_text("{ not json")
    r = subprocess.run([sys.executable, "-m", "launchtui", "report", str(p)], capture_output=True, text=True,
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"launchtui: {p}: invalid or truncated JSON")


@pytest.mark.samples
def test_nsys_rep_without_nsys_gives_the_command(tmp_path, capsys, monkeypatch):
    import shutil
    p = tmp_path / "alone" / "report1.nsys-rep"
    p.parent.mkdir()
    shutil.copy(sample("nsys/0x822a5b87__test-cuda__report1.nsys-rep"), p)
    monkeypatch.setenv("PATH", str(tmp_path))  # no nsys anywhere
    rc, out, err, written = run_cli(["info", p], capsys, tmp_path, monkeypatch)
    assert_one_line_error(rc, err, p, "nsys export --type sqlite --output")
    assert "2026.1.1.204" in err


@pytest.mark.samples
def test_nsys_rep_without_nsys_names_the_export_beside_it(tmp_path, capsys, monkeypatch):
    """The sample has its .sqlite export beside it: the hint names it instead of a command that
    would create a file that already exists."""
    p = sample("nsys/0x822a5b87__test-cuda__report1.nsys-rep")
    monkeypatch.setenv("PATH", str(tmp_path))
    rc, out, err, written = run_cli(["info", p], capsys, tmp_path, monkeypatch)
    assert_one_line_error(rc, err, p, "0x822a5b87__test-cuda__report1.sqlite is beside it: open that")
    assert "nsys export --type sqlite" not in err


@pytest.mark.slow
@pytest.mark.samples
# the Kineto samples (the slowest to read) outside the cover in two halves: the sweep lane spreads them
@pytest.mark.parametrize("folder, part", [("nsys", None), ("kineto", "cover"),
                                          pytest.param("kineto", (0, 2), marks=pytest.mark.sweep),
                                          pytest.param("kineto", (1, 2), marks=pytest.mark.sweep), ("rocm", None)],
                         ids=["nsys", "kineto-cover", "kineto-sweep-0", "kineto-sweep-1", "rocm"])
def test_samples_untouched_by_every_command(folder, part, shared, tmp_path, capsys, monkeypatch):
    root = shared / "samples"
    samples = sorted(p for p in (root / folder).rglob("*") if p.is_file() and not p.name.endswith(".md"))
    if part is not None:
        samples = cover_part(samples, root, part)
    assert samples, f"no samples under {folder}"
    before = {p: snapshot(p) for p in samples}
    listing = {d: sorted(os.listdir(d)) for d in {p.parent for p in samples}}
    for p in samples:
        for cmd in (["info", p], ["report", p, "--json"]):
            rc, out, err, _ = run_cli(cmd, capsys, tmp_path, monkeypatch)
            assert rc in (0, 2), (p, err)
            assert "Traceback" not in err
            if rc == 2:
                assert len(err.strip().splitlines()) == 1
    assert {p: snapshot(p) for p in samples} == before
    assert {d: sorted(os.listdir(d)) for d in listing} == listing, "nothing written beside any trace"


@pytest.mark.samples
def test_format_detected_by_content_not_extension(tmp_path, capsys, monkeypatch):
    import shutil
    kin = tmp_path / "looks_like.sqlite"
    shutil.copy(sample("kineto/b200__eager_trace.json.gz"), kin)
    nsy = tmp_path / "looks_like.json"
    shutil.copy(sample("nsys/nsys-ai__mock.sqlite"), nsy)
    rc, out, err, _ = run_cli(["info", kin], capsys, tmp_path, monkeypatch)
    assert rc == 0 and "kineto-json" in out
    rc, out, err, _ = run_cli(["info", nsy], capsys, tmp_path, monkeypatch)
    assert rc == 0 and "nsys-sqlite" in out


@pytest.mark.samples
@pytest.mark.parametrize("case", ["missing", "empty", "junk", "file as directory"])
def test_tui_refuses_before_taking_the_terminal(case, tmp_path, capsys, monkeypatch):
    """What a stat and the first bytes can tell is said before the TUI starts: no loading screen
    flashes up for a mistyped path (the app is never constructed)."""
    import launchtui.tui.app as tui_app

    def no_app(*a, **k):
        raise AssertionError("the TUI was started for a path that cannot be read")
    monkeypatch.setattr(tui_app, "run_app", no_app)
    path, needle = _bad_files(tmp_path)[case]
    rc, out, err, written = run_cli([path], capsys, tmp_path, monkeypatch)
    assert_one_line_error(rc, err, path, needle)
    assert out == "" and not written
    good = sample("nsys/nsys-ai__mock.sqlite")
    rc, out, err, written = run_cli([good, "--compare", path], capsys, tmp_path, monkeypatch)
    assert_one_line_error(rc, err, path, needle)


def test_bare_command_usage_error_says_launchtui_once(tmp_path, capsys, monkeypatch):
    rc, out, err, written = run_cli(["--bogus", "x.sqlite"], capsys, tmp_path, monkeypatch)
    assert rc == 2 and out == "" and not written
    assert err == "launchtui: unrecognized arguments: --bogus (see launchtui --help)\n"
