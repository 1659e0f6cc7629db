"""Range export (definitions.md §13): one window's events plus the analyses restricted to it.

`launchtui export` and the TUI's `e` key both write `export_text`, so the two files are equal: the
text of `export_document`, made a chunk of rows at a time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from launchtui.analysis import nvtx
from launchtui.analysis.report import ReportOptions, build_report
from launchtui.analysis.select import Selection, op_mask
from launchtui.output import dumps
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.grouping import dense_groups
from launchtui.trace.model import API_KIND_NAMES, OP_KIND_NAMES, Trace

EXPORT_KIND = "launchtui-range-export"
CHUNK_ROWS = 100_000   # rows made into dicts and text at a time (export_text)


def _names(trace: Trace, ids: np.ndarray) -> list[str]:
    """The strings of `ids`, each distinct one looked up once (a chunk's, not the whole table's)."""
    if not len(ids):
        return []
    distinct, at = dense_groups(ids)
    values = trace.strings.values
    return np.array([values[i] for i in distinct.tolist()], dtype=object)[at].tolist()


def export_document(trace: Trace, sel: Selection, opt: ReportOptions = ReportOptions(), record_opt=None) -> dict:
    """The range document; `record_opt` (a RecordOptions, `--phase-level`): the case record of the
    window at those options under `analysis.record`, as the TUI's verdict panel shows it (for a
    whole-trace export, the whole trace's record: the same as `record --json`)."""
    w = _window(trace, sel)
    doc = _head(trace, w, _analysis(trace, w.sel, opt, record_opt, sel))
    doc.update(api_calls=_api_rows(trace, w.a), gpu_ops=_op_rows(trace, w, slice(None)),
               nvtx_ranges=_range_rows(trace, w.r))
    doc["analysis"] = doc.pop("analysis")   # the key order of every export: the rows, then the analysis
    return doc


def export_text(trace: Trace, sel: Selection, opt: ReportOptions = ReportOptions(), record_opt=None) -> Iterator[str]:
    """`output.dumps(export_document(...))` in pieces: the analysis first, then the rows
    CHUNK_ROWS at a time, so one chunk's row dicts exist at once (a whole-trace export of a large
    trace held every row as a dict: GBs), spliced into the document's text where its empty lists
    stand. Where a name is not valid UTF-8, dumps escapes every string of the document
    (output.dumps), which only the whole document can do: one piece then."""
    w = _window(trace, sel)
    if not _names_encode(trace, w):
        yield dumps(export_document(trace, sel, opt, record_opt))
        return
    head = _head(trace, w, _analysis(trace, w.sel, opt, record_opt, sel))
    head.update(api_calls=[], gpu_ops=[], nvtx_ranges=[])
    head["analysis"] = head.pop("analysis")
    text = dumps(head)
    at = 0
    for key, n, rows in (("api_calls", len(w.a), lambda sl: _api_rows(trace, w.a[sl])),
                         ("gpu_ops", len(w.o), lambda sl: _op_rows(trace, w, sl)),
                         ("nvtx_ranges", len(w.r), lambda sl: _range_rows(trace, w.r[sl]))):
        empty = f'\n "{key}": [],\n'   # a top-level key: the only one indented by one space
        i = text.index(empty, at) + len(empty) - 3
        if not n:
            continue
        yield text[at:i] + "\n"          # through the key's `[`
        for k in range(0, n, CHUNK_ROWS):
            body = dumps(rows(slice(k, k + CHUNK_ROWS)))[2:-3]   # the items of "[\n ...\n]\n"
            yield (",\n" if k else "") + " " + body.replace("\n", "\n ")   # one level deeper
        yield "\n ]"
        at = i + 1                        # past the empty list's `]`
    yield text[at:]


@dataclass
class _Window:
    """What an export holds: the window as a closed selection, its GPU ops `o` and their launch
    calls, its API rows `a` (sorted: the calls in the window and those launching its ops), its ranges `r`."""
    sel: Selection
    o: np.ndarray
    launch: np.ndarray
    a: np.ndarray
    r: np.ndarray


def _window(trace: Trace, sel: Selection) -> _Window:
    if sel.t0 is None or sel.t1 is None:
        ext = trace.extent() or (0, 0)
        sel = Selection(ext[0] if sel.t0 is None else sel.t0, ext[1] if sel.t1 is None else sel.t1,
                        sel.devices, sel.ranges, sel.label)
    ops, api, rg = trace.ops, trace.api, trace.ranges
    o = np.nonzero(op_mask(trace, sel))[0]
    launch = ops.api[o]
    a_in = np.nonzero((api.end >= sel.t0) & (api.start <= sel.t1))[0]
    a = np.union1d(a_in, launch[launch >= 0])
    r = np.nonzero((rg.end >= sel.t0) & (rg.start <= sel.t1))[0]
    return _Window(sel, o, launch, a, r)


