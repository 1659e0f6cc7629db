"""Phases of kernels launched from a thread without ranges (PyTorch's autograd thread), definitions.md
§V5: the main thread's range at the launch time, else `backward (autograd thread)` through the
Sequence-number link; synthetic ground truth and the real Kineto samples."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from conftest import sample_model
from fixtures import record_cases as rc
from fixtures import synth
from launchtui.analysis.phases import (BACKWARD_PHASE, RULE_BACKWARD, RULE_MAIN_THREAD, RULE_NONE,
                                       attributed_phase_keys, main_thread)
from launchtui.analysis.record import RecordOptions, build_record
from launchtui.analysis.record_markdown import render_markdown
from launchtui.trace.load import open_trace
from launchtui.trace.model import STACK_BACKWARD

ALL_ROWS = RecordOptions(top=50, min_launches=1, max_avg_us=1e9)
TOP_20 = RecordOptions(top=20)     # the cuDNN helpers rank below the eager elementwise functors


@pytest.fixture(scope="module")
def autograd(tmp_path_factory):
    d = tmp_path_factory.mktemp("phases")
    sc = rc.SCENARIOS["autograd"]
    raw = rc.workload(sc)
    nsys = open_trace(synth.write_nsys_sqlite(raw, d / "a.sqlite"), use_cache=False)
    kineto = open_trace(synth.write_kineto_json(raw, d / "a.json"), use_cache=False)
    return nsys, kineto, rc.nsys_view(sc)


def _truth(w, steps):
    """Per record row name: (modal phase, its share, launched from the autograd thread) over the
    device-0 kernel launches inside the steps: the launching thread's depth-1 range, else the main
    thread's at the launch call's start."""
    main = {th for th, n in zip(w.ranges["thread"].tolist(), w.ranges["name"].tolist())
            if w.range_names[n].startswith("ProfilerStep#")}
    assert len(main) == 1
    main = main.pop()
    per: dict[tuple, list] = {}
    functors: dict[str, set] = {}
    for dev, a, kt, kind in zip(w.ops["device"].tolist(), w.ops["api"].tolist(), w.ops["ktype"].tolist(),
                                w.ops["kind"].tolist()):
        if dev != 0 or a < 0 or kt < 0:
            continue
        functors.setdefault(w.kernel_types[kt].short, set()).add(w.kernel_types[kt].functor)
        t, th = int(w.api["start"][a]), int(w.api["thread"][a])
        if not any(s <= t < e for s, e in steps):
            continue
        own = rc.enclosing_range_names(w, th, [t])[0]
        ph = own if own is not None or th == main else rc.enclosing_range_names(w, main, [t])[0]
        typ = w.kernel_types[kt]
        per.setdefault((typ.short, typ.functor), []).append((ph, th != main and own is None and ph is not None))
    # the record's rows (definitions.md §V4): a short name launched (anywhere on the device) with
    # several functors is one row per functor, `short<Functor>`
    per = {(f"{short}<{fn}>" if len(functors[short]) > 1 else short): v for (short, fn), v in per.items()}
    out = {}
    for name, v in per.items():
        (ph, by_main), n = Counter(v).most_common(1)[0]
        out[name] = (ph, n / len(v), by_main)
    return out


def test_autograd_thread_kernels_take_the_main_threads_phase(autograd):
    nsys, kineto, w = autograd
    assert len(w.threads) > 2 and any(t.name == "pt_autograd_0" for t in w.threads)
    doc = build_record(nsys, opt=ALL_ROWS)
    steps = list(zip(doc["iterations"]["starts_ns"], doc["iterations"]["ends_ns"]))
    truth = _truth(w, steps)
    rows = {r["kernel_name"]: r for r in doc["top"] + doc["nccl"]}
    assert set(rows) == set(truth)
    by_main = 0
    for name, (ph, share, main) in truth.items():
        r = rows[name]
        assert (r["phase"], r["phase_share"]) == (ph, round(share, 4)), name
        assert r["phase_rule"] == ("main thread" if main else "range" if ph else None), name
        by_main += main
    assert by_main == 3      # sgemm nn / nt and the GELU backward: only the autograd thread launches them
    assert "backward (100%, main thread)" in render_markdown(doc)
    # the Kineto file of the same workload attributes the same way
    kdoc = build_record(kineto, opt=ALL_ROWS)
    key = lambda d: Counter((r["launches"], r["phase"], r["phase_share"], r["phase_rule"]) for r in d["top"] + d["nccl"])  # noqa: E731
    assert key(kdoc) == key(doc)


def test_backward_link_names_the_phase_when_no_range_is_open(autograd):
    _, nsys, w = autograd     # the Kineto file: its calls carry stacks, and the link's `via`
    ops = np.nonzero((nsys.ops.api >= 0) & (nsys.ops.device == 0))[0]
    rg = nsys.ranges
    steps = rg.start[(rg.depth == 0) & np.isin(rg.text, [nsys.strings.intern(f"ProfilerStep#{i}") for i in range(1, 5)])]
    main = main_thread(nsys, ops, 1, steps)
    api_thread = nsys.api.thread[nsys.ops.api[ops]]
    auto = api_thread != main
    assert auto.any() and main >= 0
    # without a main thread to time them (-1) and without the link, autograd launches have no phase
    keys, texts, rule = attributed_phase_keys(nsys, ops, 1, 1, -1)
    assert (keys[auto] == -1).all() and (rule[auto] == RULE_NONE).all()
    # the Sequence-number link (as the Kineto reader records it) names the phase
    assert len(nsys.api_stacks) == len(nsys.api)
    via = nsys.api_stacks.via.copy()
    try:
        nsys.api_stacks.via[nsys.ops.api[ops[auto]]] = STACK_BACKWARD
        keys, texts, rule = attributed_phase_keys(nsys, ops, 1, 1, -1)
        assert {texts[k] for k in keys[auto]} == {BACKWARD_PHASE} and (rule[auto] == RULE_BACKWARD).all()
        # with the main thread known, its range wins over the link
        keys, texts, rule = attributed_phase_keys(nsys, ops, 1, 1, main)
        assert {texts[k] for k in keys[auto]} == {"backward"} and (rule[auto] == RULE_MAIN_THREAD).all()
    finally:
        nsys.api_stacks.via[:] = via


def _row(doc, name):
    return next(r for r in doc["top"] + doc["near_misses"] if r["kernel_name"] == name)


@pytest.mark.samples
def test_real_kineto_autograd_kernels_get_phases():
    """Before §V5's rules the phase of these rows was empty (launched from the autograd thread)."""
    v100 = build_record(sample_model("kineto/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"), opt=TOP_20)
    r = _row(v100, "computeBOffsetsKernel")
    assert (r["phase"], r["phase_rule"]) == ("## backward ##", "main thread") and r["phase_share"] > 0.9
    assert _row(v100, "computeOffsetsKernel")["phase_rule"] == "range"
    diff = build_record(sample_model("kineto/trace_diff__test__test.json.gz"), opt=TOP_20)
    r = _row(diff, "splitKreduce_kernel")
    assert (r["phase"], r["phase_rule"]) == ("## backward ##", "main thread")
    # resnet50: the main thread holds only ProfilerStep, zero_grad and step; the autograd thread's
    # calls are linked to their forward ops by Sequence number
    tb = build_record(sample_model(
        "kineto/tb_plugin__samples__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz"),
        opt=TOP_20)
    r = _row(tb, "computeOffsetsKernel")
    assert (r["phase"], r["phase_rule"]) == (BACKWARD_PHASE, "backward link") and r["phase_share"] > 0.5
