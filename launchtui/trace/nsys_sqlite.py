"""Reader for Nsight Systems SQLite exports, 2021.x to 2026.x (docs: nsys-sqlite.md).

Tables exist only when they have rows, names may carry `_V<n>` suffixes, and columns come and go
between versions, so everything is probed first. The file is opened read-only and immutable.
"""
from __future__ import annotations

import re
import shutil
import sqlite3
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from launchtui.errors import TraceError
from launchtui.trace.arrays import halves, keep_low, unique_sorted
from launchtui.trace import names as nm
from launchtui.trace import nsys_cpu, nsys_nvtx, nsys_stacks
from launchtui.trace.join import finalize
from launchtui.trace.registry import NSIGHT_MARKERS
from launchtui.trace import graph_ids, graph_nodes
from launchtui.trace.model import (OP_KERNEL, OP_MEMCPY, OP_MEMSET, ApiCalls, GpuOps, Overheads, Ranges,
                                   SourceInfo, StringTable, Threads, Trace)
from launchtui.trace.grouping import dense_groups
from launchtui.trace.nesting import range_depths
from launchtui.trace.nsys_columns import merge_in_time_order, thread_ids
from launchtui.trace.nsys_scan_shares import ScanShares, scan_shares, scan_weights
from launchtui.trace.nsys_strings import Names, StringIds, distinct_ids
from launchtui.trace.sqlite_columns import (Packed, Unpackable, connect_readonly, fetch_int_columns,
                                             fetch_int_columns_split, private_snapshot, side_files,
                                             snapshot_dir, table_capacity, table_columns)

PID_MASK = ~0xFFFFFF  # globalPid = globalTid with the thread bits cleared
I32 = np.iinfo(np.int32)

COPY_KIND = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD",
             9: "HtoH", 10: "PtoP", 11: "Unified HtoD", 12: "Unified DtoH", 13: "Unified DtoD"}

def resolve_tables(columns: dict[str, set[str]]) -> dict[str, str]:
    """Canonical name -> actual table name; `X_V<n>` variants accepted, the highest n wins."""
    best: dict[str, tuple[int, str]] = {}
    for actual in columns:
        m = re.fullmatch(r"(.+?)_V(\d+)", actual)
        canon, ver = (m.group(1), int(m.group(2))) if m else (actual, 0)
        if canon not in best or ver > best[canon][0]:
            best[canon] = (ver, actual)
    return {k: v[1] for k, v in best.items()}


