"""The C column reader (launchtui/trace/_sqlite_scan.c) gives exactly what the pure-Python
group_concat path gives: the same arrays, the same dropped-row counts, the same errors, on the
generator's exports, on crafted odd databases and on the real samples. Each test reads both ways
(LAUNCHTUI_NATIVE_READER=0 / 1) and compares; the native side is asserted to have run natively."""
from __future__ import annotations

import dataclasses
import os
import shutil
import sqlite3
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from conftest import SHARED, sample, snapshot
from fixtures import synth
from fixtures.model import NSYS_VARIANTS
from launchtui.trace import native_columns, sqlite_columns as sc
from launchtui.trace.load import read_trace

REQUIRE = "LAUNCHTUI_REQUIRE_NATIVE_READER"   # set by .ci/run: the extension must have been built

needs_native = pytest.mark.skipif(not native_columns.enabled(),
                                  reason=f"C reader not in use: {native_columns.status()}")


def test_native_reader_built_where_required():
    if os.environ.get(REQUIRE) != "1":
        pytest.skip(f"{REQUIRE} is not set (CI sets it); here: {native_columns.status()}")
    assert native_columns.enabled(), native_columns.status()


def test_env_var_selects_the_python_path(monkeypatch):
    monkeypatch.setenv(native_columns.ENV, "0")
    assert native_columns.status() == f"python ({native_columns.ENV}=0)" and not native_columns.enabled()


def test_no_extension_or_no_library_means_the_python_path(monkeypatch):
    """What `status()` says (uncached here) when the extension is missing or no library resolves."""
    import sys

    import launchtui.trace as pkg
    built = getattr(pkg, "_sqlite_scan", None)
    monkeypatch.delattr(pkg, "_sqlite_scan", raising=False)
    monkeypatch.setitem(sys.modules, "launchtui.trace._sqlite_scan", None)   # import fails
    assert native_columns._load.__wrapped__() == "python (the C extension was not built)"
    if built is not None:
        monkeypatch.setattr(pkg, "_sqlite_scan", built, raising=False)
        monkeypatch.setitem(sys.modules, "launchtui.trace._sqlite_scan", built)
        monkeypatch.setattr(built, "load", lambda path: False)
        assert native_columns._load.__wrapped__() == "python (no libsqlite3 with the needed functions found)"


@pytest.fixture
def spy(monkeypatch):
    """Counts the scans the C reader completed (None: it handed the table to the fallback)."""
    calls = Counter()
    real = native_columns.scan

    def counted(*a, **k):
        got = real(*a, **k)
        calls["native" if got is not None else "handed back"] += 1
        return got
    monkeypatch.setattr(native_columns, "scan", counted)
    return calls


def both(monkeypatch, fn):
    """fn() under the pure-Python path, then under the native one: (python, native), each a
    result or the exception raised."""
    out = []
    for mode in ("0", "1"):
        monkeypatch.setenv(native_columns.ENV, mode)
        try:
            out.append(fn())
        except Exception as e:   # compared below: the same type and message both ways
            out.append(e)
    monkeypatch.delenv(native_columns.ENV)
    return out


def assert_same_columns(a, b):
    if isinstance(a, Exception):
        assert type(a) is type(b) and str(a) == str(b), (a, b)
        return
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype == np.int64 and b[k].flags.c_contiguous
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def fetch(db: Path, table: str, exprs: dict, where: str = ""):
    def run():
        d = Counter()
        return sc.fetch_int_columns(sc.connect_readonly(db), table, exprs, where, d), d
    return run


def _make(path: Path, schema: str, rows: list, cols: str = "") -> Path:
    con = sqlite3.connect(path)
    con.execute(schema)
    table = schema.split()[2]
    if rows:
        marks = ",".join("?" * len(rows[0]))
        con.executemany(f"INSERT INTO {table}{cols} VALUES ({marks})", rows)
    con.commit()
    con.close()
    return path


