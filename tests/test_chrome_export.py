"""`launchtui export --format chrome` on generated traces (no ../shared): Kineto's conventions, exact
times, the record's overlays, the round trip through launchtui's own Kineto reader, `-o` rules, and the
TUI's export dialog. Real samples: test_chrome_samples.py."""
from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict

import numpy as np
import pytest

from chrome_helpers import cli, cli_json, diff, export, load, ns, unexpected
from conftest import synth_all
from launchtui.analysis.chrome_export import IDLE_TID
from launchtui.analysis.idle_causes import CAUSES
from launchtui.trace.load import open_trace
from launchtui.trace.model import OP_KIND_NAMES, OVERHEAD_COMMAND_BUFFER_FULL

OP_CAT = {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset"}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return synth_all(tmp_path_factory)


@pytest.fixture(scope="module")
def modern(files, tmp_path_factory):
    """The Nsight modern file, its model and its whole export (tokens as text)."""
    out = tmp_path_factory.mktemp("out") / "synth.trace.json.gz"
    return {"path": files[("nsys", "modern")], "trace": open_trace(files[("nsys", "modern")], use_cache=False),
            "out": out, "doc": export(files[("nsys", "modern")], out)}


def _events(doc, ph=None, cat=None):
    return [e for e in doc["traceEvents"] if (ph is None or e.get("ph") == ph) and (cat is None or e.get("cat") == cat)]


# --- the file --------------------------------------------------------------------------------------

def test_header_names_the_unit_clock_devices_and_origin(modern):
    doc, tr = modern["doc"], modern["trace"]
    assert doc["displayTimeUnit"] == "ns" and doc["schemaVersion"] == "1"
    assert int(doc["baseTimeNanoseconds"]) == tr.source.wall_offset_ns
    assert [(int(p["id"]), p["name"]) for p in doc["deviceProperties"]] == sorted(tr.devices.items())
    lt = doc["launchtui"]
    assert lt["format"] == "chrome" and lt["selection"] == "whole trace" and lt["source"]["format"] == "nsys-sqlite"
    assert doc["traceEvents"][-1]["name"] == "Record Window End"
    assert modern["out"].read_bytes()[:2] == b"\x1f\x8b"      # .gz name: gzip


def test_gpu_ops_carry_device_stream_and_correlation_by_kineto_category(modern):
    doc, tr = modern["doc"], modern["trace"]
    ops = tr.ops
    for k, name in enumerate(OP_KIND_NAMES):
        evs = _events(doc, "X", OP_CAT[name])
        assert len(evs) == int((ops.kind == k).sum()) > 0
        for e in evs:
            a = e["args"]
            assert e["pid"] == a["device"] and e["tid"] == a["stream"] and "correlation" in a
    # times are the model's exactly, as µs with three decimals
    kern = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in _events(doc, "X", "kernel"))
    m = ops.kind == 0
    assert kern == sorted(zip(ops.start[m].tolist(), ops.end[m].tolist()))
    assert all(len(e["ts"].split(".")[1]) == 3 for e in _events(doc, "X"))


def test_api_calls_ranges_and_command_buffer_full_on_their_threads(modern):
    doc, tr = modern["doc"], modern["trace"]
    names = tr.strings
    rt, drv = _events(doc, "X", "cuda_runtime"), _events(doc, "X", "cuda_driver")
    assert len(rt) + len(drv) == len(tr.api)
    assert drv and all(e["name"].startswith("cu") and not e["name"].startswith("cuda") for e in drv)
    assert {e["name"] for e in drv} == {names[int(i)] for i in np.unique(tr.api.name)
                                        if names[int(i)].startswith("cu") and not names[int(i)].startswith("cuda")}
    threads = set(zip(tr.threads.pid.tolist(), tr.threads.tid.tolist()))
    assert {(int(e["pid"]), int(e["tid"])) for e in rt + drv} <= threads
    assert len(_events(doc, "X", "user_annotation")) == len(tr.ranges)
    cbf = _events(doc, "X", "overhead")
    assert len(cbf) == int((tr.overheads.type == OVERHEAD_COMMAND_BUFFER_FULL).sum()) > 0
    assert {e["name"] for e in cbf} == {"Command Buffer Full"}


