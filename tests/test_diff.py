"""`launchtui diff`: synthetic before/after pairs with known truth, cross-format and real pairs."""
from __future__ import annotations

import json

import pytest

from conftest import built_once, sample_model
from fixtures import pairs
from launchtui.analysis.diff import METRICS
from launchtui.analysis.diff_inputs import diff_document, record_of
from launchtui.cli import main
from launchtui.trace.load import read_trace

OPTIM_KERNELS = {"vectorized_elementwise_kernel<CUDAFunctor_add>", "elementwise_kernel<AddcmulFunctor>",
                 "elementwise_kernel<SqrtFunctor>", "elementwise_kernel<AddcdivFunctor>"}


@pytest.fixture(scope="module")
def pair_files(tmp_path_factory):
    def build(d):
        out = {p: pairs.write_pair(d, p) for p in pairs.PAIRS}
        out["fused_nsys"] = pairs.write_pair(d / "nsys", "fused", "nsys")
        return out
    out = dict(built_once(tmp_path_factory, "diff-pairs", build))
    out["fused_cross"] = (out["fused_nsys"][0], out["fused"][1])
    return out


@pytest.fixture(scope="module")
def pair_cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("pair-cache")


@pytest.fixture
def pair_cache(pair_cache_dir, monkeypatch):
    """One cache for the command-line cases on the generated pairs: each side is read once and its
    model and record are mapped after (a CI job gating every commit gets the same), so the cases
    differ in their options and outputs only."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(pair_cache_dir))


@pytest.fixture(scope="module")
def docs(pair_files):
    return {k: diff_document(read_trace(b), read_trace(a)) for k, (b, a) in pair_files.items()}


def assert_agrees_with_records(doc, rec_b, rec_a):
    """Every per-iteration figure of the diff is the record's median on that side."""
    for key, (_, _, path) in METRICS.items():
        if path is None or key not in doc["per_iteration"]:
            continue
        for side, rec in (("before", rec_b), ("after", rec_a)):
            v = rec
            for p in path:
                v = v[p]
            v = v["median"] if isinstance(v, dict) else v
            assert doc["per_iteration"][key][side] == pytest.approx(v, abs=1e-6), (key, side)
    assert doc["before"]["iterations"]["count"] == rec_b["iterations"]["count"]
    assert doc["after"]["iterations"]["median_ns"] == rec_a["iterations"]["median_ns"]


def truth(pair, fmt="kineto"):
    b, a = pairs.PAIRS[pair]
    return pairs.side_truth(pairs.simulate_fix(b), fmt), pairs.side_truth(pairs.simulate_fix(a), fmt)


def launches(t):
    return t["launch_calls_per_iter"] + t["graph_launches_per_iter"]


def kernels_of(doc, which):
    return {r["kernel_name"]: r for r in doc["kernels"][which]}


def test_fused_optimizer_pair(docs):
    doc, (tb, ta) = docs["fused"], truth("fused")
    per = doc["per_iteration"]
    assert per["launches_per_iter"]["before"] == launches(tb) == 482
    assert per["launches_per_iter"]["after"] == launches(ta) == 102
    assert per["launches_per_iter"]["delta"] == -380
    assert per["launches_per_iter"]["rel"] == pytest.approx(-380 / 482, abs=1e-6)
    gone = kernels_of(doc, "gone")
    assert set(gone) == OPTIM_KERNELS == set(tb["kernels_per_iter"]) - set(ta["kernels_per_iter"])
    assert all(gone[n]["launches_per_iteration"] == tb["kernels_per_iter"][n] == 96 for n in OPTIM_KERNELS)
    new = kernels_of(doc, "new")
    assert set(new) == {"multi_tensor_apply_kernel<FusedAdamMathFunctor>"}
    assert new["multi_tensor_apply_kernel<FusedAdamMathFunctor>"]["launches_per_iteration"] == 4
    phases = {p["phase"]: p["launches_per_iteration"] for p in doc["phases"]}
    opt = phases["Optimizer.step#AdamW.step"]
    assert (opt["before"], opt["after"]) == (tb["phases_per_iter"]["Optimizer.step#AdamW.step"],
                                             ta["phases_per_iter"]["Optimizer.step#AdamW.step"]) == (384, 4)
    assert phases["forward"]["delta"] == 0 and phases["backward"]["before"] == tb["phases_per_iter"]["backward"]
    v = doc["verdict"]
    assert v["status"] == "improved"
    assert v["line"].startswith("launch-bound → not launch-bound: the fix removed 380 launches/iter (−78.8 %) and ")
    ex = per["exposed_overhead_ms"]
    assert ex["delta"] < 0 and f"and {-ex['delta']:.3f} ms of exposed overhead; " in v["line"]
    assert per["iteration_ms"]["delta"] < 0 and f"iteration {-per['iteration_ms']['rel'] * 100:.1f}" \
        .replace("iteration ", "iteration −") in v["line"]