class _Reader:
    def __init__(self, path: Path, progress=None):
        self.path = path
        self.db = path  # the file actually read: a private snapshot when side files hold data
        self.snapshot_dir: Path | None = None
        self.dropped: Counter = Counter()  # rows dropped per table (NULL in a required column)
        self.skipped: Counter = Counter()  # other rows skipped, by reason (e.g. unpaired sched events)
        self.progress = progress or (lambda stage, rows: None)
        sides = side_files(path)
        if sides:
            self._snapshot(sides)
        try:
            self.con = connect_readonly(self.db, immutable=self.snapshot_dir is None)
            self.cols = table_columns(self.con)
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:  # a corrupt schema's message can be bytes
            self.cleanup()
            raise TraceError(path, f"cannot read SQLite database ({_one_line(e)})") from None
        self.tables = resolve_tables(self.cols)
        if not any(m in self.tables for m in NSIGHT_MARKERS):
            self.con.close()
            self.cleanup()
            raise TraceError(path, "SQLite database is not an Nsight Systems export (no StringIds, "
                                   "CUPTI_ACTIVITY_KIND_* or NVTX_EVENTS tables)")
        self.strings = StringTable()
        self.replay_rows = graph_ids.NO_REPLAY_ROWS   # GPU-op rows with graph ids (read_gpu_raw)
        self.names = Names(self.strings, self.skipped, lambda: StringIds.read(
            self.con, self.tables["StringIds"], self.skipped) if self.has("StringIds") else StringIds.empty())

    def _snapshot(self, sides: list[Path]) -> None:
        """Read a consistent private copy: the WAL applied, a hot journal rolled back."""
        from launchtui.paths import cache_dir
        try:
            try:
                self.snapshot_dir = snapshot_dir(cache_dir() / "snapshots")
            except OSError:
                self.snapshot_dir = snapshot_dir(Path(tempfile.gettempdir()) / "launchtui-snapshots")
            self.db = private_snapshot(self.path, sides, self.snapshot_dir)
        except (OSError, sqlite3.Error, UnicodeDecodeError) as e:
            self.cleanup()
            names = ", ".join(s.name[len(self.path.name):] for s in sides)
            raise TraceError(self.path, f"has a {names} file beside it (a writer's unfinished or uncheckpointed "
                                        f"changes) and a private copy to read it safely failed ({e})") from None
        self.progress(f"read a private snapshot ({', '.join(s.suffix or s.name for s in sides)} applied)", 0)

    def cleanup(self) -> None:
        if self.snapshot_dir is not None:
            shutil.rmtree(self.snapshot_dir, ignore_errors=True)
            self.snapshot_dir = None

    # --- helpers ---------------------------------------------------------
    def has(self, canon: str) -> bool:
        return canon in self.tables

    def colset(self, canon: str) -> set[str]:
        return self.cols[self.tables[canon]]

    def ints(self, canon: str, exprs: dict[str, str], where: str = "", con=None, elsewhere=None,
             share: float = 0.5) -> dict[str, np.ndarray]:
        """The table's integer columns (sqlite_columns.fetch_int_columns). `elsewhere` (no `where`):
        the upper `share` of a big table offered to another thread (fetch_int_columns_split)."""
        con, table = con or self.con, self.tables[canon]
        if elsewhere is None or where:
            out = fetch_int_columns(con, table, exprs, where, self.dropped)
        else:
            cap = table_capacity(con, table)
            out = {k: np.empty(cap, np.int64) for k in exprs}
            n = len(fetch_int_columns_split(con, table, exprs, self.dropped, out, elsewhere, share)["start"])
            for v in out.values():
                v.resize(n, refcheck=False)   # in place (the parts' views are gone)
        self.progress(f"read {canon}", len(next(iter(out.values()))) if out else 0)
        return out

    def meta(self) -> dict[str, str]:
        """name -> value from whichever meta table exists with those columns; {} otherwise (the
        version then shows as unknown, as for a 2021 export without one)."""
        for t in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if self.has(t) and {"name", "value"} <= self.colset(t):
                return {str(k): str(v) for k, v in
                        self.con.execute(f'SELECT name, value FROM "{self.tables[t]}"') if k is not None}
        return {}

    # --- tables ----------------------------------------------------------
    def read_api(self, elsewhere=None, share: float = 0.5):
        """The API calls' columns, names interned (main thread). `elsewhere`: offered the upper
        `share` of the table, read on another thread (sqlite_columns.fetch_int_columns_split)."""
        if not self.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
            return None
        exprs = {"start": "start", "end": "end", "gtid": "globalTid"}
        try:   # the name id in the correlation-id column's high half: 8 bytes of fresh memory less per call
            c = self.ints("CUPTI_ACTIVITY_KIND_RUNTIME", {**exprs, "corr": Packed("nameId", "correlationId")},
                          elsewhere=elsewhere, share=share)
            ids, packed = halves(c["corr"])[0], True
        except Unpackable:   # a NULL, negative or large id: the two apart
            c = self.ints("CUPTI_ACTIVITY_KIND_RUNTIME", {**exprs, "corr": "correlationId", "name": "nameId"},
                          elsewhere=elsewhere, share=share)
            ids, packed = c.pop("name"), False
        name = self.names.map(ids, nm.api_display_name, (self.tables["CUPTI_ACTIVITY_KIND_RUNTIME"], "nameId"))
        del ids
        if packed:   # the correlation ids alone, in place
            keep_low(c["corr"])
        kind_of = np.array([nm.api_kind(s) for s in self.strings.values], np.int8) if len(self.strings) else np.zeros(0, np.int8)
        kind = kind_of[name] if len(name) else np.zeros(0, np.int8)
        return c, name, kind

    GPU_TABLES = (("CUPTI_ACTIVITY_KIND_KERNEL", OP_KERNEL), ("CUPTI_ACTIVITY_KIND_MEMCPY", OP_MEMCPY),
                  ("CUPTI_ACTIVITY_KIND_MEMSET", OP_MEMSET))

    def read_gpu_raw(self, elsewhere=None, share: float = 0.5, con=None):
        """The GPU-op tables' integer columns, read one after another into one set of arrays sized
        by their summed capacities (no per-table parts to concatenate: that copy would be fresh
        memory the size of every column), each table's (kind, first row, end row, ids read apart or None),
        and the rows with graph ids (graph_ids.replay_rows; read only when a graph launch can exist). No
        interning: safe on a worker thread. None when no GPU-op table exists. `elsewhere`: offered
        the upper `share` of each big table (sqlite_columns.fetch_int_columns_split)."""
        con = con or self.con
        present = [(self.tables[canon], canon, kind) for canon, kind in self.GPU_TABLES if self.has(canon)]
        if not present:
            return None
        cap = sum(table_capacity(con, table) for table, _, _ in present)
        # two ids share a column where they fit (Packed): device/stream, the kernel's two name ids
        names = ("start", "end", "devstream", "corr", "pid", "names")
        graphs = graph_ids.may_launch_graphs(con, self.tables.get("StringIds"))
        nodes = graphs and graph_nodes.node_table(self) is not None
        cols = {k: np.empty(cap, np.int64) for k in names + (("node",) if nodes else ())}   # graph_ids.scan_exprs
        n, spans, graph_spans = 0, [], []
        for table, canon, kind in present:
            cs = self.colset(canon)
            if kind == OP_KERNEL:
                ids = Packed("shortName", "demangledName" if "demangledName" in cs else "shortName")
            else:
                ids = "copyKind" if kind == OP_MEMCPY and "copyKind" in cs else "NULL"
            exprs = dict(zip(names, ("start", "end", Packed("deviceId", "streamId"), "correlationId",
                                     "globalPid" if "globalPid" in cs else "NULL", ids)))
            if graphs:
                exprs.update(graph_ids.scan_exprs(cs, kind == OP_KERNEL, nodes))
            out = {k: v[n:] for k, v in cols.items()}
            try:
                got = fetch_int_columns_split(con, table, exprs, self.dropped, out, elsewhere, share)
                m, apart = len(got["start"]), None
                del got
            except Unpackable:   # an id outside its half (e.g. above 2^31): the two columns apart
                m, apart = self._gpu_apart(con, table, exprs, out)
            self.progress(f"read {canon}", m)
            spans.append((kind, n, n + m, apart))
            if exprs["corr"] == graph_ids.GRAPH_CORR:
                graph_spans.append((n, n + m, apart))
            n += m
        for v in cols.values():
            v.resize(n, refcheck=False)   # in place (no views of it are left)
        packed = cols.pop("devstream")
        cols["device"] = halves(packed)[0].copy()     # int32, contiguous
        cols["stream"] = keep_low(packed)   # in the packed column's buffer
        for _, a, b, apart in spans:
            if apart:
                cols["device"][a:b] = apart.pop("device")
                cols["stream"][a:b] = apart.pop("stream")
        return cols, spans, graph_ids.replay_rows(cols, graph_spans) if graphs else graph_ids.NO_REPLAY_ROWS

    APART = {"devstream": ("device", "stream"), "names": ("short", "full"), "corr": ("graph", "corr")}

    def _gpu_apart(self, con, table: str, exprs: dict, out: dict) -> tuple[int, dict]:
        """Read a GPU-op table whose packed ids do not fit with each pair as two columns (APART):
        the plain columns (corr included) go to `out`, the pairs come back apart ({device, stream[,
        short, full][, graph]}). A row whose deviceId does not fit the model's int32 is skipped and
        counted."""
        split = {k: v for k, v in exprs.items() if not isinstance(v, Packed)}
        for k, e in exprs.items():
            if isinstance(e, Packed):
                split.update(zip(self.APART[k], (e.hi, e.lo)))
        got = fetch_int_columns(con, table, split, "", self.dropped)
        ok = (got["device"] >= I32.min) & (got["device"] <= I32.max)
        if not ok.all():
            self.skipped[f"{table} rows whose deviceId does not fit 32 bits"] += int((~ok).sum())
            got = {k: v[ok] for k, v in got.items()}
        m = len(got["start"])
        for k in out:
            if k in got:
                out[k][:m] = got.pop(k)
        got["device"] = got["device"].astype(np.int32)
        return m, got

    def _kernel_names(self, hi, lo, short, full, pool=None) -> None:
        """The kernels' short and demangled names interned into `short` and `full`, short names
        first. With a `pool`, the demangled ids' numbers-only steps (Names.map) run on its worker
        beside the short ones'."""
        table = self.tables[self.GPU_TABLES[0][0]]
        if "demangledName" not in self.cols[table]:
            self.names.map(hi, what=(table, "shortName"), out=short)
            full[:] = short
            return
        if pool is None or not len(hi):
            self.names.map(hi, what=(table, "shortName"), out=short)
            self.names.map(lo, what=(table, "demangledName"), out=full)
            return
        lo_groups = pool.submit(distinct_ids, lo)
        short_codes = self.names.lookup(hi, distinct_ids(hi), what=(table, "shortName"))
        full_codes = self.names.lookup(lo, lo_groups.result(), what=(table, "demangledName"))
        filled = pool.submit(Names.fill, full_codes, full)
        Names.fill(short_codes, short)
        filled.result()

    def gpu_ops(self, raw, pool=None) -> GpuOps | None:
        """Intern the GPU ops' names table by table, in the tables' order (main thread; `pool`: a
        worker for the kernel names' numbers-only steps)."""
        if raw is None:
            return None
        c, spans, self.replay_rows = raw
        n = len(c["start"])
        ids = c.pop("names")
        short, full = np.empty(n, np.int32), np.empty(n, np.int32)
        kind = np.empty(n, np.int8)
        for op_kind, a, b, apart in spans:
            kind[a:b] = op_kind
            if op_kind == OP_KERNEL:   # both ids read through views of the packed column (no copies)
                hi, lo = (apart["short"], apart["full"]) if apart else halves(ids[a:b])
                self._kernel_names(hi, lo, short[a:b], full[a:b], pool)
            elif op_kind == OP_MEMCPY:
                uniq, inv = unique_sorted(ids[a:b], return_inverse=True)
                names = np.array([self.strings.intern(f"[CUDA memcpy {COPY_KIND.get(int(k), 'Unknown')}]")
                                  for k in uniq], np.int32)
                short[a:b] = full[a:b] = names[inv.reshape(-1)] if b > a else 0
            else:
                short[a:b] = full[a:b] = self.strings.intern("[CUDA memset]")
        del ids
        ops = GpuOps(device=c["device"], stream=c["stream"], start=c["start"], end=c["end"],
                     corr=c["corr"], pid=c["pid"], name=short, full_name=full,
                     kind=kind, api=np.full(n, -1, np.int32))
        merge_in_time_order(ops, [(k, a, b) for k, a, b, _ in spans])
        return ops

    def read_overheads(self):
        if not self.has("CUPTI_ACTIVITY_KIND_OVERHEAD"):
            return None
        cs = self.colset("CUPTI_ACTIVITY_KIND_OVERHEAD")
        if "overheadType" not in cs:
            return None
        return self.ints("CUPTI_ACTIVITY_KIND_OVERHEAD", {
            "start": "start", "end": "end", "gtid": "globalTid" if "globalTid" in cs else "NULL",
            "corr": "correlationId" if "correlationId" in cs else "NULL", "type": "overheadType"})

    def devices(self) -> dict[int, str]:
        out = {}
        if self.has("TARGET_INFO_GPU"):
            cs = self.colset("TARGET_INFO_GPU")
            idcol = "id" if "id" in cs else ("deviceId" if "deviceId" in cs else None)
            if idcol and "name" in cs:
                for i, name in self.con.execute(f'SELECT {idcol}, name FROM "{self.tables["TARGET_INFO_GPU"]}"'):
                    if type(i) is int and name:
                        out.setdefault(int(i), str(name))
        return out

    def thread_names(self) -> dict[int, str]:
        return self.names.thread_names(self.con, self.tables["ThreadNames"]) if self.has("ThreadNames") else {}