def test_flows_link_each_launch_call_to_its_ops(modern):
    doc, tr = modern["doc"], modern["trace"]
    ops, api = tr.ops, tr.api
    matched = ops.api >= 0
    s, f = _events(doc, "s", "ac2g"), _events(doc, "f", "ac2g")
    assert len(f) == int(matched.sum()) and len(s) == len(np.unique(ops.api[matched]))
    assert all(e.get("bp") == "e" for e in f)
    # every f sits on its op (same device, stream, start and correlation), every s on its call
    op_at = {(e["pid"], e["tid"], e["ts"]): e["args"]["correlation"] for e in _events(doc, "X") if e["cat"] in OP_CAT.values()}
    assert all(op_at[(e["pid"], e["tid"], e["ts"])] == e["id"] for e in f)
    call_at = {(e["pid"], e["tid"], e["ts"]): e["args"]["correlation"] for e in _events(doc, "X")
               if e["cat"] in ("cuda_runtime", "cuda_driver")}
    assert all(call_at[(e["pid"], e["tid"], e["ts"])] == e["id"] for e in s)
    # graph launches: one s, one f per op of the replay
    g = Counter(e["id"] for e in f)
    assert max(g.values()) == 20      # the workload's cudaGraphLaunch feeds 20 kernels


def test_correlation_ids_of_two_processes_are_made_disjoint(modern):
    """The second process reuses the first one's ids (as CUDA does, per process); Kineto joins on the id
    alone, so the export raises the later process's ids above the earlier one's."""
    doc, tr = modern["doc"], modern["trace"]
    by_pid = defaultdict(set)
    for e in _events(doc, "X"):
        if e["cat"] in ("cuda_runtime", "cuda_driver"):
            by_pid[e["pid"]].add(int(e["args"]["correlation"]))
    assert len(by_pid) == 2
    (lo_a, hi_a), (lo_b, hi_b) = sorted((min(v), max(v)) for v in by_pid.values())
    assert hi_a < lo_b
    api = tr.api
    first = [set(api.corr[api.pid == p].tolist()) for p in np.unique(api.pid)]
    assert first[0] & first[1]       # the original's ids overlap


def test_counters_are_the_pending_depth_series(modern):
    from launchtui.analysis.index import trace_index
    doc, tr = modern["doc"], modern["trace"]
    got = defaultdict(list)
    for e in _events(doc, "C"):
        got[(int(e["pid"]), e["name"])].append((ns(e["ts"]), int(e["args"]["pending"])))
    want = {(s.device, f"stream {s.stream} pending launches"): list(zip(s.t.tolist(), s.v.astype(int).tolist()))
            for s in trace_index(tr).queue_series if len(s.t)}
    assert got == want and max(v for pts in got.values() for _, v in pts) == 1022


def test_idle_causes_cover_the_record_devices_idle_time(modern):
    """The idle slices of the record's device fill each iteration's idle time exactly (no GPU op under
    them, nothing idle left out), and per cause they give the record's mean ms per iteration."""
    doc = modern["doc"]
    rec = cli_json("record", modern["path"], "--json")
    dev = rec["device_id"]
    idle = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]) for e in _events(doc, "X", "launchtui_gpu_idle")]
    assert idle and all(int(e["pid"]) == dev and int(e["tid"]) == IDLE_TID for e in _events(doc, "X", "launchtui_gpu_idle"))
    assert {c for *_, c in idle} <= set(CAUSES)
    busy = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in _events(doc, "X")
                  if e["cat"] in OP_CAT.values() and int(e["pid"]) == dev)
    starts, ends = rec["iterations"]["starts_ns"], rec["iterations"]["ends_ns"]
    per = Counter()
    for a, b in zip(starts, ends):
        cover = np.zeros(b - a, np.int8)            # ns resolution over one ~6 ms iteration
        for s, e in busy:
            cover[max(s, a) - a:max(min(e, b), a) - a] = 1
        for s, e, c in idle:
            seg = cover[max(s, a) - a:max(min(e, b), a) - a]
            assert not seg.any(), "an idle slice lies on a GPU op"
            seg[:] = 1
            per[c] += len(seg)
        assert cover.all(), "idle time without a cause slice"
    mean = rec["idle_by_cause"]["mean_per_iteration_ms"]
    assert {c: round(per[c] / len(starts) / 1e6, 6) for c in CAUSES} == mean


