"""Tests for the synthetic trace generator (fixtures/synth.py) and its ground truth: the simulation,
the Nsight exports, big mode and the shuffled layouts.

The small readers here and in tests/synth_readers.py (SQL join, JSON + Decimal) are deliberately
independent of launchtui: they check that what the writers put in the files agrees with the ground
truth the simulation computed. The Kineto traces: test_fixture_kineto.py.
"""

from __future__ import annotations

import collections
import gzip
import json

import numpy as np
import pytest

from conftest import synth_all
from fixtures import synth
from fixtures.model import KERNEL_TYPES, NSYS_VARIANTS
from fixtures.simulate import run_simulation
from synth_readers import gt_table, ro


@pytest.fixture(scope="module")
def w():
    return synth.simulate()


@pytest.fixture(scope="module")
def files(tmp_path_factory, w):
    return synth_all(tmp_path_factory)


def _tables(path):
    with ro(path) as con:
        return {r[0] for r in con.execute("select name from sqlite_master where type='table'")}


# ---------------------------------------------------------------------------------------------
# simulation and determinism


@pytest.mark.serial
def test_simulation_is_deterministic_and_fast():
    import time
    cfg = synth.default_config()
    t = time.perf_counter()
    a = run_simulation(cfg)
    assert time.perf_counter() - t < 1.0
    b = run_simulation(cfg)
    for name in ("api", "ops", "syncs", "ranges", "marks", "overhead"):
        ta, tb = getattr(a, name), getattr(b, name)
        assert ta.keys() == tb.keys()
        for k in ta:
            assert np.array_equal(ta[k], tb[k]), (name, k)
    assert synth.simulate() is synth.simulate()  # cached, hence read-only
    with pytest.raises(ValueError):
        synth.simulate().ops["start"][0] = 0
    other = run_simulation(cfg.replace(seed=cfg.seed + 1))
    assert not np.array_equal(other.api["start"][:50], a.api["start"][:50])


def test_writers_are_byte_identical(tmp_path, w):
    for var in ("modern", "legacy2021"):
        p1 = synth.write_nsys_sqlite(w, tmp_path / f"a_{var}.sqlite", var)
        p2 = synth.write_nsys_sqlite(w, tmp_path / f"b_{var}.sqlite", var)
        assert p1.read_bytes() == p2.read_bytes()
    for var in ("modern", "shuffled"):
        p1 = synth.write_kineto_json(w, tmp_path / f"a_{var}.json.gz", var)
        p2 = synth.write_kineto_json(w, tmp_path / f"b_{var}.json.gz", var)
        assert p1.read_bytes() == p2.read_bytes()
    assert not list(tmp_path.glob("*.tmp"))


def test_ground_truth_is_json_and_stable(w):
    a = json.dumps(synth.ground_truth(w, "nsys", "modern"), sort_keys=True)
    b = json.dumps(synth.ground_truth(w, "nsys", "modern"), sort_keys=True)
    assert a == b
    json.dumps(synth.ground_truth(w))  # raw simulation clock


def test_demo_matches_generator(tmp_path):
    demo = synth.DEMO_DIR
    if not (demo / "demo.sqlite").exists():
        pytest.skip("fixtures/demo not generated")
    paths = synth.write_demo(tmp_path)
    assert (demo / "ground_truth.json").read_bytes() == paths["truth"].read_bytes()
    # content, not container bytes: another zlib/SQLite build may pack the same data differently
    # (same-machine byte identity is test_writers_are_byte_identical)
    assert gzip.open(demo / "demo.json.gz").read() == gzip.open(paths["kineto"]).read()
    with ro(demo / "demo.sqlite") as a, ro(paths["nsys"]) as b:
        assert list(a.iterdump()) == list(b.iterdump())
    assert (demo / "demo.sqlite").stat().st_size <= 2_200_000
    assert (demo / "demo.json.gz").stat().st_size <= 1_100_000


# ---------------------------------------------------------------------------------------------
# ground truth: what holds by construction


