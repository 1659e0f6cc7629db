"""Launching thread CPU busy (docs/definitions.md §V10) and the record of a trace with launches but no
GPU activity (§V11): synthetic ground truth (fixtures/cpu_sched.py) and real samples checked against
plain sqlite3 queries."""
from __future__ import annotations

import sqlite3
import statistics

import numpy as np
import pytest

from conftest import sample, sample_model
from fixtures import cpu_sched as cs
from fixtures import record_cases as rc
from fixtures import synth
from launchtui.analysis import cpu_busy
from launchtui.analysis.record import GPU_NOT_RECORDED, build_record
from launchtui.analysis.record_markdown import render_markdown
from launchtui.trace import nsys_cpu
from launchtui.trace.load import open_trace


def _main_thread(w, lo, hi) -> int:
    """globalTid making most launch-kind calls (kernel or graph launches) starting in [lo, hi)."""
    kinds = [a.kind in ("launch", "graph") for a in w.api_types]
    count: dict[int, int] = {}
    for s, t, ty in zip(w.api["start"].tolist(), w.api["thread"].tolist(), w.api["type"].tolist()):
        if kinds[ty] and lo <= s < hi:
            g = w.threads[t].global_tid
            count[g] = count.get(g, 0) + 1
    return min(count, key=lambda g: (-count[g], g))


def _written(tmp_path, scenario="profiler_step", variant="modern", **kw):
    sc = rc.SCENARIOS[scenario]
    p = synth.write_nsys_sqlite(rc.workload(sc), tmp_path / f"{scenario}.{variant}.sqlite", variant=variant)
    w = rc.nsys_view(sc, variant)
    runs = cs.add_cpu_tables(p, w, **kw)
    return p, w, runs


def test_busy_from_sched_events_to_the_tenth_of_a_percent(tmp_path):
    p, w, runs = _written(tmp_path)
    trace = open_trace(p, use_cache=False)
    steps = rc.step_ranges(w, rc.primary_device(w))
    lo, hi = steps[0][0], steps[-1][1]
    doc = build_record(trace)["launch_thread_cpu"]
    assert doc["available"] is True and doc["source"] == "SCHED_EVENTS" and doc["window_ns"] == [lo, hi]
    g = _main_thread(w, lo, hi)
    row = doc["threads"][0]
    assert (row["pid"] << 24) + row["tid"] == g & 0xFFFFFFFFFFFF
    wall = hi - lo
    on = cs.on_cpu_ns(runs[g], lo, hi)
    syncs = cs.sync_intervals(w, g)
    sync_ns = cs.on_cpu_ns(syncs, lo, hi)
    assert sync_ns > 0   # the step ends in a cudaStreamSynchronize
    outside = cs.on_cpu_outside_ns(runs[g], syncs, lo, hi)
    assert row["on_cpu_ms"] == round(on / 1e6, 3)
    assert row["busy_pct"] == round(on / wall * 100, 1) == doc["busy_pct"]
    assert row["sync_ms"] == round(sync_ns / 1e6, 3) and row["sync_pct"] == round(sync_ns / wall * 100, 1)
    assert row["busy_outside_sync_pct"] == round(outside / (wall - sync_ns) * 100, 1)
    per = [cs.on_cpu_ns(runs[g], s, e) / (e - s) * 100 for s, e in steps]
    assert row["per_iteration_busy_pct"]["median"] == round(statistics.median(per), 1)
    # 70 % duty: busy outside syncs between 50 and 90 -> partly busy
    assert 65 < row["busy_pct"] < 75 and doc["reading"] == "partly_busy"
    # both launching threads listed, most launches first; the samples cross-check the runs
    assert len(doc["threads"]) == 2 and doc["threads"][0]["launches"] >= doc["threads"][1]["launches"]
    n = sum(lo <= t < hi for t in cs.sample_times(runs[g]))
    assert row["samples"] == n and doc["sample_interval_ns"] == cs.SAMPLE_NS
    assert row["sampled_busy_pct"] == round(n * cs.SAMPLE_NS / wall * 100, 1)
    assert abs(row["sampled_busy_pct"] - row["busy_pct"]) < 2
    # the odd scheduling rows are skipped, each counted by its reason
    sk = trace.source.extra["skipped"]
    assert (sk[nsys_cpu.SKIP_OUT_UNPAIRED], sk[nsys_cpu.SKIP_IN_UNPAIRED], sk[nsys_cpu.SKIP_NO_THREAD]) == (1, 1, 1)
    assert len(trace.cpu_runs) == sum(len(v) for v in runs.values())