@needs_native
@pytest.mark.parametrize("where", ["", "kind IN (1, 3)", "kind > 99"])
def test_nulls_dropped_rows_and_where(tmp_path, monkeypatch, spy, where):
    rng = np.random.default_rng(3)
    rows = [(int(rng.integers(0, 10**12)), None if i % 37 == 3 else int(rng.integers(0, 10**12)),
             int(rng.integers(0, 4)), None if i % 5 == 0 else int(rng.integers(-2**63, 2**63 - 1)))
            for i in range(3000)]
    db = _make(tmp_path / "t.sqlite", "CREATE TABLE t (start INTEGER NOT NULL, end INTEGER, kind INTEGER, v INTEGER)",
               rows)
    exprs = {"start": "start", "end": "end", "k": "kind", "v": "v", "const": "NULL", "sum": "kind * 2 + 1"}
    (py, dpy), (nat, dnat) = both(monkeypatch, fetch(db, "t", exprs, where))
    assert_same_columns(py, nat)
    assert dpy == dnat and (dnat["t"] > 0 or where == "kind > 99")
    assert spy["native"] == 1 and not spy["handed back"]
    assert (nat["const"] == -1).all() and (where or (nat["v"] == -1).any())


@needs_native
def test_null_in_a_column_declared_not_null(tmp_path, monkeypatch, spy):
    """A NULL where the schema says NOT NULL (a schema edited after the rows were written): the row
    is dropped whole and counted, as start/end."""
    db = _make(tmp_path / "t.sqlite", "CREATE TABLE t (a INTEGER, b INTEGER)", [(1, 2), (None, 3), (4, None), (5, 6)])
    con = sqlite3.connect(db)
    con.execute("PRAGMA writable_schema=ON")
    con.execute("UPDATE sqlite_master SET sql='CREATE TABLE t (a INTEGER NOT NULL, b INTEGER)' WHERE name='t'")
    con.commit()
    con.close()
    (py, dpy), (nat, dnat) = both(monkeypatch, fetch(db, "t", {"a": "a", "b": "b"}))
    assert_same_columns(py, nat)
    assert nat["a"].tolist() == [1, 4, 5] and nat["b"].tolist() == [2, -1, 6]
    assert dpy == dnat == Counter({"t": 1}) and spy["native"] == 1


@pytest.mark.parametrize("value", ["abc", 1.5, 2.0, "123", " 7", "", b"\x01\x02", "1,2", 2**63 * 1.0])
@pytest.mark.parametrize("dropped_row", [False, True])
def test_values_that_are_not_integers(tmp_path, monkeypatch, spy, value, dropped_row):
    """Text, REAL and blob values: the C reader hands the table to the fallback, so the result
    (numeric text parsed, or the same ValueError) is the fallback's own, also in a row dropped
    for a NULL start."""
    rows = [(1, 10, 5), (2, 20, 6), (None if dropped_row else 3, 30, value), (4, 40, 7)]
    db = _make(tmp_path / "t.sqlite", "CREATE TABLE t (start INTEGER, end INTEGER, x)", rows)
    for exprs in ({"start": "start", "end": "end", "x": "x"}, {"x": "x", "start": "start"}):
        spy.clear()
        py, nat = both(monkeypatch, fetch(db, "t", exprs))
        if isinstance(py, Exception):
            assert isinstance(py, ValueError) and "not integers" in str(py)
            assert_same_columns(py, nat)
        else:
            assert_same_columns(py[0], nat[0])
            assert py[1] == nat[1]
        assert spy["handed back"] == native_columns.enabled() and not spy["native"]


@needs_native
def test_large_table_read_in_one_pass_equals_rowid_windows(tmp_path, monkeypatch, spy):
    rng = np.random.default_rng(5)
    rows = [(i, int(rng.integers(0, 10**9)), None if i % 11 == 0 else i * 3) for i in range(20000)]
    db = _make(tmp_path / "t.sqlite", "CREATE TABLE t (start INTEGER, end INTEGER, c INTEGER)", rows)
    con = sqlite3.connect(db)
    con.execute("CREATE INDEX t_end ON t(end)")
    con.execute("DELETE FROM t WHERE rowid % 101 = 7")
    con.commit()
    con.close()
    monkeypatch.setattr(sc, "CHUNK_ROWS", 1500)   # the fallback reads 14 windows
    (py, dpy), (nat, dnat) = both(monkeypatch, fetch(db, "t", {"s": "start", "e": "end", "c": "c"}, "end < 500000000"))
    assert_same_columns(py, nat)
    assert dpy == dnat and spy["native"] == 1 and 9000 < len(nat["s"]) < 11000