def test_iteration_starts_blocked_launches_and_cpu_stalls_are_marked(modern, tmp_path):
    doc = export(modern["path"], tmp_path / "burst.json", "--iter", "inference_burst")
    rec = cli_json("record", modern["path"], "--json", "--iter", "inference_burst")
    marks = Counter(e["name"] for e in _events(doc, "i", "launchtui_marker"))
    assert marks == {"Iteration Start: inference_burst #0": 1, "blocked launch": 30, "CPU stall": 3}
    assert sum(s["blocked_launches"] for s in rec["streams"]) == 30
    starts = [ns(e["ts"]) for e in _events(doc, "i", "launchtui_marker") if e["name"].startswith("Iteration")]
    assert starts == rec["iterations"]["starts_ns"]
    blocked = [e for e in _events(doc, "i", "launchtui_marker") if e["name"] == "blocked launch"]
    assert {(e["args"]["device"], e["args"]["stream"]) for e in blocked} == {("0", "7")}
    assert all(e["s"] == "t" for e in blocked)
    # the default iterations (ProfilerStep#N) are marked in the whole export
    assert Counter(e["name"] for e in _events(modern["doc"], "i", "launchtui_marker")
                   if e["name"].startswith("Iteration")) == {"Iteration Start: ProfilerStep#1": 1, "Iteration Start: ProfilerStep#2": 1, "Iteration Start: ProfilerStep#3": 1, "Iteration Start: ProfilerStep#4": 1}


def test_slices_on_cpu_threads_and_the_idle_track_nest_properly(modern):
    """Perfetto's JSON importer needs the `X` slices of one thread nested or disjoint: the API calls,
    ranges, command-buffer-full rows and stack carriers of each CPU thread, and the idle track."""
    by = defaultdict(list)
    for e in _events(modern["doc"], "X"):
        if e["cat"] not in OP_CAT.values():
            s = ns(e["ts"])
            by[(e["pid"], e["tid"])].append((s, -(s + ns(e["dur"])), s + ns(e["dur"])))
    assert len(by) >= 4
    for key, evs in by.items():
        evs.sort()
        open_ends: list = []
        for s, _, e in evs:
            while open_ends and open_ends[-1] <= s:
                open_ends.pop()
            assert not open_ends or e <= open_ends[-1], key
            open_ends.append(e)


# --- exact times -----------------------------------------------------------------------------------

def test_negative_and_sub_microsecond_times_are_exact(files, tmp_path):
    p = files[("nsys", "negative_ts")]
    tr = open_trace(p, use_cache=False)
    doc = export(p, tmp_path / "neg.json")
    toks = [e["ts"] for e in _events(doc, "X", "user_annotation")]
    assert any(t.startswith("-") for t in toks)
    got = sorted(ns(e["ts"]) for e in _events(doc, "X", "user_annotation"))
    assert got == sorted(tr.ranges.start.tolist()) and min(got) < 0
    back = open_trace(tmp_path / "neg.json", use_cache=False)
    for a, b in ((tr.ops, back.ops), (tr.api, back.api), (tr.ranges, back.ranges)):
        assert np.array_equal(np.sort(a.start), np.sort(b.start)) and np.array_equal(np.sort(a.end), np.sort(b.end))


# --- the round trip --------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("key", [("nsys", "modern"), ("nsys", "textid"), ("nsys", "negative_ts"), ("kineto", "modern"),
                                 ("kineto", "legacy2021")])
