"""GPU ops that joined no launch call (definitions.md §V8 `launch_join`): the record and the report
say what failed to join, with the rows on each side and why, never just "cannot judge"."""
from __future__ import annotations

import gzip
import json
import shutil
import sqlite3

import pytest

import fixtures.synth as synth
from launchtui.analysis.join_check import launch_join
from launchtui.analysis.record import build_record
from launchtui.analysis.record_markdown import render_markdown
from launchtui.analysis.report import build_report, render_text
from launchtui.analysis.select import Selection
from launchtui.trace.load import read_trace

GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
DEMO = synth.DEMO_DIR / "demo.sqlite"
LAUNCH_NAMES = "cu%Launch%"   # the demo's launch calls: cudaLaunchKernel(ExC), cuLaunchKernel(Ex), cudaGraphLaunch


def _counts():
    """The demo's launch calls and GPU ops, from the file itself."""
    con = sqlite3.connect(f"file:{DEMO}?mode=ro&immutable=1", uri=True)
    calls = con.execute("SELECT count(*), min(r.correlationId), max(r.correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                        f"JOIN StringIds s ON s.id = r.nameId WHERE s.value LIKE '{LAUNCH_NAMES}'"
                        ).fetchone()
    ops = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in GPU_TABLES}
    con.close()
    return calls, ops


def _copy(tmp_path, *sql):
    p = tmp_path / "t.sqlite"
    shutil.copy(DEMO, p)
    con = sqlite3.connect(p)
    for q in sql:
        con.execute(q)
    con.commit()
    con.close()
    return p


def _each_gpu_table(assignment: str) -> list[str]:
    return [f"UPDATE {t} SET {assignment}" for t in GPU_TABLES]


def test_correlation_ids_that_do_not_overlap(tmp_path):
    (n_calls, lo, hi), ops = _counts()
    trace = read_trace(_copy(tmp_path, *_each_gpu_table("correlationId = correlationId + 50000000")))
    lj = launch_join(trace)
    assert (lj["launch_calls"], lj["gpu_ops"], lj["joined"], lj["unmatched_ops"]) == (n_calls, sum(ops.values()), 0,
                                                                                     sum(ops.values()))
    assert lj["gpu_ops_by_kind"] == {"kernel": ops[GPU_TABLES[0]], "memcpy": ops[GPU_TABLES[1]],
                                     "memset": ops[GPU_TABLES[2]]}
    assert lj["reason"].startswith(f"the correlation ids of the two sides do not overlap (launch calls {lo:,}–{hi:,}, "
                                   "unjoined GPU ops 50,000,")
    rec = build_record(trace)
    assert rec["launch_join"] == lj and rec["launch_bound"] is None
    assert rec["conclusion"].startswith(f"cannot judge: no launched GPU ops: {n_calls:,} launch calls and "
                                        f"{sum(ops.values()):,} GPU ops (kernel {ops[GPU_TABLES[0]]:,}, ")
    assert "0 joined: the correlation ids of the two sides do not overlap" in render_markdown(rec)
    rep = build_report(trace)
    assert rep["launch_join"] == lj and rep["launches"]["kernel_launches"] == 0
    assert f"no launched GPU ops: {n_calls:,} launch calls and" in render_text(rep)


def test_processes_that_differ(tmp_path):
    (n_calls, _, _), ops = _counts()
    trace = read_trace(_copy(tmp_path, *_each_gpu_table("globalPid = globalPid + 7 * 16777216")))
    lj = launch_join(trace)
    assert lj["launch_calls"] == n_calls and lj["unmatched_ops"] == sum(ops.values())
    assert "share a correlation id with a launch call but not its process (GPU ops in processes 4249, 5158, " \
           "launch calls in processes 4242, 5151)" in lj["reason"]


def test_launch_names_without_strings(tmp_path):
    """The launch calls' names have no StringIds row: no call is a launch, the ops joined other calls."""
    (n_calls, _, _), ops = _counts()
    trace = read_trace(_copy(tmp_path, f"DELETE FROM StringIds WHERE value LIKE '{LAUNCH_NAMES}'"))
    lj = launch_join(trace)
    assert lj["launch_calls"] == 0 and lj["unmatched_ops"] < sum(ops.values())
    assert lj["reason"].startswith("no API call is a launch call (cudaLaunch*/cuLaunch*, definitions.md §2); "
                                   f"{n_calls:,} API rows have a name id with no StringIds row; ")
    other = [r["api_name"] for r in lj["joined_other_calls"]]
    assert other[0].startswith("<string ") and not any("Launch" in n for n in other)
    rec = build_record(trace)
    assert rec["skipped"] == {"CUPTI_ACTIVITY_KIND_RUNTIME rows whose nameId has no StringIds row (shown as "
                              "<string ID>)": n_calls}
    assert "Skipped input (definitions.md §H): " in render_markdown(rec)
    assert build_report(trace)["trace"]["skipped"] == rec["skipped"]


def test_kineto_correlations_that_do_not_overlap(tmp_path):
    doc = json.loads(gzip.decompress((synth.DEMO_DIR / "demo.json.gz").read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "correlation" in e.get("args", {}):
            e["args"]["correlation"] += 10_000_000
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    lj = launch_join(read_trace(p))
    assert lj["launch_calls"] > 1000 and lj["joined"] == 0
    assert "the correlation ids of the two sides do not overlap" in lj["reason"]


def test_joined_traces_and_empty_selections_have_none():
    trace = read_trace(DEMO)
    assert launch_join(trace) is None
    assert "launch_join" not in build_report(trace) and "launch_join" not in build_record(trace)
    assert launch_join(trace, Selection(t0=0, t1=1)) is None   # no GPU op in it


@pytest.mark.samples
@pytest.mark.parametrize("name", ["frasertajima__WeatherBench2__report1", "davidev886__tutorial_vqe__report1"])
def test_real_exports_without_launched_ops_keep_their_line(name):
    """No launch failed there: one memset joined its cudaMemsetAsync (frasertajima), no GPU op at
    all (davidev). Ops that all joined calls of other kinds are not a failed join."""
    from conftest import sample_model
    rec = build_record(sample_model(f"nsys/{name}.sqlite"))
    assert "launch_join" not in rec and rec["conclusion"] == "cannot judge: no launched GPU ops in this trace or selection"


def test_a_range_of_copies_only_is_not_a_failed_join():
    """`--nvtx` on a range that launched only memsets: every op joined its call, nothing to explain."""
    from launchtui.analysis.select import SelectionSpec, build_selection
    trace = read_trace(DEMO)
    sel = build_selection(trace, SelectionSpec(nvtx="zero_grad"))
    assert build_report(trace, sel)["launches"]["kernel_launches"] == 0
    assert launch_join(trace, sel) is None
