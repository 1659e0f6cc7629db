"""Model cache, .nsys-rep export through nsys, range export and report JSON."""
from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import textwrap

import numpy as np
import pytest

from conftest import sample, snapshot
from launchtui.analysis.index import attached, build_index, trace_index
from launchtui.cli import main
from launchtui.trace import cache, flatfile
from launchtui.trace.load import open_trace, read_trace

pytestmark = pytest.mark.samples

H100 = "nsys/nsys-ai__h100_2gpu_1s.sqlite"
V100 = "kineto/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"


def _same_model(a, b):
    for t in ("ops", "api", "ranges", "threads", "overheads"):
        ta, tb = getattr(a, t), getattr(b, t)
        for f in ta.__dataclass_fields__:
            assert np.array_equal(getattr(ta, f), getattr(tb, f)), (t, f)
    assert a.strings.values == b.strings.values and np.array_equal(a.processes, b.processes)
    assert a.devices == b.devices and a.missing == b.missing


def test_cache_round_trip_and_key(tmp_path):
    src = tmp_path / "t.sqlite"
    shutil.copy(sample(H100), src)
    fresh = read_trace(src)
    first = open_trace(src)
    entries = list(cache.models_dir().glob("*.model"))
    assert len(entries) == 1 and str(cache.models_dir()).startswith(os.environ["XDG_CACHE_HOME"])
    second = open_trace(src)
    _same_model(fresh, first)
    _same_model(fresh, second)
    from launchtui.trace.load import open_cached
    assert not open_cached(src).fresh  # came from the cache: nothing to commit
    # touching the trace changes the key: a new entry, the old one is never trusted
    os.utime(src, ns=(1, 1))
    open_trace(src)
    assert len(list(cache.models_dir().glob("*.model"))) == 2


def test_corrupt_cache_entry_is_rebuilt(tmp_path):
    src = tmp_path / "t.sqlite"
    shutil.copy(sample(H100), src)
    open_trace(src)
    (entry,) = cache.models_dir().glob("*.model")
    entry.write_bytes(b"garbage")
    trace = open_trace(src)
    _same_model(read_trace(src), trace)
    assert entry.stat().st_size > 1000


def test_no_cache_and_clear(tmp_path, capsys):
    p = sample(H100)
    assert main(["info", str(p), "--no-cache"]) == 0
    assert not cache.models_dir().exists()
    assert main(["info", str(p)]) == 0
    (entry,) = cache.models_dir().glob("*.model")
    capsys.readouterr()
    assert main(["cache", "clear"]) == 0
    assert "removed 1 cache entries" in capsys.readouterr().out
    assert not entry.exists()
    assert main(["info", str(p)]) == 0        # the cache works again after a clear
    assert entry.exists()


def test_cache_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("LAUNCHTUI_CACHE_MAX_MB", "0.000001")
    for i in range(3):
        src = tmp_path / f"t{i}.sqlite"
        shutil.copy(sample(H100), src)
        open_trace(src)
    assert len(list(cache.models_dir().glob("*.model"))) == 1, "only the newest entry survives a tiny limit"