@needs_native
@pytest.mark.parametrize("schema,rows", [
    ("CREATE TABLE t (start INTEGER, end INTEGER, PRIMARY KEY (end, start)) WITHOUT ROWID",
     [(5, 1), (3, 9), (4, 2)]),
    ("CREATE TABLE t (start INTEGER, end INTEGER)", []),
    ("CREATE TABLE t (start INTEGER, end INTEGER)", [(2**63 - 1, -2**63), (0, 0)]),
])
def test_without_rowid_empty_and_extreme_values(tmp_path, monkeypatch, spy, schema, rows):
    db = _make(tmp_path / "t.sqlite", schema, rows)
    (py, _), (nat, _) = both(monkeypatch, fetch(db, "t", {"s": "start", "e": "end"}))
    assert_same_columns(py, nat)
    assert len(nat["s"]) == len(rows) and spy["native"] == 1


def test_other_connections_and_sqlite_errors_use_the_fallback(tmp_path, monkeypatch, spy):
    db = _make(tmp_path / "t.sqlite", "CREATE TABLE t (start INTEGER, end INTEGER)", [(1, 2)])
    out = sc.fetch_int_columns(sqlite3.connect(db), "t", {"s": "start"})   # not connect_readonly's
    assert out["s"].tolist() == [1] and not spy
    py, nat = both(monkeypatch, fetch(db, "t", {"s": "no_such_column"}))
    assert isinstance(nat, sqlite3.OperationalError) and str(py) == str(nat)


def _same_trace(a, b):
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if not f.compare:
            continue
        if hasattr(x, "__dataclass_fields__") and f.name != "source":
            for g in x.__dataclass_fields__:
                assert np.array_equal(getattr(x, g), getattr(y, g)), (f.name, g)
        elif f.name == "strings":
            assert x.values == y.values
        elif isinstance(x, np.ndarray):   # Trace.processes
            assert np.array_equal(x, y), f.name
        else:
            assert x == y, f.name


def _read_both(monkeypatch, path):
    py, nat = both(monkeypatch, lambda: read_trace(path))
    assert not isinstance(py, Exception) and not isinstance(nat, Exception), (py, nat)
    _same_trace(py, nat)
    return nat


@needs_native
@pytest.mark.parametrize("variant", NSYS_VARIANTS)
def test_generator_exports_read_the_same(tmp_path, monkeypatch, spy, variant):
    p = synth.write_nsys_sqlite(synth.simulate(), tmp_path / f"{variant}.sqlite", variant=variant)
    before = snapshot(p)
    _read_both(monkeypatch, p)
    assert spy["native"] > 0 and not spy["handed back"]
    assert snapshot(p) == before and sorted(x.name for x in tmp_path.iterdir()) == [p.name]


@needs_native
def test_wal_snapshot_read_the_same(tmp_path, monkeypatch, spy):
    """Side files: both readers read the private snapshot (opened mode=rw there), nothing beside the trace."""
    p = synth.write_nsys_sqlite(synth.simulate(), tmp_path / "w.sqlite")
    con = sqlite3.connect(p)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid % 3 = 0")   # only in the WAL
    con.commit()
    keep = sqlite3.connect(p)   # a second connection holds the WAL open: no checkpoint on close
    keep.execute("SELECT 1").fetchone()
    shutil.copy(p, tmp_path / "copy.sqlite")
    shutil.copy(str(p) + "-wal", str(tmp_path / "copy.sqlite") + "-wal")
    con.close()
    keep.close()
    trace_path = tmp_path / "copy.sqlite"
    assert sc.side_files(trace_path), "the copy's WAL holds frames: read through a private snapshot"
    before = {x.name: snapshot(x) for x in tmp_path.iterdir() if x.name.startswith("copy")}
    _read_both(monkeypatch, trace_path)
    assert spy["native"] > 0 and not spy["handed back"]
    assert {x.name: snapshot(x) for x in tmp_path.iterdir() if x.name.startswith("copy")} == before


NSYS_SAMPLES = sorted(p.name for p in (SHARED / "samples" / "nsys").glob("*.sqlite")) or ["(none)"]


@pytest.mark.samples
@needs_native
@pytest.mark.parametrize("name", NSYS_SAMPLES)
def test_real_samples_read_the_same(monkeypatch, spy, name):
    _read_both(monkeypatch, sample(f"nsys/{name}"))
    assert spy["native"] > 0


