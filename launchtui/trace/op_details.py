"""Per-kernel launch details the model does not keep: grid and block (Nsight, Kineto) and the input
shapes of the op that launched the kernel (Kineto `Input Dims`), for the TUI's cursor line.

Read on demand (in a worker), from the trace's own file, read-only: the model stays as it is for
every other use, and a trace whose details are never asked for never pays for them. Kernels are
matched on (start ns, correlation id), the keys the readers keep, so the lookup is exact. Nsight:
one kernel's row at a time (`load(k)`: a scan inside SQLite, which holds no GIL, so the TUI stays
responsive at millions of kernels); Kineto: the whole file once (its JSON has to be parsed anyway:
trace.kineto_details).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from launchtui.trace.model import OP_KERNEL, Trace

_NSYS_COLUMNS = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread",
                 "staticSharedMemory", "dynamicSharedMemory")


class OpDetails:
    """`text(k)`: the details of GPU op k ("grid 128×1×1 block 256×1×1 · 32 regs · smem 0 B"), ""
    when the trace has none for it; `load()` reads them (seconds on a large trace: call it in a
    worker); `ready` says whether it ran."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.ready = False
        self.loading = False                   # set by the caller while a worker reads them
        self.start = np.zeros(0, np.int64)     # sorted
        self.corr = np.zeros(0, np.int64)
        self.texts: list[str] = []
        self.error: str | None = None
        self._available: bool | None = None
        self._one: dict[int, str] = {}         # kernel -> text, from load(k)

    def available(self) -> bool:
        """Whether the trace's format records any such detail (Nsight SQLite, Kineto JSON)."""
        if self._available is None:
            src = self.trace.source
            self._available = src.format in ("nsys-sqlite", "kineto-json") and Path(src.path).is_file()
        return self._available

    @property
    def per_kernel(self) -> bool:
        """Whether `load(k)` reads kernel k's details alone (Nsight); else the whole file, once."""
        return self.trace.source.format == "nsys-sqlite"

    def has(self, k: int) -> bool:
        """Whether `text(k)` is final (loaded, or kernel k looked up)."""
        return self.ready or k in self._one

    def load(self, k: int | None = None) -> None:
        """Read the details: of kernel `k` alone where the format allows (Nsight), else of all."""
        if k is not None and self.per_kernel:
            ops = self.trace.ops
            if ops.kind[k] != OP_KERNEL:    # copies and sets have no row in the kernel table
                self._one[k] = ""
                return
            try:
                self._one[k] = _nsys_one(self.trace, int(ops.start[k]), int(ops.corr[k]))
            except Exception as e:  # an unreadable or changed file: the cursor line just goes without
                self._one[k], self.error = "", f"{type(e).__name__}: {e}"
            return
        try:
            rows = _nsys_rows(self.trace) if self.per_kernel else _kineto_rows(self.trace)
        except Exception as e:  # an unreadable or changed file: the cursor line just goes without
            rows, self.error = [], f"{type(e).__name__}: {e}"
        rows.sort(key=lambda r: (r[0], r[1]))
        self.start = np.array([r[0] for r in rows], np.int64)
        self.corr = np.array([r[1] for r in rows], np.int64)
        self.texts = [r[2] for r in rows]
        self.ready = True

    def text(self, k: int) -> str:
        if k in self._one:
            return self._one[k]
        if not self.ready or not len(self.start):
            return ""
        ops = self.trace.ops
        t, c = int(ops.start[k]), int(ops.corr[k])
        i = int(np.searchsorted(self.start, t))
        while i < len(self.start) and self.start[i] == t:
            if self.corr[i] == c:
                return self.texts[i]
            i += 1
        return ""


def _kineto_rows(trace: Trace) -> list:
    """trace.kineto_details' rows, imported here: an Nsight trace's TUI (the cursor line asks on its
    UI thread) never loads the Kineto reader and msgspec (~13 ms)."""
    from launchtui.trace.kineto_details import kineto_rows
    return kineto_rows(Path(trace.source.path))


def _dims(v) -> str:
    return "×".join(str(int(x)) for x in v)


def _nsys_cols(con) -> list[str]:
    """The detail columns the kernel table has; [] without grid and block."""
    have = {r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")}
    cols = [c for c in _NSYS_COLUMNS if c in have]
    return cols if {"gridX", "blockX"} <= set(cols) else []


def _nsys_text(cols: list[str], values) -> str:
    f = dict(zip(cols, values))
    parts = [f"grid {_dims((f['gridX'], f.get('gridY', 1), f.get('gridZ', 1)))} "
             f"block {_dims((f['blockX'], f.get('blockY', 1), f.get('blockZ', 1)))}"]
    if f.get("registersPerThread") is not None:
        parts.append(f"{f['registersPerThread']} regs")
    smem = (f.get("staticSharedMemory") or 0) + (f.get("dynamicSharedMemory") or 0)
    parts.append(f"smem {smem:,} B")
    return " · ".join(parts)


def _nsys_rows(trace: Trace) -> list:
    from launchtui.trace.sqlite_columns import connect_readonly
    con = connect_readonly(Path(trace.source.path))
    try:
        cols = _nsys_cols(con)
        if not cols:
            return []
        return [(int(row[0]), int(row[1]), _nsys_text(cols, row[2:])) for row in
                con.execute(f"SELECT start, correlationId, {', '.join(cols)} FROM CUPTI_ACTIVITY_KIND_KERNEL")]
    finally:
        con.close()


def _nsys_one(trace: Trace, start: int, corr: int) -> str:
    """The text of the kernel row at (start, correlation), "" when none. Exporters write the table
    in (nearly) start order, so a binary search over rowids finds the neighbourhood in a few index
    lookups; a table in another order falls back to one scan."""
    from launchtui.trace.sqlite_columns import connect_readonly
    con = connect_readonly(Path(trace.source.path))
    try:
        cols = _nsys_cols(con)
        if not cols:
            return ""
        sel = f"SELECT {', '.join(cols)} FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start = ? AND correlationId = ?"
        r = _rowid_near(con, start)
        row = None if r is None else con.execute(
            sel + " AND rowid BETWEEN ? AND ? LIMIT 1", (start, corr, r - _NEAR, r + _NEAR)).fetchone()
        if row is None:
            row = con.execute(sel + " LIMIT 1", (start, corr)).fetchone()
        return "" if row is None else _nsys_text(cols, row)
    finally:
        con.close()


_NEAR = 1 << 14    # rows either side of the binary search's landing place searched for the key


def _rowid_near(con, start: int) -> int | None:
    """The first rowid whose start is ≥ `start` if the table were in start order (a binary search
    over rowids, each step one index lookup); None for an empty table."""
    lo = con.execute("SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]   # one lookup each
    hi = con.execute("SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    if lo is None:
        return None
    step = "SELECT rowid, start FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid >= ? ORDER BY rowid LIMIT 1"
    while lo < hi:
        mid = (lo + hi) // 2
        rid, s = con.execute(step, (mid,)).fetchone()
        if s < start:
            lo = rid + 1
        else:
            hi = mid
    return lo
