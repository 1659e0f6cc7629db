"""Nsight StringIds of any numbering (definitions.md §H): sparse, past 2^31, next to 2^63 - 1.

The generator writes one workload under several numberings (fixtures/nsys_writer.STRING_IDS); each
must read to the dense file's model and to the ground truth, through both column readers. Real
exports are rewritten the same way (a copy, never the sample) and must give the same `report
--json` and `record --json`, apart from the file's own path, size and mtime."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3

import numpy as np
import pytest

import fixtures.synth as synth
from cli_helpers import demo_copy
from conftest import SHARED, sample
from fixtures.nsys_writer import STRING_IDS
from launchtui.analysis.launches import kernel_groups
from launchtui.cli import main
from launchtui.trace import native_columns
from launchtui.trace.load import read_trace

NUMBERINGS = [s for s in STRING_IDS if s != "dense"]


def _model(trace) -> dict:
    """Every table of the model, with the names as text (string ids are interned per read)."""
    out = {"strings": list(trace.strings.values), "devices": trace.devices, "missing": trace.missing,
           "skipped": trace.source.extra.get("skipped")}
    for table in ("ops", "api", "ranges", "threads", "overheads", "stacks", "api_stacks"):
        t = getattr(trace, table)
        out[table] = {f.name: getattr(t, f.name).tolist() for f in dataclasses.fields(t)}
    return out


@pytest.fixture(scope="module")
def dense_models(tmp_path_factory):
    d = tmp_path_factory.mktemp("dense")
    w = synth.simulate()
    return {v: _model(read_trace(synth.write_nsys_sqlite(w, d / f"{v}.sqlite", v))) for v in ("modern", "textid",
                                                                                         "legacy2021")}


@pytest.mark.parametrize("numbering", NUMBERINGS)
@pytest.mark.parametrize("variant", ["modern", "textid", "legacy2021"])
@pytest.mark.parametrize("native", ["0", "1"])
def test_any_numbering_reads_to_the_dense_model(tmp_path, monkeypatch, dense_models, numbering, variant, native):
    if native == "1" and not native_columns.enabled():
        pytest.skip(f"C reader not in use: {native_columns.status()}")
    monkeypatch.setenv(native_columns.ENV, native)
    p = synth.write_nsys_sqlite(synth.simulate(), tmp_path / "t.sqlite", variant, string_ids=numbering)
    con = sqlite3.connect(p)
    lo, hi = con.execute("SELECT min(id), max(id) FROM StringIds").fetchone()
    con.close()
    assert lo > {"sparse": 3_000_000, "above_2_31": 2**31, "near_2_63": 2**62}[numbering]
    assert hi == 2**63 - 1 if numbering == "near_2_63" else hi < 2**32
    assert _model(read_trace(p)) == dense_models[variant]


@pytest.mark.parametrize("numbering", NUMBERINGS)
def test_any_numbering_matches_the_ground_truth(tmp_path, numbering):
    w = synth.simulate()
    trace = read_trace(synth.write_nsys_sqlite(w, tmp_path / "t.sqlite", "textid", string_ids=numbering))
    gt = synth.ground_truth(w, "nsys", "textid")
    gr = kernel_groups(trace)
    got = {(int(gr.device[i]), trace.strings[int(gr.name[i])]): (int(gr.count[i]), int(gr.sum_api[i]))
           for i in range(len(gr))}
    assert got == {(r["device_id"], r["kernel_name"]): (r["launch_count"], r["sum_api_ns"]) for r in gt["kernel_table"]}
    assert not trace.source.extra.get("skipped")


# --- ids with no StringIds row: shown, counted, never silently "" ---------------------------------
def test_a_missing_kernel_name_is_shown_by_id_and_counted(tmp_path):
    con = sqlite3.connect(synth.DEMO_DIR / "demo.sqlite")
    sid, n = con.execute("SELECT shortName, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY shortName "
                         "ORDER BY count(*) DESC LIMIT 1").fetchone()
    gone = con.execute("SELECT value FROM StringIds WHERE id = ?", (sid,)).fetchone()[0]
    con.close()
    trace = read_trace(demo_copy(tmp_path, f"DELETE FROM StringIds WHERE id = {sid}"))
    names = [trace.strings[int(i)] for i in trace.ops.name]
    assert names.count(f"<string {sid}>") == n and gone not in names and "" not in names
    assert trace.source.extra["skipped"] == {
        "CUPTI_ACTIVITY_KIND_KERNEL rows whose shortName has no StringIds row (shown as <string ID>)": n}


def test_missing_api_and_thread_names_are_counted(tmp_path):
    con = sqlite3.connect(synth.DEMO_DIR / "demo.sqlite")
    api_sid, n_api = con.execute("SELECT nameId, count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY nameId "
                                 "ORDER BY count(*) LIMIT 1").fetchone()
    thr_sid, n_thr = con.execute("SELECT nameId, count(*) FROM ThreadNames GROUP BY nameId LIMIT 1").fetchone()
    con.close()
    p = demo_copy(tmp_path, f"DELETE FROM StringIds WHERE id IN ({api_sid}, {thr_sid})",
                   "UPDATE ThreadNames SET nameId = 'x' WHERE rowid = "
                   f"(SELECT max(rowid) FROM ThreadNames WHERE nameId != {thr_sid})")
    skipped = read_trace(p).source.extra["skipped"]
    assert skipped["CUPTI_ACTIVITY_KIND_RUNTIME rows whose nameId has no StringIds row (shown as <string ID>)"] == n_api
    assert skipped["ThreadNames rows whose nameId has no StringIds row (shown as <string ID>)"] == n_thr
    assert skipped["ThreadNames rows without an integer nameId or globalTid (the thread stays unnamed)"] == 1


def test_kernel_ids_past_the_packed_halves_read_apart(tmp_path):
    """One kernel's name ids moved above 2^32 and its device/stream above 2^31: the table is read
    with the pairs apart (no overflow, no mis-split); a deviceId past int32 is skipped and counted."""
    big = 2**40 + 7
    p = demo_copy(tmp_path, f"INSERT INTO StringIds VALUES ({big}, 'moved_kernel')",
                   f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET shortName = {big}, demangledName = {big}, "
                   f"streamId = {2**33 + 5} WHERE rowid = 10",
                   f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = {2**31} WHERE rowid = 11")
    base = read_trace(synth.DEMO_DIR / "demo.sqlite")
    trace = read_trace(p)
    assert len(trace.ops) == len(base.ops) - 1
    m = np.flatnonzero(trace.ops.stream == 2**33 + 5)
    assert len(m) == 1 and trace.strings[int(trace.ops.name[m[0]])] == "moved_kernel"
    assert trace.strings[int(trace.ops.full_name[m[0]])] == "moved_kernel"
    assert trace.source.extra["skipped"] == {"CUPTI_ACTIVITY_KIND_KERNEL rows whose deviceId does not fit 32 bits": 1}


@pytest.mark.parametrize("change", ["name", "corr"])
def test_api_ids_that_do_not_pack_read_apart(tmp_path, change):
    """The runtime table reads its name ids in the correlation-id column's high half; one call's
    name id above 2^31, or its correlation id NULL, reads the table with the two apart: every call
    keeps its name and correlation id (the NULL one as -1, unjoined)."""
    big = 2**31 + 7
    edit = (f"UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = {big} WHERE rowid = 10" if change == "name" else
            "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = NULL WHERE rowid = 10")
    p = demo_copy(tmp_path, f"INSERT INTO StringIds SELECT {big}, value FROM StringIds WHERE id = "
                             "(SELECT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE rowid = 10)", edit)
    base, trace = read_trace(synth.DEMO_DIR / "demo.sqlite"), read_trace(p)
    names = lambda t: sorted(t.strings[int(i)] for i in t.api.name)   # noqa: E731
    assert names(trace) == names(base) and len(trace.api) == len(base.api)
    corr = sorted(base.api.corr.tolist())
    if change == "corr":
        with sqlite3.connect(synth.DEMO_DIR / "demo.sqlite") as con:
            gone = con.execute("SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE rowid = 10").fetchone()[0]
        con.close()
        corr.remove(gone)
        corr = sorted(corr + [-1])
    assert sorted(trace.api.corr.tolist()) == corr


@pytest.mark.parametrize("sparse", [False, True])
def test_names_map_into_out_in_blocks_equals_the_plain_map(sparse, monkeypatch):
    """Names.map(out=...) writes block by block (MAP_BLOCK = 3 here) exactly what map returns,
    for small ids (a table indexed as they are) and sparse ones (an inverse)."""
    from collections import Counter
    from launchtui.trace import nsys_strings
    from launchtui.trace.model import StringTable
    from launchtui.trace.nsys_strings import Names, StringIds
    monkeypatch.setattr(nsys_strings, "MAP_BLOCK", 3)
    ids = np.random.default_rng(1).integers(0, 6, 20) * (2**40 if sparse else 1)   # 0 <= ids: a table
    names = Names(StringTable(), Counter(), StringIds.empty)
    want = names.map(ids)
    out = np.full(len(ids), -7, np.int32)
    assert names.map(ids, out=out) is out and out.tolist() == want.tolist()
    assert len(set(want.tolist())) == len(set(ids.tolist()))


@pytest.mark.parametrize("numbering", ["dense", "sparse"])
def test_kernel_names_named_beside_a_worker_as_in_one_thread(tmp_path, monkeypatch, numbering):
    """The reader names kernels' short and demangled ids with the demangled ids' numbers-only steps
    on a worker: the model (every string in its interned order, the names, the counts of ids with no
    StringIds row) is the one a single thread gives."""
    from launchtui.trace import nsys_sqlite
    p = synth.write_nsys_sqlite(synth.simulate(), tmp_path / "t.sqlite", "modern", string_ids=numbering)
    with sqlite3.connect(p) as con:   # one short and one demangled name id without a row: both counted
        for col in ("shortName", "demangledName"):
            con.execute(f"DELETE FROM StringIds WHERE id = (SELECT {col} FROM CUPTI_ACTIVITY_KIND_KERNEL "
                        f"GROUP BY {col} ORDER BY count(*) LIMIT 1)")
    con.close()
    calls = []
    real = nsys_sqlite._Reader._kernel_names

    def spy(self, hi, lo, short, full, pool=None):
        calls.append(pool is not None)
        return real(self, hi, lo, short, full, pool)
    monkeypatch.setattr(nsys_sqlite._Reader, "_kernel_names", spy)
    beside = _model(read_trace(p))
    monkeypatch.setattr(nsys_sqlite._Reader, "_kernel_names",
                        lambda self, hi, lo, short, full, pool=None: real(self, hi, lo, short, full, None))
    alone = _model(read_trace(p))
    assert calls == [True]
    assert sum("has no StringIds row" in k for k in beside["skipped"]) == 2
    assert beside == alone


# --- real exports with their string ids rewritten ---------------------------------------------------
# every column of an Nsight export that holds a StringIds id (NVIDIA's schema reference)
ID_COLUMNS = ("nameId", "shortName", "demangledName", "mangledName", "textId", "jsonTextId", "symbol", "module",
              "filenameId")
REWRITES = {"sparse": "{c} * 11 + 3000003", "above_2_31": "{c} * 11 + 2147483648 + 3000003"}
# the issue's cases: those that lost their launches or spikes to sparse ids, and Nsight 2026.2's own
NAMED = ["nsys-ai__h100_2gpu_1s", "Sh1mwww__llama3-inference__real_inference_simulation",
         "LeiWang1999__memfusion_artifact__report1", "nsys-ai__mfu_2gpu_before", "nsys-ai__mfu_2gpu_after"]
SAMPLES = sorted({p.stem for p in (SHARED / "samples" / "nsys").glob("*.sqlite")} | set(NAMED))


def rewrite_string_ids(src, dst, how: str) -> None:
    """A copy of `src` with every StringIds id, and every column referring to one, renumbered."""
    shutil.copy(src, dst)
    con = sqlite3.connect(dst)
    new = REWRITES[how]
    con.execute("UPDATE StringIds SET id = -id - 1")   # out of the way first: no key collides
    con.execute(f"UPDATE StringIds SET id = {new.format(c='(-id - 1)')}")
    for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        if table == "StringIds":
            continue
        cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")') if r[1] in ID_COLUMNS]
        if cols:
            con.execute(f'UPDATE "{table}" SET ' + ", ".join(f"{c} = {new.format(c=c)}" for c in cols))
    con.commit()
    con.close()


def _without_source(doc):
    """`doc` less every `source` object's path, size and mtime (the report embeds the record)."""
    if isinstance(doc, list):
        return [_without_source(x) for x in doc]
    if not isinstance(doc, dict):
        return doc
    return {k: ({f: x for f, x in v.items() if f not in ("path", "size", "mtime_ns")}
                if k == "source" and isinstance(v, dict) else _without_source(v)) for k, v in doc.items()}