@needs_native
@pytest.mark.parametrize("schema,rows,chunk", [
    ("CREATE TABLE t (start INTEGER, end INTEGER, PRIMARY KEY (end, start)) WITHOUT ROWID", [(5, 1), (3, 9), (4, 2)], None),
    ("CREATE TABLE t (start INTEGER, end INTEGER)", [], None),
    ("CREATE TABLE t (start INTEGER, end INTEGER)", [(i, None if i % 7 == 3 else 2 * i) for i in range(3000)], 400),
    ("CREATE TABLE t (start INTEGER, end INTEGER)", [(i, i) for i in range(50)], None),
])
def test_fetch_into_given_arrays_at_an_offset(tmp_path, monkeypatch, spy, schema, rows, chunk):
    """`out=`: both readers write the rows into the given arrays' leading slots (views at an offset
    into larger arrays, as the GPU tables share one set) and return those slots: the same values
    and drops as a plain read, nothing written past them or before the offset."""
    db = _make(tmp_path / "t.sqlite", schema, rows)
    if chunk:   # windows for the pure-Python path; gaps in the rowids
        monkeypatch.setattr(sc, "CHUNK_ROWS", chunk)
        con = sqlite3.connect(db)
        con.execute("DELETE FROM t WHERE rowid % 13 = 2")
        con.commit()
        con.close()
    exprs = {"s": "start", "e": "end"}
    plain = both(monkeypatch, fetch(db, "t", exprs))

    def into():
        con = sc.connect_readonly(db)
        cap = sc.table_capacity(con, "t")
        big = {k: np.full(5 + cap + 3, -7, np.int64) for k in exprs}
        d = Counter()
        got = sc.fetch_int_columns(con, "t", exprs, "", d, out={k: v[5:5 + cap] for k, v in big.items()})
        m = len(got["s"])
        for k, v in big.items():
            assert (m == 0 or np.shares_memory(got[k], v)) and (v[:5] == -7).all() and (v[5 + m:] == -7).all()
        return {k: np.array(v) for k, v in got.items()}, d
    given = both(monkeypatch, into)
    for (a, da), (b, db_) in zip(plain, given):
        assert_same_columns(a, b)
        assert da == db_
    assert spy["native"] == 2   # the plain read and the read into `out`, natively


@needs_native
def test_a_locked_database_is_waited_for_as_python_does(tmp_path):
    """A reader's connection that meets another's lock (a private snapshot is opened mode=rw, and
    the reader's threads open it at once) waits as Python's sqlite3.connect does (5 s), instead of
    handing the table to the fallback at the first SQLITE_BUSY."""
    import threading
    db = _make(tmp_path / "t.sqlite", "CREATE TABLE t (start INTEGER, end INTEGER)", [(i, 2 * i) for i in range(100)])
    uri = native_columns.connection_uri(sc.connect_readonly(db, immutable=False))
    holder = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")   # rollback journal: new readers get SQLITE_BUSY until it ends
    release = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
    release.start()
    got = native_columns.scan(uri, ["start", "end"], "t", ["s", "e"], [False, False], 100, -1)
    release.join()
    holder.close()
    assert got is not None and got[0]["e"].tolist() == [2 * i for i in range(100)]


# --- packed pairs (sqlite_columns.Packed): the split is exact or the pair is read apart ---------
def _pairs_db(tmp_path, pairs, extra_rows=()):
    rows = [(i, i + 1, a, b) for i, (a, b) in enumerate(pairs)] + list(extra_rows)
    return _make(tmp_path / "p.sqlite", "CREATE TABLE t (start INTEGER, end INTEGER, a INTEGER, b INTEGER)",
                 rows)


@needs_native
@pytest.mark.parametrize("shift", [32, 2])
def test_packed_pairs_that_fit_read_the_same_both_ways(tmp_path, monkeypatch, spy, shift):
    rng = np.random.default_rng(7)
    hi_max, lo_max = 2**(63 - shift) - 1, 2**shift - 1
    pairs = [(int(rng.integers(0, hi_max, endpoint=True)), int(rng.integers(0, lo_max, endpoint=True)))
             for _ in range(2000)] + [(hi_max, lo_max), (0, 0), (hi_max, 0), (0, lo_max)]
    db = _pairs_db(tmp_path, pairs, [(None, 5, 2**40, -3)])   # a dropped row's pair is not judged
    exprs = {"start": "start", "ab": sc.Packed("a", "b", shift), "end": "end"}
    (py, dpy), (nat, dnat) = both(monkeypatch, fetch(db, "t", exprs))
    assert_same_columns(py, nat)
    assert dpy == dnat == Counter({"t": 1}) and spy["native"] == 1
    want = [a * 2**shift + b for a, b in pairs]
    assert nat["ab"].tolist() == want
    assert ((nat["ab"] >> shift).tolist(), (nat["ab"] & (2**shift - 1)).tolist()) == tuple(map(list, zip(*pairs)))