def test_counts_are_consistent(w):
    cfg = w.cfg
    gt = synth.ground_truth(w, "nsys", "modern")
    c = gt["counts"]
    assert c["kernels"] + c["memcpy"] + c["memset"] == c["gpu_ops"]
    assert c["table_kernels"] + c["graph_kernels"] + c["unmatched_kernels"] == c["kernels"]
    assert c["unmatched_kernels"] == c["unmatched_ops"] == cfg.uncaptured_kernels
    assert c["graph_kernels"] == cfg.graph_kernels and c["graph_launches"] == 1
    assert c["launch_api_rows"] == c["table_kernels"]  # every launch call in the trace ran
    assert sum(r["launch_count"] for r in gt["kernel_table"]) == c["table_kernels"]
    assert sum(r["launch_count"] for r in gt["kernel_table_by_name"]) == c["table_kernels"]
    assert c["devices_with_ops"] == list(range(cfg.devices))
    assert c["processes_with_api"] == [4242, 5151]
    assert c["memcpy"] == c["memset"] == cfg.iterations * cfg.devices
    assert c["overhead_command_buffer_full"] == c["blocked_launch_calls"] > 0
    for r in gt["kernel_table"]:
        assert 0 <= r["queue_count"] <= r["launch_count"]
        assert r["span_start_ns"] < r["span_end_ns"]
        assert r["max_api_ns"] >= r["mean_api_ns"]
        assert r["is_nccl"] == ("nccl" in r["kernel_name"].lower())
    # the >= 0 queue rule matters: some launches started before their call returned
    assert any(r["queue_count"] < r["launch_count"] for r in gt["kernel_table"])
    # by-name rows split the short-name rows exactly
    split = collections.Counter()
    for r in gt["kernel_table_by_name"]:
        split[(r["device_id"], r["short_name"])] += r["launch_count"]
    assert split == {(r["device_id"], r["kernel_name"]): r["launch_count"]
                     for r in gt["kernel_table"]}
    names = {r["kernel_name"] for r in gt["kernel_table_by_name"]}
    assert {"elementwise_kernel<AddcmulFunctor>", "elementwise_kernel<SqrtFunctor>",
            "vectorized_elementwise_kernel<CUDAFunctor_add>",
            "vectorized_elementwise_kernel<FillFunctor>", "triton_poi_fused_mul_add_0"} <= names


def test_backpressure_by_construction(w):
    cfg = w.cfg
    gt = synth.ground_truth(w, "nsys", "modern")
    depth = {(r["device_id"], r["stream_id"]): r for r in gt["queue_depth"]}
    bp = depth[(0, 7)]
    assert bp["max"] == cfg.queue_limit  # the modelled hardware limit, exactly
    assert bp["time_ge_1020_ns"] > 20_000_000  # the 30 ms kernel keeps it full for > 20 ms
    assert bp["time_ge_1000_ns"] >= bp["time_ge_1020_ns"] >= bp["time_at_limit_ns"] > 0
    assert bp["first_ns"] <= bp["last_ns"] and 0 < bp["mean_tw"] < bp["max"]
    assert all(r["max"] < 1000 for k, r in depth.items() if k != (0, 7))
    b = gt["backpressure"]
    (iv,) = b["intervals_ge_1000"]
    assert (iv["device_id"], iv["stream_id"]) == (0, 7) and iv["intervals"]
    spikes = b["spikes"]
    causes = collections.Counter(s["cause"] for s in spikes)
    assert causes["queue_full"] >= 10
    assert causes["lazy_loading"] == 3  # first GEMM on each of the three launching threads
    assert set(causes) <= {"queue_full", "lazy_loading"}
    med = {m["global_tid"]: m["median_launch_ns"] for m in b["thread_medians"]}
    for s in spikes:
        assert s["dur_ns"] > 100_000 and s["dur_ns"] > 10 * med[s["global_tid"]]
    assert max(s["dur_ns"] for s in spikes) > 10_000_000  # the call waiting out the long kernel
    assert all(4_000 <= m <= 9_000 for m in med.values())  # normal launches: a few µs
    # the straggler device's thread launches slower
    rows = {(r["device_id"], r["kernel_name"]): r for r in gt["kernel_table"]}
    assert rows[(1, "elementwise_kernel")]["mean_api_ns"] > \
        1.15 * rows[(0, "elementwise_kernel")]["mean_api_ns"]