def test_graphs_pair_one_graph_launch_per_step(docs):
    doc, (tb, ta) = docs["graphs"], truth("graphs")
    per = doc["per_iteration"]
    assert per["graph_launches_per_iter"]["before"] == 0
    # one cudaGraphLaunch per step
    assert per["graph_launches_per_iter"]["after"] == ta["graph_launches_per_iter"] == 1
    assert per["launches_per_iter"]["after"] == launches(ta) == 2
    ch = kernels_of(doc, "changed")
    for name, n in ta["graph_ops_per_iter"].items():
        assert ch[name]["graph_ops_per_iteration"]["after"] == n
        assert ch[name]["launches_per_iteration"]["after"] == ta["kernels_per_iter"].get(name, 0)
    assert not doc["kernels"]["gone"] and not doc["kernels"]["new"]
    phases = {p["phase"]: p["launches_per_iteration"] for p in doc["phases"]}
    assert phases["Optimizer.step#AdamW.step"]["after"] == 0
    assert doc["verdict"]["status"] == "improved"


def test_sync_removed_pair(docs):
    doc, (tb, ta) = docs["nosync"], truth("nosync")
    per = doc["per_iteration"]
    assert per["launches_per_iter"]["delta"] == 0 and launches(tb) == launches(ta)
    assert per["iteration_ms"]["delta"] < 0
    # the CPU no longer waits for the GPU to drain mid-step: less of the step is exposed launch time
    assert per["exposed_overhead_ms"]["delta"] < 0 and per["gpu_idle_ms"]["delta"] < 0
    assert doc["verdict"]["status"] == "improved"
    assert "left launches per iteration unchanged and removed" in doc["verdict"]["line"]


def test_diff_figures_are_the_records_medians(pair_files, docs):
    for key in ("fused", "fused_cross"):
        b, a = pair_files[key]
        assert_agrees_with_records(docs[key], record_of(read_trace(b)), record_of(read_trace(a)))


def test_gpu_bound_pair_no_improvement_with_the_reason(docs):
    doc, (tb, ta) = docs["gpu_bound"], truth("gpu_bound")
    per = doc["per_iteration"]
    assert per["launches_per_iter"]["before"] == launches(tb) == 482
    assert per["launches_per_iter"]["after"] == launches(ta) == 102
    assert set(kernels_of(doc, "gone")) == OPTIM_KERNELS
    # 2 ms GEMMs: the GPU sets the step time, and the fused kernels do the same GPU work
    assert abs(per["iteration_ms"]["delta"]) <= doc["verdict"]["iteration_noise_ms"]
    assert per["share"]["before"] < 0.10 and per["host_bound_share"]["before"] < 0.10
    v = doc["verdict"]
    assert v["status"] == "no_improvement"
    assert v["line"].startswith("no improvement (not launch-bound): the fix removed 380 launches/iter (−78.8 %)")
    assert (f"the GPU waited on the host only {per['host_bound_share']['before'] * 100:.1f} % of the iteration "
            "before") in v["line"] and v["line"].endswith("so launches did not set the pace")


def test_no_change_pair(docs):
    doc = docs["same"]
    assert all(c["delta"] in (0, None) for c in doc["per_iteration"].values())
    assert doc["per_iteration"]["launches_per_iter"]["delta"] == 0
    assert doc["kernels"]["gone"] == doc["kernels"]["new"] == doc["kernels"]["changed"] == []
    assert doc["kernels"]["unchanged"] == 12
    assert all(p["launches_per_iteration"]["delta"] == 0 for p in doc["phases"])
    assert doc["verdict"]["status"] == "no_change"
    assert doc["verdict"]["line"].startswith("no change")