def read_nsys_sqlite(path: Path, source: SourceInfo, progress=None) -> Trace:
    r = _Reader(path, progress)
    try:
        meta = r.meta()
        trace = _build(r, path, source, meta)
        if r.dropped or r.skipped:
            source.extra["skipped"] = {**{f"{t} rows with NULL in a NOT NULL column or start/end": n
                                          for t, n in sorted(r.dropped.items())}, **dict(sorted(r.skipped.items()))}
        return trace
    except sqlite3.DatabaseError as e:
        raise TraceError(path, f"cannot read Nsight export ({_one_line(e)})") from None
    except ValueError as e:
        raise TraceError(path, f"unexpected values in Nsight export ({e})") from None
    finally:
        r.con.close()
        r.cleanup()


def _one_line(e: Exception) -> str:
    return " ".join(str(e).split())


def _build(r: _Reader, path: Path, source: SourceInfo, meta: dict) -> Trace:
    _describe_source(r, source, meta)
    # _model's frame held the unsorted columns: once it returns, the trace is their only holder, so
    # finalize's sorted copies replace them instead of adding to them
    trace = _model(r, source)
    match_process = bool(len(trace.ops)) and bool((trace.ops.pid != -1).all())
    finalize(trace, match_process=match_process)
    r.progress("joined", len(trace.ops))
    graph_ids.read_nsys(trace, r.replay_rows)   # node-mode graph ids, with a graph launch (definitions.md §12.2)
    graph_ids.read_graph_trace(trace, r)   # graph-level replays' spans (§12.2)
    graph_nodes.read_nsys(trace, r, r.replay_rows["node"])   # node ids: replayed op -> captured call (§12.6)
    nsys_stacks.build(trace, r)  # CUDA_CALLCHAINS or NVTX file:line (definitions.md §S1)
    trace.cpu_runs, trace.cpu_samples = nsys_cpu.read(r)  # launching thread CPU busy (definitions.md §V10)
    return trace