def test_phases_and_attribution(w):
    gt = synth.ground_truth(w, "nsys", "modern")
    att = gt["nvtx_attribution"]
    optim = sum(r["table_count"] for r in att if r["range"] and "optim" in r["range"].lower())
    fwd_small = sum(r["table_count"] for r in att
                    if r["range"] == "forward" and not r["kernel_name"].startswith("ampere_sgemm"))
    assert fwd_small > 0 and optim >= 10 * fwd_small
    by = {(r["range"], r["kernel_name"]): r for r in att}
    assert by[("nccl:all_reduce", "ncclDevKernel_AllReduce_Sum_f32_RING_LL")]["count"] == \
        w.cfg.iterations * w.cfg.devices
    g = by[("cuda_graph_replay", "triton_poi_fused_mul_add_0")]
    assert g["count"] > 0 and g["table_count"] == 0  # graph kernels are not table launches
    assert by[(None, "vectorized_elementwise_kernel")]["count"] > 0  # warm-up, outside ranges
    assert any(r["range"].startswith("ProfilerStep#") for r in att if r["range"])
    total = sum(r["count"] for r in att)
    c = gt["counts"]
    assert total == c["kernels"] - c["unmatched_kernels"]
    (graph,) = gt["graph"]
    assert graph["ops"] == w.cfg.graph_kernels and graph["device_id"] == 0


def test_kernel_short_names_follow_definitions_section_10():
    def base_name(n: str) -> str:
        n = n.replace("(anonymous namespace)", "anonymous_namespace")
        if n.endswith(")"):  # drop the trailing top-level argument list
            depth = 0
            for i in range(len(n) - 1, -1, -1):
                depth += {")": 1, "(": -1}.get(n[i], 0)
                if depth == 0:
                    n = n[:i]
                    break
        out, depth, paren = [], 0, 0
        for ch in n:  # template arguments, counting <> outside parentheses only
            if ch == "(":
                paren += 1
            elif ch == ")":
                paren -= 1
            if paren == 0 and ch == "<":
                depth += 1
                continue
            if paren == 0 and ch == ">":
                depth -= 1
                continue
            if depth == 0:
                out.append(ch)
        n = "".join(out).strip()
        n = n.rsplit(" ", 1)[-1]
        return n.rsplit("::", 1)[-1]

    for k in KERNEL_TYPES:
        assert base_name(k.demangled) == k.short, k.key


# ---------------------------------------------------------------------------------------------
# Nsight SQLite files


EXPECTED = {
    "modern": {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
               "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
               "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_OVERHEAD",
               "NVTX_EVENTS", "StringIds", "ThreadNames", "PROCESSES", "TARGET_INFO_GPU",
               "TARGET_INFO_SESSION_START_TIME", "META_DATA_EXPORT", "META_DATA_CAPTURE"},
}


