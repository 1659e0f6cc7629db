"""How the Nsight reader's three scans share the cores (trace/nsys_sqlite.py `_read_tables`).

The main thread reads the API calls (then the overheads), one worker the GPU-op tables, the other
the NVTX ranges; the NVTX worker then reads the upper share of the API table and of each GPU-op
table that the other two offer it (sqlite_columns.fetch_int_columns_split). The shares are chosen
so that the three end together, by each scan's weight: rows (rowid spans, from the b-trees' ends)
times the values a row hands over. An offer the NVTX worker has not begun when its owner is done
is read by the owner, so a share set too high costs nothing but the offer.

Weights, measured single-threaded on this host (bench/MISSED.md): an API call hands over 5 values
(~52 ns each), a GPU op 8; an NVTX range 5, plus its inline text where it has one, read in Python
at ~680 ns a row (13 values' time). Exports differ: the samples hold 1.6-3.5x as many API calls as
kernels, and nsys-ai's 2.5-3x as many NVTX ranges as API calls, nearly all with inline text, where
the benchmark's generator writes one call per kernel and few ranges.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from launchtui.trace.sqlite_columns import rowid_bounds, rowid_span

API_ROW_VALUES, GPU_ROW_VALUES, NVTX_ROW_VALUES, NVTX_TEXT_VALUES = 5, 8, 5, 13
MAX_SHARE = 0.9          # the owner keeps at least a tenth: its part starts its scan at once
TEXT_SAMPLE_ROWS = 512   # NVTX rows looked at, at each of three places, for the share with text


@dataclass(frozen=True)
class ScanShares:
    """The upper share of the API table, and of each GPU-op table, offered to the NVTX worker."""
    api: float = 0.0
    gpu: float = 0.0


@dataclass(frozen=True)
class ScanWeights:
    """Each thread's work before any share moves: the API calls (main), the overheads (main, read
    whole), the GPU ops (a worker) and the NVTX ranges (the other worker)."""
    api: float
    overheads: float
    gpu: float
    nvtx: float


def scan_shares(w: ScanWeights) -> ScanShares:
    """The shares that leave the three threads the same work: each a third of the whole where the
    NVTX worker can take from both; else from the one heavier than it, to meet it halfway; none
    where its own ranges already outweigh them (nsys-ai's exports)."""
    if w.gpu <= 0:   # no GPU ops: that worker is free at once and takes the API calls' offer
        return ScanShares(_clamp(0.5 + w.overheads / (2 * w.api)) if w.api > 0 else 0.0, 0.0)
    third = (w.api + w.overheads + w.gpu + w.nvtx) / 3
    a = (w.api + w.overheads - third) / w.api if w.api > 0 else 0.0
    g = (w.gpu - w.nvtx - max(a, 0.0) * w.api) / (2 * w.gpu)
    if a > 0 and g < 0:       # only the main thread is heavier than the NVTX worker: meet it halfway
        a, g = (w.api + w.overheads - w.nvtx) / (2 * w.api), 0.0
    elif a <= 0:   # only the GPU worker may be: the same with its tables
        a, g = 0.0, (w.gpu - w.nvtx) / (2 * w.gpu)
    return ScanShares(_clamp(a), _clamp(g))


def _clamp(share: float) -> float:
    return min(max(share, 0.0), MAX_SHARE)


def scan_weights(con: sqlite3.Connection, api: str | None = None, overheads: str | None = None,
                 nvtx: str | None = None, gpu: tuple[str, ...] = ()) -> ScanWeights | None:
    """The weights of an export's scans, from its tables' names in the file (None: absent); None
    when a big table's rows are unknown without a scan (sparse rowids, WITHOUT ROWID): then
    nothing is offered."""
    def rows(table: str | None) -> int | None:
        if table is None:
            return 0
        span = rowid_span(con, table)
        if span is None and con.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone() is None:
            return 0   # empty
        return span
    spans = [rows(t) for t in (api, overheads, nvtx) + tuple(gpu)]
    if any(v is None for v in spans):
        return None
    n_api, n_ovh, n_nvtx = spans[:3]
    nvtx_row = NVTX_ROW_VALUES + NVTX_TEXT_VALUES * _text_share(con, nvtx)
    return ScanWeights(api=n_api * API_ROW_VALUES, overheads=n_ovh * API_ROW_VALUES,
                       gpu=sum(spans[3:]) * GPU_ROW_VALUES, nvtx=n_nvtx * nvtx_row)


def _text_share(con: sqlite3.Connection, table: str | None) -> float:
    """The share of NVTX rows with an inline text, from TEXT_SAMPLE_ROWS rowids at the table's
    start, middle and end (a few b-tree pages, not a scan)."""
    if table is None or "text" not in {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}:
        return 0.0
    lo, hi = rowid_bounds(con, table)
    if type(lo) is not int or type(hi) is not int:
        return 0.0
    seen = with_text = 0
    for at in sorted({lo, lo + (hi - lo) // 2, max(lo, hi - TEXT_SAMPLE_ROWS + 1)}):
        n, t = con.execute(f'SELECT count(*), count(text) FROM "{table}" WHERE rowid >= ? AND rowid < ?',
                           (at, at + TEXT_SAMPLE_ROWS)).fetchone()
        seen, with_text = seen + n, with_text + t
    return with_text / seen if seen else 0.0
