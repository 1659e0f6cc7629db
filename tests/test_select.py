"""The one selection builder: every way in (CLI options, TUI range, NVTX occurrences, export) gives
the Selection the lower-level helpers give, with the CLI's labels and errors."""
from __future__ import annotations

from argparse import Namespace
from pathlib import Path

import pytest

from launchtui.analysis import nvtx
from launchtui.analysis.select import (WHOLE, Selection, SelectionSpec, build_selection, device_selection,
                                       op_mask, range_selection, trim_selection)
from launchtui.errors import UsageError
from launchtui.trace.load import open_trace

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo" / "demo.sqlite"


@pytest.fixture(scope="module")
def trace():
    return open_trace(DEMO, use_cache=False)


def args(**kw):
    base = dict(device="all", trim=None, nvtx=None)
    base.update(kw)
    return Namespace(**base)


def test_whole_and_device(trace):
    assert build_selection(trace, SelectionSpec()) == WHOLE
    assert build_selection(trace, SelectionSpec.from_args(args())) == WHOLE
    sel = build_selection(trace, SelectionSpec.from_args(args(device="1")))
    assert sel == Selection(devices=(1,))
    assert set(trace.ops.device[op_mask(trace, sel)].tolist()) == {1}


def test_device_errors(trace):
    with pytest.raises(UsageError, match="expected a device number or 'all'"):
        SelectionSpec.from_args(args(device="x"))
    with pytest.raises(UsageError, match=r"--device 7: no such device in this trace; available: 0 \(\d+ GPU ops\), 1"):
        build_selection(trace, SelectionSpec(device=7))


def test_trim_is_export_window(trace):
    w0, w1 = trace.window()
    a_s, b_s = (w0 + 10_000_000) / 1e9, (w0 + 30_000_000) / 1e9
    sel = build_selection(trace, SelectionSpec(device=0, trim_s=(a_s, b_s)))
    assert sel == trim_selection(trace, a_s, b_s, device_selection(trace, 0))
    assert sel.label == f"{a_s}–{b_s} s" and sel.devices == (0,)
    with pytest.raises(UsageError, match="selects no part of this profile"):
        build_selection(trace, SelectionSpec(trim_s=(0.0, 0.001)))


def test_nvtx_substring_and_with_trim(trace):
    hits = nvtx.search(trace, "optimizer.step")
    assert len(hits) == 8
    sel = build_selection(trace, SelectionSpec(nvtx="optimizer.step"))
    assert sel == range_selection(trace, hits, "optimizer.step")
    assert sel.t0 == int(trace.ranges.start[hits].min())
    w0, w1 = trace.window()
    a_s, b_s = w0 / 1e9, w1 / 1e9
    both = build_selection(trace, SelectionSpec(nvtx="optimizer.step", trim_s=(a_s, b_s)))
    assert both.ranges == tuple(hits.tolist()) and both.label == f"optimizer.step in {a_s}–{b_s} s"
    assert (both.t0, both.t1) == (int(round(a_s * 1e9)), int(round(b_s * 1e9)))
    with pytest.raises(UsageError, match="--nvtx nosuchrange: no NVTX range name contains it"):
        build_selection(trace, SelectionSpec(nvtx="nosuchrange"))


def test_explicit_ranges_and_window(trace):
    hits = nvtx.search(trace, "forward")[:3]
    spec = SelectionSpec(device=1, ranges=tuple(hits.tolist()), label="forward ×3")
    assert build_selection(trace, spec) == range_selection(trace, hits, "forward ×3", WHOLE.with_devices((1,)))
    assert build_selection(trace, SelectionSpec(ranges=(), label="none")) == Selection(ranges=(), label="none")
    # a window drawn in the TUI is taken as is, even one holding no GPU op
    spec = SelectionSpec(window_ns=(5, 10), label="range 5 ns")
    assert build_selection(trace, spec) == Selection(5, 10, None, None, "range 5 ns")
    assert not op_mask(trace, build_selection(trace, spec)).any()


def test_spec_is_frozen_and_hashable():
    spec = SelectionSpec(device=0)
    assert {spec: 1}[SelectionSpec(device=0)] == 1
    with pytest.raises(AttributeError):
        spec.device = 1  # type: ignore[misc]