@pytest.mark.parametrize("bad", [(2**31, 0), (0, 2**32), (-1, 5), (5, -1), (None, 5), (5, None),
                                 (2**63 - 1, 2**63 - 1), (3_000_003 * 11, 2**62)])
def test_packed_pairs_that_do_not_fit_raise_unpackable_both_ways(tmp_path, monkeypatch, bad):
    """Ids past a half (above 2^31 high, 2^32 low), negative or NULL: never an overflowing REAL or a
    silent mis-split; both readers say Unpackable and count no dropped row (the caller reads again)."""
    db = _pairs_db(tmp_path, [(1, 2), bad, (3, 4)])
    py, nat = both(monkeypatch, fetch(db, "t", {"start": "start", "ab": sc.Packed("a", "b"), "end": "end"}))
    assert isinstance(py, sc.Unpackable) and isinstance(nat, sc.Unpackable)


def test_packed_pairs_apart_read_every_int64(tmp_path, monkeypatch):
    """What the caller does on Unpackable: the two columns apart, exact for any int64."""
    pairs = [(2**63 - 1, -2**63), (2**31, 2**32), (3_000_003, 3_435_062)]
    db = _pairs_db(tmp_path, pairs)
    (py, _), (nat, _) = both(monkeypatch, fetch(db, "t", {"start": "start", "a": "a", "b": "b"}))
    assert_same_columns(py, nat)
    assert list(zip(nat["a"].tolist(), nat["b"].tolist())) == pairs


@pytest.mark.parametrize("gaps", [False, True])
@pytest.mark.parametrize("share", [0.5, 0.1, 0.9])
def test_a_table_read_in_two_parts_on_two_threads_equals_one_read(tmp_path, monkeypatch, gaps, share):
    """fetch_int_columns_split: the same rows, order and drop counts as one read, into the given
    arrays (rowid gaps and dropped rows in the lower part close up), both readers, whatever share
    the other thread reads; an Unpackable pair in either part raises and counts nothing."""
    from concurrent.futures import ThreadPoolExecutor
    monkeypatch.setattr(sc, "SPLIT_MIN_ROWS", 100)
    rows = [(i, None if i % 41 == 7 else i + 3, i % 5, i % 3) for i in range(1000)]
    db = _make(tmp_path / "t.sqlite", "CREATE TABLE t (start INTEGER, end INTEGER, a INTEGER, b INTEGER)", rows)
    if gaps:
        con = sqlite3.connect(db)
        con.execute("DELETE FROM t WHERE rowid % 13 = 2 OR rowid BETWEEN 300 AND 350")
        con.commit()
        con.close()
    exprs = {"start": "start", "end": "end", "ab": sc.Packed("a", "b")}
    where = []

    def parts(exprs):
        def run():
            con, d = sc.connect_readonly(db), Counter()
            cap = sc.table_capacity(con, "t")
            out = {k: np.full(cap + 4, -7, np.int64) for k in exprs}
            with ThreadPoolExecutor(1) as pool:
                got = sc.fetch_int_columns_split(
                    con, "t", exprs, d, out,
                    lambda fn: pool.submit(lambda: where.append(threading.current_thread().name)
                                           or fn(con=sc.connect_readonly(db))), share)
            return {k: np.array(v) for k, v in got.items()}, d
        return run
    for (one, d1), (two, d2) in zip(both(monkeypatch, fetch(db, "t", exprs)), both(monkeypatch, parts(exprs))):
        assert_same_columns(one, two)
        assert d1 == d2 and d1["t"] == sum(1 for r in rows if r[1] is None and (not gaps or _kept(r[0] + 1)))
    assert len(where) == 2 and all(name != threading.current_thread().name for name in where)
    con = sqlite3.connect(db)
    con.execute("UPDATE t SET a = -1 WHERE rowid = (SELECT max(rowid) FROM t)")   # upper part
    con.commit()
    con.close()
    for got in both(monkeypatch, parts(exprs)):
        assert isinstance(got, sc.Unpackable)


