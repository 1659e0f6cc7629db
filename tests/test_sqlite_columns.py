"""fetch_int_columns read in rowid windows (a large table) gives exactly the single pass's arrays:
same rows in rowid order, NULLs as -1 or dropped and counted, a WHERE clause, gaps in the rowids,
and an index SQLite could pick for the WHERE (the windows are read NOT INDEXED, in rowid order).
These test the pure-Python path (the C reader reads in one pass; tests/test_native_columns.py)."""
import sqlite3
from collections import Counter

import numpy as np
import pytest

from launchtui.trace import native_columns, sqlite_columns as sc


@pytest.fixture(autouse=True)
def python_path(monkeypatch):
    monkeypatch.setenv(native_columns.ENV, "0")


def _db(path, n=5000, seed=0):
    rng = np.random.default_rng(seed)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (start INTEGER NOT NULL, end INTEGER, kind INTEGER, corr INTEGER)")
    con.execute("CREATE INDEX t_kind ON t(kind)")
    rows = []
    for i in range(n):
        s = int(rng.integers(0, 10**12))
        rows.append((s, None if i % 97 == 5 else s + int(rng.integers(0, 1000)),   # NULL end: dropped
                     int(rng.integers(0, 4)), None if i % 13 == 0 else int(rng.integers(0, 10**9))))
    con.executemany("INSERT INTO t VALUES (?,?,?,?)", rows)
    con.execute("DELETE FROM t WHERE rowid % 211 = 7")      # gaps in the rowids
    con.commit()
    con.close()


@pytest.mark.parametrize("where", ["", "kind IN (1, 3)"])
def test_windows_equal_single_pass(tmp_path, monkeypatch, where):
    db = tmp_path / "x.sqlite"
    _db(db)
    con = sc.connect_readonly(db)
    exprs = {"start": "start", "end": "end", "corr": "corr", "k": "kind * 10 + 1"}
    d1 = Counter()
    one = sc.fetch_int_columns(con, "t", exprs, where, d1)
    monkeypatch.setattr(sc, "CHUNK_ROWS", 700)
    d2 = Counter()
    win = sc.fetch_int_columns(con, "t", exprs, where, d2)
    assert d1 == d2 and d1["t"] > 0, "rows with a NULL end are dropped and counted the same"
    for k in exprs:
        assert win[k].dtype == np.int64 and win[k].flags.owndata
        np.testing.assert_array_equal(win[k], one[k])
    assert (one["corr"] == -1).any()
    # the values, independently of group_concat: plain rows in rowid order
    plain = con.execute(f"SELECT start, end, ifnull(corr, -1), kind * 10 + 1 FROM t WHERE end IS NOT NULL"
                        + (f" AND ({where})" if where else "") + " ORDER BY rowid").fetchall()
    assert np.array_equal(np.array(plain, np.int64).reshape(-1, 4),
                          np.stack([win["start"], win["end"], win["corr"], win["k"]], axis=1))


def test_sparse_rowids_read_in_one_pass(tmp_path, monkeypatch):
    db = tmp_path / "x.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (start INTEGER, end INTEGER)")
    con.executemany("INSERT INTO t(rowid, start, end) VALUES (?,?,?)", [(1, 5, 6), (2**40, 7, 9)])
    con.commit()
    con.close()
    monkeypatch.setattr(sc, "CHUNK_ROWS", 4)
    out = sc.fetch_int_columns(sc.connect_readonly(db), "t", {"start": "start", "end": "end"})
    assert out["start"].tolist() == [5, 7] and out["end"].tolist() == [6, 9]


def test_packed_id_halves_equal_shift_and_mask():
    """The reader's `high * 2**32 + low` columns read back through int32/uint32 views of the int64
    buffer: exactly `>> 32` and `& (2**32 - 1)`, for NULL (-1), zero, negative and extreme values."""
    from launchtui.trace.arrays import halves as _halves
    v = np.array([-1, 0, 1, 2**32, 5 * 2**32 + 7, 2**63 - 1, -2**63, -(2**32) + 3, 123456789 * 2**32 + 2**32 - 1],
                 np.int64)
    hi, lo = _halves(v)
    assert hi.dtype == np.int32 and lo.dtype == np.uint32
    np.testing.assert_array_equal(hi.astype(np.int64), v >> 32)
    np.testing.assert_array_equal(lo.astype(np.int64), v & (2**32 - 1))