def _describe_source(r: _Reader, source: SourceInfo, meta: dict) -> None:
    """Format, producer, export version and schema, CPU data present, and the wall clock."""
    source.format = "nsys-sqlite"
    source.producer = "Nsight Systems"
    if meta:
        source.version = meta.get("EXPORT_PRODUCT_VERSION", "")
        source.extra["schema"] = meta.get("EXPORT_SCHEMA_VERSION", "")
        source.extra["meta_table"] = "META_DATA_EXPORT" if r.has("META_DATA_EXPORT") else "EXPORT_META_DATA"
        if "DERIVED_WINDOW_NS" in meta:
            source.extra["derived_window_ns"] = meta["DERIVED_WINDOW_NS"]
    else:
        source.version = "<= 2021.x (no meta table)"
        source.extra["meta_table"] = "none"
    for table, key in (("SCHED_EVENTS", "cpu_sched_events"), ("COMPOSITE_EVENTS", "cpu_samples")):
        if r.has(table):   # CPU scheduling / sampling data: the record says it is there but not read yet
            source.extra[key] = int(r.con.execute(f'SELECT COUNT(*) FROM "{r.tables[table]}"').fetchone()[0])
    if r.has("TARGET_INFO_SESSION_START_TIME") and "utcEpochNs" in r.colset("TARGET_INFO_SESSION_START_TIME"):
        normalized = meta.get("EXPORT_PARAM_TIME_NORMALIZE", "false").lower() in ("true", "1", "yes")
        row = r.con.execute(f'SELECT utcEpochNs FROM "{r.tables["TARGET_INFO_SESSION_START_TIME"]}"').fetchone()
        if row and type(row[0]) is int:  # a REAL (±inf) or text value: the wall clock stays unknown
            source.wall_offset_ns = 0 if normalized else row[0]


