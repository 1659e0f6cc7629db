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
    from conftest import sample
    t = open_trace(sample("kineto/h100_qwen_chat.json.gz"), use_cache=False)
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
