"""The AMD profilers' real files in ../shared/samples/rocm/ against the oracles they carry.

- rocprofv3 rocpd: its own summary views `top_kernels` (per kernel) and `top` (per call name);
- RPD: its `top` view (per op name), and for the matmul run the Chrome trace rpd2tracing made of it
  (`rpd_matmul_result.json`: µs truncated by integer division, ops per name, calls, api->op flows);
- rocprof v1: the Chrome trace rocprof made of the same run (exact ns in its args).
The views and JSON are read with plain sqlite3 / json here, never through launchtui.
"""
from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
import sqlite3
from collections import Counter, defaultdict

import pytest

from conftest import ROOT, sample, sample_model
from launchtui.cli import main
from launchtui.trace.load import read_trace
from launchtui.trace.model import OP_KERNEL

pytestmark = pytest.mark.samples

ROCPD = "rocm/mi300x_rocprofv3_bmm_rocpd.db"
RPD = "rocm/rpd_matmul_result.rpd"
RPD_GZ = "rocm/rpd_pytorch_autograd_callstack.rpd.gz"
V1 = "rocm/mi300a_rocprof_v1_results.db"
FORMATS = {ROCPD: "rocpd-sqlite", RPD: "rpd-sqlite", RPD_GZ: "rpd-sqlite", V1: "rocprof-v1-sqlite"}


def _ro(path):
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def _per_name(trace, mask=None, dur=lambda ns: ns):
    """{full name: [ops, summed dur(end - start)]} over the ops in `mask`."""
    out = defaultdict(lambda: [0, 0])
    ops = trace.ops
    for i in range(len(ops)):
        if mask is None or mask[i]:
            g = out[trace.strings[int(ops.full_name[i])]]
            g[0] += 1
            g[1] += dur(int(ops.end[i]) - int(ops.start[i]))
    return out


def test_every_file_opens_or_says_why_in_one_line(capsys):
    folder = sample(ROCPD).parent
    seen = {}
    for p in sorted(folder.iterdir()):
        rc = main(["info", str(p), "--json", "--no-cache"])
        out, err = capsys.readouterr()
        if rc == 0:
            seen[p.name] = json.loads(out)["source"]["format"]
        else:
            assert rc == 2 and len(err.strip().splitlines()) == 1 and str(p) in err, (p, err)
            seen[p.name] = "error: " + err.strip().split(f"{p}: ", 1)[1]
    assert {k: v for k, v in seen.items() if not k.endswith((".json", ".md"))} == {
        "mi300a_rocprof_v1_results.db": "rocprof-v1-sqlite", "mi300x_rocprofv3_bmm_rocpd.db": "rocpd-sqlite",
        "rpd_matmul_result.rpd": "rpd-sqlite", "rpd_pytorch_autograd_callstack.rpd.gz": "rpd-sqlite"}
    assert seen["SOURCES.md"].startswith("error: not a supported trace")
    # the Chrome-trace exports have no Kineto categories: read as Kineto, they hold no GPU activity
    assert seen["rpd_matmul_result.json"] == seen["mi300a_rocprof_v1_results.json"] == "kineto-json"


def test_rocpd_equals_its_own_views():
    path = sample(ROCPD)
    t = read_trace(path)
    kernels = _per_name(t, t.ops.kind == OP_KERNEL)
    views = _ro(path).execute("SELECT name, total_calls, total_duration FROM top_kernels").fetchall()
    assert {n: (c, d) for n, c, d in views} == {n: (c, d / 1000.0) for n, (c, d) in kernels.items()}
    calls, time = Counter(), Counter()
    for i in range(len(t.api)):
        n = t.strings[int(t.api.name[i])]
        calls[n] += 1
        time[n] += int(t.api.end[i] - t.api.start[i])
    top = {n: (c, d) for n, c, d in _ro(path).execute("SELECT name, total_calls, total_duration FROM top")
           if n in calls}
    assert top == {n: (calls[n], time[n] / 1000.0) for n in calls}
    assert (top["hipLaunchKernel"], top["hipMemset"]) == ((150, 2009.678), (151, 189556.178))
    assert int((t.ops.api >= 0).sum()) == len(t.ops) == 301     # every dispatch joined by stack_id
    assert t.devices == {2: "AMD Instinct MI300X"}