def _model(r: _Reader, source: SourceInfo) -> Trace:
    """The model before finalize. Strings are interned in a fixed order (API names, GPU op names,
    NVTX texts and domains, thread names), so string ids do not depend on the scans' timing."""
    api_part, ovh_part, ops, nvtx_part, gtid_ids = _read_tables(r)
    threads, tix = _threads(r, gtid_ids)
    ops = ops if ops is not None else GpuOps.empty()
    trace = Trace(source=source, strings=r.strings, ops=ops, api=_api_calls(api_part, tix), ranges=_ranges(nvtx_part, tix),
                  threads=threads, overheads=_overheads(ovh_part, tix), devices=_devices(r, ops))
    _note_missing(trace, r, has_api=bool(api_part), has_nvtx=bool(nvtx_part))
    return trace


def _read_tables(r: _Reader) -> tuple:
    """(API part, overheads part, GPU ops, NVTX part, thread ids), the parts None when their table
    is absent; thread ids: `_thread_ids_by_part` of the present parts' globalTids.

    The big scans run on their own connections in parallel: SQLite releases the GIL while it
    scans, so kernels, NVTX and the API table share the machine's cores. Workers only fetch
    integer columns; strings are interned here on the main thread. Once the scans are done, the
    threads' numbering (numbers only) runs on a worker while the GPU ops are named and merged."""
    def on_own_connection(fn, *args):
        con = connect_readonly(r.db, immutable=r.snapshot_dir is None)
        try:
            return fn(*args, con=con)
        finally:
            con.close()

    shares = _shares(r)
    with ThreadPoolExecutor(max_workers=2) as pool:
        # the API calls and the GPU ops offer their upper shares to whichever worker is free first:
        # the NVTX worker, once its ranges are read (nsys_scan_shares)
        elsewhere = lambda fn: pool.submit(on_own_connection, fn)   # noqa: E731
        gpu_future = pool.submit(on_own_connection, r.read_gpu_raw, elsewhere, shares.gpu)
        nvtx_future = pool.submit(on_own_connection, nsys_nvtx.read_raw, r)
        api_part = r.read_api(elsewhere, shares.api)
        ovh_part = r.read_overheads()
        gpu_raw = gpu_future.result()
        nvtx_raw = nvtx_future.result()
        del gpu_future, nvtx_future   # a future holds its result: the raw columns would outlive the read
        parts = (("api", api_part[0] if api_part else None), ("nvtx", nvtx_raw[0] if nvtx_raw else None),
                 ("ovh", ovh_part))
        ids_future = pool.submit(_thread_ids_by_part, {k: p["gtid"] for k, p in parts if p is not None})
        ops = r.gpu_ops(gpu_raw, pool)
        nvtx_part = nsys_nvtx.intern(r, nvtx_raw) if nvtx_raw is not None else None
        gtid_ids = ids_future.result()
    return api_part, ovh_part, ops, nvtx_part, gtid_ids


