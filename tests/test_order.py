"""Order independence (docs/definitions.md §9): the model and every tie are functions of the set of
events. Hand-built traces whose rows (and string interning) come in every order must read, nest,
attribute and rank the same, with each tie broken by the documented rule."""
from __future__ import annotations

import numpy as np
import pytest

from launchtui.analysis import iterations as itr
from launchtui.analysis import nvtx, phases
from launchtui.trace.join import finalize
from launchtui.trace.model import (API_LAUNCH, OP_KERNEL, RANGE_PUSHPOP, ApiCalls, GpuOps, Overheads, Ranges,
                                   SourceInfo, StringTable, Threads, Trace)
from launchtui.trace.nesting import range_depths
from launchtui.trace.order import in_order, string_ranks, time_order


# --- the order helpers ----------------------------------------------------------------------------

def test_string_ranks_follow_the_text_not_the_id():
    s = StringTable()
    ids = [s.intern(t) for t in ("zeta", "alpha", "mid")]
    assert string_ranks(s, np.array(ids + [ids[1], -1])).tolist() == [3, 1, 2, 1, 0]
    assert string_ranks(None, np.array(["b", "a", "b"], object)).tolist() == [1, 0, 1]


@pytest.mark.parametrize("seed", range(6))
def test_time_order_is_a_total_order_with_names_as_strings(seed):
    rng = np.random.default_rng(seed)
    s = StringTable()
    words = ["k%d" % i for i in rng.permutation(6)]           # interned in a random order
    n = 400
    start = rng.integers(0, 12, n)
    end = start + rng.integers(0, 2, n)
    dev = rng.integers(0, 2, n)
    name = np.array([s.intern(words[i]) for i in rng.integers(0, 6, n)], np.int64)
    if seed == 0:   # already in order: no permutation
        o = sorted(range(n), key=lambda i: (start[i], end[i], dev[i], s[int(name[i])]))
        start, end, dev, name = start[o], end[o], dev[o], name[o]
    order, st = time_order(start, end, dev, names=(name,), strings=s)
    want = sorted((int(a), int(b), int(c), s[int(d)]) for a, b, c, d in zip(start, end, dev, name))
    idx = range(n) if order is None else order.tolist()
    got = [(int(start[i]), int(end[i]), int(dev[i]), s[int(name[i])]) for i in idx]
    assert got == want and st.tolist() == [g[0] for g in got]
    assert (order is None) == (seed == 0)
    assert in_order(start if order is None else st, (end, dev), order, (name,), s)
    # names given as the strings themselves sort the same
    lst = [s[int(i)] for i in name]
    order2, _ = time_order(start, end, dev, names=(lst,))
    assert (order2 is None and order is None) or order2.tolist() == order.tolist()


# --- finalize: the model is a function of the set of rows --------------------------------------

def _trace(rows_api, rows_op, rows_rg, perm_seed: int) -> Trace:
    """A trace from (thread, start, end, corr, name) API rows, (device, stream, start, end, corr,
    name) ops and (thread, start, end, text) ranges, each table's rows and the string interning in
    the order of `perm_seed`."""
    rng = np.random.default_rng(perm_seed)
    s = StringTable()
    words = sorted({r[-1] for r in rows_api + rows_op + rows_rg})
    for w in rng.permutation(words).tolist():
        s.intern(w)
    a = [rows_api[i] for i in rng.permutation(len(rows_api))]
    o = [rows_op[i] for i in rng.permutation(len(rows_op))]
    g = [rows_rg[i] for i in rng.permutation(len(rows_rg))]
    api = ApiCalls(thread=np.array([r[0] for r in a]), pid=np.zeros(len(a), np.int64),
                   start=np.array([r[1] for r in a]), end=np.array([r[2] for r in a]),
                   corr=np.array([r[3] for r in a]), name=np.array([s.intern(r[4]) for r in a]),
                   kind=np.full(len(a), API_LAUNCH))
    ops = GpuOps(device=np.array([r[0] for r in o]), stream=np.array([r[1] for r in o]),
                 start=np.array([r[2] for r in o]), end=np.array([r[3] for r in o]),
                 corr=np.array([r[4] for r in o]), pid=np.zeros(len(o), np.int64),
                 name=np.array([s.intern(r[5]) for r in o]), full_name=np.array([s.intern(r[5]) for r in o]),
                 kind=np.full(len(o), OP_KERNEL), api=np.full(len(o), -1))
    th = np.array([r[0] for r in g], np.int64)
    st, en = np.array([r[1] for r in g], np.int64), np.array([r[2] for r in g], np.int64)
    ranges = Ranges(thread=th, start=st, end=en, depth=range_depths(th, st, en),
                    text=np.array([s.intern(r[3]) for r in g]), domain=np.full(len(g), -1),
                    kind=np.full(len(g), RANGE_PUSHPOP))
    threads = Threads(pid=np.array([1, 1]), tid=np.array([10, 11]), key=np.array([10, 11]), name=np.full(2, -1))
    tr = Trace(SourceInfo("mem", 0, 0, "test", "test"), s, ops, api, ranges, threads, Overheads.empty())
    return finalize(tr)


