"""No traceback on any input (issue 12): a fixed-seed fuzz campaign, and one named regression test
per defect class the campaign found. Each test asserts the answer or the one-line error, not only
the absence of a crash."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import time

import pytest

from conftest import ROOT, optional_shared, sample
from launchtui.cli import main

sys.path.insert(0, str(ROOT / "scripts"))
import fuzz  # noqa: E402


# --- the campaign ---------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.serial
def test_fixed_seed_campaign_has_no_defects(tmp_path):
    """One case per family and mutation kind (`--cover`), one command each, on generated traces and
    the small shared samples: every run is ok or a clean one-line error; inputs untouched, nothing
    beside them. The random campaign is the long one (scripts/fuzz.py --minutes M)."""
    out = tmp_path / "fuzz"
    shared = optional_shared()
    samples = ["--samples", str(shared / "samples")] if shared else ["--no-samples"]
    rc = fuzz.main(["--seed", "12", "--cover", "--jobs", "2", "--runs-per-case", "1", "--timeout", "20",
                    "--max-seed-bytes", "700000", "--out", str(out), "--quiet"] + samples)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["signatures"] == [] and rc == 0, summary["signatures"]
    assert set(summary["by_family"]) == set(fuzz.FAMILIES)
    plan = fuzz.cover_plan()
    assert summary["kinds"] == sorted(f"{f}/{k}" for f, k in plan), "every kind of every family ran"
    counted = sum(sum(c.values()) for c in summary["by_family"].values())
    assert counted == summary["runs"] >= len(plan)
    classes = {k for c in summary["by_family"].values() for k in c}
    assert classes == {"ok", "clean-error"}, "both outcomes occur, nothing else"


def test_classifier_catches_each_defect_kind():
    c = fuzz.classify
    assert c(None, "", "", True, False, False)[0] == "hang"
    assert c(1, "", 'Traceback (most recent call last):\n  File "/x/launchtui/a.py", line 3, in f\nValueError: x\n',
             False, False, False) == ("traceback", "ValueError in a.py:f")
    assert c(2, "", "launchtui: a\nb\n", False, False, False)[0] == "multi-line-error"
    assert c(0, '{"a": NaN}', "", False, True, False)[0] == "nan-in-json"
    assert c(0, '{"a": ', "", False, True, False)[0] == "invalid-json"
    assert c(0, "{}", "warning: overflow\n", False, True, False)[0] == "noisy-stderr"
    assert c(2, "", "launchtui: f: bad\n", False, True, False) == ("clean-error", "")
    assert c(0, "{}", "launchtui: wrote x\n", False, True, True) == ("ok", "")


# --- helpers ----------------------------------------------------------------------------------
def run(args, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line(rc, err, needle):
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("launchtui: ") and needle in lines[0], err
    return lines[0]


def strict_json(text):
    def bad(c):
        raise AssertionError(f"non-finite number {c} in JSON")
    return json.loads(text, parse_constant=bad)


def kineto_doc(n=6):
    ev = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 100 + i * 10,
           "dur": 3, "args": {"correlation": i}} for i in range(n)]
    ev += [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 105 + i * 10, "dur": 2,
            "args": {"correlation": i, "device": 0, "stream": 7}} for i in range(n)]
    return {"traceEvents": ev}


# --- non-finite and out-of-range numbers --------------------------------------------------------
@pytest.mark.parametrize("opts,needle", [
    (["--trim", "nan", "nan"], "--trim"), (["--trim", "inf", "2"], "--trim"), (["--trim", "1e400", "2"], "--trim"),
    (["--max-avg-us", "inf"], "--max-avg-us"), (["--max-avg-us", "0"], "--max-avg-us"),
    (["--max-avg-us", "1e-320"], "--max-avg-us"), (["--spike-us", "nan"], "--spike-us"),
    (["--spike-factor", "1e308"], "--spike-factor"), (["--min-launches", "-1"], "--min-launches"),
    (["--thresholds", "0"], "--thresholds"), (["--device", "-1"], "--device"), (["--limit", "x"], "--limit")])
def test_non_finite_and_out_of_range_options_refused_at_parse_time(opts, needle, tmp_path, capsys, monkeypatch):
    p = ROOT / "fixtures/demo/demo.sqlite"
    rc, out, err = run(["report", p, "--json"] + opts, capsys, monkeypatch, tmp_path)
    assert out == ""
    one_line(rc, err, needle)


def test_json_never_holds_nan_or_infinity_at_option_limits(tmp_path, capsys, monkeypatch):
    p = ROOT / "fixtures/demo/demo.sqlite"
    rc, out, err = run(["report", p, "--json", "--max-avg-us", "1e12", "--spike-factor", "1e6", "--spike-us", "0",
                        "--min-launches", "0", "--limit", "0"], capsys, monkeypatch, tmp_path)
    assert rc == 0 and err == ""
    doc = strict_json(out)
    assert doc["options"]["max_avg_us"] == 1e12


def test_epoch_of_infinity_leaves_wall_clock_unknown(tmp_path, capsys, monkeypatch):
    p = tmp_path / "t.sqlite"
    shutil.copy(ROOT / "fixtures/demo/demo.sqlite", p)
    con = sqlite3.connect(p)
    con.execute("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = 9e999")
    con.commit()
    con.close()
    rc, out, err = run(["report", p, "--json"], capsys, monkeypatch, tmp_path)
    assert rc == 0 and err == ""
    assert strict_json(out)["trace"]["wall_offset_ns"] is None


# --- Kineto values of the wrong type ------------------------------------------------------------
def test_kineto_wrong_types_are_skipped_and_counted_by_reason(tmp_path, capsys, monkeypatch):
    doc = kineto_doc()
    api, ker = doc["traceEvents"][:6], doc["traceEvents"][6:]
    api[1]["args"] = "a string"
    api[2]["args"] = [1, 2]
    ker[1]["dur"] = "abc"
    ker[2]["ts"] = "@1e400@"
    ker[3]["pid"] = [1]                                 # wrong type for a field of the event itself
    ker[4]["args"]["stream"] = 1234567890123456789      # a big stream id is still an id
    ker[5]["name"] = "@bad \\ud800 name@"                # lone surrogate
    text = json.dumps(doc).replace('"@1e400@"', "1e400").replace('"@bad \\\\ud800 name@"', '"bad \\ud800 name"')
    p = tmp_path / "t.json"
    p.write_text(text)
    rc, out, err = run(["info", p, "--json"], capsys, monkeypatch, tmp_path)
    assert rc == 0 and err == ""
    info = strict_json(out)
    assert info["skipped"] == {"args not an object, or correlation/device/stream of the wrong type": 2,
                               "event field of the wrong type (ph, cat, name, pid or tid)": 1,
                               "lone UTF-16 surrogate in a string (replaced by U+FFFD)": 1,
                               "ts or dur not a finite number in range": 2}
    assert info["counts"]["gpu_ops"]["kernel"] == 3 and info["counts"]["api_calls"]["launch"] == 4
    assert sorted(map(str, info["streams"]["0"])) == sorted(["7", "1234567890123456789"])
    rc, out, err = run(["info", p], capsys, monkeypatch, tmp_path)
    assert "skipped   2 × ts or dur not a finite number in range" in out


def test_kineto_invalid_utf8_in_one_event_skips_that_event(tmp_path, capsys, monkeypatch):
    """fuzz seed 2 case 1886: a bit flip put an invalid UTF-8 byte inside one event's name; only that
    event is dropped (counted), the others are read."""
    doc = kineto_doc()
    n_kernels = sum(e.get("cat") == "kernel" for e in doc["traceEvents"])
    doc["traceEvents"][6]["name"] = "@BAD@"
    p = tmp_path / "t.json"
    p.write_bytes(json.dumps(doc).encode().replace(b"@BAD@", b"bad\xffname"))
    rc, out, err = run(["info", p, "--json"], capsys, monkeypatch, tmp_path)
    assert rc == 0 and err == ""
    info = strict_json(out)
    assert info["skipped"] == {"event not decodable (e.g. invalid UTF-8 in a string)": 1}
    assert info["counts"]["gpu_ops"]["kernel"] == n_kernels - 1


def test_clean_trace_info_has_no_skipped_key(tmp_path, capsys, monkeypatch):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(kineto_doc()))
    rc, out, err = run(["info", p, "--json"], capsys, monkeypatch, tmp_path)
    assert rc == 0 and "skipped" not in strict_json(out)


def test_kineto_with_nothing_usable_left_is_one_line(tmp_path, capsys, monkeypatch):
    doc = kineto_doc()
    for e in doc["traceEvents"]:
        e["ts"] = "kernel"
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    rc, out, err = run(["info", p], capsys, monkeypatch, tmp_path)
    assert out == ""
    one_line(rc, err, "no usable events: 12 ts or dur not a finite number in range")


def test_deep_nesting_is_one_line(tmp_path, capsys, monkeypatch):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(kineto_doc()).replace('{"correlation": 2}', "[" * 100_000 + "]" * 100_000, 1))
    rc, out, err = run(["report", p], capsys, monkeypatch, tmp_path)
    one_line(rc, err, "JSON nested deeper than the decoder allows")


def test_top_level_fields_of_odd_types_are_ignored_and_counted(tmp_path, capsys, monkeypatch):
    doc = kineto_doc()
    doc["deviceProperties"] = "x"
    doc["baseTimeNanoseconds"] = "@1e400@"
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(json.dumps(doc).replace('"@1e400@"', "1e400").encode()))
    rc, out, err = run(["info", p, "--json"], capsys, monkeypatch, tmp_path)
    assert rc == 0
    assert strict_json(out)["skipped"] == {"top-level baseTimeNanoseconds of an unexpected type (ignored)": 1,
                                           "top-level deviceProperties of an unexpected type (ignored)": 1}


# --- Nsight schema surprises and NULLs ----------------------------------------------------------
def _demo_copy(tmp_path, *sql, writable_schema=False):
    p = tmp_path / "t.sqlite"
    shutil.copy(ROOT / "fixtures/demo/demo.sqlite", p)
    con = sqlite3.connect(p)
    if writable_schema:
        con.execute("PRAGMA writable_schema=ON")
    for q in sql:
        con.execute(q)
    con.commit()
    con.close()
    return p


def _kernels(p, capsys, monkeypatch, tmp_path):
    rc, out, err = run(["info", p, "--json"], capsys, monkeypatch, tmp_path)
    assert rc == 0 and err == "", err
    return strict_json(out)


@pytest.mark.parametrize("sql", [
    ["ALTER TABLE META_DATA_EXPORT RENAME COLUMN name TO key"],
    ["ALTER TABLE META_DATA_EXPORT DROP COLUMN value"],
    ["ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA"],
    ["UPDATE ThreadNames SET nameId = 1.5"], ["UPDATE ThreadNames SET nameId = '12abc'"],
    ["DROP TABLE TARGET_INFO_SESSION_START_TIME"], ["UPDATE TARGET_INFO_GPU SET name = x'ff00'"]])
def test_nsight_schema_surprises_read_as_an_export_would(sql, tmp_path, capsys, monkeypatch):
    info = _kernels(_demo_copy(tmp_path, *sql), capsys, monkeypatch, tmp_path)
    assert info["counts"]["gpu_ops"]["kernel"] == 5445


def test_invalid_utf8_text_is_decoded_with_replacement(tmp_path, capsys, monkeypatch):
    p = _demo_copy(tmp_path, "UPDATE StringIds SET value = CAST(x'41ff42' AS TEXT) WHERE value LIKE '%gemm%'")
    rc, out, err = run(["report", p, "--json", "--max-avg-us", "1e6", "--min-launches", "1", "--limit", "0"],
                       capsys, monkeypatch, tmp_path)
    assert rc == 0 and err == ""
    names = {r["kernel_name"] for r in strict_json(out)["small_kernels"]}
    assert "A\ufffdB" in names


def test_null_in_not_null_column_drops_the_whole_row_and_counts_it(tmp_path, capsys, monkeypatch):
    """NULL `end` in 7 kernel rows, the schema still saying NOT NULL: those rows go, counted."""
    con = sqlite3.connect(ROOT / "fixtures/demo/demo.sqlite")
    sql = con.execute("SELECT sql FROM sqlite_master WHERE name='CUPTI_ACTIVITY_KIND_KERNEL'").fetchone()[0]
    con.close()
    assert "NOT NULL" in sql
    p = _demo_copy(tmp_path, "CREATE TABLE k2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL",
                   "UPDATE k2 SET end = NULL WHERE rowid IN (1, 2, 3, 4, 5, 6, 7)",
                   "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL", "ALTER TABLE k2 RENAME TO CUPTI_ACTIVITY_KIND_KERNEL")
    con = sqlite3.connect(p)
    con.execute("PRAGMA writable_schema=ON")
    con.execute("UPDATE sqlite_master SET sql=? WHERE name='CUPTI_ACTIVITY_KIND_KERNEL'", (sql,))
    con.commit()
    con.close()
    info = _kernels(p, capsys, monkeypatch, tmp_path)
    assert info["counts"]["gpu_ops"]["kernel"] == 5445 - 7
    assert info["skipped"] == {"CUPTI_ACTIVITY_KIND_KERNEL rows with NULL in a NOT NULL column or start/end": 7}
    rc, out, err = run(["report", p, "--json"], capsys, monkeypatch, tmp_path)
    assert rc == 0 and err == ""


def test_every_kernel_end_null_is_counted_not_a_crash(tmp_path, capsys, monkeypatch):
    p = _demo_copy(tmp_path, "CREATE TABLE k2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL",
                   "UPDATE k2 SET end = NULL", "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL",
                   "ALTER TABLE k2 RENAME TO CUPTI_ACTIVITY_KIND_KERNEL")
    info = _kernels(p, capsys, monkeypatch, tmp_path)
    assert info["counts"]["gpu_ops"]["kernel"] == 0
    assert info["skipped"]["CUPTI_ACTIVITY_KIND_KERNEL rows with NULL in a NOT NULL column or start/end"] == 5445


def test_wrong_type_in_an_integer_column_is_one_line(tmp_path, capsys, monkeypatch):
    p = _demo_copy(tmp_path, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'abc' WHERE rowid = 3")
    rc, out, err = run(["info", p], capsys, monkeypatch, tmp_path)
    one_line(rc, err, "CUPTI_ACTIVITY_KIND_KERNEL holds values that are not integers")


# --- WAL, hot journal: never silently wrong numbers ---------------------------------------------
def test_wal_database_is_read_with_its_wal_applied(tmp_path, capsys, monkeypatch):
    """Half the kernel rows deleted in a WAL a writer has not checkpointed: SQLite sees 2,723."""
    snap = fuzz._side_file_state(None, _demo_copy(tmp_path), "wal")
    listing = sorted(os.listdir(snap.parent))
    assert "snap-t.sqlite-wal" in listing
    info = _kernels(snap, capsys, monkeypatch, tmp_path)
    assert info["counts"]["gpu_ops"]["kernel"] == 5445 - 5445 // 2
    assert sorted(os.listdir(snap.parent)) == listing, "nothing written beside the trace (no -shm)"


def test_hot_journal_is_rolled_back_not_read(tmp_path, capsys, monkeypatch):
    """Uncommitted deletions spilled into the file, with the killed writer's hot journal beside it."""
    snap = fuzz._side_file_state(None, _demo_copy(tmp_path), "journal")
    before = {n: (snap.parent / n).read_bytes() for n in os.listdir(snap.parent)}
    assert "snap-t.sqlite-journal" in before
    info = _kernels(snap, capsys, monkeypatch, tmp_path)
    assert info["counts"]["gpu_ops"]["kernel"] == 5445, "the committed state, not the writer's pages"
    assert {n: (snap.parent / n).read_bytes() for n in os.listdir(snap.parent)} == before


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
    p = _demo_copy(tmp_path)
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
    p = _demo_copy(tmp_path)
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
