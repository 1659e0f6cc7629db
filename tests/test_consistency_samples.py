"""One story per fact (issue 22): on each shared sample, the TUI's verdict panel at given thresholds
holds the same figures as `record --json` at those thresholds, and `export --phase-level` writes the
same record and the table's rows."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import SHARED, cover_or_sweep
from launchtui.session import Session

pytestmark = [pytest.mark.samples, pytest.mark.slow]

MIN_LAUNCHES, MAX_AVG_US, PHASE = 50, 20.0, 2
EXPORTED = ("kineto/b200__eager_trace.json.gz", "kineto/h100_qwen_chat.json.gz", "nsys/nsys-ai__mock.sqlite")


def _samples() -> list[str]:
    s = SHARED / "samples"
    return sorted(str(p.relative_to(s)) for p in [*s.glob("kineto/*.json.gz"), *s.glob("nsys/*.sqlite")])


def _cli_json(tmp_path: Path, *argv) -> dict:
    from launchtui.cli import main
    out = tmp_path / f"out{len(list(tmp_path.iterdir()))}.json"
    assert main([*argv, "-o", str(out), "--no-cache"]) == 0
    return json.loads(out.read_text())


@pytest.mark.parametrize("rel", cover_or_sweep(_samples()) or ["(no ../shared)"])
def test_panel_record_and_export_agree(rel, tmp_path):
    from conftest import sample, sample_model
    from launchtui.analysis.record_conclusion import outside_notes
    from launchtui.tui.verdict import FULL, VerdictSettings, compute, panel_lines
    path = sample(rel)
    opts = ["--min-launches", str(MIN_LAUNCHES), "--max-avg-us", f"{MAX_AVG_US:g}"]
    from launchtui.errors import TraceError
    try:
        trace = sample_model(rel)    # the panel's side mapped, the command's read (--no-cache)
    except TraceError:
        pytest.skip("no trace to judge")
    if not len(trace.api) and not len(trace.ops):   # `record` refuses it in one line, as the TUI does
        pytest.skip("no CUDA activity in this trace")
    cli = _cli_json(tmp_path, "record", str(path), "--json", "--phase-level", str(PHASE), *opts)
    st = VerdictSettings(MIN_LAUNCHES, MAX_AVG_US, PHASE)
    tui = compute(Session(trace), None, st, 0).doc
    for key in ("launch_bound_level", "conclusion", "streams", "per_iteration", "top", "backpressure",
                "iterations", "idle_by_cause"):
        assert tui.get(key) == cli.get(key), key
    if cli.get("empty") or cli.get("gpu_recorded") is False:
        return
    text = "\n".join(panel_lines(tui, st, FULL)[0])
    for s in cli["streams"]:
        assert f"GPU {s['device_id']} stream {s['stream_id']}: {s['queue_class']}" in text
        assert f"(max {s['max_depth']}" in text
    for note in outside_notes(cli):
        assert note in text
    for i, r in enumerate(cli["top"], 1):
        assert f" {i}. {r['kernel_name']} {r['launches_per_iteration']:,.1f}/iter" in text
    if rel in EXPORTED:
        exp = _cli_json(tmp_path, "export", str(path), "--phase-level", str(PHASE), "--limit", "0", *opts)
        rec = exp["analysis"]["record"]
        for key in ("launch_bound_level", "conclusion", "streams", "top"):
            assert rec.get(key) == cli.get(key), key
        assert exp["analysis"]["options"]["min_launches"] == MIN_LAUNCHES
