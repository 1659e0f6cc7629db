"""Every analysis against the synthetic generator's independently computed ground truth,
on every file variant (Nsight schema eras, Kineto eras)."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import fixtures.synth as synth
from conftest import built_once, synth_all
from launchtui.analysis import nvtx
from launchtui.analysis.backpressure import Options, backpressure
from launchtui.analysis.launches import kernel_groups, launched_kernels, small_kernel_table
from launchtui.analysis.queue import queue_summary
from launchtui.trace.load import read_trace
from launchtui.trace.model import API_GRAPH_LAUNCH, OP_KERNEL

# the same events in another layout (fixtures/layout.py): rows / traceEvents shuffled, Nsight
# string ids dealt out again; the ground truth is the unshuffled variant's (definitions.md §9)
SHUFFLED = "@shuffled"
RELAID = [("nsys", "modern"), ("nsys", "legacy2021"), ("nsys", "textid"), ("kineto", "modern"),
          ("kineto", "legacy2021")]
WITH_KERNELS = [("nsys", v) for v in synth.NSYS_VARIANTS if v not in ("no_kernels", "no_cuda")] + \
               [("kineto", v) for v in synth.KINETO_VARIANTS] + [(f, v + SHUFFLED) for f, v in RELAID]


@pytest.fixture(scope="session")
def files(tmp_path_factory):
    out = dict(synth_all(tmp_path_factory))
    relaid = built_once(tmp_path_factory, "synth-relaid", lambda d: synth.make_trace_files(
        d, variants=RELAID, shuffle=7, permute_ids=7))
    out.update({(f, v + SHUFFLED): p for (f, v), p in relaid.items()})
    return out


_loaded: dict = {}


def load(files, fmt, variant):
    key = (fmt, variant)
    if key not in _loaded:
        trace = read_trace(files[key])
        _loaded[key] = (trace, synth.ground_truth(synth.simulate(), fmt, variant.removesuffix(SHUFFLED)))
    return _loaded[key]


def _groups(trace, names):
    gr = kernel_groups(trace, names=names)
    return gr, {(int(gr.device[i]), trace.strings[int(gr.name[i])]): i for i in range(len(gr))}


@pytest.mark.parametrize("fmt,variant", WITH_KERNELS)
@pytest.mark.parametrize("names,key", [("short", "kernel_table"), ("full", "kernel_table_by_name")])
def test_kernel_table_exact(files, fmt, variant, names, key):
    trace, gt = load(files, fmt, variant)
    gr, mine = _groups(trace, names)
    want = {(r["device_id"], r["kernel_name"]): r for r in gt[key]}
    if names == "full":
        # the generator declares a functor only for functor kernels; launchtui also splits others by
        # their telling template argument (cunn_SoftMaxForward<SoftMaxForwardEpilogue>): same groups
        mine = {(k if k in want else (k[0], k[1].split("<")[0])): i for k, i in mine.items()}
        assert {k[1] for k in want if "<" in k[1]} >= {"elementwise_kernel<AddcmulFunctor>"}
    assert set(mine) == set(want)
    for k, r in want.items():
        i = mine[k]
        got = (int(gr.count[i]), int(gr.queue_count[i]), int(gr.sum_api[i]), int(gr.sum_queue[i]),
               int(gr.sum_kernel[i]), int(gr.max_api[i]), int(gr.span_start[i]), int(gr.span_end[i]))
        assert got == (r["launch_count"], r["queue_count"], r["sum_api_ns"], r["sum_queue_ns"],
                       r["sum_kernel_ns"], r["max_api_ns"], r["span_start_ns"], r["span_end_ns"]), k


@pytest.mark.parametrize("fmt,variant", [("nsys", "modern"), ("kineto", "modern")])
def test_kernel_groups_summed_in_blocks(files, fmt, variant, monkeypatch):
    """Sums taken 7 launches at a time equal the ground truth and the one-block sums exactly."""
    from launchtui.analysis import launches
    trace, gt = load(files, fmt, variant)
    whole = kernel_groups(trace)
    monkeypatch.setattr(launches, "AGG_BLOCK", 7)
    gr, mine = _groups(trace, "short")
    assert len(gr.op_idx) > 7 * 3
    for r in gt["kernel_table"]:
        i = mine[(r["device_id"], r["kernel_name"])]
        assert (int(gr.sum_api[i]), int(gr.sum_queue[i]), int(gr.queue_count[i]), int(gr.sum_kernel[i]),
                int(gr.max_api[i]), int(gr.span_start[i]), int(gr.span_end[i])) == \
            (r["sum_api_ns"], r["sum_queue_ns"], r["queue_count"], r["sum_kernel_ns"], r["max_api_ns"],
             r["span_start_ns"], r["span_end_ns"])
    for f in launches._FIELDS + ("op_idx", "op_group"):
        assert np.array_equal(getattr(gr, f), getattr(whole, f)), f


@pytest.mark.parametrize("fmt,variant", [("nsys", "modern"), ("kineto", "modern"), ("kineto", "legacy2021")])
def test_rows_in_nsys_ai_format(files, fmt, variant):
    trace, gt = load(files, fmt, variant)
    rows = small_kernel_table(trace, min_launches=1, max_avg_us=1e12, limit=0)
    got = {(r["device_id"], r["kernel_name"]): {k: v for k, v in r.items() if k != "is_nccl"} for r in rows}
    want = {(r["device_id"], r["kernel_name"]): r["nsys_ai"] for r in gt["kernel_table"]}
    assert got == want
    nccl = {r["kernel_name"] for r in rows if r["is_nccl"]}
    assert nccl and all("nccl" in n.lower() for n in nccl)


def test_default_table_filters_and_ranks(files):
    trace, gt = load(files, "nsys", "modern")
    rows = small_kernel_table(trace)
    want = [r for r in gt["kernel_table"] if r["launch_count"] >= 100 and r["mean_kernel_ns"] < 10_000]
    want.sort(key=lambda r: (-r["sum_api_ns"], -r["launch_count"], r["kernel_name"], r["device_id"]))
    assert [(r["device_id"], r["kernel_name"]) for r in rows] == \
        [(r["device_id"], r["kernel_name"]) for r in want][:20]


def test_full_names_split_the_optimizer_row(files):
    trace, _ = load(files, "nsys", "modern")
    short = {r["kernel_name"] for r in small_kernel_table(trace, limit=0)}
    full = {r["kernel_name"] for r in small_kernel_table(trace, limit=0, names="full")}
    assert "elementwise_kernel" in short
    assert {"elementwise_kernel<AddcmulFunctor>", "elementwise_kernel<SqrtFunctor>"} <= full


@pytest.mark.parametrize("fmt,variant", WITH_KERNELS)
def test_queue_depth(files, fmt, variant):
    trace, gt = load(files, fmt, variant)
    got = {(q.device_id, q.stream_id): q for q in queue_summary(trace)}
    want = {(r["device_id"], r["stream_id"]): r for r in gt["queue_depth"]}
    assert set(got) == set(want)
    for k, r in want.items():
        q = got[k]
        assert q.max_depth == r["max"], k
        assert q.span_ns == r["last_ns"] - r["first_ns"], k
        assert q.mean_depth == pytest.approx(r["mean_tw"], rel=1e-12), k
        assert q.time_at_or_above_ns == {1000: r["time_ge_1000_ns"], 1020: r["time_ge_1020_ns"]}, k
    limit = gt["backpressure"]["queue_limit"]
    assert max(q.max_depth for q in got.values()) == limit


@pytest.mark.parametrize("fmt,variant", WITH_KERNELS)
def test_backpressure_episodes_and_spikes(files, fmt, variant):
    trace, gt = load(files, fmt, variant)
    bp = backpressure(trace, opt=Options(merge_gap_us=0))
    want = sorted((d["device_id"], d["stream_id"], a, b) for d in gt["backpressure"]["intervals_ge_1000"]
                  for a, b in d["intervals"])
    assert sorted((e.device, e.stream, e.start, e.end) for e in bp["episodes"]) == want
    assert all(e.level == "saturated" and e.max_depth == gt["backpressure"]["queue_limit"]
               for e in bp["episodes"])
    got_spikes = sorted((int(trace.api.corr[e.worst_api]), e.end - e.start) for e in bp["spikes"])
    want_spikes = sorted((s["correlation_id"], s["dur_ns"]) for s in gt["backpressure"]["spikes"])
    assert got_spikes == want_spikes
    if fmt == "nsys":  # Nsight's own "command buffer full" rows attach to the blocked launch calls
        from launchtui.analysis.backpressure import _command_buffer_full, command_buffer_full_ids
        flags = _command_buffer_full(trace)
        assert int(flags.sum()) == gt["counts"]["overhead_command_buffer_full"]
        # the ids the queue class and the ceilings read: the flagged calls, computed once
        assert command_buffer_full_ids(trace).tolist() == np.flatnonzero(flags).tolist()
        assert command_buffer_full_ids(trace) is command_buffer_full_ids(trace)
        # the spikes' per-call lookup: the same flags as the whole table's, call by call
        some = np.concatenate([np.flatnonzero(flags), np.arange(0, len(flags), 7)])
        assert _command_buffer_full(trace, some).tolist() == flags[some].tolist()
        assert [e.command_buffer_full for e in bp["spikes"]] == [bool(flags[e.worst_api]) for e in bp["spikes"]]
        assert bp["command_buffer_full_events"] == gt["counts"]["overhead_command_buffer_full"]
        if gt["counts"]["overhead_command_buffer_full"]:
            assert sum(e.command_buffer_full for e in bp["spikes"]) > 0


@pytest.mark.parametrize("fmt,variant", WITH_KERNELS)
def test_nvtx_attribution(files, fmt, variant):
    trace, gt = load(files, fmt, variant)
    k = launched_kernels(trace)
    rng = nvtx.op_ranges(trace)[k]
    names = [trace.strings[int(trace.ranges.text[r])] if r >= 0 else None for r in rng]
    got = Counter(zip(names, (trace.strings[int(n)] for n in trace.ops.name[k])))
    want = Counter({(r["range"], r["kernel_name"]): r["table_count"] for r in gt["nvtx_attribution"]
                    if r["table_count"]})
    assert got == want


def test_optimizer_search_and_range_restriction(files):
    from launchtui.analysis.select import range_selection
    trace, gt = load(files, "nsys", "modern")
    hits = nvtx.search(trace, "optim")
    assert len(hits) and all("optim" in trace.strings[int(t)].lower() for t in trace.ranges.text[hits])
    i = int(nvtx.search(trace, nvtx.OPTIMIZER_PATTERN)[0])
    assert i == hits[0] and trace.ranges.start[i] == trace.ranges.start[hits].min()
    sel = range_selection(trace, hits, "optim")
    rows = small_kernel_table(trace, sel, min_launches=1, max_avg_us=1e12, limit=0)
    want = Counter()
    for r in gt["nvtx_attribution"]:
        if r["range"] and "optim" in r["range"].lower():
            want[r["kernel_name"]] += r["table_count"]
    got = Counter()
    for r in rows:
        got[r["kernel_name"]] += r["launch_count"]
    assert got == +want


@pytest.mark.parametrize("fmt,variant", WITH_KERNELS)
def test_counts_window_and_graph_join(files, fmt, variant):
    trace, gt = load(files, fmt, variant)
    c = gt["counts"]
    ops = trace.ops
    assert int((ops.kind == OP_KERNEL).sum()) == c["kernels"]
    assert len(ops) == c["gpu_ops"]
    assert int((ops.api < 0).sum()) == c["unmatched_ops"]
    assert int(((ops.api < 0) & (ops.kind == OP_KERNEL)).sum()) == c["unmatched_kernels"]
    assert len(launched_kernels(trace)) == c["table_kernels"]
    assert trace.window() == (gt["window"]["first_kernel_start_ns"], gt["window"]["last_kernel_end_ns"])
    assert trace.device_ids() == c["devices_with_ops"]
    for g in gt["graph"]:
        m = (ops.corr == g["correlation_id"]) & (ops.api >= 0)
        assert int(m.sum()) == g["ops"]
        (a,) = np.unique(ops.api[m])
        assert trace.api.kind[a] == API_GRAPH_LAUNCH and trace.api.start[a] == g["api_start_ns"]


def test_exports_without_kernels_or_cuda(files):
    trace = read_trace(files[("nsys", "no_kernels")])
    assert len(trace.ops) == 0 and len(trace.api) > 0 and trace.has_cuda_tables
    assert any("no CUDA kernel table" in m for m in trace.missing)
    trace = read_trace(files[("nsys", "no_cuda")])
    assert not trace.has_cuda_tables and len(trace.ranges) > 0
    assert any("no CUDA tables" in m for m in trace.missing)


def test_variant_specifics(files):
    t, _ = load(files, "nsys", "legacy2021")
    assert "2021" in t.source.version
    t, _ = load(files, "nsys", "meta2022")
    assert t.source.extra["meta_table"] == "EXPORT_META_DATA"
    t, _ = load(files, "nsys", "textid")
    assert any(nvtx.range_name(t, i).count(":") for i in range(len(t.ranges)))
    t, gt = load(files, "nsys", "negative_ts")
    assert int(t.api.start.min()) < 0 or int(t.ranges.start.min()) < 0
    t, _ = load(files, "kineto", "absolute")
    assert t.source.extra["clock"] == "Unix epoch µs" and int(t.ops.start.min()) > 10**18


def test_demo_files_are_the_generator_output(tmp_path):
    """The bundled demo is exactly what the generator makes (content, not zlib/SQLite build bytes)."""
    import gzip
    import sqlite3
    synth.write_demo(tmp_path)
    assert (tmp_path / "ground_truth.json").read_bytes() == (synth.DEMO_DIR / "ground_truth.json").read_bytes()
    assert gzip.decompress((tmp_path / "demo.json.gz").read_bytes()) == \
        gzip.decompress((synth.DEMO_DIR / "demo.json.gz").read_bytes())

    def dump(p):
        con = sqlite3.connect(f"file:{p}?mode=ro&immutable=1", uri=True)
        try:
            return list(con.iterdump())
        finally:
            con.close()
    assert dump(tmp_path / "demo.sqlite") == dump(synth.DEMO_DIR / "demo.sqlite")


def test_row_phases_counted_over_every_launch(files):
    """Groups holding most launches are counted over every launch, the rest in one extra group:
    the same top range and share per group as counting their own launches only."""
    from launchtui.analysis import launches
    from launchtui.analysis.nvtx import top_range_per_group
    trace, _ = load(files, "nsys", "modern")
    gr = kernel_groups(trace)
    by_count = np.argsort(-gr.count, kind="stable")
    upto = int(np.searchsorted(np.cumsum(gr.count[by_count]), gr.count.sum() * 0.6)) + 1
    wanted = np.sort(by_count[:upto])
    assert 0 < len(wanted) < len(gr)
    op_idx, group, n = launches._launches_counted(gr, wanted)
    assert n == len(gr) + 1 and len(op_idx) == len(gr.op_idx) and group.dtype == np.int32
    got = top_range_per_group(trace, op_idx, group, n)
    got.pop(len(gr), None)
    want = top_range_per_group(trace, *launches.launches_of(gr, wanted), len(gr))
    assert want and got == want
    few = by_count[-1:]     # a group with few launches: its own launches, copied
    assert launches._launches_counted(gr, few)[2] == len(gr)
