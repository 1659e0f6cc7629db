"""No traceback on any input (issue 12): a fixed-seed fuzz campaign, and one named regression test
per defect class the campaign found in the values inside a trace (numbers, Kineto types, Nsight
schemas and NULLs, WAL and hot journals). Each test asserts the answer or the one-line error, not
only the absence of a crash. The files around a trace (special files, outputs, caches, nsys):
test_fuzz_files.py."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import sys

import pytest

from cli_helpers import demo_copy, kineto_doc, one_line, run, strict_json
from conftest import ROOT, optional_shared

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


def test_merge_adds_up_the_parts_of_one_campaign_and_refuses_others(tmp_path, capsys):
    """`--merge` sums the parts of one seed's campaign; parts of two seeds, or parts that share a case,
    are refused in one line (exit 2), not summed into a wrong total."""
    def part(name, seed, lo, hi, runs):
        doc = {"seed": seed, "cases": hi - lo + 1, "indices": [[lo, hi]], "runs": runs, "elapsed_s": 1.0,
               "defect_runs": 0, "defect_cases": 0, "by_family": {"nsys": {"ok": runs}}, "kinds": ["nsys/x"],
               "signatures": []}
        (tmp_path / name).write_text(json.dumps(doc))
        return str(tmp_path / name)
    a, b = part("a.json", 3, 0, 59, 120), part("b.json", 3, 60, 139, 160)
    assert fuzz.main(["--merge", a, b]) == 0
    total = fuzz.merge_summaries([json.loads(open(x).read()) for x in (a, b)])
    assert (total["cases"], total["runs"], total["indices"]) == (140, 280, [[0, 139]])
    capsys.readouterr()
    for others, needle in (([part("c.json", 4, 140, 149, 10)], "different seeds (3, 4)"),
                           ([part("d.json", 3, 50, 69, 40)], "overlap: 10 case indices"),
                           ([str(tmp_path / "absent.json")], "absent.json")):
        with pytest.raises(SystemExit) as e:
            fuzz.main(["--merge", a, *others])
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and needle in err[-1] and "Traceback" not in "".join(err), err


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
    info = _kernels(demo_copy(tmp_path, *sql), capsys, monkeypatch, tmp_path)
    assert info["counts"]["gpu_ops"]["kernel"] == 5445


def test_invalid_utf8_text_is_decoded_with_replacement(tmp_path, capsys, monkeypatch):
    p = demo_copy(tmp_path, "UPDATE StringIds SET value = CAST(x'41ff42' AS TEXT) WHERE value LIKE '%gemm%'")
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
    p = demo_copy(tmp_path, "CREATE TABLE k2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL",
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
    p = demo_copy(tmp_path, "CREATE TABLE k2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL",
                   "UPDATE k2 SET end = NULL", "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL",
                   "ALTER TABLE k2 RENAME TO CUPTI_ACTIVITY_KIND_KERNEL")
    info = _kernels(p, capsys, monkeypatch, tmp_path)
    assert info["counts"]["gpu_ops"]["kernel"] == 0
    assert info["skipped"]["CUPTI_ACTIVITY_KIND_KERNEL rows with NULL in a NOT NULL column or start/end"] == 5445


def test_wrong_type_in_an_integer_column_is_one_line(tmp_path, capsys, monkeypatch):
    p = demo_copy(tmp_path, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'abc' WHERE rowid = 3")
    rc, out, err = run(["info", p], capsys, monkeypatch, tmp_path)
    one_line(rc, err, "CUPTI_ACTIVITY_KIND_KERNEL holds values that are not integers")


# --- WAL, hot journal: never silently wrong numbers ---------------------------------------------
def test_wal_database_is_read_with_its_wal_applied(tmp_path, capsys, monkeypatch):
    """Half the kernel rows deleted in a WAL a writer has not checkpointed: SQLite sees 2,723."""
    snap = fuzz._side_file_state(None, demo_copy(tmp_path), "wal")
    listing = sorted(os.listdir(snap.parent))
    assert "snap-t.sqlite-wal" in listing
    info = _kernels(snap, capsys, monkeypatch, tmp_path)
    assert info["counts"]["gpu_ops"]["kernel"] == 5445 - 5445 // 2
    assert sorted(os.listdir(snap.parent)) == listing, "nothing written beside the trace (no -shm)"


def test_hot_journal_is_rolled_back_not_read(tmp_path, capsys, monkeypatch):
    """Uncommitted deletions spilled into the file, with the killed writer's hot journal beside it."""
    snap = fuzz._side_file_state(None, demo_copy(tmp_path), "journal")
    before = {n: (snap.parent / n).read_bytes() for n in os.listdir(snap.parent)}
    assert "snap-t.sqlite-journal" in before
    info = _kernels(snap, capsys, monkeypatch, tmp_path)
    assert info["counts"]["gpu_ops"]["kernel"] == 5445, "the committed state, not the writer's pages"
    assert {n: (snap.parent / n).read_bytes() for n in os.listdir(snap.parent)} == before