def _outputs(p, capsys, monkeypatch, tmp_path):
    """`report --json` and `record --json` of `p`, less the file's own path, size and mtime (a trace
    these refuse, e.g. one without CUDA activity: its exit status and message). Through the test's
    own cache: `report` reads the file, `record` maps the model it stored."""
    monkeypatch.chdir(tmp_path)
    out = {}
    for cmd in ("report", "record"):
        rc = main([cmd, str(p), "--json"])
        text, err = capsys.readouterr()
        out[cmd] = (rc, _without_source(json.loads(text)) if rc == 0 else err.replace(str(p), "TRACE"))
    return out


def _sample_rewrites() -> list[tuple[str, str]]:
    """Each sample with one rewrite, the rewrites taken in turn (both schemas' id paths are covered
    on about half the samples each); `LAUNCHTUI_STRING_IDS=all` runs every sample with every rewrite."""
    hows = list(REWRITES)
    if os.environ.get("LAUNCHTUI_STRING_IDS") == "all":
        return [(n, h) for n in SAMPLES for h in hows]
    return [(n, hows[i % len(hows)]) for i, n in enumerate(SAMPLES)]


@pytest.mark.samples
@pytest.mark.parametrize("name, how", _sample_rewrites())
def test_rewritten_string_ids_give_the_same_report_and_record(name, how, tmp_path, capsys, monkeypatch):
    src = sample(f"nsys/{name}.sqlite")
    copy = tmp_path / "copy.sqlite"
    rewrite_string_ids(src, copy, how)
    con = sqlite3.connect(copy)
    assert con.execute("SELECT min(id) FROM StringIds").fetchone()[0] >= 3_000_003
    con.close()
    got, want = _outputs(copy, capsys, monkeypatch, tmp_path), _outputs(src, capsys, monkeypatch, tmp_path)
    assert got == want
    if name in NAMED:
        assert want["report"][0] == 0 and want["report"][1]["launches"]["kernel_launches"] > 0


@pytest.mark.parametrize("how", list(REWRITES))
def test_call_stacks_through_rewritten_ids(tmp_path, how):
    """CUDA_CALLCHAINS symbol and module ids rewritten with the rest: the same frames and sites."""
    from fixtures import stacks_synth
    src = tmp_path / "stacks.sqlite"
    stacks_synth.write_nsys(src)
    rewrite_string_ids(src, tmp_path / "copy.sqlite", how)
    a, b = read_trace(src), read_trace(tmp_path / "copy.sqlite")
    assert len(a.stacks) > 0 and (a.api_stacks.node >= 0).any()
    assert _model(b) == _model(a)


@pytest.mark.samples
def test_shared_samples_are_present_for_the_rewrite(shared):
    assert all((SHARED / "samples" / "nsys" / f"{n}.sqlite").is_file() for n in NAMED)
    assert len(SAMPLES) == 21
