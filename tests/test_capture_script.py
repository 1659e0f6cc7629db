"""scripts/capture_gpu_traces.py (issue 3): the parts that need no GPU.

Most tests need no torch (the project's CI has none): argument parsing, the trace table, manifest
building, the size-limit logic, the engine measurements and checks on synthetic traces, --remeasure and
the one-line failure without torch or CUDA. When torch is importable, the CPU dry run runs too.
"""
from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "capture_gpu_traces.py"
README = ROOT / "fixtures" / "gpu" / "README.md"
NAMES = ("eager_adamw_unfused", "eager_adamw_fused", "backpressure", "cuda_graphs", "sync_in_loop")
HAS_TORCH = importlib.util.find_spec("torch") is not None
NO_TORCH = ("torch not installed: the CPU dry run of scripts/capture_gpu_traces.py needs torch "
            "(a CPU wheel is enough)")


def _load(module_name: str, path: Path):
    spec = importlib.util.spec_from_file_location(module_name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = mod          # dataclasses resolve their module through sys.modules
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return mod


@pytest.fixture(scope="module")
def cap():
    return _load("capture_gpu_traces", SCRIPT)


@pytest.fixture(scope="module")
def synth():
    """The synthetic Kineto builders of tests/test_gpu_fixtures.py."""
    return _load("_gpu_fixture_builders", Path(__file__).with_name("test_gpu_fixtures.py"))


def _run(*args, env=None, timeout=120):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          env=e, timeout=timeout)


# ------------------------------------------------------------------------------------------------
# Import, arguments, the table
# ------------------------------------------------------------------------------------------------

def test_module_imports_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)     # `import torch` now raises ImportError
    mod = _load("capture_gpu_traces_no_torch", SCRIPT)
    try:
        assert mod.parse_args(["--out", "x"]).only == list(NAMES)
        with pytest.raises(mod.Unavailable, match="torch is not importable"):
            mod.import_torch()
    finally:
        sys.modules.pop("capture_gpu_traces_no_torch", None)


def test_defaults(cap):
    a = cap.parse_args(["--out", "d"])
    assert (a.out, a.only, a.steps, a.dry_run, a.remeasure) == ("d", list(NAMES), 5, False, False)
    assert (a.bp_sleep_ms, a.bp_kernels, a.size_limit) == (50.0, 3000, 2 * 1024 * 1024)


def test_only_is_deduplicated_and_kept_in_table_order(cap):
    a = cap.parse_args(["--out", "d", "--only", "sync_in_loop", "backpressure", "sync_in_loop"])
    assert a.only == ["backpressure", "sync_in_loop"]


@pytest.mark.parametrize("argv", [
    [],                                             # --out is required
    ["--out", "d", "--only", "nope"],
    ["--out", "d", "--only"],
    ["--out", "d", "--steps", "0"],
    ["--out", "d", "--steps", "two"],
    ["--out", "d", "--bp-sleep-ms", "-1"],
    ["--out", "d", "--dry-run", "--remeasure"],
])
def test_bad_arguments_exit_2(cap, argv, capsys):
    with pytest.raises(SystemExit) as e:
        cap.parse_args(argv)
    assert e.value.code == 2


def test_trace_table(cap):
    assert cap.TRACE_NAMES == NAMES
    for spec in cap.SPECS:
        assert spec.filename == f"{spec.name}.json.gz"
        assert len(spec.purpose) > 40 and spec.shows
    assert "foreach=False" in cap.SPEC_BY_NAME["eager_adamw_unfused"].purpose
    assert "fused=True" in cap.SPEC_BY_NAME["eager_adamw_fused"].purpose
    assert "_sleep" in cap.SPEC_BY_NAME["backpressure"].purpose
    assert "CUDAGraph" in cap.SPEC_BY_NAME["cuda_graphs"].purpose
    assert ".item()" in cap.SPEC_BY_NAME["sync_in_loop"].purpose


def test_shapes(cap):
    g, d = cap.GPU_SHAPES, cap.DRY_RUN_SHAPES
    assert (g.layers, g.hidden, g.batch, g.dtype) == (4, 1024, 8, "bfloat16")
    assert d.layers == g.layers and d.hidden % d.heads == 0 and g.hidden % g.heads == 0


def test_readme_documents_every_trace_and_the_command(cap):
    text = README.read_text()
    for name in NAMES:
        assert f"{name}.json.gz" in text
    assert cap.REGENERATE in text
    assert "MANIFEST.json" in text and "--dry-run" in text


