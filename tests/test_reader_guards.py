"""Nothing dropped in silence, by class (definitions.md §H): every input record a reader leaves out is
counted by reason, and the counts reach `info`, `report` and the record (text and JSON); valid
records of a legal but unusual shape are read, not dropped."""
from __future__ import annotations

import gzip
import json
import sqlite3

import numpy as np

import fixtures.synth as synth
from cli_helpers import demo_copy
from launchtui.analysis.info import render_info, trace_info
from launchtui.analysis.record import build_record
from launchtui.analysis.record_markdown import render_markdown
from launchtui.analysis.report import build_report, render_text
from launchtui.trace.load import read_trace

DEMO = synth.DEMO_DIR / "demo.sqlite"


def _shown_everywhere(trace, reason: str, n: int) -> None:
    """The count reaches info, report and record, as JSON and as text."""
    info = trace_info(trace)
    assert info["skipped"][reason] == n and f"skipped   {n:,} × {reason}" in render_info(info)
    rep = build_report(trace)
    assert rep["trace"]["skipped"][reason] == n and f"skipped: {n:,} × {reason}" in render_text(rep)
    rec = build_record(trace)
    assert rec["skipped"][reason] == n and f"{n:,} × {reason}" in render_markdown(rec)


# --- Nsight --------------------------------------------------------------------------------------
def test_nvtx_ranges_without_an_end_are_counted_and_texts_stay_aligned(tmp_path):
    con = sqlite3.connect(DEMO)
    rows = con.execute("SELECT rowid, text FROM NVTX_EVENTS WHERE eventType = 59 ORDER BY rowid").fetchall()
    con.close()
    open_rows = [r for r, _ in rows[1::50]]
    p = demo_copy(tmp_path, f"UPDATE NVTX_EVENTS SET end = NULL WHERE rowid IN ({','.join(map(str, open_rows))})")
    base, trace = read_trace(DEMO), read_trace(p)
    assert len(trace.ranges) == len(base.ranges) - len(open_rows)
    want = sorted(t for r, t in rows if r not in open_rows)
    assert sorted(trace.strings[int(i)] for i in trace.ranges.text) == want   # every text on its own range
    _shown_everywhere(trace, "NVTX_EVENTS ranges without an end (open when the capture stopped; left out)",
                      len(open_rows))


def test_nvtx_texts_line_up_when_a_row_is_dropped(tmp_path):
    """A NULL start where the schema says NOT NULL drops the row from the integer read; the inline
    texts are read for exactly the kept rows, so no range takes its neighbour's name."""
    con = sqlite3.connect(DEMO)
    (rowid, gone), = con.execute("SELECT rowid, text FROM NVTX_EVENTS WHERE eventType = 59 ORDER BY rowid "
                                 "LIMIT 1 OFFSET 7").fetchall()
    names = sorted(t for (t,) in con.execute("SELECT text FROM NVTX_EVENTS WHERE eventType = 59"))
    sql = con.execute("SELECT sql FROM sqlite_master WHERE name = 'NVTX_EVENTS'").fetchone()[0]
    con.close()
    p = demo_copy(tmp_path, "CREATE TABLE n2 AS SELECT * FROM NVTX_EVENTS", f"UPDATE n2 SET start = NULL WHERE rowid = {rowid}",
              "DROP TABLE NVTX_EVENTS", "ALTER TABLE n2 RENAME TO NVTX_EVENTS")
    con = sqlite3.connect(p)
    con.execute("PRAGMA writable_schema=ON")
    con.execute("UPDATE sqlite_master SET sql = ? WHERE name = 'NVTX_EVENTS'", (sql,))
    con.commit()
    con.close()
    trace = read_trace(p)
    names.remove(gone)
    assert sorted(trace.strings[int(i)] for i in trace.ranges.text) == names
    assert trace.source.extra["skipped"] == {"NVTX_EVENTS rows with NULL in a NOT NULL column or start/end": 1}


def test_call_stack_ids_without_chains_are_counted(tmp_path):
    from fixtures import stacks_synth
    p = tmp_path / "s.sqlite"
    stacks_synth.write_nsys(p)
    con = sqlite3.connect(p)
    n = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE callchainId = 3").fetchone()[0]
    con.execute("DELETE FROM CUDA_CALLCHAINS WHERE id = 3")
    con.commit()
    con.close()
    trace = read_trace(p)
    assert n and trace.source.extra["skipped"] == {
        "CUPTI_ACTIVITY_KIND_RUNTIME rows whose callchainId has no CUDA_CALLCHAINS rows (no call stack)": n}


