"""Reader for rocprofv3's `rocpd` SQLite databases (its default output; docs/definitions.md §16).

rocprofv3 writes each process's rows into tables named `rocpd_<kind>_<uuid>` and views `rocpd_<kind>`
over them; a merged database holds several such sets. Each set is read on its own (string ids,
event ids and correlation ids are per process) from its base tables:

- `rocpd_region`: CPU-side calls (HIP runtime and compiler API, HSA, ...) with start and end; those
  whose event category is a roctx core one (`MARKER_CORE_RANGE_API`, `MARKER_CORE_API`) are roctx
  ranges, named by the event's `extdata.message` as rocprofv3's own `range_markers` view does;
- `rocpd_kernel_dispatch` and `rocpd_memory_copy`: GPU ops, on the agent's device and the HIP stream;
- `rocpd_event.stack_id`: the internal correlation id, equal on a call and on the ops it enqueued
  (`rocpd_event.correlation_id` is the external one, 0 unless the application set one).
"""
from __future__ import annotations

import re
import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np

from launchtui.errors import TraceError
from launchtui.trace import rocm_build as rb
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.model import OP_KERNEL, OP_MEMCPY, RANGE_PUSHPOP, RANGE_STARTEND, SourceInfo, StringTable, Trace
from launchtui.trace.sqlite_columns import fetch_int_columns
from launchtui.trace.sqlite_probe import consistent, schema_of

KINDS = ("event", "region", "kernel_dispatch", "memory_copy", "string", "info_agent", "info_kernel_symbol",
         "info_thread", "metadata")
_UUID = re.compile(r"_[0-9a-fA-F]{8}(?:_[0-9a-fA-F]{4}){3}_[0-9a-fA-F]{12}")
PID_BITS = 32   # process key = set index << 32 | OS pid (registry.ROCPD: pid mask 0xFFFFFFFF)


def table_sets(con: sqlite3.Connection) -> list[dict[str, str]]:
    """One {kind: table} per process set, sets in the order of their uuid suffix (the data's own
    names, not the file's order); a kind the set lacks is absent."""
    tables = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    suffixes = sorted({n[len("rocpd_event"):] for n in tables
                       if n.startswith("rocpd_event") and (n == "rocpd_event" or _UUID.fullmatch(n[len("rocpd_event"):]))})
    return [{k: f"rocpd_{k}{s}" for k in KINDS if f"rocpd_{k}{s}" in tables} for s in suffixes]