def _fake_nsys(bin_dir, sqlite_src, log):
    """An `nsys` stand-in: `nsys export --type sqlite ... --output OUT REPORT` copies a real export."""
    script = bin_dir / "nsys"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import shutil, sys
        args = sys.argv[1:]
        open({str(log)!r}, "a").write(" ".join(args) + "\\n")
        out = args[args.index("--output") + 1]
        shutil.copy({str(sqlite_src)!r}, out)
        """))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_nsys_rep_exported_into_cache_and_reused(tmp_path, monkeypatch, capsys):
    rep = tmp_path / "r" / "report1.nsys-rep"
    rep.parent.mkdir()
    shutil.copy(sample("nsys/0x822a5b87__test-cuda__report1.nsys-rep"), rep)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "nsys.log"
    _fake_nsys(bin_dir, sample("nsys/0x822a5b87__test-cuda__report1.sqlite"), log)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    before = snapshot(rep)
    assert main(["info", str(rep), "--no-cache"]) == 0
    out = capsys.readouterr()
    assert "kernel 4" in out.out and "report 2026.1.1.204" in out.out
    assert main(["report", str(rep), "--no-cache"]) == 0
    assert log.read_text().count("export --type sqlite") == 1, "the export is reused while the report is unchanged"
    assert sorted(os.listdir(rep.parent)) == ["report1.nsys-rep"], "nothing beside the report"
    assert snapshot(rep) == before
    exports = list((cache.cache_root() / "nsys-export").glob("*.sqlite"))
    assert len(exports) == 1


def test_report_json_schema_and_determinism(tmp_path, capsys):
    p = sample(H100)
    assert main(["report", str(p), "--json", "--no-cache"]) == 0
    a = capsys.readouterr().out
    assert main(["report", str(p), "--json"]) == 0
    b = capsys.readouterr().out
    assert main(["report", str(p), "--json"]) == 0  # warm, from the cache
    c = capsys.readouterr().out
    assert a == b == c, "byte-identical JSON, cold or warm"
    doc = json.loads(a)
    assert {"trace", "small_kernels", "queues", "backpressure", "unmatched_kernels"} <= set(doc)
    assert doc["trace"]["window_ns"] == [155360295935, 156320780944]
    assert [d["device_id"] for d in doc["trace"]["devices"]] == [0, 1]
    q = doc["queues"][0]
    assert set(q) >= {"device_id", "stream_id", "max_depth", "mean_depth", "time_at_or_above_ns"}
    assert doc["unmatched_kernels"]["kernels"] == 1810
    assert doc["backpressure"]["command_buffer_full_events"] == 198


def test_device_all_lists_every_launched_kernel(capsys):
    p = sample(H100)
    assert main(["report", str(p), "--json", "--device", "all", "--min-launches", "1", "--max-avg-us", "1e12",
                 "--limit", "0"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = doc["small_kernels"] + doc["small_kernels_nccl"]
    assert len(rows) == 30 and sum(r["launch_count"] for r in rows) == 1632


def test_text_report_layout(capsys):
    assert main(["report", str(sample(H100)), "--device", "0"]) == 0
    out = capsys.readouterr().out
    assert "-- Small and Frequent Kernel Launches --" in out
    header = next(line for line in out.splitlines() if line.startswith("Kernel"))
    for col in ("Launches", "API avg(us)", "Queue avg(us)", "Kernel avg(us)", "max API(us)", "total API(ms)"):
        assert col in header
    assert "vectorized_elementwise_kernel" in out and "-- Queue depth" in out and "-- Backpressure" in out
    assert main(["report", str(sample("nsys/nsys-ai__mock.sqlite"))]) == 0
    assert "(No small-and-frequent kernel launch data found)" in capsys.readouterr().out


def test_export_window_document(tmp_path, capsys):
    p = sample(H100)
    out = tmp_path / "w.json"
    assert main(["export", str(p), "--trim", "155.9", "156.4", "--device", "0", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["window"]["t0_ns"] == 155_900_000_000 and doc["window"]["t1_ns"] == 156_400_000_000
    ops = doc["gpu_ops"]
    assert ops and all(155_900_000_000 <= o["start_ns"] and o["end_ns"] <= 156_400_000_000 for o in ops)
    assert all(o["device_id"] == 0 for o in ops)
    launched = [o for o in ops if o["api_index"] is not None]
    assert all(doc["api_calls"][o["api_index"]]["correlation"] == o["correlation"] for o in launched)
    rows = doc["analysis"]["small_kernels"]
    assert rows[0]["kernel_name"] == "vectorized_elementwise_kernel" and rows[0]["launch_count"] == 304
    assert doc["source"]["size"] == os.path.getsize(p)
    # never overwrite without --force; with --force, atomically replaced
    capsys.readouterr()
    assert main(["export", str(p), "--trim", "155.9", "156.4", "-o", str(out)]) == 2
    assert "exists; use --force" in capsys.readouterr().err
    assert main(["export", str(p), "--trim", "155.9", "156.4", "--device", "0", "-o", str(out), "--force"]) == 0
    assert json.loads(out.read_text()) == doc
    assert sorted(os.listdir(tmp_path)) == ["w.json"], "no temporary files left"


def test_nvtx_restriction_counts_only_range_kernels(capsys):
    p = sample(V100)
    assert main(["report", str(p), "--json", "--nvtx", "Optimizer.step", "--min-launches", "1",
                 "--max-avg-us", "1e12", "--limit", "0"]) == 0
    doc = json.loads(capsys.readouterr().out)
    n_opt = sum(r["launch_count"] for r in doc["small_kernels"] + doc["small_kernels_nccl"])
    assert main(["report", str(p), "--json", "--min-launches", "1", "--max-avg-us", "1e12", "--limit", "0"]) == 0
    doc_all = json.loads(capsys.readouterr().out)
    n_all = sum(r["launch_count"] for r in doc_all["small_kernels"] + doc_all["small_kernels_nccl"])
    assert 0 < n_opt < n_all
    assert [(r["kernel_name"], r["launch_count"], r["nvtx_range"], r["nvtx_share"]) for r in doc["small_kernels"]] \
        == [("multi_tensor_apply_kernel", 45, "Optimizer.step#SGD.step", 1.0)]


@pytest.mark.skipif(shutil.which("nsys") is None, reason="NVIDIA nsys not installed (Debian non-free nsight-systems)")
def test_real_nsys_exports_old_report_and_refuses_new(tmp_path, capsys):
    old = sample("nsys/MohanadOdema__DLProf__nsys_profile.nsys-rep")
    assert main(["info", str(old), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["counts"]["gpu_ops"]["kernel"] == 46 and info["details"]["report_version"].startswith("old")
    new = sample("nsys/0x822a5b87__test-cuda__report1.nsys-rep")
    assert main(["info", str(new)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nsys export failed (report version 2026.1.1.204" in err[0]


def test_cache_keeps_the_index_and_warm_report_is_identical(tmp_path, capsys):
    from launchtui.session import Index, Session
    from launchtui.trace.load import open_cached
    src = tmp_path / "t.sqlite"
    shutil.copy(sample(H100), src)
    assert main(["report", str(src), "--json"]) == 0  # cold: reads, reports, then caches with analyses
    cold = capsys.readouterr().out
    (entry,) = cache.models_dir().glob("*.model")
    _, z = flatfile.read(entry.with_name(entry.name + ".index"))   # beside the model, not in it
    assert {"qs.meta", "depth_before_launch", "op_ranges", "distinguishing_names"} <= set(z)
    opened = open_cached(src)
    assert not opened.fresh and attached(opened.trace) is None   # the model carries no index
    fresh = build_index(read_trace(src))
    warm = Session(opened.trace, opened.entry).get(Index())
    assert trace_index(opened.trace) is warm and not warm.op_ranges.flags.owndata
    assert (warm.op_ranges == fresh.op_ranges).all()
    assert (warm.depth_before_launch == fresh.depth_before_launch).all()
    assert [(s.device, s.stream, s.t.tolist(), s.v.tolist()) for s in warm.queue_series] == \
        [(s.device, s.stream, s.t.tolist(), s.v.tolist()) for s in fresh.queue_series]
    assert main(["report", str(src), "--json"]) == 0
    assert capsys.readouterr().out == cold
