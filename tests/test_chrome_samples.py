"""The chrome export's round trip on real captures (../shared): an Nsight export, Kineto traces and a
rocpd database become Kineto-style files whose report, record and call sites equal the original's,
apart from what a Kineto trace cannot say about its source (chrome_helpers.FORMAT_PATHS)."""
from __future__ import annotations

import pytest

from chrome_helpers import cli_json, export, unexpected
from conftest import sample

pytestmark = [pytest.mark.samples, pytest.mark.slow]

CASES = [
    # Nsight, 2 GPUs in 2 processes, 198 "command buffer full" rows, saturated queues
    "nsys/nsys-ai__h100_2gpu_1s.sqlite",
    # Nsight, the two processes' correlation ids overlap (311 ids in both)
    "nsys/nsys-ai__mfu_2gpu_before.sqlite",
    # Nsight with CPU scheduling data: all but the launching thread's CPU share comes back
    "nsys/Sh1mwww__llama3-inference__real_inference_simulation.sqlite",
    # Kineto V100, 2024: absolute-epoch ns timestamps, real backpressure at 1022
    "kineto/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    # Kineto MI300: HIP calls, python stacks, backward launches linked by Sequence number
    "kineto/mi300_resnet.json.gz",
    # rocprofv3 rocpd database (its clock has no wall-clock offset)
    "rocm/mi300x_rocprofv3_bmm_rocpd.db",
]


@pytest.mark.parametrize("rel", CASES)
def test_whole_export_round_trips(rel, tmp_path):
    p = sample(rel)
    out = tmp_path / "rt.trace.json.gz"
    doc = export(p, out)
    assert doc["displayTimeUnit"] == "ns"
    for cmd in (("report", "--json"), ("record", "--json"), ("report", "--json", "--by", "source")):
        a, b = cli_json(cmd[0], p, *cmd[1:]), cli_json(cmd[0], out, *cmd[1:])
        assert unexpected(a, b) == [], (rel, cmd)
    if "h100" in rel:
        a = cli_json("report", out, "--json")
        assert a["backpressure"]["command_buffer_full_events"] == 198
        assert sum(s["command_buffer_full"] for s in a["record"]["streams"]) == 118
    if "mi300_resnet" in rel:
        rec = cli_json("record", out, "--json")
        assert any(r.get("phase_rule") == "backward link" for r in rec["top"])


def test_range_export_of_the_h100_capture(tmp_path):
    p = sample("nsys/nsys-ai__h100_2gpu_1s.sqlite")
    a_s, b_s = "155.65", "155.95"
    out = tmp_path / "range.trace.json"
    export(p, out, "--trim", a_s, b_s)
    a = cli_json("report", p, "--json", "--trim", a_s, b_s)
    b = cli_json("report", out, "--json", "--trim", a_s, b_s)
    for k in ("launches", "small_kernels", "small_kernels_nccl", "queues", "unmatched_kernels"):
        assert a[k] == b[k], k
    assert a["launches"]["kernel_launches"] > 500
    ra, rb = a["record"], b["record"]
    for k in ("iterations", "per_iteration", "streams", "top", "conclusion"):
        assert ra[k] == rb[k], k
    # the submission latency's samples are the whole device's (here too few either way: the default L)
    assert ra["idle_by_cause"]["latency"]["us"] == rb["idle_by_cause"]["latency"]["us"] == 5.0
    assert {k: v for k, v in ra["idle_by_cause"].items() if k != "latency"} == \
        {k: v for k, v in rb["idle_by_cause"].items() if k != "latency"}