@pytest.mark.parametrize("key", ["fused_nsys", "fused_cross"])
def test_nsight_and_cross_format_pairs_agree_with_kineto(docs, key):
    k, other = docs["fused"], docs[key]
    tb, ta = truth("fused", "nsys")
    assert other["per_iteration"]["launches_per_iter"]["before"] == launches(tb) == 482
    for m in ("launches_per_iter", "launch_api_ms", "iteration_ms", "graph_launches_per_iter",
              "exposed_overhead_ms", "share"):
        assert other["per_iteration"][m] == k["per_iteration"][m], m
    assert other["kernels"]["gone"] == k["kernels"]["gone"]
    assert other["kernels"]["new"] == k["kernels"]["new"]
    assert other["phases"] == k["phases"]
    # Nsight also holds the second (eval) process, whose stream on device 1 starts last: it has no
    # partner in the after trace; the others pair by first use
    rows = [(s["before"]["device_id"], s["before"]["stream_id"], s["after"] and s["after"]["stream_id"])
            for s in other["streams"]]
    eval_after = 33 if key == "fused_nsys" else None
    assert rows == [(0, 7, 7), (0, 20, 20), (1, 15, 15), (1, 28, 28), (1, 33, eval_after)]
    if key == "fused_cross":
        assert other["streams"][-1]["matched_by"] == "unmatched: only before has a 3rd stream on its 2nd device"
    assert other["verdict"]["line"] == k["verdict"]["line"]


# --- CLI and gates -----------------------------------------------------------------------------

