"""The same events in another layout give the same answer (docs/definitions.md §9).

Each case copies a trace to a temporary folder, rewrites it without changing its set of events
(fixtures/layout.py: rows or traceEvents in a seeded order, Nsight string ids dealt out again or
renumbered sparse) and compares the whole `report --json` and `record --json` documents with those
of an untouched copy, byte for byte apart from the file's own path, size and mtime
(scripts/metamorphic.py). The shared samples are never modified.

The default run takes a few real samples chosen for their ties (equal NVTX ranges, equal counts
of range texts, a periodic iteration anchor among equal counts, call sites with equal launches)
and the bundled demo. `LAUNCHTUI_METAMORPHIC=all` runs every shared sample with every variant,
as `python scripts/metamorphic.py` does.
"""
from __future__ import annotations

import importlib.util
import os

import pytest

from conftest import ROOT, SHARED, sample

_spec = importlib.util.spec_from_file_location("metamorphic", ROOT / "scripts" / "metamorphic.py")
mm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mm)

# (sample, variants): ties that once followed the file's order; a sample's variants share one
# untouched copy's documents
FAST = [
    ("nsys/nsys-ai__h100_2gpu_1s.sqlite", ["rows:1",     # equal NVTX ranges; range texts once each
                                           "idperm:1",
                                           "ids"]),      # sparse string ids (Nsight 2026.2)
    ("nsys/Sh1mwww__llama3-inference__real_inference_simulation.sqlite", ["rows:2"]),   # layer_N ranges tie
    ("nsys/MohanadOdema__DLProf__nsys_profile.sqlite", ["rows:1"]),   # call sites with equal launches
    ("kineto/b200__eager_trace.json.gz", ["events:1"]),       # periodic anchors with equal counts
    ("kineto/resnet50_legacy_workers4.json.gz", ["events:1"]),   # ProfilerStep#N ranges tie in count
]


def _check(src, variants, tmp_path):
    for r in mm.check_sample(src, variants, tmp_path):
        why = "; ".join(f"{k}: {', '.join(d)}" for k, d in r["differs"].items())
        assert r["same"], f"{src.name} {r['variant']}: {why}"


@pytest.mark.samples
@pytest.mark.parametrize("rel,variants", FAST, ids=[f"{r}-{'+'.join(v)}" for r, v in FAST])
def test_real_sample_in_another_layout(rel, variants, tmp_path):
    _check(sample(rel), variants, tmp_path)


@pytest.mark.parametrize("name,variant", [
    ("demo.sqlite", "rows:3"), ("demo.sqlite", "idperm:3"), ("demo.json.gz", "events:3"), ("demo.sqlite", "ids")])
def test_generated_trace_in_another_layout(name, variant, tmp_path):
    _check(ROOT / "fixtures" / "demo" / name, [variant], tmp_path)


def _campaign():
    if os.environ.get("LAUNCHTUI_METAMORPHIC") != "all":
        return [pytest.param(None, None, marks=pytest.mark.skip(reason="LAUNCHTUI_METAMORPHIC=all runs every sample"))]
    files = mm.sample_files(SHARED / "samples") if SHARED.is_dir() else []
    return [pytest.param(p, v, id=f"{p.name}-{v}") for p in files for v in mm.variants(p)]


@pytest.mark.slow
@pytest.mark.samples
@pytest.mark.parametrize("src,variant", _campaign())
def test_every_shared_sample_in_every_layout(src, variant, tmp_path):
    _check(src, [variant], tmp_path)
