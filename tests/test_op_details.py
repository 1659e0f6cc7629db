"""Per-kernel launch details for the cursor line (trace.op_details): grid, block, registers and
shared memory from Nsight's kernel table and Kineto's kernel args, input shapes from Kineto's
`Input Dims`, matched on (start, correlation) for every kernel."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from launchtui.trace.load import open_trace
from launchtui.trace.model import OP_KERNEL
from launchtui.trace.op_details import OpDetails

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo"


@pytest.mark.parametrize("name", ["demo.sqlite", "demo.json.gz"])
def test_every_demo_kernel_has_its_launch_config_in_both_formats(name):
    t = open_trace(DEMO / name, use_cache=False)
    d = OpDetails(t)
    assert d.available() and d.text(0) == ""      # nothing before load
    d.load()
    k = np.flatnonzero(t.ops.kind == OP_KERNEL)
    texts = [d.text(int(i)) for i in k]
    assert all(x.startswith("grid ") and " block " in x and " regs · smem " in x for x in texts)
    soft = t.strings.lookup("cunn_SoftMaxForward")
    i = int(np.flatnonzero(t.ops.name == soft)[0])
    assert d.text(i) == "grid 65536×1×1 block 1024×1×1 · 38 regs · smem 0 B"


@pytest.mark.samples
def test_kineto_input_dims_of_the_launching_op():
    from conftest import sample_model
    t = sample_model("kineto/h100_qwen_chat.json.gz")
    d = OpDetails(t)
    d.load()
    k = np.flatnonzero(t.ops.kind == OP_KERNEL)
    texts = [d.text(int(i)) for i in k]
    assert all(texts) and sum(" · inputs [" in x for x in texts) > len(texts) // 2


@pytest.mark.parametrize("order", ["as written", "reversed"])
def test_nsight_looks_up_one_kernel_as_the_whole_load_reads_it(tmp_path, order):
    """load(k) on Nsight reads kernel k's row alone (the TUI's cursor) and gives the whole load's
    text, whether the kernel table is in start order (binary search over rowids) or not (a scan)."""
    import shutil
    import sqlite3
    path = DEMO / "demo.sqlite"
    if order == "reversed":
        path = tmp_path / "demo.sqlite"
        shutil.copy(DEMO / "demo.sqlite", path)
        con = sqlite3.connect(path)
        con.executescript("CREATE TABLE k2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start DESC;"
                          "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;"
                          "ALTER TABLE k2 RENAME TO CUPTI_ACTIVITY_KIND_KERNEL;")
        con.close()
    t = open_trace(path, use_cache=False)
    whole = OpDetails(t)
    whole.load()
    one = OpDetails(t)
    k = np.flatnonzero(t.ops.kind == OP_KERNEL)
    for i in (int(x) for x in k[:: max(1, len(k) // 150)]):
        assert not one.has(i) and one.text(i) == ""
        one.load(i)
        assert one.has(i) and not one.ready and one.text(i) == whole.text(i) != ""


def _oracle_rows(path) -> list:
    """kineto_details.kineto_rows, computed another way: the whole document through `json`, each
    event a dict, every number with a fraction a Decimal, so `ts` keeps its ns digits (the reader's
    exact µs→ns rule, sub-ns digits dropped; a float would round 1712195495505582.988 µs)."""
    import gzip
    import json
    from decimal import Decimal
    raw = Path(path).read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw, parse_float=Decimal)
    events = [e for e in (doc.get("traceEvents") or [] if isinstance(doc, dict) else doc) if isinstance(e, dict)]
    num = lambda v: isinstance(v, (int, Decimal)) and not isinstance(v, bool) and v.is_finite() if \
        isinstance(v, Decimal) else isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
    key = lambda v: v is None or isinstance(v, (int, Decimal, str))  # noqa: E731
    dims = {}
    for e in events:
        a = e.get("args")
        if e.get("cat") == "cpu_op" and isinstance(a, dict) and key(a.get("External id")) \
                and a.get("External id") is not None and a.get("Input Dims"):
            dims.setdefault(a["External id"], a["Input Dims"])
    out = []
    for e in events:
        a = e.get("args")
        if e.get("cat") != "kernel" or not isinstance(a, dict):
            continue
        parts = []
        g, b = a.get("grid"), a.get("block")
        if all(isinstance(v, list) and v and all(num(x) for x in v) for v in (g, b)):
            parts.append("grid " + "×".join(str(int(x)) for x in g) + " block " + "×".join(str(int(x)) for x in b))
        if num(a.get("registers per thread")):
            parts.append(f"{a['registers per thread']} regs")
        if num(a.get("shared memory")):
            parts.append(f"smem {int(a['shared memory']):,} B")
        ext = a.get("External id")
        if key(ext) and dims.get(ext):
            parts.append("inputs " + ", ".join(str(s).replace(" ", "") for s in dims[ext] if s != []))
        ts = e.get("ts")
        if not parts or not num(a.get("correlation")) or not num(ts) or "e" in str(ts).lower():
            continue
        out.append((int(Decimal(ts) * 1000), int(a["correlation"]), " · ".join(parts)))
    return out


def _odd_kineto_events() -> list:
    k = lambda ts, **args: {"ph": "X", "cat": "kernel", "name": "k", "ts": ts, "dur": 1, "args": args}  # noqa: E731
    return [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 5,
         "args": {"External id": 7, "Input Dims": [[64, 32], [32, 16], []]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 2, "dur": 5,
         "args": {"External id": [1, 2], "Input Dims": [[1]]}},          # unhashable id: ignored
        k(10.5, correlation=1, grid=[2, 1, 1], block=[128, 1, 1], **{"registers per thread": 32,
          "shared memory": 1024, "External id": 7}),
        k("11", correlation=2, grid=[1, 1, 1], block=[1, 1, 1]),           # string ts: no kernel there
        k(12.0000009, correlation=3, grid="2,1,1", block=[64, 1, 1], **{"registers per thread": "many"}),
        k(13, correlation=4, grid=[True, 1, 1], block=[1, 1, 1], **{"shared memory": 0}),
        k(14.25, correlation="x", grid=[1, 1, 1], block=[1, 1, 1]),        # no usable correlation
        k(15, correlation=6, **{"External id": [1, 2], "shared memory": 8.9}),
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 16, "dur": 1, "args": [1, 2]},   # args not an object
        {"ph": "X", "cat": "kernel", "name": "k", "dur": 1, "args": {"correlation": 8, "grid": [1], "block": [1]}},
        {"ph": "X", "cat": ["kernel"], "ts": 17, "args": {"correlation": 9, "grid": [1], "block": [1]}},
        42, "not an event", None,
        k("TS_EXACT", correlation=10, grid=[4, 2, 1], block=[32, 8, 1], **{"External id": 7}),
    ]


@pytest.mark.parametrize("form", ["object", "bare array", "gzip"])
def test_kineto_details_match_a_plain_json_reading_on_odd_events(tmp_path, form):
    """Odd events and fields (args not an object, string ts or grid, unhashable External ids, events
    that are not objects) drop the field or the kernel, never the whole trace's details."""
    import gzip
    import json

    from launchtui.trace.kineto_details import kineto_rows
    events = _odd_kineto_events()
    text = json.dumps(events if form == "bare array" else {"traceEvents": events}).encode()
    text = text.replace(b'"TS_EXACT"', b"1712195495521133.783")     # more digits than a float keeps
    path = tmp_path / ("t.json.gz" if form == "gzip" else "t.json")
    path.write_bytes(gzip.compress(text) if form == "gzip" else text)
    rows = kineto_rows(path)
    assert rows == _oracle_rows(path)
    by_corr = {c: x for _, c, x in rows}
    assert by_corr == {1: "grid 2×1×1 block 128×1×1 · 32 regs · smem 1,024 B · inputs [64,32], [32,16]",
                       4: "smem 0 B", 6: "smem 8 B",
                       10: "grid 4×2×1 block 32×8×1 · inputs [64,32], [32,16]"}
    assert [t for t, c, _ in rows if c == 10] == [1712195495521133783]


SWEEP_SHARDS = 3   # the samples outside the cover in this many tests, so the sweep lane spreads the json.load


@pytest.mark.samples
@pytest.mark.parametrize("part", ["cover", *[pytest.param((i, SWEEP_SHARDS), marks=pytest.mark.sweep, id=f"sweep-{i}")
                                             for i in range(SWEEP_SHARDS)]])
def test_kineto_details_match_a_plain_json_reading_on_every_sample(shared, part):
    from conftest import cover_part
    from launchtui.trace.kineto_details import kineto_rows
    every = sorted((shared / "samples" / "kineto").rglob("*.json*"))
    assert len(every) >= 20
    paths = cover_part(every, shared / "samples", part)
    assert paths
    with_details = 0
    for p in paths:
        rows = kineto_rows(p)
        assert rows == _oracle_rows(p), p.name
        with_details += bool(rows)
    assert with_details >= len(paths) // 2
