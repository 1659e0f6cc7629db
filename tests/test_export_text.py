"""The range export written a chunk of rows at a time (analysis/export.export_text) is the text of
the whole document (`output.dumps(export_document(...))`), byte for byte: any chunk size, empty
row lists, the record at --phase-level, and a name that is not valid UTF-8 (one piece then, as
only the whole document can escape every string)."""
from __future__ import annotations

import dataclasses
import json

import pytest

from fixtures import synth
from launchtui.analysis import export as ex
from launchtui.analysis.record_options import RecordOptions
from launchtui.analysis.report import ReportOptions
from launchtui.analysis.select import WHOLE, Selection
from launchtui.output import dumps
from launchtui.trace.load import read_trace
from launchtui.trace.model import StringTable


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return read_trace(str(synth.write_nsys_sqlite(synth.simulate(), tmp_path_factory.mktemp("exp") / "t.sqlite")))


def _windows(tr):
    lo, hi = tr.extent()
    mid = (lo + hi) // 2
    return {"whole": WHOLE, "a slice": Selection(mid, mid + (hi - lo) // 50),
            "before the trace": Selection(lo - 10_000, lo - 1)}   # no ops, calls or ranges


@pytest.mark.parametrize("rows", [1, 7, 100_000])
def test_the_text_in_chunks_is_the_whole_documents(trace, monkeypatch, rows):
    monkeypatch.setattr(ex, "CHUNK_ROWS", rows)
    for name, sel in _windows(trace).items():
        for record in (None, RecordOptions(phase_level=2)):
            whole = dumps(ex.export_document(trace, sel, ReportOptions(), record))
            pieces = list(ex.export_text(trace, sel, ReportOptions(), record))
            assert "".join(pieces) == whole, (name, record)
            doc = json.loads(whole)
            if rows == 1 and doc["counts"]["gpu_ops"] > 1:
                assert len(pieces) > doc["counts"]["gpu_ops"]        # a piece per row, not one
    empty = json.loads("".join(ex.export_text(trace, _windows(trace)["before the trace"])))
    assert empty["gpu_ops"] == [] and empty["api_calls"] == [] and empty["nvtx_ranges"] == []


def test_a_name_that_is_not_utf8_escapes_every_string_as_the_whole_document_does(trace):
    values = list(trace.strings.values)
    named = int(trace.ops.name[0])
    values[named] = "kernel \udcff\nbad"
    bad = dataclasses.replace(trace, strings=StringTable.from_values(values))
    pieces = list(ex.export_text(bad, WHOLE))
    assert pieces == [dumps(ex.export_document(bad, WHOLE))] and "kernel \\\\xff\\\\nbad" in pieces[0]