API = [(0, 100, 110, 1, "cudaLaunchKernel"), (0, 100, 110, 2, "cuLaunchKernel"), (1, 100, 110, 3, "cudaLaunchKernel"),
       (0, 200, 205, 4, "cudaLaunchKernel"), (0, 300, 305, 5, "cudaLaunchKernel"), (0, 300, 305, 6, "cudaLaunchKernel")]
OPS = [(0, 7, 120, 125, 1, "kb"), (0, 7, 120, 125, 2, "ka"), (0, 8, 120, 125, 3, "ka"),
       (0, 7, 210, 215, 4, "kc"), (0, 7, 310, 312, 5, "kc"), (0, 7, 310, 312, 6, "kd")]
# two equal ranges (the issue's `aten::add` / `aten::mul`), a range inside both, a sibling
RANGES = [(0, 50, 150, "aten::mul, op_id = 314661"), (0, 50, 150, "aten::add, op_id = 314309"),
          (0, 90, 140, "inner"), (0, 250, 350, "b_step"), (0, 250, 350, "a_step"), (1, 0, 500, "other")]


def _as_text(tr: Trace) -> tuple:
    s = tr.strings
    return ([(int(t), int(a), int(b), int(c), s[int(n)]) for t, a, b, c, n in
             zip(tr.api.thread, tr.api.start, tr.api.end, tr.api.corr, tr.api.name)],
            [(int(d), int(x), int(a), int(b), int(c), s[int(n)], int(p)) for d, x, a, b, c, n, p in
             zip(tr.ops.device, tr.ops.stream, tr.ops.start, tr.ops.end, tr.ops.corr, tr.ops.name, tr.ops.api)],
            [(int(t), int(a), int(b), int(d), s[int(x)]) for t, a, b, d, x in
             zip(tr.ranges.thread, tr.ranges.start, tr.ranges.end, tr.ranges.depth, tr.ranges.text)])


def test_rows_in_any_order_give_one_model():
    models = {repr(_as_text(_trace(API, OPS, RANGES, seed))) for seed in range(12)}
    assert len(models) == 1


@pytest.mark.parametrize("seed", range(6))
def test_equal_ranges_nest_in_name_order(seed):
    tr = _trace(API, OPS, RANGES, seed)
    rg, s = tr.ranges, tr.strings
    depth = {s[int(t)]: int(d) for t, d in zip(rg.text, rg.depth)}
    # the first by name is the outer one; what they enclose is below both
    assert depth["aten::add, op_id = 314309"] == 0 and depth["aten::mul, op_id = 314661"] == 1
    assert depth["inner"] == 2 and (depth["a_step"], depth["b_step"]) == (0, 1)
    inner = nvtx.op_ranges(tr)
    got = {int(tr.ops.corr[i]): s[int(rg.text[r])] for i, r in enumerate(inner.tolist()) if r >= 0}
    assert got == {1: "inner", 2: "inner", 3: "other", 5: "b_step", 6: "b_step"}


