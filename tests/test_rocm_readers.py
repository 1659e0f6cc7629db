"""The rocprofv3 rocpd and RPD readers against the generator's ground truth (no ../shared needed).

`fixtures/rocm_writer.py` writes the simulated workload as each AMD profiler would (one process,
HIP names, HSA agent numbering: device d is agent d + 2); `fixtures/truth.py` computes what it
must analyse to from the simulation's own records, never through launchtui.
"""
from __future__ import annotations

import gzip
import importlib.util
import json
import os
import shutil
import sqlite3
from collections import Counter

import numpy as np
import pytest

import fixtures.synth as synth
from conftest import ROOT
from fixtures import layout
from fixtures import rocm_writer as rw
from fixtures.truth import ground_truth
from launchtui.analysis import nvtx
from launchtui.analysis.backpressure import Options, backpressure
from launchtui.analysis.launches import kernel_groups, launched_kernels
from launchtui.analysis.queue import queue_summary
from launchtui.cli import main
from launchtui.errors import TraceError
from launchtui.trace import registry
from launchtui.trace.load import open_trace, read_trace
from launchtui.trace.model import API_GRAPH_LAUNCH, OP_KERNEL, OP_MEMCPY, OP_MEMSET

_spec = importlib.util.spec_from_file_location("metamorphic", ROOT / "scripts" / "metamorphic.py")
mm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mm)

DEV = rw.CPU_AGENTS          # truth device d is agent (device id) d + DEV in these files
FORMATS = ["rocpd", "rpd", "rpd.gz", "rocpd@shuffled", "rpd.gz@shuffled"]
EXPECT_FORMAT = {"rocpd": "rocpd-sqlite", "rpd": "rpd-sqlite", "rpd.gz": "rpd-sqlite"}