def test_busy_estimated_from_samples_without_sched_events(tmp_path):
    p, w, runs = _written(tmp_path, sched=False)
    trace = open_trace(p, use_cache=False)
    steps = rc.step_ranges(w, rc.primary_device(w))
    lo, hi = steps[0][0], steps[-1][1]
    doc = build_record(trace)["launch_thread_cpu"]
    g = _main_thread(w, lo, hi)
    n = sum(lo <= t < hi for t in cs.sample_times(runs[g]))
    row = doc["threads"][0]
    assert doc["source"] == "COMPOSITE_EVENTS" and doc["sample_interval_ns"] == cs.SAMPLE_NS
    assert row["busy_pct"] == round(n * cs.SAMPLE_NS / (hi - lo) * 100, 1) and row["running_sample_share"] == 1.0
    assert "estimated from CPU samples" in doc["note"]
    assert "skipped" not in trace.source.extra


def test_cache_keeps_cpu_tables(tmp_path):
    p, _, _ = _written(tmp_path)
    first = open_trace(p)           # read and cached
    from launchtui.trace.load import open_cached
    second = open_cached(p)         # from the cache
    assert not second.fresh
    second = second.trace
    assert len(second.cpu_runs) == len(first.cpu_runs) > 0
    for a, b in ((first.cpu_runs, second.cpu_runs), (first.cpu_samples, second.cpu_samples)):
        for col in ("thread", "start", "end") if a is first.cpu_runs else ("thread", "time", "state"):
            assert np.array_equal(getattr(a, col), getattr(b, col)), col
    assert build_record(first)["launch_thread_cpu"] == build_record(second)["launch_thread_cpu"]


def test_pairing_rules():
    from collections import Counter
    sk = Counter()
    # thread 7: out (unpaired), in 10, out 20, in 20, out 30, in 40 (unpaired); thread 8: in 5, in 6 (first unpaired), out 9
    g = [7, 7, 7, 7, 7, 7, 8, 8, 8, -1]
    t = [0, 10, 20, 20, 30, 40, 5, 6, 9, 3]
    i = [0, 1, 0, 1, 0, 1, 1, 1, 0, 1]
    r = nsys_cpu.pair_runs(np.array(g), np.array(t), np.array(i), sk)
    assert list(zip(r.thread.tolist(), r.start.tolist(), r.end.tolist())) == [(7, 10, 20), (7, 20, 30), (8, 6, 9)]
    assert sk == {nsys_cpu.SKIP_OUT_UNPAIRED: 1, nsys_cpu.SKIP_IN_UNPAIRED: 2, nsys_cpu.SKIP_NO_THREAD: 1}


def test_kineto_says_not_available(tmp_path):
    p = synth.write_kineto_json(synth.simulate(), tmp_path / "t.json")
    doc = build_record(open_trace(p, use_cache=False))["launch_thread_cpu"]
    assert doc["available"] is False and "Kineto" in doc["reason"]