@pytest.mark.parametrize("rel", [RPD, RPD_GZ])
def test_rpd_equals_its_top_view(rel, tmp_path):
    path = sample(rel)
    db = path
    if rel.endswith(".gz"):
        db = tmp_path / "plain.rpd"
        with gzip.open(path, "rb") as f, open(db, "wb") as g:
            shutil.copyfileobj(f, g)
    t = read_trace(path)
    # `top`: ops per description (else op type), total duration in µs by integer division
    top = {n: (c, d) for n, c, d in _ro(db).execute("SELECT Name, TotalCalls, TotalDuration FROM top")}
    mine = _per_name(t)
    assert top == {n: (c, d // 1000) for n, (c, d) in mine.items()}
    assert int((t.ops.api >= 0).sum()) == len(t.ops)
    if rel == RPD_GZ:
        assert (len(t.ops), len(t.ranges), int((t.ops.kind == OP_KERNEL).sum())) == (10124, 11884, 8948)


def test_rpd_equals_its_chrome_trace():
    t = sample_model(RPD)
    events = [e for e in json.loads(sample("rocm/rpd_matmul_result.json").read_text()) if e]
    gpu = [e for e in events if e.get("ph") == "X" and e["pid"] == "2"]       # pid = gpuId, tid = queueId
    cpu = [e for e in events if e.get("ph") == "X" and e["pid"] != "2"]
    want = defaultdict(lambda: [0, 0])
    for e in gpu:
        want[e["name"]][0] += 1
        want[e["name"]][1] += int(e["dur"])
    assert dict(want) == dict(_per_name(t, dur=lambda ns: ns // 1000))
    assert sorted((e["name"], int(e["ts"]), int(e["tid"])) for e in gpu) == sorted(
        (t.strings[int(t.ops.full_name[i])], int(t.ops.start[i]) // 1000, int(t.ops.stream[i])) for i in range(len(t.ops)))
    assert Counter(e["name"] for e in cpu) == Counter(t.strings[int(n)] for n in t.api.name)
    # flows: from the call's thread at min(call end - 2 µs, op start), to the op's start
    flows = {e["id"]: e for e in events if e.get("cat") == "api_op"}
    starts = Counter((int(e["tid"]), int(e["ts"])) for e in events if e.get("cat") == "api_op" and e["ph"] == "s")
    ends = Counter(int(e["ts"]) for e in events if e.get("cat") == "api_op" and e["ph"] == "f")
    a = t.ops.api
    assert len(flows) and (a >= 0).all()
    assert starts == Counter((int(t.threads.tid[t.api.thread[a[i]]]), min(int(t.api.end[a[i]]) // 1000 - 2,
                              int(t.ops.start[i]) // 1000)) for i in range(len(t.ops)))
    assert ends == Counter(int(s) // 1000 for s in t.ops.start)
    launches = Counter(e["name"] for e in cpu if e["name"] in ("hipLaunchKernel", "hipExtModuleLaunchKernel"))
    assert launches == {"hipLaunchKernel": 28, "hipExtModuleLaunchKernel": 1}


def test_rocprof_v1_equals_its_chrome_trace():
    t = sample_model(V1)
    events = json.loads(sample("rocm/mi300a_rocprof_v1_results.json").read_text())["traceEvents"]
    x = [e for e in events if e and e.get("ph") == "X"]
    api = [e for e in x if str(e["pid"]) == "2"]        # "CPU HIP API"
    gpu = [e for e in x if str(e["pid"]) != "2"]
    assert sorted((e["name"], int(e["args"]["BeginNs"]), int(e["args"]["EndNs"]), int(e["args"]["dev-id"]),
                   int(e["args"]["stream-id"])) for e in gpu) == sorted(
        (t.strings[int(t.ops.full_name[i])], int(t.ops.start[i]), int(t.ops.end[i]), int(t.ops.device[i]),
         int(t.ops.stream[i])) for i in range(len(t.ops)))
    assert sorted((e["name"], int(e["args"]["BeginNs"])) for e in api) == sorted(
        (t.strings[int(t.api.name[i])], int(t.api.start[i])) for i in range(len(t.api)))
    joined = sorted((t.strings[int(t.ops.name[i])], t.strings[int(t.api.name[t.ops.api[i]])]) for i in range(len(t.ops)))
    assert joined == [("CopyDeviceToHost", "hipMemcpy"), ("CopyHostToDevice", "hipMemcpy"),
                      ("CopyHostToDevice", "hipMemcpy"), ("vector_add", "hipLaunchKernel")]
    assert len([e for e in events if e and e.get("ph") == "s"]) == len(t.ops)   # one flow per op


@pytest.mark.parametrize("rel", [ROCPD, RPD, RPD_GZ, V1])
def test_cli_report_and_record(rel, capsys):
    path = sample(rel)
    assert main(["report", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["trace"]["source"]["format"] == FORMATS[rel]
    assert main(["record", str(path), "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["source"]["format"] == FORMATS[rel] and rec["launch_thread_cpu"]["available"] is False
    if rel in (ROCPD, RPD):   # the file's `busy` view: summed op time per agent, wall time first op to last
        (gpu_ns, wall_ns), = _ro(path).execute("SELECT GpuTime, WallTime FROM busy").fetchall()
        t = read_trace(path)
        busy_ns = round(rec["per_iteration"]["gpu_busy_ms"]["median"] * 1e6)   # a union: overlaps once
        assert int((t.ops.end - t.ops.start).sum()) == gpu_ns and busy_ns <= gpu_ns
        assert round(rec["per_iteration"]["iteration_ms"]["median"] * 1e6) == wall_ns
        assert busy_ns == (gpu_ns if rel == RPD else 2213462)   # rocpd: dispatches overlap by 396 ns
    if rel == ROCPD:
        (row,) = rep["small_kernels"]
        assert (row["kernel_name"], row["device_id"], row["launch_count"], row["total_api_ms"]) == \
            ("batched_matrix_multiplication_matrix_core_128x128x16_transe", 2, 150, 2.01)
        assert rec["device_id"] == 2 and rec["per_iteration"]["launches"]["median"] == 150


_spec = importlib.util.spec_from_file_location("metamorphic", ROOT / "scripts" / "metamorphic.py")
mm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mm)


@pytest.mark.parametrize("rel,variant", [(ROCPD, "rows+ids:1"), (RPD, "idperm:1"), (V1, "rows:2"),
                                         pytest.param(RPD_GZ, "rows+ids:1", marks=pytest.mark.slow)])
def test_another_layout_gives_identical_json(rel, variant, tmp_path):
    (r,) = mm.check_sample(sample(rel), [variant], tmp_path)
    assert r["same"], r["differs"]


@pytest.mark.tui
@pytest.mark.parametrize("rel", [ROCPD, RPD_GZ])
def test_tui_opens_with_the_launch_table(rel):
    from tui_helpers import make_app, run, screen_text, wait_ready
    path = sample(rel)

    async def go():
        app = make_app(path)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_ready(app, pilot)
            assert not app.error_message
            txt = screen_text(app)
            assert {r.device for r in app.main.timeline.rows if r.kind == "hw"} == {2}
            names = {r["kernel_name"] for r in app.main.table.rows}
            if rel == ROCPD:
                assert names == {"batched_matrix_multiplication_matrix_core_128x128x16_transe"}
                assert "rocprofv3 rocpd schema 3" in txt and "GPU 2 · AMD Instinct MI300X" in txt
            else:
                assert "RPD schema 2" in txt and len(names) >= 1
    run(go())
