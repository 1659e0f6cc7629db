"""No traceback on any input (issue 12), the files around a trace: special files and odd paths,
output targets, cache entries, stale temporaries and limits, and an `nsys` that hangs or writes
garbage. Each test asserts the answer or the one-line error, not only the absence of a crash. The
campaign and the values inside traces: test_fuzz.py."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import stat
import subprocess
import sys
import time

import pytest

from cli_helpers import demo_copy, one_line, run, strict_json
from conftest import ROOT, sample

sys.path.insert(0, str(ROOT / "scripts"))
import fuzz  # noqa: E402


# --- special files and odd paths ----------------------------------------------------------------
@pytest.mark.parametrize("kind,needle", [("fifo", "is a FIFO"), ("device", "is a device"),
                                         ("dangling", "broken symbolic link"), ("loop", "symbolic links"),


                                         ("long", "file name too long")])
def test_special_files_refused_without_opening(kind, needle, tmp_path, capsys, monkeypatch):
    if kind == "fifo":
        p = tmp_path / "f.sqlite"
        os.mkfifo(p)
    elif kind == "device":
        p = "/dev/zero"
    elif kind == "dangling":
        p = tmp_path / "d.sqlite"
        p.symlink_to(tmp_path / "nowhere")
    elif kind == "loop":
        p = tmp_path / "l.sqlite"
        p.symlink_to(p)
    else:
        p = tmp_path / ("x" * 300 + ".sqlite")
    t0 = time.monotonic()
    rc, out, err = run(["info", p], capsys, monkeypatch, tmp_path)
    one_line(rc, err, needle)
    assert time.monotonic() - t0 < 10


def test_newline_and_non_utf8_names_are_escaped(tmp_path):
    """Subprocess: stdout and stderr as bytes, as a shell sees them."""
    raw = os.fsencode(str(tmp_path)) + b"/bad\xffname.sqlite"
    shutil.copy(ROOT / "fixtures/demo/demo.sqlite", raw)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "launchtui", "info", "--json", os.fsdecode(raw)], capture_output=True,
                       env=env, cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == b""
    assert json.loads(r.stdout.decode("utf-8"))["source"]["path"].endswith("/bad\\xffname.sqlite")
    nl = tmp_path / "a\nb.sqlite"
    r = subprocess.run([sys.executable, "-m", "launchtui", "info", str(nl)], capture_output=True, env=env,
                       cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.decode().count("\n") == 1
    assert "a\\nb.sqlite: no such file" in r.stderr.decode()


# --- outputs ---------------------------------------------------------------------------------------
def test_output_targets_refused_in_one_line(tmp_path, capsys, monkeypatch):
    p = ROOT / "fixtures/demo/demo.sqlite"
    out_dir = tmp_path / "o"
    out_dir.mkdir()
    (out_dir / "t.txt").write_text("keep")
    (out_dir / "link.json").symlink_to(out_dir / "t.txt")
    cases = [(["-o", ""], "empty output file name"), (["-o", "/dev/full", "--force"], "is a device"),
             (["-o", out_dir / "link.json", "--force"], "is a symbolic link"),
             (["-o", out_dir / ("a" * 300 + ".json")], "file name too long"),
             (["-o", out_dir / "no" / "x.json"], "does not exist"), (["-o", out_dir], "is a directory")]
    for opts, needle in cases:
        rc, out, err = run(["export", p] + opts, capsys, monkeypatch, tmp_path)
        assert out == ""
        one_line(rc, err, needle)
    assert (out_dir / "link.json").is_symlink() and (out_dir / "t.txt").read_text() == "keep"
    assert sorted(os.listdir(out_dir)) == ["link.json", "t.txt"], "no temporaries left"


def test_output_honours_the_umask(tmp_path, capsys, monkeypatch):
    old = os.umask(0o022)
    try:
        rc, out, err = run(["report", ROOT / "fixtures/demo/demo.sqlite", "-o", tmp_path / "r.txt"], capsys,
                           monkeypatch, tmp_path)
    finally:
        os.umask(old)
    assert rc == 0 and stat.S_IMODE(os.stat(tmp_path / "r.txt").st_mode) == 0o644


# --- cache entries, temporaries, limits --------------------------------------------------------------
@pytest.mark.parametrize("kind", ["fifo", "directory", "garbage"])
def test_cache_entry_replaced_by_special_file_is_rebuilt(kind, tmp_path, capsys, monkeypatch):
    from launchtui.trace import cache
    p = demo_copy(tmp_path)
    rc, first, _ = run(["report", p, "--json"], capsys, monkeypatch, tmp_path)
    (entry,) = cache.models_dir().glob("*.model")
    entry.unlink()
    if kind == "fifo":
        os.mkfifo(entry)
    elif kind == "directory":
        entry.mkdir()
    else:
        entry.write_bytes(b"PK\x03\x04garbage")
    rc, again, err = run(["report", p, "--json"], capsys, monkeypatch, tmp_path)
    assert rc == 0 and err == "" and again == first
    assert entry.is_file(), "rebuilt as a regular entry"


def test_stale_temporaries_are_swept(tmp_path, capsys, monkeypatch):
    from launchtui.trace import cache
    cache.models_dir().mkdir(parents=True)
    stale, fresh = cache.models_dir() / ".tmp-killed.model", cache.models_dir() / ".tmp-inflight.model"
    for f in (stale, fresh):
        f.write_bytes(bytes(1000))
    old = time.time() - 2 * cache.STALE_TMP_S
    os.utime(stale, (old, old))
    p = demo_copy(tmp_path)
    rc, out, err = run(["report", p], capsys, monkeypatch, tmp_path)
    assert rc == 0 and not stale.exists() and fresh.exists(), "a save in progress elsewhere is left alone"
    stale.write_bytes(bytes(1000))
    os.utime(stale, (old, old))
    rc, out, err = run(["report", p], capsys, monkeypatch, tmp_path)  # warm: read from the cache
    assert rc == 0 and not stale.exists(), "a warm run sweeps too"


@pytest.mark.parametrize("value,limit", [("inf", 2**62), ("nan", 2048 * 10**6), ("-1", 2048 * 10**6),


                                         ("abc", 2048 * 10**6), ("1e400", 2**62), ("", 2048 * 10**6), ("5", 5 * 10**6)])
def test_cache_max_mb_parsed_safely(value, limit, tmp_path, capsys, monkeypatch):
    from launchtui.trace import cache
    monkeypatch.setenv("LAUNCHTUI_CACHE_MAX_MB", value)
    assert cache.max_bytes() == limit
    rc, out, err = run(["report", ROOT / "fixtures/demo/demo.sqlite"], capsys, monkeypatch, tmp_path)
    assert rc == 0 and err == ""


# --- nsys: hangs and garbage -----------------------------------------------------------------------
def _rep_with_fake_nsys(tmp_path, monkeypatch, script):
    rep = tmp_path / "r" / "report1.nsys-rep"
    rep.parent.mkdir()
    shutil.copy(sample("nsys/0x822a5b87__test-cuda__report1.nsys-rep"), rep)
    b = tmp_path / "bin"
    b.mkdir()
    (b / "nsys").write_text(script)
    (b / "nsys").chmod(0o755)
    monkeypatch.setenv("PATH", f"{b}{os.pathsep}{os.environ['PATH']}")
    return rep


@pytest.mark.samples
def test_nsys_that_never_exits_is_stopped(tmp_path, capsys, monkeypatch):
    rep = _rep_with_fake_nsys(tmp_path, monkeypatch, fuzz.FAKE_NSYS_HANG)
    monkeypatch.setenv("LAUNCHTUI_NSYS_TIMEOUT_S", "1")
    t0 = time.monotonic()
    rc, out, err = run(["info", rep], capsys, monkeypatch, tmp_path)
    one_line(rc, err, "nsys export did not finish in 1 s")
    assert time.monotonic() - t0 < 10


@pytest.mark.samples
def test_nsys_garbage_export_is_not_cached(tmp_path, capsys, monkeypatch):
    from launchtui.trace.nsys_rep import export_target
    rep = _rep_with_fake_nsys(tmp_path, monkeypatch, fuzz.FAKE_NSYS_GARBAGE)
    rc, out, err = run(["info", rep], capsys, monkeypatch, tmp_path)
    one_line(rc, err, "nsys export exited 0 but wrote no Nsight SQLite export")
    assert not export_target(rep).exists() and os.listdir(export_target(rep).parent) == []
    export_target(rep).write_bytes(b"garbage left by an older launchtui")  # a poisoned cache:
    # the next run exports again instead of trusting it
    rc, out, err = run(["info", rep], capsys, monkeypatch, tmp_path)
    one_line(rc, err, "wrote no Nsight SQLite export")
    assert not export_target(rep).exists()


@pytest.mark.samples
def test_failed_nsys_blames_the_version_only_when_nsys_says_so(tmp_path, capsys, monkeypatch):
    rep = _rep_with_fake_nsys(tmp_path, monkeypatch, "#!/bin/sh\necho 'disk quota exceeded' >&2\nexit 3\n")
    rc, out, err = run(["info", rep], capsys, monkeypatch, tmp_path)
    line = one_line(rc, err, "nsys export failed (report version 2026.1.1.204): disk quota exceeded")
    assert "older nsys" not in line
    (tmp_path / "bin" / "nsys").write_text("#!/bin/sh\necho 'Unsupported report version' >&2\nexit 1\n")
    rc, out, err = run(["info", rep], capsys, monkeypatch, tmp_path)
    one_line(rc, err, "an older nsys cannot read newer reports")


@pytest.mark.samples
def test_cache_home_that_is_a_file(tmp_path, capsys, monkeypatch):
    """XDG_CACHE_HOME naming a file: reports still work (nothing cached); a report needing an
    nsys export says where it could not write."""
    home = tmp_path / "file"
    home.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    rc, out, err = run(["report", ROOT / "fixtures/demo/demo.sqlite", "--json"], capsys, monkeypatch, tmp_path)
    assert rc == 0 and err == "" and strict_json(out)["schema_version"]
    rep = _rep_with_fake_nsys(tmp_path, monkeypatch, "#!/bin/sh\nexit 0\n")
    rc, out, err = run(["info", rep], capsys, monkeypatch, tmp_path)
    one_line(rc, err, "cannot create the export directory")


# --- memory ----------------------------------------------------------------------------------------
def test_memory_error_is_one_line_with_the_estimate(tmp_path, capsys, monkeypatch):
    import launchtui.trace.kineto as kineto
    p = ROOT / "fixtures/demo/demo.json.gz"

    def no_memory(*a, **k):
        raise MemoryError()
    monkeypatch.setattr(kineto, "read_kineto", no_memory)
    rc, out, err = run(["info", p, "--no-cache"], capsys, monkeypatch, tmp_path)
    with gzip.open(p) as f:
        mib = len(f.read()) * 2.6 / 2**20
    one_line(rc, err, f"not enough memory to read this trace; it needs about {mib:,.0f} MiB")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux-only here")
def test_address_space_limit_gives_one_line(tmp_path):
    """A real limit ('ulimit -v'): 48 MiB above what the interpreter holds once launchtui is imported,
    and a 25 MB trace whose read needs more than that."""
    big = tmp_path / "big.json"
    ev = ",".join('{"ph":"X","cat":"kernel","name":"k%d","pid":0,"tid":7,"ts":%d,"dur":2,'
                  '"args":{"correlation":%d,"device":0,"stream":7}}' % (i % 50, i * 10, i) for i in range(200_000))
    big.write_text('{"traceEvents":[' + ev + "]}")
    code = ("import re, resource, sys\nimport numpy, msgspec, launchtui.cli, launchtui.trace.kineto, launchtui.analysis.info\n"
            "vm = int(re.search(r'VmSize:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) * 1024\n"
            "resource.setrlimit(resource.RLIMIT_AS, (vm + 48 * 2**20, vm + 48 * 2**20))\n"
            "from launchtui.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    r = subprocess.run([sys.executable, "-c", code, "info", "--no-cache", str(big)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}, cwd=tmp_path)
    if r.returncode == 0:
        pytest.skip("the read fitted under the limit on this machine")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr[-2000:]
    assert "not enough memory to read this trace; it needs about" in r.stderr


# --- file names that are not UTF-8 ----------------------------------------------------------------
@pytest.mark.parametrize("source", [pytest.param("nsys/0x822a5b87__test-cuda__report1.nsys-rep", marks=pytest.mark.samples),


                                    "demo.sqlite", "demo.json.gz"])
def test_non_utf8_file_name_is_read_or_refused_in_one_line(source, tmp_path, capsys, monkeypatch):
    """A POSIX name may hold any bytes: every place that hashes or prints the path takes them
    (the .nsys-rep export key once encoded the path as UTF-8 and raised UnicodeEncodeError)."""
    src = ROOT / "fixtures/demo" / source if source.startswith("demo") else sample(source)
    name = os.fsdecode(b"bad\xff\xfename" + src.name.encode()[src.name.find("."):] if source.startswith("demo")
                       else b"bad\xff\xfename.nsys-rep")
    p = tmp_path / name
    shutil.copy(src, p)
    monkeypatch.setenv("PATH", str(tmp_path))   # no nsys: the report gives the export command
    for cmd in (["info", p], ["report", "--json", p], ["record", p]):
        rc, out, err = run(cmd, capsys, monkeypatch, tmp_path)
        if source.startswith("demo"):
            assert rc == 0 and err == "" and out, (cmd, err)
        else:
            one_line(rc, err, "nsys export --type sqlite")
            assert "\\xff\\xfe" in err