def test_record_without_gpu_activity_states_cpu_side_facts(tmp_path):
    p, w, runs = _written(tmp_path, "dry", "no_kernels")
    trace = open_trace(p, use_cache=False)
    assert len(trace.ops) == 0
    doc = build_record(trace)
    steps = rc.step_ranges(w, 0)
    kinds = [a.kind in ("launch", "graph") for a in w.api_types]
    launches, api_ns = [], []
    for s0, e0 in steps:
        m = [k for k in range(len(w.api["start"])) if kinds[w.api["type"][k]] and s0 <= w.api["start"][k] < e0]
        launches.append(len(m))
        api_ns.append(sum(int(w.api["end"][k] - w.api["start"][k]) for k in m))
    it = doc["iterations"]
    assert (it["source"], list(zip(it["starts_ns"], it["ends_ns"]))) == ("ProfilerStep", steps)
    pi = doc["per_iteration"]
    assert pi["launches"]["median"] == statistics.median(launches) > 0
    assert pi["launch_api_ms"]["median"] == round(statistics.median(api_ns) / 1e6, 6)
    assert pi["gpu_busy_ms"] is pi["gpu_idle_ms"] is pi["exposed_overhead_ms"] is None
    assert doc["empty"] == GPU_NOT_RECORDED and doc["gpu_recorded"] is False
    assert doc["overhead_share"] is doc["amdahl_bound"] is doc["launch_bound"] is doc["backpressure"] is None
    assert doc["streams"] == [] and doc["top"] == [] and doc["cross_checks"]["idle_gaps"] is None
    n_sync = sum(1 for s, t in zip(w.api["start"].tolist(), w.api["type"].tolist())
                 if "Synchronize" in w.api_types[t].name and steps[0][0] <= s < steps[-1][1])
    assert sum(b["count"] for b in doc["syncs"]["by_api"]) == n_sync > 0
    assert sum(a["count"] for a in doc["cross_checks"]["api_totals"]) == sum(launches)
    assert doc["launch_thread_cpu"]["available"] is True
    assert "cannot judge" in doc["conclusion"] and "nsys profile --trace=cuda" in doc["conclusion"]
    page = render_markdown(doc)
    assert "GPU activity not recorded" in page and "Launches/iteration" in page
    assert "Launching thread CPU busy: main launching thread" in page
    # the TUI's panel states the same facts instead of only "empty" (definitions.md §V11)
    from launchtui.tui.verdict import COMPACT, FULL, ONE, VerdictSettings, panel_lines
    full, _ = panel_lines(doc, VerdictSettings(), FULL)
    assert full[0].startswith("Verdict: cannot judge: GPU activity not recorded") and "--trace=cuda" in full[0]
    assert f"{statistics.median(launches):,.0f} launches/iter" in full[1]
    assert f"launch API {statistics.median(api_ns) / 1e6:,.3f} ms/iter" in full[1]
    assert f"{doc['syncs']['per_iteration']['median']:,.0f} host syncs/iter" in full[1]
    assert full[2].startswith(" Launching thread: on the CPU") and len(full) == 3
    assert panel_lines(doc, VerdictSettings(), COMPACT)[0] == full[:2]
    assert panel_lines(doc, VerdictSettings(), ONE)[0] == full[:1]


def test_record_without_launches_or_gpu_is_still_empty(tmp_path):
    p = synth.write_nsys_sqlite(synth.simulate(), tmp_path / "n.sqlite", variant="no_cuda")
    doc = build_record(open_trace(p, use_cache=False))
    assert doc["empty"] == "no launched GPU ops in this trace or selection" and "gpu_recorded" not in doc


# --- real samples: each figure against a plain sqlite3 query --------------------------------------------

SQL_MAIN = """SELECT r.globalTid, COUNT(*) AS c FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
  WHERE (s.value LIKE 'cudaLaunch%' OR s.value LIKE 'cuLaunch%' OR s.value LIKE 'cudaGraphLaunch%'
         OR s.value LIKE 'cuGraphLaunch%') AND r.start >= ? AND r.start < ? GROUP BY 1 ORDER BY c DESC LIMIT 1"""
SQL_ON_CPU = """WITH ev AS (SELECT start, isSchedIn, LEAD(start) OVER w AS nxt, LEAD(isSchedIn) OVER w AS nin
  FROM SCHED_EVENTS WHERE globalTid = ? WINDOW w AS (ORDER BY start, isSchedIn))
  SELECT TOTAL(MAX(0, MIN(nxt, ?) - MAX(start, ?))) FROM ev WHERE isSchedIn != 0 AND nin = 0"""
SQL_SYNC = """SELECT TOTAL(MAX(0, MIN(r.end, ?) - MAX(r.start, ?))) FROM CUPTI_ACTIVITY_KIND_RUNTIME r
  JOIN StringIds s ON s.id = r.nameId WHERE r.globalTid = ? AND (s.value LIKE '%Synchronize%'
  OR s.value GLOB 'cudaMemcpy_v[0-9]*' OR s.value GLOB 'cudaMemset_v[0-9]*'
  OR s.value IN ('cudaMemcpy', 'cuMemcpyDtoH', 'cuMemcpyDtoH_v2', 'cudaMemset'))"""