def test_a_clean_export_shows_no_skipped_key_anywhere():
    trace = read_trace(DEMO)
    assert "skipped" not in trace_info(trace) and "skipped" not in build_report(trace)["trace"]
    assert "skipped" not in build_record(trace) and "Skipped input" not in render_markdown(build_record(trace))


# --- Kineto --------------------------------------------------------------------------------------
def _kineto(tmp_path, edit) -> tuple:
    doc = json.loads(gzip.decompress((synth.DEMO_DIR / "demo.json.gz").read_bytes()))
    base = read_trace(synth.DEMO_DIR / "demo.json.gz")
    edit(doc["traceEvents"])
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    return base, read_trace(p)


def test_generator_artefacts_are_counted():
    """The generator writes two `ts: 0, dur: 0` kernels into every Kineto file: dropped, counted."""
    trace = read_trace(synth.DEMO_DIR / "demo.json.gz")
    gt = synth.ground_truth(synth.simulate(), "kineto", "modern")
    assert trace.source.extra["skipped"] == {"GPU op with ts 0 and dur 0 (a profiler artefact)":
                                             gt["kineto"]["artefact_kernels"]} == {
        "GPU op with ts 0 and dur 0 (a profiler artefact)": 2}
    assert int((trace.ops.kind == 0).sum()) == gt["counts"]["kernels"]


def test_kineto_args_with_invalid_utf8_skip_only_their_event(tmp_path):
    """A byte that is not UTF-8 inside an operator's call stack (a bit flip the outer decode passes
    over, as args stay raw until decoded on their own): that operator's args are skipped and
    counted, every op and call still read (fuzz seed 116, case 84: a traceback before)."""
    skip = "args not an object, or correlation/device/stream of the wrong type"
    doc = json.loads(gzip.decompress((synth.DEMO_DIR / "demo.json.gz").read_bytes()))
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    ops[100]["args"]["Call stack"] = "model.py(97): forward;site-packages/s\u00e9te/x.py(1): f"
    raw = json.dumps(doc, ensure_ascii=False).encode()
    assert raw.count("s\u00e9te".encode()) == 1
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_bytes(raw)
    bad.write_bytes(raw.replace("s\u00e9te".encode(), b"s\xe9te"))   # a lone 0xE9: not UTF-8
    ok_trace, bad_trace = read_trace(good), read_trace(bad)
    assert skip not in ok_trace.source.extra.get("skipped", {})
    assert bad_trace.source.extra["skipped"][skip] == 1
    assert len(bad_trace.ops) == len(ok_trace.ops) and len(bad_trace.api) == len(ok_trace.api)


def test_kineto_ids_that_are_not_integers_skip_the_event(tmp_path):
    """A correlation of 2.5 would join the call of correlation 2, "abc" none: both are skipped and
    counted; integral floats and integer strings are ids."""
    picked = {}

    def edit(ev):
        kernels = [e for e in ev if e.get("cat") == "kernel" and e.get("dur")]
        a, b, c, d = kernels[100:104]
        picked.update(a=a["args"]["correlation"], c=c["args"]["correlation"], d=d["args"]["correlation"])
        a["args"]["correlation"] += 0.5
        b["args"]["correlation"] = "abc"
        c["args"]["correlation"] = float(c["args"]["correlation"])
        d["args"]["correlation"] = str(d["args"]["correlation"])
    base, trace = _kineto(tmp_path, edit)
    assert len(trace.ops) == len(base.ops) - 2
    assert trace.source.extra["skipped"]["args not an object, or correlation/device/stream of the wrong type"] == 2
    assert picked["a"] not in set(trace.ops.corr.tolist())
    for k in ("c", "d"):
        (i,) = np.flatnonzero(trace.ops.corr == picked[k])
        assert trace.ops.api[i] >= 0 and trace.api.corr[trace.ops.api[i]] == picked[k]


def test_kineto_events_that_are_not_complete_are_counted(tmp_path):
    def edit(ev):
        ann = next(e for e in ev if e.get("cat") == "user_annotation")
        ev.append({**ann, "ph": "B"})
        ev.append({**ann, "ph": "E", "ts": ann["ts"] + 5})
        ev.append({**next(e for e in ev if e.get("cat") == "python_function"), "ph": "i"})
    base, trace = _kineto(tmp_path, edit)
    assert len(trace.ranges) == len(base.ranges)
    sk = trace.source.extra["skipped"]
    assert sk["CUDA API, GPU op or annotation event that is not a complete event (ph other than X)"] == 2
    assert sk["python_function or cpu_op event that is not a complete event (ph other than X)"] == 1