@pytest.mark.parametrize("variant", NSYS_VARIANTS)
def test_nsys_variant_tables(files, variant):
    t = _tables(files[("nsys", variant)])
    cupti = {x for x in t if x.startswith("CUPTI_ACTIVITY_KIND_")}
    if variant in ("modern", "textid", "negative_ts"):
        assert EXPECTED["modern"] <= t
    if variant == "suffixed":
        assert cupti and all(x.endswith("_V3") for x in cupti)
        assert "CUPTI_ACTIVITY_KIND_KERNEL_V3" in t and "CUPTI_ACTIVITY_KIND_KERNEL" not in t
    if variant == "legacy2021":
        assert not {"META_DATA_EXPORT", "EXPORT_META_DATA", "PROCESSES"} & t
        assert "UnwindMethodType" in t
        with ro(files[("nsys", variant)]) as con:
            cols = {r[1] for r in con.execute("pragma table_info(CUPTI_ACTIVITY_KIND_KERNEL)")}
            gcols = [r[1] for r in con.execute("pragma table_info(TARGET_INFO_GPU)")]
        assert "mangledName" not in cols and "shortName" in cols
        assert gcols == ["vmId", "deviceId", "name", "busLocation", "isDiscrete"]
        assert "CUPTI_ACTIVITY_KIND_OVERHEAD" not in t
    if variant == "meta2022":
        assert "EXPORT_META_DATA" in t and "META_DATA_EXPORT" not in t
        assert "ENUM_CUDA_KRENEL_LAUNCH_TYPE" in t
    if variant == "no_kernels":
        assert "CUPTI_ACTIVITY_KIND_RUNTIME" in t
        assert not {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                    "CUPTI_ACTIVITY_KIND_MEMSET"} & t
    if variant == "no_cuda":
        assert not cupti and not any(x.startswith("TARGET_INFO_CUDA") for x in t)
        assert {"NVTX_EVENTS", "ThreadNames"} <= t
    with ro(files[("nsys", variant)]) as con:
        assert not con.execute("select count(*) from sqlite_master where type='index'").fetchone()[0]
        for name in t:  # every table present has rows (lazy export)
            assert con.execute(f"select count(*) from {name}").fetchone()[0] > 0, name


def test_nsys_textid_and_negative(files, w):
    with ro(files[("nsys", "textid")]) as con:
        n_text = con.execute("select count(*) from NVTX_EVENTS where eventType=59 and "
                             "text is not null").fetchone()[0]
        rows = con.execute("select s.value, e.domainId from NVTX_EVENTS e join StringIds s on "
                           "s.id=e.textId where eventType=59").fetchall()
        dom = dict(con.execute("select domainId, text from NVTX_EVENTS where eventType=75"))
    assert n_text == 0 and len(rows) == len(w.ranges["start"])
    assert {d for _, d in rows} == {2} and dom[2] == "synth_app"
    assert {v for v, _ in rows} >= {"forward", "backward", "Optimizer.step#AdamW.step"}
    with ro(files[("nsys", "negative_ts")]) as con:
        neg = con.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL where start<0"
                          ).fetchone()[0]
        dc = con.execute("select start from NVTX_EVENTS where eventType=75").fetchone()[0]
    assert neg > 0 and dc < 0
    gt = synth.ground_truth(w, "nsys", "negative_ts")
    assert gt["window"]["first_kernel_start_ns"] < 0


def _nsys_table(path, suffix=""):
    """Independent NV-style join: corr + process, launch APIs only, grouped by device/short."""
    sql = f"""
      select k.deviceId, s.value, r.start, r.end, k.start, k.end
      from CUPTI_ACTIVITY_KIND_KERNEL{suffix} k
      join CUPTI_ACTIVITY_KIND_RUNTIME{suffix} r
        on r.correlationId = k.correlationId and k.globalPid = (r.globalTid & -16777216)
      join StringIds s on s.id = k.shortName
      join StringIds n on n.id = r.nameId
      where n.value like 'cudaLaunch%' or n.value like 'cuLaunch%'"""
    agg = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
    with ro(path) as con:
        for dev, name, a0, a1, k0, k1 in con.execute(sql):
            g = agg[(dev, name)]
            g[0] += 1
            g[1] += a1 - a0
            if k0 - a1 >= 0:
                g[2] += 1
                g[3] += k0 - a1
            g[4] += k1 - k0
    return agg