def _shares(r: _Reader) -> ScanShares:
    """The shares of the API and GPU-op scans offered to the NVTX worker (nsys_scan_shares); none
    where a big table's rows are unknown without a scan."""
    def table(canon: str) -> str | None:
        return r.tables[canon] if r.has(canon) else None
    w = scan_weights(r.con, api=table("CUPTI_ACTIVITY_KIND_RUNTIME"), overheads=table("CUPTI_ACTIVITY_KIND_OVERHEAD"),
                     nvtx=table("NVTX_EVENTS"), gpu=tuple(t for c, _ in r.GPU_TABLES if (t := table(c))))
    return scan_shares(w) if w is not None else ScanShares()


def _thread_ids_by_part(gtids: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Every globalTid of the parts' (`gtids`: "api", "nvtx", "ovh" -> their rows' globalTids),
    sorted and distinct, and per part its rows' int32 index into them (numbers only: any thread)."""
    uniq_gtid, part_tix = thread_ids(list(gtids.values()))
    return uniq_gtid, dict(zip(gtids, part_tix))


def _threads(r: _Reader, gtid_ids) -> tuple[Threads, dict[str, np.ndarray]]:
    """Threads: every globalTid seen on API rows, ranges and overheads, interned densely; and per
    part present ("api", "nvtx", "ovh") its rows' int32 index into them (`gtid_ids`:
    `_thread_ids_by_part`)."""
    uniq_gtid, tix = gtid_ids
    tnames = r.thread_names()
    threads = Threads(pid=(uniq_gtid >> 24) & 0xFFFFFF, tid=uniq_gtid & 0xFFFFFF, key=uniq_gtid,
                      name=np.array([r.strings.intern(tnames[g]) if g in tnames else -1
                                     for g in uniq_gtid.tolist()], np.int32))
    return threads, tix