def test_thresholds_agree_with_the_fixture_tests(cap, synth):
    assert cap.MIN_OPTIMIZER_RATIO == synth.MIN_RATIO
    assert cap.MIN_UNFUSED_OPTIMIZER_LAUNCHES == synth.MIN_OPTIMIZER_LAUNCHES
    assert cap.MIN_SATURATED_DEPTH == synth.MIN_SATURATED
    assert cap.MIN_OPS_PER_GRAPH_LAUNCH == synth.MIN_OPS_PER_GRAPH
    assert cap.SIZE_LIMIT_BYTES == synth.SIZE_LIMIT_BYTES
    assert cap.TRACE_NAMES == synth.NAMES


# ------------------------------------------------------------------------------------------------
# Size limit: gzip, scrub, exact slimming
# ------------------------------------------------------------------------------------------------

def _kineto_text(n_cpu_ops: int) -> str:
    """Kineto-like text with absolute 16-digit µs timestamps (the float64 trap) and many cpu_ops."""
    ev = [
        '{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 9, "tid": 9, '
        '"ts": 1712195495521133.783, "dur": 9000.001}',
        '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, '
        '"ts": 1712195495521140.125, "dur": 4.5, "args": {"correlation": 5, "cbid": 211}}',
        '{"ph": "X", "cat": "kernel", "name": "void k<float>(float*)", "pid": 0, "tid": 7, '
        '"ts": 1712195495521150.007, "dur": 1.25, "args": {"device": 0, "stream": 7, "correlation": 5}}',
        '{"ph": "s", "id": 5, "pid": 9, "tid": 9, "ts": 1712195495521140.125, "cat": "ac2g", "name": "ac2g"}',
        '{"ph": "i", "s": "t", "name": "[memory]", "pid": 9, "tid": 9, "ts": 1712195495521141.5, '
        '"args": {"Bytes": 1e-05}}',
    ]
    ev += [f'{{"ph": "X", "cat": "cpu_op", "name": "aten::op_{i % 97}", "pid": 9, "tid": 9, '
           f'"ts": 17121954955211{i % 100:02d}.{i % 1000:03d}, "dur": 0.{i % 10}01, '
           f'"args": {{"External id": {i}, "Ev Idx": {i * 7919 % 100003}}}}}' for i in range(n_cpu_ops)]
    return ('{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": "GPU"}],\n'
            '  "host_name": "secret-host.example",\n  "baseTimeNanoseconds": 0,\n'
            '  "traceEvents": [\n' + ",\n".join(ev) + '\n],\n  "traceName": "/tmp/x/trace-0.json"\n}\n')


def test_gzip_is_deterministic(cap):
    data = _kineto_text(10).encode()
    assert cap.gzip_bytes(data) == cap.gzip_bytes(data)
    assert gzip.decompress(cap.gzip_bytes(data)) == data


def test_scrub_header_replaces_host_and_temp_path_only(cap):
    text = _kineto_text(3)
    out = cap.scrub_header(text, "backpressure.json.gz")
    assert "secret-host" not in out and '"host_name": "redacted"' in out
    assert '"traceName": "backpressure.json.gz"' in out and "/tmp/x" not in out
    assert out.replace('"redacted"', '"secret-host.example"').replace(
        '"backpressure.json.gz"', '"/tmp/x/trace-0.json"') == text


def test_exact_roundtrip_keeps_number_tokens(cap):
    text = _kineto_text(5)
    doc = cap.exact_loads(text)
    out = cap.exact_dumps(doc).decode()
    for token in ("1712195495521133.783", "9000.001", "1712195495521150.007", "1e-05", "4.5"):
        assert token in out
    assert json.loads(out) == json.loads(text)


def test_small_trace_is_written_as_is(cap):
    raw = _kineto_text(10).encode()
    f = cap.fit_to_limit(raw, limit=10**6)
    assert f.within_limit and not f.slimmed and gzip.decompress(f.data) == raw
    assert f.to_json() == {"size_bytes": len(f.data), "uncompressed_bytes": len(raw), "within_limit": True,
                           "slimmed": None}


