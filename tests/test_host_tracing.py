"""A trace recorded under the Python tracer says its host figures are upper bounds (definitions.md
§V13): Kineto `with_stack=True` writes one `python_function` event per Python call, and the tracer
slows every one of them, so the host time between launches is longer than in an untraced run."""
from __future__ import annotations

import gzip
import json

import pytest

from fixtures import synth
from launchtui.analysis.limits import host_tracing
from launchtui.analysis.record_conclusion import BOUND_LEVELS
from launchtui.trace.load import open_trace
from launchtui.cli import main

LAUNCH_NAMES = {"cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC", "cudaGraphLaunch"}


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    d = tmp_path_factory.mktemp("traced")
    w = synth.simulate()
    files = synth.make_trace_files(d, variants=["kineto:modern", "kineto:legacy2021", "nsys:modern"])
    return w, files


def _file_counts(path) -> tuple[int, int]:
    """(python_function events, launch calls) counted in the Kineto file itself by category and
    name, not by launchtui's reader."""
    with gzip.open(path, "rt") if str(path).endswith(".gz") else open(path) as f:
        ev = json.load(f)["traceEvents"]
    py = sum(1 for e in ev if e.get("cat") == "python_function")
    calls = sum(1 for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("name") in LAUNCH_NAMES)
    return py, calls


def test_python_frames_are_counted_per_launch_call(traced):
    w, files = traced
    truth = synth.ground_truth(w, "kineto", "modern")["kineto"]["python_function"]
    py, calls = _file_counts(files[("kineto", "modern")])
    assert truth == py > 0
    got = host_tracing(open_trace(files[("kineto", "modern")], use_cache=False))
    assert got["python_frames"] == truth
    assert got["per_launch_call"] == round(truth / calls, 2)
    assert "upper bounds" in got["note"] and f"{truth:,}" in got["note"]


@pytest.mark.parametrize("key", [("kineto", "legacy2021"), ("nsys", "modern")])
def test_traces_without_the_python_tracer_claim_nothing(traced, key):
    _, files = traced
    assert host_tracing(open_trace(files[key], use_cache=False)) is None


def test_the_record_bounds_its_gain_when_the_host_was_traced(traced, capsys):
    """The record carries the limit; where it states a gain, it says "at most" and why."""
    _, files = traced
    assert main(["record", str(files[("kineto", "modern")]), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["limits"]["host_tracing"]["python_frames"] > 0
    stated = doc["launch_bound_level"] in BOUND_LEVELS and doc["gain"]["realistic"]
    assert ("at most (Python tracing slowed the host)" in doc["conclusion"]) == bool(stated)
    assert main(["record", str(files[("kineto", "modern")])]) == 0
    page = capsys.readouterr().out
    assert "Upper bounds: recorded with Python tracing" in page