class _Set:
    """One process set's tables: events, names, agents."""

    def __init__(self, con, tables: dict[str, str], index: int, strings: StringTable, skipped: Counter,
                 dropped: Counter):
        self.con, self.t, self.index = con, tables, index
        self.skipped, self.dropped = skipped, dropped
        self.names = rb.Interner(strings, skipped)
        cols = schema_of(con).columns
        self.cols = {k: cols(v) for k, v in tables.items()}
        ev = self.ints("event", {"id": "id", "category": "ifnull(category_id, -1)", "stack": "ifnull(stack_id, -1)"})
        order = np.argsort(ev["id"], kind="stable")
        self.ev_id, self.ev_cat, self.ev_stack = ev["id"][order], ev["category"][order], ev["stack"][order]
        self.categories = self.text_of(unique(self.ev_cat), "string", "string")

    def ints(self, kind: str, exprs: dict) -> dict[str, np.ndarray]:
        return fetch_int_columns(self.con, self.t[kind], exprs, "", self.dropped)

    def col(self, kind: str, name: str, default: str = "NULL") -> str:
        return f'"{name}"' if name in self.cols.get(kind, ()) else default

    def text_of(self, ids: np.ndarray, kind: str, column: str) -> dict[int, str]:
        if kind not in self.t or column not in self.cols[kind]:
            return {}
        return rb.strings_by_id(self.con, self.t[kind], ids, text_col=column)

    def event_of(self, event_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(stack id, category id) per row's event_id; -1 where the event is not in the table."""
        if not len(self.ev_id):
            return np.full(len(event_id), -1, np.int64), np.full(len(event_id), -1, np.int64)
        pos = np.minimum(np.searchsorted(self.ev_id, event_id), len(self.ev_id) - 1)
        hit = self.ev_id[pos] == event_id
        return np.where(hit, self.ev_stack[pos], -1), np.where(hit, self.ev_cat[pos], -1)

    def key(self, pid: np.ndarray) -> np.ndarray:
        return (np.int64(self.index) << PID_BITS) | (pid & ((1 << PID_BITS) - 1))


def unique(a: np.ndarray) -> np.ndarray:
    return unique_sorted(np.asarray(a, np.int64))


def _regions(s: _Set, out: rb.Columns) -> None:
    if "region" not in s.t:
        return
    c = s.ints("region", {"start": "start", "end": "end", "pid": "pid", "tid": "tid", "name": "name_id",
                          "event": s.col("region", "event_id", "-1")})
    c = rb.drop_reversed(c, s.t["region"], s.skipped)
    stack, cat = s.event_of(c["event"])
    # roctx ranges; the other marker domains (MARKER_CONTROL_API: profiler pause/resume,
    # MARKER_NAME_API: thread names) are calls like any other
    marker = np.isin(cat, [i for i, t in s.categories.items() if "MARKER_CORE" in t.upper()])
    texts = s.text_of(c["name"], "string", "string")
    name = s.names.ids(c["name"], texts, rb.missing_name(s.t["region"], "name_id"))
    if (~marker).any():
        k = ~marker
        out.api.append({"start": c["start"][k], "end": c["end"][k], "pid": s.key(c["pid"][k]), "tid": c["tid"][k],
                        "corr": stack[k], "name": name[k]})
    if marker.any():
        k = marker
        ev, op = c["event"][k], name[k]
        msg = _messages(s, ev)   # {event id: message}, for markers that carry one
        keys = np.array(sorted(msg), np.int64)
        vals = np.array([s.names.strings.intern(msg[e]) for e in keys.tolist()], np.int32)
        pos = np.minimum(np.searchsorted(keys, ev), max(len(keys) - 1, 0))
        hit = (keys[pos] == ev) if len(keys) else np.zeros(len(ev), bool)
        text = np.where(hit, vals[pos] if len(keys) else op, op).astype(np.int32)
        # start/stop ranges (roctxRangeStart, process ranges) may cross threads; push/pop ranges nest
        ops_ = unique_sorted(op)
        start_stop = np.array([("ProcessRange" in s.names.strings[i] or "RangeStart" in s.names.strings[i])
                               for i in ops_.tolist()], bool)
        kind = np.where(start_stop[np.searchsorted(ops_, op)], RANGE_STARTEND, RANGE_PUSHPOP).astype(np.int8)
        out.ranges.append({"start": c["start"][k], "end": c["end"][k], "pid": s.key(c["pid"][k]), "tid": c["tid"][k],
                           "text": text, "kind": kind})


def _messages(s: _Set, event_ids: np.ndarray) -> dict[int, str]:
    """{event id: roctx message} from the marker events' extdata (JSON `message`)."""
    if "extdata" not in s.cols.get("event", ()):
        return {}
    out: dict[int, str] = {}
    want = unique(event_ids)
    for a in range(0, len(want), 500):
        chunk = ",".join(str(int(i)) for i in want[a:a + 500])
        try:
            rows = s.con.execute(f'SELECT id, CASE WHEN json_valid(extdata) THEN json_extract(extdata, \'$.message\') END '
                                 f'FROM "{s.t["event"]}" WHERE id IN ({chunk})').fetchall()
        except sqlite3.OperationalError:   # an SQLite without JSON functions: the call's name stays
            return {}
        out.update({i: str(m) for i, m in rows if type(i) is int and m is not None and str(m)})
    return out


def _agents(s: _Set) -> tuple[dict[int, int], dict[int, bool], dict[int, str]]:
    """Agent id -> device id (the agent's absolute index: the HSA node id, what Kineto and RPD
    show for the same GPU), -> is a GPU, and device id -> product name."""
    if "info_agent" not in s.t:
        return {}, {}, {}
    q = (f'SELECT id, {s.col("info_agent", "absolute_index")}, {s.col("info_agent", "type")}, '
         f'{s.col("info_agent", "product_name")}, {s.col("info_agent", "name")} FROM "{s.t["info_agent"]}"')
    dev, gpu, names = {}, {}, {}
    for i, absolute, typ, product, name in s.con.execute(q):
        if type(i) is not int:
            continue
        d = absolute if type(absolute) is int else i
        dev[i], gpu[i] = d, typ == "GPU"
        if product or name:
            names.setdefault(d, str(product or name))
    return dev, gpu, names


def _device(agent: np.ndarray, dev: dict[int, int]) -> np.ndarray:
    """Device id per agent id (an agent without a row keeps its own id)."""
    if not len(agent):
        return agent
    uniq, inv = unique_sorted(agent, return_inverse=True)
    return np.array([dev.get(int(a), int(a)) for a in uniq], np.int64)[inv.reshape(-1)]


def _stream(s: _Set, kind: str) -> str:
    """The HIP stream (`stream_id`); files without it: the queue."""
    return s.col(kind, "stream_id", s.col(kind, "queue_id", "0"))


def _dispatches(s: _Set, dev: dict[int, int], out: rb.Columns) -> None:
    if "kernel_dispatch" not in s.t:
        return
    table = s.t["kernel_dispatch"]
    c = s.ints("kernel_dispatch", {"start": "start", "end": "end", "pid": "pid", "agent": "agent_id",
                                   "kernel": "kernel_id", "stream": _stream(s, "kernel_dispatch"),
                                   "event": s.col("kernel_dispatch", "event_id", "-1")})
    c = rb.drop_reversed(c, table, s.skipped)
    c = rb.drop_rows(c, c["stream"] < 0, s.skipped, f"{table} rows without a stream")
    texts = s.text_of(c["kernel"], "info_kernel_symbol", "display_name") or \
        s.text_of(c["kernel"], "info_kernel_symbol", "kernel_name")
    name = s.names.ids(c["kernel"], texts, rb.missing_name(table, "kernel_id", "kernel symbol", "kernel"), "kernel")
    stack, _ = s.event_of(c["event"])
    out.ops.append({"device": _device(c["agent"], dev), "stream": c["stream"], "start": c["start"], "end": c["end"],
                    "corr": stack, "pid": s.key(c["pid"]), "name": name,
                    "kind": np.full(len(name), OP_KERNEL, np.int8)})


def _copies(s: _Set, dev: dict[int, int], gpu: dict[int, bool], out: rb.Columns) -> None:
    if "memory_copy" not in s.t:
        return
    table = s.t["memory_copy"]
    c = s.ints("memory_copy", {"start": "start", "end": "end", "pid": "pid", "name": "name_id",
                               "dst": s.col("memory_copy", "dst_agent_id", "-1"),
                               "src": s.col("memory_copy", "src_agent_id", "-1"),
                               "stream": _stream(s, "memory_copy"), "event": s.col("memory_copy", "event_id", "-1")})
    c = rb.drop_reversed(c, table, s.skipped)
    c = rb.drop_rows(c, c["stream"] < 0, s.skipped, f"{table} rows without a stream")
    # the copy's GPU: its destination when that is a GPU, else its source (a device-to-host copy)
    gpus = np.array(sorted(a for a, g in gpu.items() if g), np.int64)
    agent = np.where(np.isin(c["dst"], gpus), c["dst"], c["src"])
    c = rb.drop_rows({**c, "agent": agent}, agent < 0, s.skipped, f"{table} rows without a source or destination agent")
    name = s.names.ids(c["name"], s.text_of(c["name"], "string", "string"), rb.missing_name(table, "name_id"))
    stack, _ = s.event_of(c["event"])
    out.ops.append({"device": _device(c["agent"], dev), "stream": c["stream"], "start": c["start"], "end": c["end"],
                    "corr": stack, "pid": s.key(c["pid"]), "name": name,
                    "kind": np.full(len(name), OP_MEMCPY, np.int8)})


def _thread_names(s: _Set) -> dict[tuple[int, int], str]:
    if "info_thread" not in s.t or "name" not in s.cols["info_thread"]:
        return {}
    rows = s.con.execute(f'SELECT pid, tid, name FROM "{s.t["info_thread"]}" WHERE name IS NOT NULL')
    return {(int(s.key(np.int64(p))), t): str(n) for p, t, n in rows if type(p) is int and type(t) is int and n}


def _metadata(s: _Set) -> dict[str, str]:
    if "metadata" not in s.t:
        return {}
    try:
        return {str(k): str(v) for k, v in s.con.execute(f'SELECT tag, value FROM "{s.t["metadata"]}"') if k is not None}
    except sqlite3.Error:
        return {}


def read_rocpd(path: Path, source: SourceInfo, progress=None) -> Trace:
    progress = progress or (lambda stage, rows: None)
    try:
        with consistent(path) as (con, _):
            return _read(con, source, progress)
    except sqlite3.DatabaseError as e:
        raise TraceError(path, f"cannot read rocpd database ({' '.join(str(e).split())})") from None
    except ValueError as e:
        raise TraceError(path, f"unexpected values in rocpd database ({e})") from None


def _read(con, source: SourceInfo, progress) -> Trace:
    strings, skipped, dropped = StringTable(), Counter(), Counter()
    out, devices, tnames, meta = rb.Columns(), {}, {}, {}
    sets = table_sets(con)
    for i, tables in enumerate(sets):
        s = _Set(con, tables, i, strings, skipped, dropped)
        dev, gpu, names = _agents(s)
        for d, n in names.items():
            devices.setdefault(d, n)
        _regions(s, out)
        _dispatches(s, dev, out)
        _copies(s, dev, gpu, out)
        tnames.update(_thread_names(s))
        meta = meta or _metadata(s)
        progress("read rocpd tables", sum(len(p["start"]) for p in out.ops))
    source.format = "rocpd-sqlite"
    source.producer = "rocprofv3"
    source.version = f"rocpd schema {meta['schema_version']}" if "schema_version" in meta else "rocpd schema unknown"
    if len(sets) > 1:
        source.extra["processes"] = len(sets)
    for t, n in sorted(dropped.items()):
        skipped[f"{t} rows with NULL in a NOT NULL column or start/end"] += n
    trace = rb.build(source, strings, out, devices, skipped, pid_mask=(1 << PID_BITS) - 1, thread_names=tnames)
    progress("joined", len(trace.ops))
    return trace