def test_whole_export_round_trips_report_and_record(files, tmp_path, key):
    p = files[key]
    out = tmp_path / "rt.trace.json.gz"
    export(p, out)
    for cmd in (("report", "--json"), ("record", "--json"), ("report", "--json", "--by", "source")):
        a, b = cli_json(cmd[0], p, *cmd[1:]), cli_json(cmd[0], out, *cmd[1:])
        assert unexpected(a, b) == [], cmd
    if key == ("nsys", "textid"):      # NVTX domains come back as domains
        t0, t1 = open_trace(p, use_cache=False), open_trace(out, use_cache=False)
        doms = lambda t: sorted({t.strings[int(d)] for d in t.ranges.domain if d >= 0})   # noqa: E731
        assert doms(t0) == doms(t1) == ["synth_app"]


def test_same_data_in_any_order_exports_the_same_events(files, tmp_path):
    a = export(files[("kineto", "modern")], tmp_path / "a.json")
    b = export(files[("kineto", "shuffled")], tmp_path / "b.json")
    assert a["traceEvents"] == b["traceEvents"]
    a.pop("launchtui"), b.pop("launchtui")
    assert a == b


# What a range export cannot reproduce under the same --trim: facts of the whole trace (its window,
# extent and devices; the devices with launches anywhere and their streams' verdicts; the first
# launches of the capture; the correlation-id density and the ops launched before the capture; the
# device's submission latency L, measured over all its launches; graph-launched ops per stream), and
# backpressure episodes that run past the range (cut at the file's edge). README "Chrome trace export".
RANGE_WHOLE_TRACE = {
    "/trace/window_ns[]", "/trace/window_s[]", "/trace/extent_ns[]", "/trace/devices",
    "/queues[]/graph_ops", "/queues[]/ceiling/backlog_ops", "/record/devices", "/record/streams",
    "/record/cold_start/calls", "/record/cold_start/distinct_first_launches", "/record/cold_start/first_launches",
    "/record/cold_start/launches", "/record/cold_start/total_ms", "/record/limits/ops_without_launch",
    "/record/limits/trimmed_start", "/record/idle_by_cause/latency/samples", "/record/idle_by_cause/latency/source",
    "/record/idle_by_cause/latency/us", "/record/idle_by_cause/launch_limit/latency_ms", "/record/checks[]/detail",
    "/record/verdict"}


def _paths(diffs) -> set:
    import re
    return {re.sub(r"\[\d+\]", "[]", p) for p, *_ in diffs}


@pytest.mark.slow
def test_range_export_with_the_same_trim_gives_the_ranges_figures(modern, tmp_path):
    """A range from step 3 into the inference burst: the kernel table, the queue figures and the
    record's per-iteration figures equal the trace's under the same --trim; what differs is listed."""
    tr = modern["trace"]
    w0, w1 = tr.window()
    a_s, b_s = repr((w0 + (w1 - w0) * 0.35) / 1e9), repr((w0 + (w1 - w0) * 0.8) / 1e9)
    out = tmp_path / "range.json"
    doc = export(modern["path"], out, "--trim", a_s, b_s)
    assert int(doc["launchtui"]["context_ops"]) > 0
    a = cli_json("report", modern["path"], "--json", "--trim", a_s, b_s)
    b = cli_json("report", out, "--json", "--trim", a_s, b_s)
    for k in ("launches", "small_kernels", "small_kernels_nccl", "unmatched_kernels"):
        assert a[k] == b[k], k
    keep = ("max_depth", "mean_depth", "point_mean_depth", "span_ns", "time_at_or_above_ns")
    assert [{k: q[k] for k in keep} for q in a["queues"]] == [{k: q[k] for k in keep} for q in b["queues"]]
    assert [{k: v for k, v in q["ceiling"].items() if k != "backlog_ops"} for q in a["queues"] if q["ceiling"]] == \
        [{k: v for k, v in q["ceiling"].items() if k != "backlog_ops"} for q in b["queues"] if q["ceiling"]]
    assert a["small_kernels"] and max(q["max_depth"] for q in a["queues"]) == 1022
    assert a["backpressure"]["spikes"] == b["backpressure"]["spikes"]
    ra, rb = a["record"], b["record"]
    for k in ("iterations", "per_iteration", "top", "syncs", "overhead_share", "conclusion"):
        assert ra[k] == rb[k], k
    assert _paths(unexpected(a, b)) == RANGE_WHOLE_TRACE
    rc, text, _ = cli("info", out, "--no-cache")
    lo = doc["launchtui"]["window_ns"][0]
    assert rc == 0 and f"--trim {int(lo) / 1e9:.9f}" in text