def test_thread_ids_equal_unique_of_the_concatenation(monkeypatch):
    """Thread indices per part (runs, interleaved rows, an empty part, blocks smaller than a part)
    equal np.unique's inverse over the concatenated parts."""
    from launchtui.trace import nsys_columns
    rng = np.random.default_rng(3)
    keys = np.array([7 << 24 | 5, 7 << 24 | 9, 3 << 24 | 1, 2**40 + 11], np.int64)
    parts = [np.repeat(keys[rng.integers(0, 4, 300)], rng.integers(1, 20, 300)),   # runs
             keys[rng.integers(0, 3, 5000)],                                         # interleaved
             np.zeros(0, np.int64), keys[[3]]]
    for block in (1 << 19, 64):
        monkeypatch.setattr(nsys_columns, "BLOCK", block)
        uniq, ids = nsys_columns.thread_ids(parts)
        ref_u, ref_inv = np.unique(np.concatenate(parts), return_inverse=True)
        np.testing.assert_array_equal(uniq, ref_u)
        assert [i.dtype for i in ids] == [np.int32] * 4
        np.testing.assert_array_equal(np.concatenate(ids), ref_inv)
    assert nsys_columns.thread_ids([])[0].dtype == np.int64


def _ops(rng, sizes, tie_across=False, unsorted=None):
    """GpuOps of tables of `sizes` rows, each sorted by (start, end, device, stream) with repeated
    keys inside a table; table t's starts are t modulo 4 (no tie across tables) unless `tie_across`."""
    from launchtui.trace.model import GpuOps
    cols = {k: [] for k in ("start", "end", "device", "stream")}
    spans, n = [], 0
    for t, m in enumerate(sizes):
        start = rng.integers(0, 400, m) * 4 + t
        if tie_across and t == 1 and m:
            start[0] = 4 * 7
        dev, stream = rng.integers(0, 2, m), rng.integers(0, 3, m)
        end = start + rng.integers(0, 3, m)
        o = np.lexsort((stream, dev, end, start))
        if unsorted == t:
            o = o[::-1]
        for k, v in zip(cols, (start, end, dev, stream)):
            cols[k].append(v[o])
        spans.append((t + 1, n, n + m))
        n += m
    c = {k: np.concatenate(v).astype(np.int64) for k, v in cols.items()}
    return GpuOps(device=c["device"].astype(np.int32), stream=c["stream"], start=c["start"], end=c["end"],
                  corr=np.arange(n, dtype=np.int64), pid=np.full(n, -1, np.int64),
                  name=np.arange(n, dtype=np.int32) % 7, full_name=np.arange(n, dtype=np.int32),
                  kind=np.array([k for k, a, b in spans for _ in range(b - a)], np.int8),
                  api=np.full(n, -1, np.int32)), spans


@pytest.mark.parametrize("sizes,tie,unsorted,moves", [
    ((5000, 300, 40), False, None, True), ((5000, 0, 40), False, None, True), ((0, 300, 40), False, None, True),
    ((5000,), False, None, False), ((5000, 300, 40), True, None, False), ((5000, 300, 40), False, 2, False),
    ((30, 3000, 5), False, None, True)])
@pytest.mark.parametrize("cpus", [1, 2])
def test_gpu_tables_merged_in_finalize_order(monkeypatch, sizes, tie, unsorted, moves, cpus):
    """The reader's in-place merge of the GPU tables gives exactly finalize's order (a stable sort
    by start, end, device, stream of the tables' rows in table order), with blocks smaller than a
    table, its columns moved on one thread or, with two CPUs, half of them on a second; it leaves
    the ops as they are on a start tie across tables or an unsorted table."""
    import threading
    from dataclasses import fields
    from launchtui.trace import nsys_columns
    from launchtui.trace.join import time_order
    monkeypatch.setattr(nsys_columns, "BLOCK", 256)
    monkeypatch.setattr(nsys_columns, "MOVE_BESIDE_ROWS", 0)
    monkeypatch.setattr(nsys_columns, "usable_cpus", lambda: cpus)
    movers, real_move = set(), nsys_columns._move
    monkeypatch.setattr(nsys_columns, "_move", lambda *a: movers.add(threading.current_thread().name) or real_move(*a))
    ops, spans = _ops(np.random.default_rng(sum(sizes)), sizes, tie, unsorted)
    before = {f.name: getattr(ops, f.name).copy() for f in fields(ops)}
    order = np.lexsort((ops.stream, ops.device, ops.end, ops.start))   # stable: ties in table order
    nsys_columns.merge_in_time_order(ops, spans)
    for f in fields(ops):
        want = before[f.name][order] if moves else before[f.name]
        np.testing.assert_array_equal(getattr(ops, f.name), want, err_msg=f.name)
    assert (time_order(ops.start, ops.end, ops.device, ops.stream)[0] is None) == (moves or len(sizes) == 1)
    if moves and sizes[0]:   # a first table to move: on this thread, and with two CPUs beside it
        assert len(movers) == cpus and threading.current_thread().name in movers
