"""What launchtui's chrome export adds to Kineto's conventions, read back by the Kineto reader
(definitions.md §13b): an annotation's NVTX domain and start/end kind in its args, Kineto `overhead`
events named Command Buffer Full, and the export's origin in a top-level `launchtui` object. Real
Kineto traces carry none of these, so what they read is unchanged (scripts/json_identity.py)."""
from __future__ import annotations

import json

from launchtui.trace.load import open_trace
from launchtui.trace.model import OVERHEAD_COMMAND_BUFFER_FULL, RANGE_STARTEND


def test_kineto_reader_takes_domains_start_end_ranges_and_command_buffer_full(tmp_path):
    ev = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 10, "dur": 5,
           "args": {"correlation": 7}},
          {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 1,
           "args": {"correlation": 7, "device": 0, "stream": 7}},
          {"ph": "X", "cat": "user_annotation", "name": "a", "pid": 1, "tid": 2, "ts": 0, "dur": 30,
           "args": {"domain": "app"}},
          {"ph": "X", "cat": "user_annotation", "name": "b", "pid": 1, "tid": 2, "ts": 5, "dur": 40,
           "args": {"nvtx": "start/end"}},
          {"ph": "X", "cat": "user_annotation", "name": "c", "pid": 1, "tid": 2, "ts": 1, "dur": 3, "args": {"domain": 5}},
          {"ph": "X", "cat": "overhead", "name": "Command Buffer Full", "pid": 1, "tid": 2, "ts": 11, "dur": 3,
           "args": {"correlation": 7}},
          {"ph": "X", "cat": "overhead", "name": "Command Buffer Full", "pid": -1, "tid": 0, "ts": 11, "dur": 3},
          {"ph": "X", "cat": "overhead", "name": "Buffer Flush", "pid": -1, "tid": 0, "ts": 11, "dur": 3}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    t = open_trace(p, use_cache=False)
    rg = t.ranges
    by = {t.strings[int(x)]: i for i, x in enumerate(rg.text)}
    assert t.strings[int(rg.domain[by["a"]])] == "app" and rg.domain[by["b"]] == -1 and rg.domain[by["c"]] == -1
    assert rg.kind[by["b"]] == RANGE_STARTEND and rg.kind[by["a"]] != RANGE_STARTEND
    assert rg.depth[by["a"]] == 0 and rg.depth[by["c"]] == 0      # other domains nest apart
    ov = t.overheads
    assert len(ov) == 2 and set(ov.type.tolist()) == {OVERHEAD_COMMAND_BUFFER_FULL}
    assert sorted(ov.thread.tolist()) == [-1, 0] and sorted(ov.corr.tolist()) == [-1, 7]
    assert len(t.threads) == 1        # an overhead on another thread adds none


def test_the_export_note_names_the_source_and_the_trim_of_a_range(tmp_path):
    ev = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 1, "args": {"stream": 7}}]
    head = {"source": {"path": "/a/b/run.sqlite", "producer": "Nsight Systems", "version": "2026.2"},
            "window_ns": [1500000000, 1750000000], "selection": "1.5-1.75 s"}
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"launchtui": head, "traceEvents": ev}))
    note = open_trace(p, use_cache=False).source.extra["exported"]
    assert note == ("launchtui chrome export of run.sqlite (Nsight Systems 2026.2); range 1.500000000-1.750000000 s: "
                    "--trim 1.500000000 1.750000000 gives its figures")
    p.write_text(json.dumps({"launchtui": [1, 2], "traceEvents": ev}))   # another shape: no note, no error
    assert "exported" not in open_trace(p, use_cache=False).source.extra
