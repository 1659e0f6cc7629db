"""The synthetic generator's Kineto traces (fixtures/kineto_writer.py) against its ground truth: exact
ts/dur tokens, the legacy layout, the kernel table, the base time, and a shuffled layout that keeps
every event byte for byte. The readers are independent of launchtui (tests/synth_readers.py). The
Nsight side and the simulation: test_fixture_generator.py."""
from __future__ import annotations

import collections
import gzip
import re

import pytest

from conftest import synth_all
from fixtures import synth
from fixtures.model import KERNEL_TYPES, KINETO_VARIANTS
from synth_readers import gt_table, load_kineto, ns_of

TS_RE = re.compile(r'"(ts|dur)": (-?[0-9][0-9.eE+-]*)')


@pytest.fixture(scope="module")
def w():
    return synth.simulate()


@pytest.fixture(scope="module")
def files(tmp_path_factory, w):
    return synth_all(tmp_path_factory)


@pytest.mark.parametrize("variant", ["modern", "absolute", "shuffled"])
def test_kineto_ts_tokens_are_exact(files, variant):
    raw, _ = load_kineto(files[("kineto", variant)])
    toks = TS_RE.findall(raw)
    assert len(toks) > 10_000
    lossy = 0
    for _, tok in toks:
        assert re.fullmatch(r"\d+\.\d{3}", tok), tok
        ns = ns_of(tok)
        a, b = tok.split(".")
        assert ns == int(a) * 1000 + int(b)
        lossy += round(float(tok) * 1000) != ns
    if variant == "absolute":
        assert lossy > 0  # the float64 trap is really there
        assert any(len(tok.split(".")[0]) == 16 for _, tok in toks)
    else:
        assert lossy == 0


def test_kineto_legacy_tokens(files):
    raw, d = load_kineto(files[("kineto", "legacy2021")])
    for _, tok in TS_RE.findall(raw):
        assert re.fullmatch(r"\d+", tok), tok
    ev = d["traceEvents"]
    cats = {e.get("cat") for e in ev}
    assert {"Operator", "Runtime", "Kernel", "Memcpy", "Memset"} <= cats
    assert not {"python_function", "cpu_op", "kernel", "user_annotation"} & cats
    assert "baseTimeNanoseconds" not in d
    k = next(e for e in ev if e.get("cat") == "Kernel")
    assert isinstance(k["tid"], str) and k["tid"].startswith("stream ")
    rt = next(e for e in ev if e.get("cat") == "Runtime")
    assert isinstance(rt["pid"], str) and isinstance(rt["tid"], str)


def _kineto_table(d):
    """Independent reader: correlation join of runtime/driver launch events and kernels."""
    ev = d["traceEvents"]
    rt_cats = {"cuda_runtime", "cuda_driver", "runtime"}
    api = {}
    for e in ev:
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() in rt_cats:
            api[e["args"]["correlation"]] = (e["name"], ns_of(e["ts"]), ns_of(e["ts"]) + ns_of(e["dur"]))
    agg = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
    short = {k.demangled: k.short for k in KERNEL_TYPES}
    for e in ev:
        if e.get("ph") != "X" or str(e.get("cat", "")).lower() != "kernel":
            continue
        ts, dur = ns_of(e["ts"]), ns_of(e["dur"])
        if ts == 0 and dur == 0:
            continue  # artefact
        a = api.get(e["args"]["correlation"])
        if a is None or not (a[0].startswith("cudaLaunch") or a[0].startswith("cuLaunch")):
            continue
        g = agg[(e["args"]["device"], short[e["name"]])]
        g[0] += 1
        g[1] += a[2] - a[1]
        if ts - a[2] >= 0:
            g[2] += 1
            g[3] += ts - a[2]
        g[4] += dur
    return agg


@pytest.mark.parametrize("variant", KINETO_VARIANTS)
def test_kineto_file_agrees_with_ground_truth(files, w, variant):
    _, d = load_kineto(files[("kineto", variant)])
    gt = synth.ground_truth(w, "kineto", variant)
    assert dict(_kineto_table(d)) == gt_table(gt)
    ev = d["traceEvents"]
    cat = collections.Counter(str(e.get("cat")) for e in ev if e.get("ph") == "X")
    kc = gt["kineto"]
    n_kernel = cat["kernel"] + cat["Kernel"]
    assert n_kernel == kc["kernel_events_in_file"] == gt["counts"]["kernels"] + 2
    assert cat["python_function"] == kc["python_function"]
    assert cat["gpu_user_annotation"] == kc["gpu_user_annotation"]
    assert len(ev) == kc["trace_events"]
    zero = [e for e in ev if str(e.get("cat")).lower() == "kernel" and ns_of(e["ts"]) == 0]
    assert len(zero) == 2
    if variant == "legacy2021":
        assert gt["meta"]["truncated_to_us"]
        assert all(r["span_start_ns"] % 1000 == 0 for r in gt["kernel_table"])
    else:
        assert cat["python_function"] >= 3 * gt["counts"]["kernels"] * 0.9
        assert cat["cuda_driver"] == kc["driver_events"] > 0
        graph = [e for e in ev if e.get("cat") == "cuda_runtime" and e["name"] ==
                 "cudaGraphLaunch"]
        assert len(graph) == 1 and graph[0]["args"]["cbid"] == 311
        n = sum(1 for e in ev if e.get("cat") == "kernel" and
                e["args"]["correlation"] == graph[0]["args"]["correlation"])
        assert n == w.cfg.graph_kernels
    # time order: real traces are not sorted; ours are not either
    ts = [ns_of(e["ts"]) for e in ev if e.get("ph") == "X" and e.get("cat") != "Trace"]
    assert ts != sorted(ts)
    assert 4242 in gt["counts"]["processes_with_api"] and 5151 not in \
        gt["counts"]["processes_with_api"]


def test_kineto_base_time(files, w):
    _, d = load_kineto(files[("kineto", "modern")])
    gt = synth.ground_truth(w, "kineto", "modern")
    base = d["baseTimeNanoseconds"]
    first = gt["window"]["first_kernel_start_ns"]
    # the same instant on the Nsight capture clock, through the session's UTC epoch
    nsys_first = synth.ground_truth(w, "nsys", "modern")["window"]["first_kernel_start_ns"]
    assert base + first == w.cfg.session_epoch_ns + nsys_first
    assert len(str(first // 1000)) == 13


def test_kineto_layout_keeps_every_event_byte_for_byte(files, tmp_path):
    import msgspec

    from fixtures import layout
    src = files[("kineto", "modern")]
    a = layout.shuffle_kineto(src, tmp_path / "a.json.gz", seed=3)
    b = layout.shuffle_kineto(src, tmp_path / "b.json.gz", seed=3)
    assert a.read_bytes() == b.read_bytes()

    def events(p):
        doc = msgspec.json.decode(gzip.decompress(p.read_bytes()), type=dict[str, msgspec.Raw])
        return [bytes(e) for e in msgspec.json.decode(doc["traceEvents"], type=list[msgspec.Raw])], list(doc)
    (ea, ka), (es, ks) = events(a), events(src)
    assert ka == ks and ea != es and sorted(ea) == sorted(es)