def test_an_offer_no_thread_took_up_is_read_by_its_owner(tmp_path, monkeypatch):
    """The other thread busy until the owner is done: the upper part is withdrawn and read on the
    owner's own connection, the rows as one read gives them, and the other thread never runs it."""
    from concurrent.futures import ThreadPoolExecutor
    rows = [(i, i + 3, i % 5, i % 3) for i in range(1000)]
    db = _make(tmp_path / "t.sqlite", "CREATE TABLE t (start INTEGER, end INTEGER, a INTEGER, b INTEGER)", rows)
    exprs = {"start": "start", "end": "end", "a": "a"}
    busy, ran = threading.Event(), []
    con = sc.connect_readonly(db)
    out = {k: np.zeros(sc.table_capacity(con, "t"), np.int64) for k in exprs}
    monkeypatch.setattr(sc, "SPLIT_MIN_ROWS", 100)
    with ThreadPoolExecutor(1) as pool:
        pool.submit(busy.wait, 5)   # the one worker busy: the offer queues behind it (5 s: no hang if not)
        try:
            got = sc.fetch_int_columns_split(con, "t", exprs, Counter(), out,
                                             lambda fn: pool.submit(lambda: ran.append(1) or fn(con=con)), 0.7)
        finally:
            busy.set()
    one = sc.fetch_int_columns(con, "t", exprs)
    assert_same_columns(one, {k: np.ascontiguousarray(v) for k, v in got.items()})
    assert ran == []


def _kept(rowid: int) -> bool:
    return not (rowid % 13 == 2 or 300 <= rowid <= 350)


def _api_heavy(path: Path) -> Path:
    """The export with a non-launch call (an event record) after each call: twice the API rows."""
    con = sqlite3.connect(path)
    sid = con.execute("SELECT max(id) + 1 FROM StringIds").fetchone()[0]
    con.execute("INSERT INTO StringIds(id, value) VALUES (?, 'cudaEventRecord_v3020')", (sid,))
    cols = [r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_RUNTIME)")]
    shifted = {"start": "end + 1", "end": "end + 2", "correlationId": "correlationId + 100000000", "nameId": str(sid)}
    con.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME({', '.join(cols)}) "
                f"SELECT {', '.join(shifted.get(c, c) for c in cols)} FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    con.commit()
    con.close()
    return path


def _nvtx_heavy(path: Path) -> Path:
    """The export with 60 ranges per launch call's worth of inline-text NVTX rows (nsys-ai's exports
    hold 2.5-3x as many ranges as calls, nearly all with inline text)."""
    con = sqlite3.connect(path)
    cols = [r[1] for r in con.execute("PRAGMA table_info(NVTX_EVENTS)")]
    n_api = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    n = con.execute("SELECT count(*) FROM NVTX_EVENTS").fetchone()[0]
    for k in range(max(1, 4 * n_api // max(n, 1))):
        shifted = {"start": f"start + {k + 1}", "end": f"end + {k + 1}", "text": f"ifnull(text, 'r') || '{k}'"}
        con.execute(f"INSERT INTO NVTX_EVENTS({', '.join(cols)}) SELECT {', '.join(shifted.get(c, c) for c in cols)} "
                    f"FROM NVTX_EVENTS WHERE rowid <= {n}")
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("shape", ["generator", "api_heavy", "nvtx_heavy"])
def test_offered_shares_follow_the_scans_weights(tmp_path, monkeypatch, shape):
    """The API calls and the GPU ops offer the NVTX worker the shares that even the three scans out
    (nsys_scan_shares): the kernels the larger in the generator's exports (one call per kernel),
    the API calls where they outnumber the kernels as in real exports, nothing where the NVTX
    ranges outweigh both (nsys-ai's exports); the trace is the one a read in whole tables gives."""
    from launchtui.trace import nsys_sqlite
    path = synth.write_nsys_sqlite(synth.simulate(), tmp_path / "t.sqlite")
    {"api_heavy": _api_heavy, "nvtx_heavy": _nvtx_heavy}.get(shape, lambda p: p)(path)
    monkeypatch.setattr(sc, "SPLIT_MIN_ROWS", 10**12)
    whole = read_trace(path)
    offered, real = {}, sc.fetch_int_columns_split

    def spied(con, table, exprs, dropped, out, elsewhere, share):
        if elsewhere is not None and share > 0:
            offered[table] = share
        return real(con, table, exprs, dropped, out, elsewhere, share)
    monkeypatch.setattr(nsys_sqlite, "fetch_int_columns_split", spied)
    monkeypatch.setattr(sc, "SPLIT_MIN_ROWS", 100)
    _same_trace(whole, read_trace(path))
    api, kernels = offered.get("CUPTI_ACTIVITY_KIND_RUNTIME", 0), offered.get("CUPTI_ACTIVITY_KIND_KERNEL", 0)
    if shape == "generator":
        assert 0 < api < kernels
    elif shape == "api_heavy":
        assert api > kernels >= 0 and api > 0.3
    else:
        assert offered == {}
