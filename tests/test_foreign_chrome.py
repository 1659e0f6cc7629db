"""Chrome traces other profilers write (rocprof v1, RPD's rpd2tracing) hold GPU activity outside
Kineto's categories: launchtui says which profiler wrote them and which database to open, in one
line with exit status 2, instead of calling them CPU-only."""
from __future__ import annotations

import json

import pytest

from conftest import sample
from launchtui.cli import main

ROCPROF_V1 = {"traceEvents": [
    {"ph": "X", "name": "CopyHostToDevice", "pid": "1", "tid": "0", "ts": "10", "dur": "5",
     "args": {"BeginNs": "10000", "EndNs": "15000", "dev-id": "4", "queue-id": "0"}}]}
RPD = [{"ph": "X", "name": "Cijk_gemm", "pid": "2", "tid": "0", "ts": "10", "dur": "5",
        "args": {"desc": "KernelExecution"}}]


@pytest.mark.parametrize("doc, producer, database", [(ROCPROF_V1, "rocprof v1", "results.db"),
                                                      (RPD, "rpd2tracing (RPD)", ".rpd database")])
def test_a_foreign_chrome_trace_names_its_producer_and_database(tmp_path, capsys, doc, producer, database):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    assert main(["record", str(p), "--no-cache"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(p) in err[0]
    assert f"a Chrome trace from {producer}" in err[0] and database in err[0]
    assert main(["info", str(p), "--no-cache"]) == 0
    assert f"no GPU activity launchtui can read: a Chrome trace from {producer}" in capsys.readouterr().out


def test_a_cpu_only_kineto_trace_keeps_its_own_message(tmp_path, capsys):
    p = tmp_path / "cpu.json"
    p.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1,
                                              "tid": 1, "ts": 1, "dur": 2}]}))
    assert main(["record", str(p), "--no-cache"]) == 2
    assert "no CUDA activity in this trace" in capsys.readouterr().err


@pytest.mark.samples
@pytest.mark.parametrize("rel, database", [("rocm/mi300a_rocprof_v1_results.json", "results.db"),
                                           ("rocm/rpd_matmul_result.json", ".rpd database")])
def test_the_shared_amd_chrome_exports_point_at_their_databases(rel, database, capsys):
    assert main(["report", str(sample(rel)), "--no-cache"]) == 2
    assert database in capsys.readouterr().err