REAL = {  # sample: (main thread busy %, reading)
    "Sh1mwww__llama3-inference__real_inference_simulation.sqlite": (17.8, "mostly_off_cpu"),
    "0x822a5b87__test-cuda__report1.sqlite": (92.5, "waiting_in_syncs"),
    "bwyogatama__Mordred-Deprecated__report1.sqlite": (100.0, "waiting_in_syncs"),
    "LeiWang1999__memfusion_artifact__report1.sqlite": (100.0, "waiting_in_syncs"),
    "ZhangXin8069__qcu__refer__qcu__test__report10.sqlite": (93.9, "waiting_in_syncs"),
}


@pytest.mark.samples
@pytest.mark.parametrize("name", sorted(REAL))
def test_real_busy_matches_sqlite(name):
    path = sample(f"nsys/{name}")
    doc = build_record(sample_model(f"nsys/{name}"))["launch_thread_cpu"]
    lo, hi = doc["window_ns"]
    con = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    gtid, launches = con.execute(SQL_MAIN, (lo, hi)).fetchone()
    on = con.execute(SQL_ON_CPU, (gtid, hi, lo)).fetchone()[0]
    sync = con.execute(SQL_SYNC, (hi, lo, gtid)).fetchone()[0]
    row = doc["threads"][0]
    assert doc["source"] == "SCHED_EVENTS" and ((row["pid"] << 24) | row["tid"]) == gtid & 0xFFFFFFFFFFFF
    assert row["launches"] == launches
    assert row["on_cpu_ms"] == round(on / 1e6, 3) and row["busy_pct"] == round(on / (hi - lo) * 100, 1)
    assert row["sync_ms"] == round(sync / 1e6, 3)
    assert (row["busy_pct"], doc["reading"]) == REAL[name]


@pytest.mark.samples
def test_real_samples_agree_with_sched_on_llama():
    """Where the thread is sampled often enough, samples × interval gives the same busy share."""
    doc = build_record(sample_model("nsys/Sh1mwww__llama3-inference__real_inference_simulation.sqlite"))["launch_thread_cpu"]
    row = doc["threads"][0]
    assert row["samples"] == 171 and abs(row["sampled_busy_pct"] - row["busy_pct"]) <= 0.5


@pytest.mark.samples
def test_qcu_record_without_kernel_table():
    path = sample("nsys/ZhangXin8069__qcu__refer__qcu__test__report10.sqlite")
    doc = build_record(open_trace(path, use_cache=False))
    con = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    n_launch, launch_ns = con.execute(
        "SELECT COUNT(*), TOTAL(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value LIKE 'cudaLaunch%' OR s.value LIKE 'cuLaunch%'").fetchone()
    lo, hi = doc["iterations"]["starts_ns"][0], doc["iterations"]["ends_ns"][0]
    n_sync, sync_ns = con.execute(
        "SELECT COUNT(*), TOTAL(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value LIKE '%Synchronize%' AND r.start >= ? AND r.start < ?", (lo, hi)).fetchone()
    assert doc["empty"] == GPU_NOT_RECORDED and doc["iterations"]["source"] == "none"
    assert doc["per_iteration"]["launches"]["median"] == n_launch == 5756
    assert doc["per_iteration"]["launch_api_ms"]["median"] == round(launch_ns / 1e6, 6)
    assert doc["syncs"]["total_ms"] == round(sync_ns / 1e6, 3)
    assert sum(b["count"] for b in doc["syncs"]["by_api"]) == n_sync
    assert doc["per_iteration"]["gpu_busy_ms"] is None and doc["launch_bound"] is None
    assert doc["launch_thread_cpu"]["busy_pct"] == 93.9
    assert "--trace=cuda" in doc["conclusion"] and "5,756 launches" in doc["conclusion"]


def test_reading_rules():
    row = {"sync_pct": 10.0, "busy_pct": 95.0, "busy_outside_sync_pct": 95.0}
    assert cpu_busy.reading(row) == "busy"
    assert cpu_busy.reading({**row, "sync_pct": 50.0}) == "waiting_in_syncs"
    assert cpu_busy.reading({**row, "busy_outside_sync_pct": 49.9}) == "mostly_off_cpu"
    assert cpu_busy.reading({**row, "busy_outside_sync_pct": 50.0}) == "partly_busy"