def test_big_trace_is_slimmed_exactly_and_reads_the_same(cap, tmp_path):
    from launchtui.trace.load import read_trace
    raw = _kineto_text(20000).encode()
    full = cap.gzip_bytes(raw)
    f = cap.fit_to_limit(raw, limit=len(full) // 4)
    assert f.within_limit and f.gz_size <= len(full) // 4
    assert [s["step"] for s in f.slimmed][-1].startswith("drop ATen cpu_op")
    assert f.slimmed[-1]["removed"] == {"cpu_op": 20000}
    text = gzip.decompress(f.data).decode()
    assert "1712195495521133.783" in text and "1712195495521150.007" in text and "aten::" not in text
    (tmp_path / "a.json.gz").write_bytes(full)
    (tmp_path / "b.json.gz").write_bytes(f.data)
    a, b = read_trace(tmp_path / "a.json.gz"), read_trace(tmp_path / "b.json.gz")
    for table in ("ops", "api", "ranges"):
        ta, tb = getattr(a, table), getattr(b, table)
        assert len(ta) == len(tb) and (ta.start == tb.start).all() and (ta.end == tb.end).all()
    assert int(b.ops.start[0]) == 1712195495521150007  # exact ns after the rewrite
    assert (b.ops.api >= 0).all()


def test_trace_that_cannot_fit_is_flagged(cap):
    f = cap.fit_to_limit(_kineto_text(200).encode(), limit=100)
    assert not f.within_limit and f.slimmed


# ------------------------------------------------------------------------------------------------
# Measurements and checks with launchtui's engine, on synthetic traces
# ------------------------------------------------------------------------------------------------

@pytest.fixture()
def synthetic_dir(tmp_path, synth):
    synth.synth_eager(tmp_path, 250, "eager_adamw_unfused")
    synth.synth_eager(tmp_path, 5, "eager_adamw_fused")
    synth.synth_backpressure(tmp_path)
    synth.synth_graphs(tmp_path)
    synth.synth_sync(tmp_path)
    return tmp_path


def test_measure_trace_on_synthetic_traces(cap, synthetic_dir):
    m = {n: cap.measure_trace(n, synthetic_dir / f"{n}.json.gz") for n in NAMES}
    assert m["eager_adamw_unfused"]["optimizer_launches"] == 1250
    assert m["eager_adamw_unfused"]["optimizer_launches_per_step"] == 250
    assert m["eager_adamw_unfused"]["optimizer_small_kernel_rows"] >= 1
    assert m["eager_adamw_fused"]["optimizer_launches"] == 25
    bp = m["backpressure"]
    assert bp["max_pending_depth"] == 1024 and bp["spikes"] == 1 and bp["max_depth_before_spike"] == 1023
    assert bp["worst_spike_us"] > 40_000 and bp["longest_kernel_ms"] == 50.0
    g = m["cuda_graphs"]
    assert (g["graph_launches_with_ops"], g["ops_per_graph_launch_min"], g["graph_ops"]) == (5, 150, 750)
    s = m["sync_in_loop"]
    assert s["profiler_steps"] == 5 and s["steps_drained"] == 5 and s["steps_with_sync"] == 5
    assert all(r["min_depth"] == 0 and r["drained_at_sync"] for r in s["step_drains"])
    traces = {n: {"measured": v, "within_limit": True} for n, v in m.items()}
    assert cap.check_expectations(traces) == []
    json.dumps(m)  # the manifest must be able to hold it


def test_check_expectations_names_each_failure(cap):
    good = {
        "eager_adamw_unfused": {"optimizer_launches": 2000},
        "eager_adamw_fused": {"optimizer_launches": 50},
        "backpressure": {"max_pending_depth": 1022, "spikes": 2},
        "cuda_graphs": {"graph_launches_with_ops": 5, "ops_per_graph_launch_min": 900},
        "sync_in_loop": {"profiler_steps": 5, "steps_drained": 5},
    }
    assert cap.check_expectations({n: {"measured": v} for n, v in good.items()}) == []
    bad = {
        "eager_adamw_unfused": {"measured": {"optimizer_launches": 400}},
        "eager_adamw_fused": {"measured": {"optimizer_launches": 50}},
        "backpressure": {"measured": {"max_pending_depth": 300, "spikes": 0}},
        "cuda_graphs": {"measured": {"graph_launches_with_ops": 0}},
        "sync_in_loop": {"measured": {"profiler_steps": 5, "steps_drained": 3}, "within_limit": False,
                         "size_bytes": 3_000_000, "size_limit_bytes": 2_097_152},
    }
    problems = "\n".join(cap.check_expectations(bad))
    for needle in ("400 optimizer-range launches", "ratio >= 10", "max pending depth 300", "no launch spike",
                   "no GPU op is joined", "3 of 5 steps", "over the 2097152 limit"):
        assert needle in problems
    assert "not measured (msgspec missing)" in "\n".join(
        cap.check_expectations({"backpressure": {"measured": None, "measure_error": "msgspec missing"}}))


@pytest.mark.parametrize("measured,n,retry", [
    ({"max_pending_depth": 1023, "spikes": 1}, 3000, False),
    ({"max_pending_depth": 3000, "spikes": 0}, 3000, True),     # every kernel fit: no limit found
    ({"max_pending_depth": 2990, "spikes": 1}, 3000, True),
    ({"max_pending_depth": 1023, "spikes": 0}, 3000, True),     # full, but nothing blocked
    ({"max_pending_depth": 400, "spikes": 3}, 3000, True),
    (None, 3000, False),                                        # unmeasured: nothing to decide on
])
def test_backpressure_retry_rule(cap, measured, n, retry):
    assert cap.backpressure_needs_retry(measured, n) is retry


def _manifest(cap, traces, dry_run=False):
    env = {"gpu_name": "NVIDIA H200", "driver_version": "580.159.03", "torch_version": "2.11.0+cu130",
           "cuda_version": "13.0"}
    return cap.build_manifest(env, cap.GPU_SHAPES, 5, traces, dry_run=dry_run, options={"only": list(NAMES)})


def test_build_manifest(cap):
    traces = {n: {"size_bytes": 1000, "within_limit": True, "measured": None, "measure_error": "x"} for n in NAMES}
    traces["backpressure"]["measured"] = {"max_pending_depth": 1022, "spikes": 1}
    traces.pop("cuda_graphs")
    doc = json.loads(json.dumps(_manifest(cap, dict(reversed(list(traces.items()))))))
    assert doc["schema"] == 1 and doc["dry_run"] is False and doc["steps"] == 5
    assert doc["regenerate"] == cap.REGENERATE
    assert doc["shapes"] == {"layers": 4, "hidden": 1024, "heads": 16, "ffn": 4096, "batch": 8, "seq": 256,
                             "dtype": "bfloat16"}
    assert list(doc["traces"]) == [n for n in NAMES if n != "cuda_graphs"]   # table order
    for n, t in doc["traces"].items():
        assert t["file"] == f"{n}.json.gz" and t["purpose"] == cap.SPEC_BY_NAME[n].purpose and t["shows"]
        assert t["size_limit_bytes"] == cap.SIZE_LIMIT_BYTES
    assert doc["measured_pending_limit"]["max_pending_depth"] == 1022
    assert doc["measured_pending_limit"]["gpu"] == "NVIDIA H200"
    assert any("not measured" in p for p in doc["checks"]["problems"])


def test_dry_run_manifest_has_no_limit_and_no_checks(cap):
    doc = _manifest(cap, {"backpressure": {"measured": {"max_pending_depth": 0, "spikes": 0}}}, dry_run=True)
    assert doc["dry_run"] is True and "measured_pending_limit" not in doc and doc["checks"]["problems"] == []


def test_remeasure_fills_the_manifest_without_torch(cap, synthetic_dir):
    traces = {n: {"size_bytes": 1, "within_limit": True, "measured": None, "measure_error": "msgspec missing",
                  "capture_seconds": 1.0} for n in NAMES}
    cap.write_json_atomic(synthetic_dir / "MANIFEST.json", _manifest(cap, traces))
    r = _run("--out", str(synthetic_dir), "--remeasure", env={"PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    doc = json.loads((synthetic_dir / "MANIFEST.json").read_text())
    assert doc["checks"]["problems"] == [] and "remeasured_utc" in doc
    assert doc["measured_pending_limit"]["max_pending_depth"] == 1024
    for n in NAMES:
        assert doc["traces"][n]["size_bytes"] == (synthetic_dir / f"{n}.json.gz").stat().st_size
        assert "measure_error" not in doc["traces"][n]
    assert "max pending depth on NVIDIA H200: 1024" in r.stdout


def test_remeasure_exits_3_when_a_trace_misses_its_pattern(cap, synth, synthetic_dir):
    synth.synth_sync(synthetic_dir, sync=False)            # a loop that never drains
    traces = {n: {"size_bytes": 1, "within_limit": True, "measured": None} for n in NAMES}
    cap.write_json_atomic(synthetic_dir / "MANIFEST.json", _manifest(cap, traces))
    r = _run("--out", str(synthetic_dir), "--remeasure", env={"PYTHONPATH": str(ROOT)})
    assert r.returncode == 3, r.stdout + r.stderr
    assert "CHECK FAILED: sync_in_loop: queue drained at a sync in 0 of 5 steps" in r.stderr
    doc = json.loads((synthetic_dir / "MANIFEST.json").read_text())
    assert doc["checks"]["problems"] == ["sync_in_loop: queue drained at a sync in 0 of 5 steps"]


def test_remeasure_without_a_manifest_fails_in_one_line(tmp_path):
    r = _run("--out", str(tmp_path), "--remeasure")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "MANIFEST.json: missing" in r.stderr


# ------------------------------------------------------------------------------------------------
# Without a GPU
# ------------------------------------------------------------------------------------------------

def test_fails_fast_without_cuda(tmp_path):
    """No torch, or torch without a visible CUDA device: one clear line, exit status 2, nothing written."""
    out = tmp_path / "out"
    r = _run("--out", str(out), env={"CUDA_VISIBLE_DEVICES": ""})
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "capture_gpu_traces:" in ln]
    assert len(lines) == 1 and r.stdout == ""
    assert ("no CUDA device available" in lines[0] and "--dry-run" in lines[0]) if HAS_TORCH else \
        "torch is not importable" in lines[0]
    assert not out.exists()


@pytest.mark.skipif(not HAS_TORCH, reason=NO_TORCH)
def test_dry_run_on_the_cpu(cap, tmp_path):
    from launchtui.trace.load import read_trace
    out = tmp_path / "dry"
    r = _run("--out", str(out), "--dry-run", "--steps", "2", env={"CUDA_VISIBLE_DEVICES": ""}, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads((out / "MANIFEST.json").read_text())
    assert doc["dry_run"] is True and doc["steps"] == 2
    assert doc["shapes"] == cap.DRY_RUN_SHAPES.to_json()
    assert doc["environment"]["torch_version"] and doc["environment"]["device"] == "cpu"
    assert list(doc["traces"]) == list(NAMES)
    assert sorted(p.name for p in out.iterdir()) == sorted(["MANIFEST.json"] + [f"{n}.json.gz" for n in NAMES])
    for n in NAMES:
        p = out / f"{n}.json.gz"
        entry = doc["traces"][n]
        assert entry["size_bytes"] == p.stat().st_size <= cap.SIZE_LIMIT_BYTES
        assert entry["measured"] is not None, entry.get("measure_error")
        header = gzip.decompress(p.read_bytes())[:4096].decode()
        assert '"host_name": "redacted"' in header or "host_name" not in header
        t = read_trace(p)
        assert not t.has_cuda_tables and any("no GPU activity" in m for m in t.missing)
        names = {t.strings[int(i)] for i in t.ranges.text}
        steps = sorted(x for x in names if x.startswith("ProfilerStep#"))
        if n == "backpressure":
            assert "backpressure_burst" in names and len(steps) == 1
            continue
        assert len(steps) == 2
        if n == "cuda_graphs":
            assert "graph_replay" in names
        else:
            assert {"forward", "backward", "Optimizer.step", "Optimizer.step#AdamW.step"} <= names
    assert "loss.item()" in {read_trace(out / "sync_in_loop.json.gz").strings[int(i)]
                             for i in read_trace(out / "sync_in_loop.json.gz").ranges.text}
    assert doc["traces"]["eager_adamw_unfused"]["settings"]["optimizer_kwargs"] == {"foreach": False}
    assert doc["traces"]["eager_adamw_fused"]["settings"]["optimizer_kwargs"] == {"fused": True}
    assert doc["traces"]["eager_adamw_unfused"]["settings"]["param_tensors"] == 66
    # --only re-captures one trace and keeps the other entries
    before = {n: doc["traces"][n]["size_bytes"] for n in NAMES}
    r = _run("--out", str(out), "--dry-run", "--steps", "2", "--only", "backpressure",
             env={"CUDA_VISIBLE_DEVICES": ""}, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    doc2 = json.loads((out / "MANIFEST.json").read_text())
    assert list(doc2["traces"]) == list(NAMES)
    assert {n: doc2["traces"][n]["size_bytes"] for n in NAMES if n != "backpressure"} == \
        {n: v for n, v in before.items() if n != "backpressure"}
    info = subprocess.run([sys.executable, "-m", "launchtui", "info", str(out / "eager_adamw_unfused.json.gz")],
                          capture_output=True, text=True, cwd=ROOT)
    assert info.returncode == 0 and "none with GPU activity" in info.stdout


def test_independent_pending_limit_counts_calls_before_the_first_blocking_one(cap):
    fast = [4_000 + (i % 7) * 100 for i in range(1022)]
    blocked = [900_000, 850_000, 3_000]
    assert cap.independent_pending_limit(fast + blocked) == 1022
    assert cap.independent_pending_limit(fast) is None                  # never blocked: no limit claimed
    assert cap.independent_pending_limit([5_000] * 10) is None          # too few calls to say
    assert cap.independent_pending_limit([40_000] * 100 + [60_000]) is None   # slow host, not a block
