"""Reader for RPD (rocmProfileData) SQLite databases, plain or gzipped (docs/definitions.md §16).

- `rocpd_api`: CPU-side calls (HIP API, and RPD's own bookkeeping rows); those named `UserMarker`
  are roctx ranges, named by their `args` string. A `UserMarker` with no duration is an instant
  mark (rpd2tracing draws it as one), not a range, and is not read.
- `rocpd_op`: GPU ops on `gpuId` (the HSA node id: what Kineto shows for the same GPU) and
  `queueId`; the op type says kernel (`KernelExecution`, `Task`: a graph node), copy (`Copy*`) or
  fill (`FillBuffer`). The name is the op's description, else its type (the `top` view's rule).
- `rocpd_api_ops`: the link, one row per op. The call's id serves as correlation id of both sides.
"""
from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np

from launchtui.errors import TraceError
from launchtui.trace import rocm_build as rb
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.model import OP_KERNEL, OP_MEMCPY, OP_MEMSET, SourceInfo, StringTable, Trace
from launchtui.trace.sqlite_columns import fetch_int_columns
from launchtui.trace.sqlite_probe import consistent

MARKER = "UserMarker"
_NO_OP = -1


def op_kind(op_type: str) -> int:
    """The model's op kind of an RPD op type; -1 for others (barriers, markers: not work)."""
    if op_type in ("KernelExecution", "Task"):
        return OP_KERNEL
    if op_type.startswith("Copy"):
        return OP_MEMCPY
    if op_type.startswith("Fill"):
        return OP_MEMSET
    return _NO_OP


def read_rpd(path: Path, source: SourceInfo, progress=None) -> Trace:
    progress = progress or (lambda stage, rows: None)
    try:
        with consistent(path) as (con, _):
            return _read(con, source, progress)
    except sqlite3.DatabaseError as e:
        raise TraceError(path, f"cannot read RPD database ({' '.join(str(e).split())})") from None
    except ValueError as e:
        raise TraceError(path, f"unexpected values in RPD database ({e})") from None


def _link(con, skipped: Counter, dropped: Counter) -> tuple[np.ndarray, np.ndarray]:
    """(op ids, launching call ids), one per linked op. An op linked more than once keeps the
    smallest call id (a rule on the data), the other links counted."""
    tables = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "rocpd_api_ops" not in tables:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    c = fetch_int_columns(con, "rocpd_api_ops", {"api": "api_id", "op": "op_id"}, "", dropped)
    order = np.lexsort((c["api"], c["op"]))
    op, api = c["op"][order], c["api"][order]
    first = np.ones(len(op), bool)
    first[1:] = op[1:] != op[:-1]
    if not first.all():
        skipped["rocpd_api_ops rows linking an op another call (of a smaller id) already links"] += int((~first).sum())
    return op[first], api[first]


def _read(con, source: SourceInfo, progress) -> Trace:
    strings, skipped, dropped = StringTable(), Counter(), Counter()
    names = rb.Interner(strings, skipped)
    out = rb.Columns()
    a = fetch_int_columns(con, "rocpd_api", {"id": "id", "pid": "pid", "tid": "tid", "start": "start", "end": "end",
                                             "name": "apiName_id", "args": "args_id"}, "", dropped)
    a = rb.drop_reversed(a, "rocpd_api", skipped)
    progress("read rocpd_api", len(a["start"]))
    api_text = rb.strings_by_id(con, "rocpd_string", a["name"])
    name = names.ids(a["name"], api_text, rb.missing_name("rocpd_api", "apiName_id"))
    marker_ids = [i for i, t in api_text.items() if t == MARKER]
    is_marker = np.isin(a["name"], marker_ids)
    k = ~is_marker
    out.api.append({"start": a["start"][k], "end": a["end"][k], "pid": a["pid"][k], "tid": a["tid"][k],
                    "corr": a["id"][k], "name": name[k]})
    k = is_marker & (a["end"] > a["start"])
    text = names.ids(a["args"][k], rb.strings_by_id(con, "rocpd_string", a["args"][k]),
                     rb.missing_name("rocpd_api", "args_id"))
    out.ranges.append({"start": a["start"][k], "end": a["end"][k], "pid": a["pid"][k], "tid": a["tid"][k],
                       "text": text, "kind": rb.pushpop(int(k.sum()))})

    o = fetch_int_columns(con, "rocpd_op", {"id": "id", "device": "gpuId", "stream": "queueId", "start": "start",
                                            "end": "end", "desc": "description_id", "type": "opType_id"}, "", dropped)
    o = rb.drop_reversed(o, "rocpd_op", skipped)
    progress("read rocpd_op", len(o["start"]))
    type_text = rb.strings_by_id(con, "rocpd_string", o["type"])
    types, inv = unique_sorted(o["type"], return_inverse=True)
    o["kind"] = np.array([op_kind(type_text.get(t, "")) for t in types.tolist()], np.int8)[inv.reshape(-1)]
    for t in unique_sorted(o["type"][o["kind"] == _NO_OP]).tolist():   # once per op type that is not work
        bad = (o["type"] == t) & (o["kind"] == _NO_OP)
        o = rb.drop_rows(o, bad, skipped, f"rocpd_op rows of type {type_text.get(t, f'<string {t}>')} "
                                          "(not a kernel, copy or fill)")
    desc_text = rb.strings_by_id(con, "rocpd_string", o["desc"])
    named = np.isin(o["desc"], [i for i, t in desc_text.items() if t != ""])
    label = np.where(named, o["desc"], o["type"])
    label_text = {**{i: t for i, t in type_text.items()}, **{i: t for i, t in desc_text.items() if t != ""}}
    op_name = names.ids(label, label_text, rb.missing_name("rocpd_op", "description_id or opType_id"))
    link_op, link_api = _link(con, skipped, dropped)
    pos = np.minimum(np.searchsorted(link_op, o["id"]), max(len(link_op) - 1, 0))
    hit = (link_op[pos] == o["id"]) if len(link_op) else np.zeros(len(o["id"]), bool)
    corr = np.where(hit, link_api[pos] if len(link_op) else -1, -1)
    out.ops.append({"device": o["device"], "stream": o["stream"], "start": o["start"], "end": o["end"], "corr": corr,
                    "pid": np.full(len(corr), -1, np.int64), "name": op_name, "kind": o["kind"]})

    meta = {}
    try:
        meta = {str(k): str(v) for k, v in con.execute("SELECT tag, value FROM rocpd_metadata") if k is not None}
    except sqlite3.Error:
        pass
    source.format = "rpd-sqlite"
    source.producer = "rocmProfileData (RPD)"
    source.version = f"RPD schema {meta['schema_version']}" if "schema_version" in meta else "RPD schema unknown"
    for t, n in sorted(dropped.items()):
        skipped[f"{t} rows with NULL in a NOT NULL column or start/end"] += n
    trace = rb.build(source, strings, out, {}, skipped, ranges_note="no roctx ranges (UserMarker rows)")
    progress("joined", len(trace.ops))
    return trace
