"""The TUI table's phase column attributed a batch of whole groups at a time (issue 11: the cold 5M
TUI's peak was the table worker's per-launch temporaries): the rows and phases equal those of one
pass over every launch, whatever the batch size, inside and outside iteration spans."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import sample_model


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    from fixtures.synth import simulate, write_nsys_sqlite
    from launchtui.trace.load import open_trace
    p = write_nsys_sqlite(simulate(), tmp_path_factory.mktemp("batches") / "synth.sqlite", variant="modern")
    return open_trace(p, use_cache=False)


def _rows_by_batch(monkeypatch, trace, level: int):
    from launchtui.analysis.select import WHOLE
    from launchtui.tui import verdict
    settings = verdict.VerdictSettings(min_launches=1, max_avg_us=1e9, phase_level=level)
    from launchtui.session import Session
    doc = verdict.compute(Session(trace), None, settings, 1).doc
    it = doc.get("iterations") or {}
    base, spans = int(it.get("base_depth", 0)), list(zip(it.get("starts_ns", []), it.get("ends_ns", [])))
    out = {}
    for limit in (1 << 62, 1, 3, 1000):   # one pass; one group a batch; a few; mixed
        monkeypatch.setattr(verdict, "PHASE_BATCH", limit)
        out[limit] = verdict.table_rows(trace, WHOLE, "short", settings, base, spans)
    return out, base


@pytest.mark.parametrize("level", [1, 2])
def test_batched_phases_equal_one_pass_on_the_generator(monkeypatch, synth, level):
    out, base = _rows_by_batch(monkeypatch, synth, level)
    one = out.pop(1 << 62)
    assert len(one) > 3 and base > 0 and any(r["nvtx_range"] for r in one)
    for rows in out.values():
        assert rows == one


@pytest.mark.samples
@pytest.mark.parametrize("rel", ["nsys/nsys-ai__h100_2gpu_1s.sqlite",
                                 "kineto/b200__eager_trace.json.gz"])
def test_batched_phases_equal_one_pass_on_samples(monkeypatch, rel):
    from launchtui.trace.load import open_trace
    tr = sample_model(rel)
    out, _ = _rows_by_batch(monkeypatch, tr, 2)
    one = out.pop(1 << 62)
    if rel.startswith("kineto/b200"):
        # the one `execute_context_1(...)` step is the iteration (definitions.md §V1): phases are the
        # ranges inside it, the compiled graph's call and the all-gather; the rest has none
        assert len(one) > 3 and sorted(r["nvtx_range"][:24] for r in one if r["nvtx_range"]) == [
            "## Call CompiledFxGraph ", "nccl:_all_gather_base"]
    else:
        assert len(one) > 3 and all(r["nvtx_range"] for r in one)
    for rows in out.values():
        assert rows == one


def test_phase_batches_keep_groups_whole_and_in_order():
    from launchtui.tui.verdict import phase_batches
    groups = np.array([7, 2, 9, 4, 5])
    counts = np.array([5, 3, 10, 1, 1])
    got = phase_batches(counts, groups, limit=8)
    assert [b.tolist() for b in got] == [[7, 2], [9], [4, 5]]
    assert [b.tolist() for b in phase_batches(counts, groups, limit=100)] == [[7, 2, 9, 4, 5]]
    assert phase_batches(counts[:0], groups[:0]) == []


def test_groups_from_stored_totals_equal_kernel_groups(synth):
    """The table's groups from the totals `report` stored plus the launches' grouping equal
    kernel_groups field by field; totals of other groups (another device) are not used."""
    import dataclasses

    from launchtui.analysis.launches import kernel_groups
    from launchtui.analysis.select import WHOLE
    from launchtui.analysis.launches import group_totals
    from launchtui.tui.verdict import _with_launches
    for names in ("short", "full"):
        ref = kernel_groups(synth, WHOLE, names)
        got = _with_launches(synth, WHOLE, names, group_totals(ref))
        assert len(ref) > 3
        for f in dataclasses.fields(ref):
            a, b = getattr(got, f.name), getattr(ref, f.name)
            assert a.dtype == b.dtype and (a == b).all(), f.name
    one = WHOLE.with_devices((int(synth.ops.device[0]),))
    other = group_totals(kernel_groups(synth, one, "short"))
    if len(other) != len(kernel_groups(synth, WHOLE, "short")):
        got = _with_launches(synth, WHOLE, "short", other)
        assert (got.count == kernel_groups(synth, WHOLE, "short").count).all()