# --- the command line ------------------------------------------------------------------------------

def test_output_file_rules_gzip_and_stdout(modern, tmp_path):
    p = modern["path"]
    out = tmp_path / "x.trace.json"
    rc, _, err = cli("export", p, "--format", "chrome", "-o", out)
    assert rc == 0 and f"wrote {out}" in err
    before = out.read_bytes()
    rc, _, err = cli("export", p, "--format", "chrome", "-o", out)
    assert rc == 2 and "exists; use --force" in err and err.count("\n") == 1 and out.read_bytes() == before
    rc, _, _ = cli("export", p, "--format", "chrome", "-o", out, "--force")
    assert rc == 0 and out.read_bytes() == before          # same trace, same bytes
    gz = tmp_path / "x.trace.json.gz"
    assert cli("export", p, "--format", "chrome", "-o", gz)[0] == 0
    assert gz.read_bytes()[:2] == b"\x1f\x8b" and gzip.decompress(gz.read_bytes()) == before
    rc, _, err = cli("export", p, "--format", "chrome", "-o", tmp_path / "no" / "such.json")
    assert rc == 2 and err.count("\n") == 1 and "does not exist" in err
    rc, _, err = cli("export", p, "--format", "perfetto")
    assert rc == 2 and err.count("\n") == 1 and "invalid choice" in err
    assert not list(tmp_path.glob(".*.tmp"))


def test_stdout_gets_the_same_document(modern, capfdbinary):
    from launchtui.cli import main
    assert main(["export", str(modern["path"]), "--format", "chrome", "--no-cache"]) == 0
    data = capfdbinary.readouterr().out
    assert json.loads(data)["traceEvents"] == json.loads(gzip.decompress(modern["out"].read_bytes()))["traceEvents"]


def test_the_launchtui_format_is_unchanged_by_default(modern, tmp_path):
    out = tmp_path / "r.json"
    rc, _, _ = cli("export", modern["path"], "-o", out, "--no-cache")
    assert rc == 0 and json.loads(out.read_text())["kind"] == "launchtui-range-export"


# --- the TUI ---------------------------------------------------------------------------------------

@pytest.mark.tui
@pytest.mark.slow
def test_ctrl_t_in_the_export_dialog_writes_the_chrome_trace_the_command_writes(modern, tmp_path, monkeypatch):
    from tui_helpers import make_app, record_notifications, run, settle, wait_ready
    monkeypatch.chdir(tmp_path)

    async def go():
        app = make_app(modern["path"], trace=modern["trace"])
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_ready(app, pilot)
            await pilot.press("minus")
            await settle(app, pilot)
            v0, v1 = int(app.main.timeline.view.start), int(app.main.timeline.view.end)
            notes = record_notifications(app)
            await pilot.press("e")
            await pilot.pause()
            dlg = app.screen
            assert dlg.default_name.endswith(".launchtui.json")
            await pilot.press("ctrl+t")
            await pilot.pause()
            name = dlg.default_name
            assert name.endswith(".trace.json.gz") and dlg.query_one("#export-path").value == name
            assert "--format chrome" in str(dlg.query_one("#hint").render())
            await pilot.press("enter")
            await settle(app, pilot)
            for _ in range(50):
                if (tmp_path / name).exists():
                    break
                await pilot.pause(0.1)
            cli_out = tmp_path / "cli.trace.json.gz"
            rc, _, err = cli("export", modern["path"], "--format", "chrome", "--trim", repr(v0 / 1e9), repr(v1 / 1e9),
                             "-o", cli_out)
            assert rc == 0, err
            assert (tmp_path / name).read_bytes() == cli_out.read_bytes()
            assert any("wrote" in n and name in n for n in notes)
    run(go())