def run(capsys, *argv):
    rc = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_markdown_and_json(pair_files, pair_cache, capsys):
    b, a = pair_files["fused"]
    rc, out, err = run(capsys, "diff", b, a)
    assert rc == 0 and out.startswith("# launchtui diff")
    assert "| launches | 482 | 102 | −380 | −78.8 % |" in out
    assert "| Optimizer.step#AdamW.step | 384 | 4 | −380 | −99.0 % |" in out
    rc, out, err = run(capsys, "diff", b, a, "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["schema"] == "launchtui-diff/1"
    assert doc["per_iteration"]["launches_per_iter"]["after"] == 102


@pytest.mark.parametrize("key", ["fused", "fused_nsys"])
def test_cli_diff_after_report_reads_each_sides_record(pair_files, capsys, tmp_path, monkeypatch, key):
    """`report --json` stores each side's record; a diff after it (the case record's before/after
    loop) finds both, computes neither, and says what a diff read afresh says. A diff without a
    report stores them in turn, so the next finds them too."""
    import launchtui.analysis.record as record_mod
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    b, a = pair_files[key]
    fresh = {it: run(capsys, "diff", b, a, "--json", "--no-cache", *it)[1] for it in ((), ("--iter", "FORWARD"))}
    for side in (b, a):
        assert run(capsys, "report", side, "--json")[0] == 0
    computed = []
    real = record_mod.record_with_streams
    monkeypatch.setattr(record_mod, "record_with_streams",
                        lambda trace, sel, opt, shared=None: computed.append(opt.iter_name) or real(trace, sel, opt, shared))
    assert run(capsys, "diff", b, a, "--json")[1] == fresh[()] and computed == []
    assert run(capsys, "diff", b, a, "--json", "--iter", "FORWARD")[1] == fresh[("--iter", "FORWARD")]
    assert computed == ["FORWARD", "FORWARD"]          # another --iter: another record, once per side
    assert run(capsys, "diff", b, a, "--json", "--iter", "FORWARD")[1] == fresh[("--iter", "FORWARD")]
    assert computed == ["FORWARD", "FORWARD"]


def test_cli_trace_without_launched_ops_cannot_be_compared(capsys, tmp_path):
    from fixtures import synth
    paths = synth.make_trace_files(tmp_path, variants=["nsys:no_kernels", "nsys:modern"])
    rc, out, err = run(capsys, "diff", paths[("nsys", "no_kernels")], paths[("nsys", "modern")], "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["verdict"]["status"] == "unknown"
    assert doc["verdict"]["line"].startswith("cannot compare: before has GPU activity not recorded")
    assert doc["per_iteration"]["launches_per_iter"] == {"before": None, "after": 482.0, "delta": None, "rel": None}
    rc, out, err = run(capsys, "diff", paths[("nsys", "no_kernels")], paths[("nsys", "modern")],
                       "--fail-if", "launches_per_iter>+5%")
    assert rc == 2 and "launches is not available" in err


def test_cli_iter_names_the_iteration_ranges(pair_files, pair_cache, capsys):
    b, a = pair_files["fused"]
    rc, out, err = run(capsys, "diff", b, a, "--iter", "FORWARD", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["before"]["iterations"]["source"] == "named range"
    assert doc["before"]["iterations"]["count"] == doc["after"]["iterations"]["count"] == 4
    # the forward pass launches 4 kernels per layer (12 layers) on either side of the optimizer fix
    assert doc["per_iteration"]["launches_per_iter"]["before"] == doc["per_iteration"]["launches_per_iter"]["after"] == 48
    assert not doc["kernels"]["gone"] and not doc["kernels"]["new"]


def test_cli_output_file_atomic_and_force(pair_files, pair_cache, capsys, tmp_path):
    b, a = pair_files["same"]
    o = tmp_path / "d.md"
    assert run(capsys, "diff", b, a, "-o", o)[0] == 0
    first = o.read_text()
    assert "no change" in first
    rc, out, err = run(capsys, "diff", b, a, "--json", "-o", o)
    assert rc == 2 and "exists; use --force" in err and o.read_text() == first
    assert run(capsys, "diff", b, a, "--json", "-o", o, "--force")[0] == 0
    assert json.loads(o.read_text())["schema"] == "launchtui-diff/1"


@pytest.mark.parametrize("gates,rc", [
    (["launches_per_iter>+5%"], 0),              # fell by 78.8 %
    (["launches_per_iter<-50%"], 1),             # ... which is below -50 %
    (["launch_api_ms>+0.5"], 0),
    (["launch_api_ms<-2"], 1),                   # −2.086 ms
    (["iteration_ms>3"], 0),                     # after = 2.539 ms
    (["iteration_ms>2.5"], 1),
    (["launches_per_iter>+5%", "iteration_ms>2.5"], 1),
    (["launches_per_iter>+5%,launch_api_ms>0"], 1),
    (["graph_launches_per_iter>0"], 0),
])
def test_cli_gates(pair_files, pair_cache, capsys, gates, rc):
    b, a = pair_files["fused"]
    argv = ["diff", b, a]
    for g in gates:
        argv += ["--fail-if", g]
    got, out, err = run(capsys, *argv)
    assert got == rc
    assert out.startswith("# launchtui diff")      # the page is written either way
    if rc == 1:
        assert "launchtui: gate tripped: " in err
    else:
        assert "gate tripped" not in err


@pytest.mark.parametrize("gate,msg", [
    ("launches_per_iter>>5%", "expected METRIC OP VALUE"),
    ("launches=5", "expected METRIC OP VALUE"),
    ("nonsense>1", "unknown metric 'nonsense'"),
    ("", "expected METRIC OP VALUE"),
])
def test_cli_bad_gate_exit_2_before_reading(capsys, tmp_path, gate, msg):
    rc, out, err = run(capsys, "diff", tmp_path / "missing1", tmp_path / "missing2", "--fail-if", gate)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("launchtui: --fail-if") and msg in err


def test_cli_gate_on_unavailable_figure_is_an_error(pair_files, pair_cache, capsys, tmp_path):
    b, a = pair_files["same"]
    o = tmp_path / "x.md"
    rc, out, err = run(capsys, "diff", b, a, "--fail-if", "amdahl_bound>+0.5", "-o", o)
    if rc == 0:   # the case record provides the Amdahl bound: the gate is judged
        return
    assert rc == 2 and "not available" in err and not o.exists()


def test_cli_bad_trace_one_line(capsys, pair_files, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("not a trace")
    rc, out, err = run(capsys, "diff", pair_files["same"][0], bad)
    assert rc == 2 and err.count("\n") == 1 and str(bad) in err and "Traceback" not in err


# --- real pairs --------------------------------------------------------------------------------

def real(a, b):
    return diff_document(sample_model(f"kineto/{a}"), sample_model(f"kineto/{b}"))


@pytest.mark.samples
def test_real_xdit_flux1_pair_agrees_with_the_record_on_each_side():
    b = sample_model("kineto/xdit_flux1__baseline__rank0.json.gz")
    a = sample_model("kineto/xdit_flux1__aiter_sage__rank0.json.gz")
    doc = diff_document(b, a)
    assert_agrees_with_records(doc, record_of(b), record_of(a))
    per = doc["per_iteration"]
    # the record finds the repeating launch period (one block of the denoiser): 41 launches each side
    assert doc["before"]["iterations"]["source"] == "periodic launch sequence"
    assert per["launches_per_iter"]["before"] == per["launches_per_iter"]["after"] == 41
    assert not doc["kernels"]["gone"] and not doc["kernels"]["new"]
    # the kernel rows add up to the record's launches per iteration (no graph launch inside a period)
    assert per["graph_launches_per_iter"]["after"] == 0
    assert sum(r["launches_per_iteration"]["after"] for r in doc["kernels"]["changed"]) == 41
    assert [(s["before"]["stream_id"], s["after"]["stream_id"]) for s in doc["streams"]][0] == (0, 0)
    # the 41-launch periods cover 7.1 % and 3.8 % of the 396 and 713 ms windows: partial, so the
    # verdict leads with the whole window, where the attention kernel was swapped (issue 22)
    wb, wa = doc["before"]["window"], doc["after"]["window"]
    assert wb["partial"] and wa["partial"] and wb["heuristic"]
    assert (round(wb["window_ms"]), round(wa["window_ms"])) == (396, 713)
    assert 0.06 < wb["iteration_share"] < 0.08 and 0.03 < wa["iteration_share"] < 0.05
    w = doc["kernels_window"]
    assert (w["kernels"]["before"], w["kernels"]["after"]) == (2540, 3113)
    gone = {r["kernel_name"]: r["launches"] + r["graph_ops"] for r in w["gone"]}
    new = {r["kernel_name"]: r["launches"] + r["graph_ops"] for r in w["new"]}
    assert gone["aiter::fmha_fwd_hd128_bf16_rtz"] == 57 and new["sage_fwd"] == new["sage_quant_kernel"] == 57
    v = doc["verdict"]
    assert v["status"] == "changed" and v["partial_iterations"]
    assert v["line"].startswith("whole window: kernels 2,540 → 3,113 (+22.6 %); gone: `aiter::fmha_fwd_hd128_bf16_rtz` (57)")
    assert "`sage_fwd` (57), `sage_quant_kernel` (57)" in v["line"]
    assert "The iterations are partial (a repeating launch sequence covering 7.1 % and 3.8 % of the windows)" in v["line"]
    from launchtui.analysis.diff_markdown import render_markdown
    page = render_markdown(doc)
    assert "the iterations cover 28.126 ms of its 396.068 ms window (7.1 %, partial); 2,540 kernels" in page
    assert "## Kernels over the whole window: 2,540 → 3,113 (+22.6 %); 19 gone, 28 new" in page
    assert "| `aiter::fmha_fwd_hd128_bf16_rtz` | 0 | 57 |" in page and "| `sage_quant_kernel` | 0 | 57 |" in page


@pytest.mark.samples
def test_real_cross_vendor_stream_matching():
    doc = real("h100__timesformer-k400.json.gz", "mi300__timesformer-k400.json.gz")
    (s,) = doc["streams"]
    assert (s["before"]["device_id"], s["before"]["stream_id"]) == (0, 7)
    assert (s["after"]["device_id"], s["after"]["stream_id"]) == (2, 0)
    assert s["matched_by"] == "1st device (id 0 → 2), 1st stream by first use"
    assert doc["before"]["iterations"]["source"] == doc["after"]["iterations"]["source"] == "ProfilerStep"


@pytest.mark.samples
def test_real_docs_before_after_fix_tiny():
    doc = real("docs__traces__before_fix_trace.json", "docs__traces__after_fix_trace.json")
    per = doc["per_iteration"]
    assert per["launches_per_iter"]["before"] == per["launches_per_iter"]["after"] == 1
    assert doc["before"]["iterations"]["count"] == 1
    assert doc["verdict"]["status"] == "no_change"   # the same 40 ns kernel on both sides
    from launchtui.analysis.diff_markdown import render_markdown
    assert "the whole window, 0.00004 ms" in render_markdown(doc)