def _api_calls(api_part, tix: dict) -> ApiCalls:
    if not api_part:
        return ApiCalls.empty()
    c, name, kind = api_part
    return ApiCalls(thread=tix["api"], pid=np.bitwise_and(c["gtid"], PID_MASK, out=c["gtid"]), start=c["start"],
                    end=c["end"], corr=c["corr"], name=name, kind=kind)


def _ranges(nvtx_part, tix: dict) -> Ranges:
    if not nvtx_part:
        return Ranges.empty()
    c, text, dom, kind = nvtx_part
    doms, dom_code = dense_groups(c["domain"])   # (thread, domain) nesting groups, any domain ids
    group = tix["nvtx"].astype(np.int64) * max(len(doms), 1) + dom_code
    return Ranges(thread=tix["nvtx"], start=c["start"], end=c["end"],
                  depth=range_depths(group, c["start"], c["end"]), text=text, domain=dom, kind=kind)


def _overheads(ovh_part, tix: dict) -> Overheads:
    if not ovh_part:
        return Overheads.empty()
    return Overheads(thread=tix["ovh"], start=ovh_part["start"], end=ovh_part["end"],
                     corr=ovh_part["corr"], type=ovh_part["type"].astype(np.int32))


def _devices(r: _Reader, ops: GpuOps) -> dict[int, str]:
    """Name per device the ops use: from TARGET_INFO_GPU, else "GPU <id>"."""
    devices = r.devices()
    used = sorted(set(unique_sorted(ops.device).tolist()))
    return {d: devices.get(d, f"GPU {d}") for d in used} if used else {}


def _note_missing(trace: Trace, r: _Reader, has_api: bool, has_nvtx: bool) -> None:
    """has_cuda_tables, and lines on what the export lacks and what that disables."""
    cuda_tables = [t for t in r.tables if t.startswith("CUPTI_ACTIVITY_KIND_")]
    trace.has_cuda_tables = bool(cuda_tables)
    if not cuda_tables:
        trace.missing.append("no CUDA tables at all (captured without --trace=cuda): no API row, no HW row, "
                             "no kernel table, no queue depth")
    else:
        if not has_api:
            trace.missing.append("no CUDA API table: launch costs and queue depth unavailable")
        if not r.has("CUPTI_ACTIVITY_KIND_KERNEL"):
            trace.missing.append("no CUDA kernel table (GPU activity not captured, e.g. under WSL2): "
                                 "no HW row, no kernel table, no queue depth")
    if not has_nvtx:
        trace.missing.append("no NVTX ranges: phase attribution and range jumps unavailable")
    if r.has("CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
        trace.missing.append("CUDA graphs traced at graph level (--cuda-graph-trace=graph): replays "
                             "have no per-kernel rows")