@pytest.mark.parametrize("variant", ["modern", "suffixed", "legacy2021", "negative_ts"])
def test_nsys_file_agrees_with_ground_truth(files, w, variant):
    path = files[("nsys", variant)]
    got = _nsys_table(path, "_V3" if variant == "suffixed" else "")
    gt = synth.ground_truth(w, "nsys", variant)
    assert {k: v for k, v in got.items()} == gt_table(gt)
    with ro(path) as con:
        sfx = "_V3" if variant == "suffixed" else ""
        n_k = con.execute(f"select count(*) from CUPTI_ACTIVITY_KIND_KERNEL{sfx}").fetchone()[0]
        n_r = con.execute(f"select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME{sfx}").fetchone()[0]
        n_unm = con.execute(f"""select count(*) from CUPTI_ACTIVITY_KIND_KERNEL{sfx} k where not
            exists (select 1 from CUPTI_ACTIVITY_KIND_RUNTIME{sfx} r where r.correlationId =
            k.correlationId and k.globalPid = (r.globalTid & -16777216))""").fetchone()[0]
        # correlation ids repeat across the two processes: a join without the process term
        # matches more rows than it should
        n_loose = con.execute(f"""select count(*) from CUPTI_ACTIVITY_KIND_KERNEL{sfx} k join
            CUPTI_ACTIVITY_KIND_RUNTIME{sfx} r on r.correlationId = k.correlationId""").fetchone()[0]
    c = gt["counts"]
    assert n_k == c["kernels"] and n_r == c["api_rows"] and n_unm == c["unmatched_kernels"]
    assert n_loose > n_k - n_unm


def test_nsys_graph_and_overhead_rows(files, w):
    gt = synth.ground_truth(w, "nsys", "modern")
    (g,) = gt["graph"]
    with ro(files[("nsys", "modern")]) as con:
        rows = con.execute("select correlationId, graphNodeId from CUPTI_ACTIVITY_KIND_KERNEL "
                           "where graphNodeId is not null").fetchall()
        api = con.execute("select s.value from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s "
                          "on s.id=r.nameId where r.correlationId=? and r.globalTid>>24&16777215"
                          "=4242", (g["correlation_id"],)).fetchall()
        ovh = con.execute("select overheadType, count(*) from CUPTI_ACTIVITY_KIND_OVERHEAD "
                          "group by 1").fetchall()
        names = {r[0] for r in con.execute(
            "select distinct s.value from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s on "
            "s.id=r.nameId")}
        drv = con.execute("select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s "
                          "on s.id=r.nameId where s.value like 'cuLaunch%' and r.eventClass=1"
                          ).fetchone()[0]
    assert len(rows) == g["ops"] and {c for c, _ in rows} == {g["correlation_id"]}
    assert api == [("cudaGraphLaunch_v10000",)]
    assert dict(ovh) == {7: gt["counts"]["overhead_lazy_loading"],
                         8: gt["counts"]["overhead_command_buffer_full"]}
    assert {"cudaLaunchKernel_v7000", "cuLaunchKernel", "cuLaunchKernelEx",
            "cudaLaunchKernelExC_v11060", "cudaMemcpyAsync_v3020", "cudaMemsetAsync_v3020",
            "cudaStreamSynchronize_v3020", "cudaDeviceSynchronize_v3020"} <= names
    assert drv > 0


# ---------------------------------------------------------------------------------------------
# Kineto files


# ---------------------------------------------------------------------------------------------
# big mode


