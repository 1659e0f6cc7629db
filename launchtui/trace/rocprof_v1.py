"""Reader for rocprof (v1) SQLite databases, `rocprof --hip-trace` (docs/definitions.md §16).

- `HIP`: the HIP API calls (`BeginNs`, `EndNs`, `pid`, `tid`, `Name`) and their correlation id
  `Index`;
- `OPS` (kernel dispatches) and `COPY` (copies): GPU ops on `dev-id` and `stream-id`, whose
  `Index` is the launching call's (the rocprof Chrome trace draws its flow arrows from it).
The format holds no ranges.
"""
from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np

from launchtui.errors import TraceError
from launchtui.trace import rocm_build as rb
from launchtui.trace.model import OP_KERNEL, OP_MEMCPY, SourceInfo, StringTable, Trace
from launchtui.trace.sqlite_columns import fetch_int_columns, fetch_text_column
from launchtui.trace.sqlite_probe import consistent, schema_of

OP_TABLES = (("OPS", OP_KERNEL), ("COPY", OP_MEMCPY))


def read_rocprof_v1(path: Path, source: SourceInfo, progress=None) -> Trace:
    progress = progress or (lambda stage, rows: None)
    try:
        with consistent(path) as (con, _):
            return _read(con, source, progress)
    except sqlite3.DatabaseError as e:
        raise TraceError(path, f"cannot read rocprof database ({' '.join(str(e).split())})") from None
    except ValueError as e:
        raise TraceError(path, f"unexpected values in rocprof database ({e})") from None


def _col(cols: frozenset, name: str, default: str = "-1") -> str:
    return f'"{name}"' if name in cols else default


def _rows(con, table: str, exprs: dict, skipped: Counter, dropped: Counter) -> tuple[dict, list[str]]:
    """Integer columns and the `Name` texts of the rows with both times (a row without them cannot
    be placed in time: counted and left out)."""
    where = "typeof(BeginNs) = 'integer' AND typeof(EndNs) = 'integer'"
    total = con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
    c = fetch_int_columns(con, table, exprs, where, dropped)
    if total != len(c["start"]):
        skipped[f"{table} rows without integer BeginNs and EndNs"] += total - len(c["start"])
    names = fetch_text_column(con, table, "ifnull(Name, '')", where)
    if len(names) != len(c["start"]):
        raise ValueError(f"{table}'s Name column does not line up with its rows")
    return c, names


def _read(con, source: SourceInfo, progress) -> Trace:
    strings, skipped, dropped = StringTable(), Counter(), Counter()
    schema = schema_of(con)
    out = rb.Columns()
    if schema.base("HIP") == "HIP":
        cols = schema.columns("HIP")
        c, names = _rows(con, "HIP", {"start": "BeginNs", "end": "EndNs", "pid": _col(cols, "pid"),
                                      "tid": _col(cols, "tid"), "corr": _col(cols, "Index")}, skipped, dropped)
        c["name"] = strings.intern_many(names)
        c = rb.drop_reversed(c, "HIP", skipped)
        out.api.append(c)
        progress("read HIP", len(c["start"]))
    for table, kind in OP_TABLES:
        if schema.base(table) != table:
            continue
        cols = schema.columns(table)
        c, names = _rows(con, table, {"start": "BeginNs", "end": "EndNs", "device": _col(cols, "dev-id"),
                                      "stream": _col(cols, "stream-id", _col(cols, "queue-id")),
                                      "pid": _col(cols, "pid"), "corr": _col(cols, "Index")}, skipped, dropped)
        c["name"] = strings.intern_many(names)
        c["kind"] = np.full(len(c["start"]), kind, np.int8)
        c = rb.drop_reversed(c, table, skipped)
        out.ops.append(c)
        progress(f"read {table}", len(c["start"]))
    source.format = "rocprof-v1-sqlite"
    source.producer = "rocprof"
    source.version = "v1"
    for t, n in sorted(dropped.items()):
        skipped[f"{t} rows with NULL in a NOT NULL column or start/end"] += n
    trace = rb.build(source, strings, out, {}, skipped, ranges_note="rocprof v1 databases hold no ranges")
    progress("joined", len(trace.ops))
    return trace