def _base(name: str) -> str:
    return name.split("@")[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("rocm")
    w = synth.simulate()
    out = {"rocpd": rw.write_rocpd(w, d / "synth_rocpd.db"), "rpd": rw.write_rpd(w, d / "synth.rpd"),
           "rpd.gz": rw.write_rpd(w, d / "synth.rpd.gz")}
    for name in ("rocpd", "rpd.gz"):   # rows in another order, string ids renumbered sparse (§9)
        src = out[name]
        out[name + "@shuffled"] = layout.shuffle_sqlite(src, d / ("shuffled_" + src.name), seed=5,
                                                        renumber=layout.RENUMBER)
    return out


@pytest.fixture(scope="module")
def truth():
    return ground_truth(rw.rocm_view(synth.simulate()))


_loaded: dict = {}


def load(files, name):
    if name not in _loaded:
        _loaded[name] = read_trace(files[name])
    return _loaded[name]


@pytest.mark.parametrize("name", FORMATS)
def test_recognised_by_content(files, name):
    t = load(files, name)
    assert t.source.format == EXPECT_FORMAT[_base(name)]
    assert t.provides(registry.FACT_RANGES) and not t.provides(registry.FACT_CPU_SAMPLING)
    assert not t.provides(registry.FACT_COMMAND_BUFFER_FULL) and not t.provides(registry.FACT_CALL_STACKS)
    assert t.source.extra.get("skipped") is None    # a clean file skips nothing
    assert set(t.devices) == {DEV, DEV + 1}
    assert t.threads.pid.tolist() == [4242, 4242] and t.threads.tid.tolist() == [4242, 4290]


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("names,key", [("short", "kernel_table"), ("full", "kernel_table_by_name")])
def test_kernel_table_exact(files, truth, name, names, key):
    trace = load(files, name)
    gr = kernel_groups(trace, names=names)
    mine = {(int(gr.device[i]) - DEV, trace.strings[int(gr.name[i])]): i for i in range(len(gr))}
    want = {(r["device_id"], r["kernel_name"]): r for r in truth[key]}
    if names == "full":   # launchtui also splits functor-less kernels by a telling template argument
        mine = {(k if k in want else (k[0], k[1].split("<")[0])): i for k, i in mine.items()}
    assert set(mine) == set(want)
    for k, r in want.items():
        i = mine[k]
        got = (int(gr.count[i]), int(gr.queue_count[i]), int(gr.sum_api[i]), int(gr.sum_queue[i]),
               int(gr.sum_kernel[i]), int(gr.max_api[i]), int(gr.span_start[i]), int(gr.span_end[i]))
        assert got == (r["launch_count"], r["queue_count"], r["sum_api_ns"], r["sum_queue_ns"],
                       r["sum_kernel_ns"], r["max_api_ns"], r["span_start_ns"], r["span_end_ns"]), k


@pytest.mark.parametrize("name", FORMATS)
def test_queue_depth_and_backpressure(files, truth, name):
    trace = load(files, name)
    got = {(q.device_id - DEV, q.stream_id): q for q in queue_summary(trace)}
    want = {(r["device_id"], r["stream_id"]): r for r in truth["queue_depth"]}
    assert set(got) == set(want)
    for k, r in want.items():
        q = got[k]
        assert (q.max_depth, q.span_ns) == (r["max"], r["last_ns"] - r["first_ns"]), k
        assert q.mean_depth == pytest.approx(r["mean_tw"], rel=1e-12), k
        assert q.time_at_or_above_ns == {1000: r["time_ge_1000_ns"], 1020: r["time_ge_1020_ns"]}, k
    bp = backpressure(trace, opt=Options(merge_gap_us=0))
    want_ep = sorted((d["device_id"] + DEV, d["stream_id"], a, b)
                     for d in truth["backpressure"]["intervals_ge_1000"] for a, b in d["intervals"])
    assert sorted((e.device, e.stream, e.start, e.end) for e in bp["episodes"]) == want_ep
    # a spike by its call's start (RPD numbers calls its own way; the simulation's ids are not kept)
    view = rw.rocm_view(synth.simulate())
    start_of = dict(zip(view.api["corr"].tolist(), view.api["start"].tolist()))
    got_spikes = sorted((int(trace.api.start[e.worst_api]), e.end - e.start) for e in bp["spikes"])
    assert got_spikes == sorted((start_of[s["correlation_id"]], s["dur_ns"]) for s in truth["backpressure"]["spikes"])
    assert bp["command_buffer_full_events"] == 0   # neither format records it


@pytest.mark.parametrize("name", FORMATS)
def test_roctx_ranges_attribute_launches(files, truth, name):
    trace = load(files, name)
    assert len(trace.ranges) == truth["counts"]["ranges"]
    k = launched_kernels(trace)
    rng = nvtx.op_ranges(trace)[k]
    names = [trace.strings[int(trace.ranges.text[r])] if r >= 0 else None for r in rng]
    got = Counter(zip(names, (trace.strings[int(n)] for n in trace.ops.name[k])))
    want = Counter({(r["range"], r["kernel_name"]): r["table_count"] for r in truth["nvtx_attribution"]
                    if r["table_count"]})
    assert got == want


@pytest.mark.parametrize("name", FORMATS)
def test_counts_join_and_graph(files, truth, name):
    trace = load(files, name)
    c, ops = truth["counts"], trace.ops
    # ROCm runs a memset as a fill kernel (rocpd records its dispatch); RPD calls it a FillBuffer op
    fills_are_kernels = _base(name) == "rocpd"
    assert int((ops.kind == OP_KERNEL).sum()) == c["kernels"] + (c["memset"] if fills_are_kernels else 0)
    assert int((ops.kind == OP_MEMSET).sum()) == (0 if fills_are_kernels else c["memset"])
    assert int((ops.kind == OP_MEMCPY).sum()) == c["memcpy"]
    assert len(ops) == c["gpu_ops"] and len(trace.api) == c["api_rows"]
    assert int((ops.api < 0).sum()) == c["unmatched_ops"] == 5
    assert len(launched_kernels(trace)) == c["table_kernels"]
    assert trace.window()[1] == truth["window"]["last_kernel_end_ns"]
    assert trace.device_ids() == [d + DEV for d in c["devices_with_ops"]]
    for g in truth["graph"]:
        m = (ops.api >= 0) & (ops.start >= g["api_start_ns"]) & np.isin(ops.api, np.flatnonzero(
            (trace.api.kind == API_GRAPH_LAUNCH) & (trace.api.start == g["api_start_ns"])))
        assert int(m.sum()) == g["ops"]


@pytest.mark.parametrize("name", ["rocpd", "rpd.gz"])
def test_shuffled_rows_and_ids_give_identical_json(files, name, tmp_path):
    """report --json and record --json, byte for byte, on rows shuffled and string ids renumbered
    (scripts/metamorphic.py; definitions.md §9)."""
    for variant in ("rows:3", "rows+ids:4", "idperm:2"):
        (r,) = mm.check_sample(files[name], [variant], tmp_path / variant.replace(":", "-"))
        assert r["same"], f"{name} {variant}: {r['differs']}"


@pytest.mark.parametrize("name", ["rocpd", "rpd", "rpd.gz"])
def test_cli_info_report_record(files, truth, name, capsys):
    path = files[name]
    assert main(["info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["source"]["format"] == EXPECT_FORMAT[name] and info["counts"]["unmatched_gpu_ops"] == 5
    assert main(["report", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    rows = {(r["device_id"] - DEV, r["kernel_name"]): r for r in rep["small_kernels"] + rep["small_kernels_nccl"]}
    want = {(r["device_id"], r["kernel_name"]): r["nsys_ai"] for r in truth["kernel_table"]}
    assert rows and set(rows) <= set(want)       # the table's filter: frequent and small
    for k, r in rows.items():
        mine = {c: v for c, v in r.items() if c not in ("is_nccl", "nvtx_range", "nvtx_share")}
        assert {**mine, "device_id": r["device_id"] - DEV} == want[k], k
    assert rep["launches"]["kernel_launches"] == truth["counts"]["table_kernels"]
    assert main(["record", str(path), "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["source"]["format"] == EXPECT_FORMAT[name]
    assert "not recorded" in rec["launch_thread_cpu"]["reason"]


def test_gzipped_database_is_read_from_the_cache_never_beside(files, tmp_path):
    d = tmp_path / "user"
    d.mkdir()
    gz = d / "trace.rpd.gz"
    shutil.copyfile(files["rpd.gz"], gz)
    stages = []
    t = open_trace(gz, progress=lambda stage, n: stages.append(stage))
    assert sorted(os.listdir(d)) == ["trace.rpd.gz"]                     # nothing written beside it
    snaps = registry_cache() / "snapshots"
    assert not snaps.exists() or not any(p.is_file() for p in snaps.rglob("*"))   # the copy is gone
    assert t.source.path == str(gz) and t.source.size == gz.stat().st_size
    assert "decompressed" in stages
    again = []
    open_trace(gz, progress=lambda stage, n: again.append(stage))         # cached as the .gz itself
    assert "loaded from cache" in again and "decompressed" not in again


def registry_cache():
    from launchtui.paths import cache_dir
    return cache_dir()


def test_damaged_gzip_is_one_line(files, tmp_path):
    bad = tmp_path / "cut.rpd.gz"
    bad.write_bytes(files["rpd.gz"].read_bytes()[:4000])
    with pytest.raises(TraceError) as e:
        read_trace(bad)
    assert "cannot decompress" in str(e.value) and str(bad) in str(e.value)


def test_foreign_sqlite_says_what_it_is_not(tmp_path):
    p = tmp_path / "other.db"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (x INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(TraceError) as e:
        read_trace(p)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(p))
    for part in ("not an Nsight Systems export", "not a rocprofv3 rocpd database", "not an RPD",
                 "not a rocprof v1 database"):
        assert part in msg
    gz = tmp_path / "other.db.gz"            # the same inside gzip: named by the user's file
    gz.write_bytes(gzip.compress(p.read_bytes()))
    with pytest.raises(TraceError) as e:
        read_trace(gz)
    assert str(e.value).startswith(str(gz)) and "not an RPD" in str(e.value)


# ---------------------------------------------------------------------------------------------
# Odd rows: skipped (or shown as <... ID>) and counted by reason, everything else unchanged (§H)

def _copy(src, dst):
    shutil.copyfile(src, dst)
    return sqlite3.connect(dst)


def test_rpd_odd_rows(files, tmp_path):
    clean = load(files, "rpd")
    con = _copy(files["rpd"], tmp_path / "odd.rpd")
    s = dict(con.execute("SELECT string, id FROM rocpd_string"))
    op = con.execute("SELECT * FROM rocpd_op LIMIT 1").fetchone()
    con.execute("INSERT INTO rocpd_string (string) VALUES ('BarrierAnd')")
    barrier = con.execute("SELECT id FROM rocpd_string WHERE string = 'BarrierAnd'").fetchone()[0]
    con.execute("INSERT INTO rocpd_op VALUES (9, ?, ?, 0, '', ?, ?, ?, ?)", (op[1], op[2], op[5], op[6], op[7], barrier))
    con.execute("INSERT INTO rocpd_op VALUES (10, ?, ?, 0, '', 200, 100, ?, ?)", (op[1], op[2], op[7], op[8]))
    first_link = con.execute("SELECT api_id, op_id FROM rocpd_api_ops ORDER BY op_id LIMIT 1").fetchone()
    con.execute("INSERT INTO rocpd_api_ops (api_id, op_id) VALUES (?, ?)", (first_link[0] + 10**12, first_link[1]))
    con.execute("INSERT INTO rocpd_api VALUES (11, 4242, 4242, 5, 6, 999999, ?)", (s[""],))
    con.commit()
    con.close()
    t = read_trace(tmp_path / "odd.rpd")
    assert t.source.extra["skipped"] == {
        "rocpd_api rows whose apiName_id has no string row (shown as <string ID>)": 1,
        "rocpd_api_ops rows linking an op another call (of a smaller id) already links": 1,
        "rocpd_op rows of type BarrierAnd (not a kernel, copy or fill)": 1,
        "rocpd_op rows whose end is before their start": 1}
    assert len(t.ops) == len(clean.ops) and len(t.api) == len(clean.api) + 1
    assert "<string 999999>" in t.strings.values
    assert np.array_equal(t.ops.start, clean.ops.start) and int((t.ops.api < 0).sum()) == 5


def test_rocpd_odd_rows(files, tmp_path):
    clean = load(files, "rocpd")
    con = _copy(files["rocpd"], tmp_path / "odd.db")
    T = {k: f'"rocpd_{k}_{rw.UUID}"' for k in ("kernel_dispatch", "region", "memory_copy")}
    cols = "guid, nid, pid, tid, agent_id, kernel_id, dispatch_id, queue_id, stream_id, start, end, event_id"
    row = con.execute(f"SELECT {cols} FROM {T['kernel_dispatch']} LIMIT 1").fetchone()
    con.execute(f"INSERT INTO {T['kernel_dispatch']} ({cols}) VALUES ({','.join('?' * 12)})",
                (*row[:5], 777, *row[6:9], 10, 20, None))            # a kernel id without a symbol
    con.execute(f"INSERT INTO {T['kernel_dispatch']} ({cols}) VALUES ({','.join('?' * 12)})",
                (*row[:9], 30, 20, None))                            # end before start
    con.execute(f"INSERT INTO {T['memory_copy']} (guid, nid, pid, start, end, name_id, dst_agent_id, src_agent_id, "
                f"size, stream_id) VALUES ('g', 1, 4242, 40, 50, 1, 2, 0, 8, NULL)")   # no stream
    con.commit()
    con.close()
    t = read_trace(tmp_path / "odd.db")
    table = f"rocpd_kernel_dispatch_{rw.UUID}"
    assert t.source.extra["skipped"] == {
        f"{table} rows whose end is before their start": 1,
        f"{table} rows whose kernel_id has no kernel symbol row (shown as <kernel ID>)": 1,
        f"rocpd_memory_copy_{rw.UUID} rows without a stream": 1}
    assert len(t.ops) == len(clean.ops) + 1 and "<kernel 777>" in t.strings.values
    assert int((t.ops.api < 0).sum()) == 6       # the dispatch without an event joins nothing


def test_os_pids_by_reader():
    assert registry.NSIGHT.pid_shift == 24 and registry.reader_for("nsys-sqlite") is registry.NSIGHT
    assert registry.reader_for("rpd-sqlite") is registry.RPD and registry.facts_of("nope") == frozenset()
    assert registry.facts_of("kineto-json") == {registry.FACT_CALL_STACKS, registry.FACT_RANGES,
                                                registry.FACT_CALL_NUMBERING}
    # RPD's ids are row ids with bits of their own: no sampling is read from their density (§V13)
    assert registry.FACT_CALL_NUMBERING in registry.facts_of("rocpd-sqlite")
    assert registry.FACT_CALL_NUMBERING not in registry.facts_of("rpd-sqlite")


def test_rpd_row_ids_do_not_make_a_trace_sampled(files):
    """An RPD database whose call ids leave most of their span unused (as the real ones do: high
    words of their own) is no sample: the density is not read for the format."""
    import copy

    from launchtui.analysis.limits import trace_limits
    t = copy.copy(load(files, "rpd"))
    t.api = copy.copy(t.api)
    t.api.corr = np.where(t.api.corr >= 0, t.api.corr * 4096, -1)   # ids spread over 4096× their count
    lim = trace_limits(t)
    assert lim["correlation_density"] is None and lim["sampled"] is False
    t.source = copy.deepcopy(t.source)
    t.source.format = "kineto-json"      # the same ids where they number every call: a sample
    assert trace_limits(t)["sampled"] is True


def test_rocpd_roctx_control_calls_are_no_ranges(files, tmp_path):
    clean = load(files, "rocpd")
    con = _copy(files["rocpd"], tmp_path / "ctl.db")
    T = {k: f'"rocpd_{k}_{rw.UUID}"' for k in ("string", "event", "region")}
    for text in ("MARKER_CONTROL_API", "roctxProfilerPause"):
        con.execute(f"INSERT INTO {T['string']} (guid, string) VALUES ('g', ?)", (text,))
    ids = dict(con.execute(f"SELECT string, id FROM {T['string']}"))
    con.execute(f"INSERT INTO {T['event']} (id, guid, category_id, stack_id, parent_stack_id, correlation_id, extdata) "
                f"VALUES (999999, 'g', ?, 424242, 424242, 0, '{{\"message\": \"pause\"}}')", (ids["MARKER_CONTROL_API"],))
    con.execute(f"INSERT INTO {T['region']} (guid, nid, pid, tid, start, end, name_id, event_id) "
                f"VALUES ('g', 7, 4242, 4242, 100, 200, ?, 999999)", (ids["roctxProfilerPause"],))
    con.commit()
    con.close()
    t = read_trace(tmp_path / "ctl.db")
    assert len(t.ranges) == len(clean.ranges) and len(t.api) == len(clean.api) + 1
    assert "roctxProfilerPause" in t.strings.values and "pause" not in t.strings.values