@pytest.mark.samples
def test_verdict_panel_shows_one_cpu_line():
    from launchtui.tui.verdict import COMPACT, VerdictSettings, panel_lines
    doc = build_record(sample_model("nsys/Sh1mwww__llama3-inference__real_inference_simulation.sqlite"))
    lines, styles = panel_lines(doc, VerdictSettings())
    cpu = [x for x in lines if x.startswith(" Launching thread:")]
    assert cpu == [" Launching thread: on the CPU 18 %, 1 % in syncs — mostly off cpu (SCHED_EVENTS)"]
    assert len(lines) == len(styles)
    assert not any(x.startswith(" Launching thread:") for x in panel_lines(doc, VerdictSettings(), COMPACT)[0])


@pytest.mark.samples
@pytest.mark.parametrize("name, busy, outside", [
    ("Sh1mwww__llama3-inference__real_inference_simulation.sqlite", 17.8, 16.6),
    ("0x822a5b87__test-cuda__report1.sqlite", 92.9, 77.2)])
def test_real_samples_alone_estimate_what_sched_events_measure(name, busy, outside):
    """Without the runs, the samples give the estimate, within 1.5 points of the scheduling figures
    (regularly sampled threads: interval 709.7 µs and 2.0 ms)."""
    from launchtui.trace.model import CpuRuns
    trace = sample_model(f"nsys/{name}")
    sched = build_record(trace)["launch_thread_cpu"]
    trace.cpu_runs = CpuRuns.empty()
    est = build_record(trace)["launch_thread_cpu"]
    assert est["source"] == "COMPOSITE_EVENTS" and est["reading"] == sched["reading"]
    r, s = est["threads"][0], sched["threads"][0]
    assert (r["busy_pct"], r["busy_outside_sync_pct"]) == (busy, outside)
    assert abs(r["busy_pct"] - s["busy_pct"]) <= 1.5 and abs(r["busy_outside_sync_pct"] - s["busy_outside_sync_pct"]) <= 1.5


def test_ranks_table_leaves_a_cpu_side_rank_without_per_iteration_figures(tmp_path):
    """A rank whose record is CPU-side (any device's launches) is not set beside the GPU ranks' figures."""
    import json
    import shutil
    from launchtui.cli import main
    paths = synth.make_trace_files(tmp_path, variants=["nsys:no_kernels", "nsys:modern"])
    d = tmp_path / "ranks"
    d.mkdir()
    shutil.copy(paths[("nsys", "no_kernels")], d / "rank0.sqlite")
    shutil.copy(paths[("nsys", "modern")], d / "rank1.sqlite")
    assert main(["report", str(d), "--json", "-o", str(tmp_path / "o.json")]) == 0
    rows = {r["rank"]: r for r in json.loads((tmp_path / "o.json").read_text())["ranks"]}
    assert (rows[0]["iterations"], rows[0]["launches_per_iter"], rows[0]["launch_api_ms_per_iter"]) == (0, None, None)
    assert rows[1]["iterations"] == 4 and rows[1]["launches_per_iter"] == 482.0


@pytest.mark.samples
def test_info_counts_the_cpu_tables(capsys):
    from launchtui.cli import main
    path = sample("nsys/Sh1mwww__llama3-inference__real_inference_simulation.sqlite")
    con = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    n_samples, n_threads = con.execute("SELECT COUNT(*), COUNT(DISTINCT globalTid) FROM COMPOSITE_EVENTS").fetchone()
    sched_threads = con.execute("SELECT COUNT(DISTINCT globalTid) FROM SCHED_EVENTS").fetchone()[0]
    assert main(["info", str(path), "--json", "--no-cache"]) == 0
    import json
    cpu = json.loads(capsys.readouterr().out)["cpu"]
    assert (cpu["samples"], cpu["sample_threads"]) == (n_samples, n_threads)
    assert cpu["sched_threads"] <= sched_threads and cpu["sched_runs"] > 0
    assert main(["info", str(path), "--no-cache"]) == 0
    assert f"{n_samples:,} samples of {n_threads} threads (COMPOSITE_EVENTS)" in capsys.readouterr().out
    assert main(["info", str(sample("nsys/nsys-ai__mock.sqlite")), "--no-cache"]) == 0
    assert "cpu       no scheduling or sampling data" in capsys.readouterr().out
