#!/usr/bin/env python
"""Reference floors for the benchmark: what reading the same data costs without launchtui.

    python bench/floors.py sqlite-numpy FILE.sqlite   # Python sqlite3: fetchall -> np.array
    python bench/floors.py msgspec FILE.json[.gz]      # typed msgspec decode of the needed fields
    python bench/floors.py json FILE.json[.gz]         # plain json.loads

Each prints one JSON line (what it read, so the work can be checked) and is meant to run in a
fresh process, timed from outside (wall time and peak RSS). The C-level floor for SQLite is the
`sqlite3` shell running SCAN_SQL (see `scan_sql`), also started from outside.

The columns are those launchtui's Nsight reader reads: GPU ops (start, end, device, stream,
correlation, process, names), CUDA API calls (start, end, thread, correlation, name), NVTX
push/pop and start/end ranges, overhead rows, and the string table. For Kineto, gunzip is
included in every parser (launchtui, both floors, HTA all read the same .json.gz).
"""
from __future__ import annotations

import gzip
import json
import sqlite3
import sys
from pathlib import Path
from urllib.parse import quote

import msgspec

# table -> (where, [column expressions]) : the same for the C scan and the Python fetch
NSYS_COLUMNS: dict[str, tuple[str, list[str]]] = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ("", ["start", "end", "deviceId", "streamId", "correlationId",
                                        "globalPid", "shortName", "demangledName"]),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("", ["start", "end", "globalTid", "correlationId", "nameId"]),
    "CUPTI_ACTIVITY_KIND_MEMCPY": ("", ["start", "end", "deviceId", "streamId", "correlationId",
                                        "globalPid", "copyKind"]),
    "CUPTI_ACTIVITY_KIND_MEMSET": ("", ["start", "end", "deviceId", "streamId", "correlationId",
                                        "globalPid"]),
    "NVTX_EVENTS": ("eventType IN (59, 60) AND end IS NOT NULL",
                    ["start", "end", "globalTid", "eventType", "textId", "domainId", "length(text)"]),
    "CUPTI_ACTIVITY_KIND_OVERHEAD": ("", ["start", "end", "globalTid", "correlationId", "overheadType"]),
    "StringIds": ("", ["id", "length(value)"]),
}


def present_tables(path: Path) -> list[str]:
    con = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1", uri=True)
    try:
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        con.close()
    return [t for t in NSYS_COLUMNS if t in names]


def scan_sql(tables: list[str]) -> str:
    """One aggregate per table: SQLite scans and decodes every needed column, builds no rows."""
    out = []
    for t in tables:
        where, cols = NSYS_COLUMNS[t]
        aggs = ", ".join(f"total({c})" for c in cols)
        out.append(f'SELECT count(*), {aggs} FROM "{t}"' + (f" WHERE {where}" if where else "") + ";")
    return "\n".join(out)


def sqlite_numpy(path: Path) -> dict:
    """The naive Python way: fetchall() row tuples, then np.array per table."""
    import numpy as np
    con = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1", uri=True)
    counts = {}
    for t in present_tables(path):
        where, cols = NSYS_COLUMNS[t]
        # NULLs -> -1 so the column can be int64 (what any reader has to do)
        sel = ", ".join(f"ifnull({c}, -1)" for c in cols)
        rows = con.execute(f'SELECT {sel} FROM "{t}"' + (f" WHERE {where}" if where else "")).fetchall()
        arr = np.array(rows, dtype=np.int64).reshape(-1, len(cols))
        counts[t] = int(arr.shape[0])
        del rows, arr
    con.close()
    return {"rows": counts}


def row_counts(path: Path) -> dict:
    """Rows of each read table (with the same filters): the file's events, without fetching them."""
    con = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1", uri=True)
    try:
        return {t: int(con.execute(f'SELECT count(*) FROM "{t}"' + (f" WHERE {w}" if w else "")).fetchone()[0])
                for t, (w, _cols) in ((t, NSYS_COLUMNS[t]) for t in present_tables(path))}
    finally:
        con.close()


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


class _Args(msgspec.Struct):
    correlation: int = -1
    device: int = -1
    stream: int = -1


class _Event(msgspec.Struct):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = 0.0
    dur: float = 0.0
    args: _Args | None = None


class _Doc(msgspec.Struct):
    traceEvents: list[_Event] = []


def msgspec_typed(path: Path) -> dict:
    doc = msgspec.json.decode(_read(path), type=_Doc)
    return {"events": len(doc.traceEvents)}   # no per-event Python work after the decode


def json_plain(path: Path) -> dict:
    doc = json.loads(_read(path))
    ev = doc["traceEvents"]
    return {"events": len(ev)}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] not in ("sqlite-numpy", "msgspec", "json", "scan-sql"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, path = argv[0], Path(argv[1])
    if mode == "scan-sql":
        print(scan_sql(present_tables(path)))
        return 0
    fn = {"sqlite-numpy": sqlite_numpy, "msgspec": msgspec_typed, "json": json_plain}[mode]
    print(json.dumps(fn(path)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