@pytest.mark.parametrize("seed", range(6))
def test_top_range_of_equal_ranges_is_the_inner_one(seed, monkeypatch):
    tr = _trace(API, OPS, RANGES, seed)
    ops = np.flatnonzero(tr.ops.corr >= 5)          # both launched inside b_step (the inner one)
    for cells in (nvtx.DENSE_CELLS, 0):             # the dense table and the pairs path
        monkeypatch.setattr(nvtx, "DENSE_CELLS", cells)
        top = nvtx.top_range_per_group(tr, ops, np.zeros(len(ops), np.int64), 1)
        assert tr.strings[top[0][0]] == "b_step" and top[0][1] == 1.0
        both = np.flatnonzero(tr.ops.corr <= 3)     # inner, inner, other: inner wins by count
        top = nvtx.top_range_per_group(tr, both, np.zeros(len(both), np.int64), 1)
        assert tr.strings[top[0][0]] == "inner" and top[0][1] == pytest.approx(2 / 3)


def test_top_range_count_tie_between_texts(monkeypatch):
    """Ranges whose texts occur once each (emit_nvtx's op_id): the first text as a string wins."""
    rows = [(0, 10 * i, 10 * i + 5, f"aten::add, op_id = {9 - i}") for i in range(4)]
    api = [(0, 10 * i + 1, 10 * i + 2, i + 1, "cudaLaunchKernel") for i in range(4)]
    op = [(0, 7, 10 * i + 3, 10 * i + 4, i + 1, "k") for i in range(4)]
    for seed in range(4):
        tr = _trace(api, op, rows, seed)
        for cells in (nvtx.DENSE_CELLS, 0):
            monkeypatch.setattr(nvtx, "DENSE_CELLS", cells)
            top = nvtx.top_range_per_group(tr, np.arange(4), np.zeros(4, np.int64), 1)
            assert tr.strings[top[0][0]] == "aten::add, op_id = 6" and top[0][1] == 0.25


@pytest.mark.parametrize("seed", range(4))
def test_phase_tie_goes_to_the_first_text(seed):
    tr = _trace(API, OPS, RANGES, seed)
    ops = np.flatnonzero(tr.ops.corr >= 5)
    keys, texts, _ = phases.attributed_phase_keys(tr, ops, 0, 1)
    assert texts == ["a_step"]                      # the outer of the equal pair: level 1 is depth 0
    (ph,) = phases.group_phases(keys, texts, np.zeros(len(ops), np.int64), 1)
    assert ph == ("a_step", 1.0)
    # two phases with one launch each: the first text wins
    keys, texts, _ = phases.attributed_phase_keys(tr, np.flatnonzero(tr.ops.corr >= 4), 0, 1)
    assert phases.group_phases(keys, texts, np.zeros(3, np.int64), 1)[0][0] == "a_step"


def test_periodic_anchor_tie_goes_to_the_first_name():
    """Two names launched the same number of times with the same period: the first by name
    anchors the iterations, whatever the interning order."""
    seq = ["zz_anchor", "aa_anchor", "k1", "k2", "k3", "k4"] * 5
    api = [(0, 100 * i, 100 * i + 5, i + 1, "cudaLaunchKernel") for i in range(len(seq))]
    op = [(0, 7, 100 * i + 10, 100 * i + 12, i + 1, n) for i, n in enumerate(seq)]
    for seed in range(4):
        tr = _trace(api, op, [], seed)
        it = itr.periodic(tr)
        assert it is not None and it.name == "aa_anchor" and it.start[0] == 100


@pytest.mark.parametrize("flip", [False, True])
def test_equal_python_frames_nest_in_name_order(tmp_path, flip):
    """Kineto python_function frames with the same interval on one thread (µs-rounded nested
    calls): the first by name is the caller, whatever the event order."""
    import json

    from launchtui.trace.load import read_trace
    from launchtui.trace.stacks import stack_frames
    py = [{"ph": "X", "cat": "python_function", "name": n, "pid": 1, "tid": 1, "ts": 10, "dur": 20}
          for n in ("model.py(3): b_inner", "model.py(2): a_outer")]
    rest = [{"ph": "X", "cat": "python_function", "name": "train.py(1): <module>", "pid": 1, "tid": 1, "ts": 0, "dur": 50},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12, "dur": 2,
             "args": {"correlation": 5}},
            {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 15, "dur": 1,
             "args": {"correlation": 5, "device": 0, "stream": 7}}]
    events = (py[::-1] if flip else py) + rest
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events}))
    tr = read_trace(p)
    assert stack_frames(tr, int(tr.api_stacks.node[0])) == \
        ["model.py(3): b_inner", "model.py(2): a_outer", "train.py(1): <module>"]