@pytest.mark.slow
def test_big_mode_replication(tmp_path):
    w = synth.simulate()
    n_base = int((w.ops["kind"] == 0).sum())
    b = synth.simulate_big(12_000)   # three replicas of the default workload's 5,445 kernels
    assert b.replicas > 2
    n_k = int((b.ops["kind"] == 0).sum())
    assert 12_000 <= n_k < 12_000 + n_base
    assert np.all(np.diff(b.api["start"]) >= 0)
    assert np.all(np.diff(b.ops["start"]) >= 0)
    pid = np.array([t.pid for t in b.threads])[b.api["thread"]]
    for p in (4242, 5151):
        c = b.api["corr"][pid == p]
        assert len(np.unique(c)) == len(c)
    # links survive replication: every matched op's API row has the op's correlation id
    m = b.ops["api"] >= 0
    assert np.array_equal(b.api["corr"][b.ops["api"][m]], b.ops["corr"][m])
    gt = synth.ground_truth(b, "nsys", "modern", exact=False)
    c0 = synth.ground_truth(w, "nsys", "modern")["counts"]
    assert gt["counts"]["unmatched_kernels"] == c0["unmatched_kernels"]
    assert gt["counts"]["graph_kernels"] == c0["graph_kernels"]
    assert sum(r["launch_count"] for r in gt["launch_counts"]) == gt["counts"]["table_kernels"]
    steps = [n for n in b.range_names if n.startswith("ProfilerStep#")]
    assert len(steps) == w.cfg.iterations * b.replicas
    p = synth.write_nsys_sqlite(b, tmp_path / "big.sqlite")
    with ro(p) as con:
        assert con.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] == n_k
    p = synth.write_kineto_json(b, tmp_path / "big.json")
    json.loads(p.read_text())


# ---------------------------------------------------------------------------------------------
# other layouts of the same events (fixtures/layout.py)

_NAMED_KERNELS = ("SELECT k.start, k.end, k.correlationId, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                  "JOIN StringIds s ON s.id = k.shortName")


def _rows(path, sql):
    with ro(path) as con:
        return con.execute(sql).fetchall()


@pytest.mark.parametrize("how", [dict(seed=5), dict(seed=None, permute_ids=5), dict(seed=None, renumber=(11, 3_000_003))])
def test_sqlite_layouts_keep_the_events(files, tmp_path, how):
    from fixtures import layout
    src = files[("nsys", "modern")]
    a = layout.shuffle_sqlite(src, tmp_path / "a.sqlite", **how)
    b = layout.shuffle_sqlite(src, tmp_path / "b.sqlite", **how)
    assert _rows(a, _NAMED_KERNELS) == _rows(b, _NAMED_KERNELS)          # the seed decides, nothing else
    assert sorted(_rows(a, _NAMED_KERNELS)) == sorted(_rows(src, _NAMED_KERNELS))   # the same events, by name
    ids = [i for i, _ in _rows(a, "SELECT id, value FROM StringIds")]   # a table scan, as readers do
    if how.get("seed") is not None:      # rows in a new order: time order and id order broken
        k = [r[0] for r in _rows(a, "SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL")]
        assert k != sorted(k) and ids != sorted(ids)
        assert sorted(ids) == [i for (i,) in _rows(src, "SELECT id FROM StringIds")]
    elif "renumber" in how:              # sparse, above the row count
        assert min(ids) >= 3_000_003 and all((i - 3_000_003) % 11 == 0 for i in ids)
    else:                                # the same dense ids, dealt out anew
        assert sorted(ids) == [i for (i,) in _rows(src, "SELECT id FROM StringIds ORDER BY id")]
        assert _rows(a, "SELECT id, value FROM StringIds ORDER BY id") != \
            _rows(src, "SELECT id, value FROM StringIds ORDER BY id")


def test_make_trace_files_shuffled_keeps_the_ground_truth(tmp_path, w):
    """A shuffled file holds the same events as the plain one: the ground truth files are equal
    (tests/test_synthetic.py analyses the shuffled files against them)."""
    plain = synth.make_trace_files(tmp_path / "p", variants=["nsys:modern"], truth=True)
    shuf = synth.make_trace_files(tmp_path / "s", variants=["nsys:modern"], truth=True, shuffle=1, permute_ids=1)
    assert (tmp_path / "p" / "ground_truth_nsys_modern.json").read_bytes() == \
        (tmp_path / "s" / "ground_truth_nsys_modern.json").read_bytes()
    src, got = plain[("nsys", "modern")], shuf[("nsys", "modern")]
    assert sorted(_rows(src, _NAMED_KERNELS)) == sorted(_rows(got, _NAMED_KERNELS)) != _rows(got, _NAMED_KERNELS)