def _head(trace: Trace, w: _Window, analysis: dict) -> dict:
    sel = w.sel
    return {
        "kind": EXPORT_KIND,
        "schema_version": 1,
        "source": trace.source.to_json(),
        "window": {"t0_ns": sel.t0, "t1_ns": sel.t1, "t0_s": sel.t0 / 1e9, "t1_s": sel.t1 / 1e9, "label": sel.label,
                   "devices": None if sel.devices is None else list(sel.devices)},
        "counts": {"api_calls": len(w.a), "gpu_ops": len(w.o), "nvtx_ranges": len(w.r)},
        "analysis": analysis,
    }


def _names_encode(trace: Trace, w: _Window) -> bool:
    """Whether every string the rows take from the trace is valid UTF-8 (see export_text)."""
    ops, api, rg = trace.ops, trace.api, trace.ranges
    ids = np.concatenate([api.name[w.a], ops.name[w.o], rg.text[w.r], rg.domain[w.r]]).astype(np.int64)
    try:
        for i in unique_sorted(ids[ids >= 0]).tolist():   # once per distinct string
            trace.strings[i].encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _thread_labels(trace: Trace, ti: np.ndarray) -> list[str]:
    th = trace.threads
    return [f"{p}/{t}" for p, t in zip(th.pid[ti].tolist(), th.tid[ti].tolist())]


def _api_rows(trace: Trace, a: np.ndarray) -> list[dict]:
    api = trace.api
    return [{"start_ns": s, "end_ns": e, "name": n, "kind": API_KIND_NAMES[k], "thread": t, "correlation": c}
            for s, e, n, k, t, c in zip(api.start[a].tolist(), api.end[a].tolist(), _names(trace, api.name[a]),
                                        api.kind[a].tolist(), _thread_labels(trace, api.thread[a]),
                                        api.corr[a].tolist())]


def _op_rows(trace: Trace, w: _Window, sl: slice) -> list[dict]:
    """The rows of the window's ops `w.o[sl]`: `api_index` is the launch call's row in `w.a`."""
    ops, api = trace.ops, trace.api
    o, launch = w.o[sl], w.launch[sl]
    op_rng = nvtx.op_ranges(trace)[o]
    range_names = {int(i): nvtx.range_name(trace, int(i)) for i in unique_sorted(op_rng[op_rng >= 0]).tolist()}
    # no API table at all (GPU activity only): every op is unmatched
    queue = np.where(launch >= 0, ops.start[o] - api.end[np.maximum(launch, 0)], 0) if len(api) else \
        np.zeros(len(o), np.int64)
    at = np.searchsorted(w.a, launch)
    return [
        {"start_ns": s, "end_ns": e, "name": n, "kind": OP_KIND_NAMES[k], "device_id": d, "stream_id": st,
         "correlation": c, "api_index": i if la >= 0 else None,
         "queue_ns": q if la >= 0 else None, "nvtx_range": range_names.get(rr) if rr >= 0 else None}
        for s, e, n, k, d, st, c, la, i, q, rr in zip(
            ops.start[o].tolist(), ops.end[o].tolist(), _names(trace, ops.name[o]), ops.kind[o].tolist(),
            ops.device[o].tolist(), ops.stream[o].tolist(), ops.corr[o].tolist(), launch.tolist(), at.tolist(),
            queue.tolist(), op_rng.tolist())]


def _range_rows(trace: Trace, r: np.ndarray) -> list[dict]:
    rg = trace.ranges
    return [{"start_ns": s, "end_ns": e, "name": nvtx.range_name(trace, int(i)), "depth": d, "thread": t}
            for i, s, e, d, t in zip(r.tolist(), rg.start[r].tolist(), rg.end[r].tolist(), rg.depth[r].tolist(),
                                     _thread_labels(trace, rg.thread[r]))]


def _analysis(trace: Trace, sel: Selection, opt: ReportOptions, record_opt, asked: Selection) -> dict:
    doc = build_report(trace, sel, opt)
    if record_opt is not None:
        from launchtui.analysis.record import build_record
        doc["record"] = build_record(trace, asked, record_opt)
    return doc


def default_export_name(trace: Trace, sel: Selection) -> str:
    from pathlib import Path
    stem = Path(trace.source.path).name.split(".")[0] or "trace"
    return f"{stem}.{sel.t0 / 1e9:.6f}-{sel.t1 / 1e9:.6f}.launchtui.json"
