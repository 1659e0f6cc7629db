"""The model from the columns an AMD profiler database gives (rocprofv3 rocpd, RPD, rocprof v1).

The three readers differ in where rows and names live (docs/definitions.md §16); once they hold
plain columns (times in ns, process keys, OS thread ids, correlation keys, names as text or as ids
into the file's string table) the model is built here the same way for all of them: names
interned once per distinct value, API kinds and kernel short names derived per distinct name, a
thread per (process, OS thread), range depths per thread, then `finalize` sorts and joins.
"""
from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from launchtui.trace import names as nm
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.grouping import unique_rows
from launchtui.trace.join import finalize
from launchtui.trace.model import (OP_KERNEL, RANGE_PUSHPOP, ApiCalls, GpuOps, Overheads, Ranges, SourceInfo,
                                   StringTable, Threads, Trace)
from launchtui.trace.nesting import range_depths

I32 = np.iinfo(np.int32)
_IN_CHUNK = 500   # ids per `IN (...)` list: under SQLite's 999-parameter limit of old builds


def missing_name(table: str, column: str, row: str = "string", shown: str = "string") -> str:
    """The skipped-count reason for rows naming an id the file's `row` table lacks (§H); the name
    shows as `<shown ID>`."""
    return f"{table} rows whose {column} has no {row} row (shown as <{shown} ID>)"


def strings_by_id(con: sqlite3.Connection, table: str, ids: np.ndarray, id_col: str = "id",
                  text_col: str = "string") -> dict[int, str]:
    """{id: text} for the distinct `ids` found in `table` (absent ids are simply not in the dict;
    a NULL text is absent too). Reads only the ids asked for."""
    want = unique_sorted(np.asarray(ids, np.int64))
    out: dict[int, str] = {}
    for a in range(0, len(want), _IN_CHUNK):
        chunk = ",".join(str(int(i)) for i in want[a:a + _IN_CHUNK])
        for i, text in con.execute(f'SELECT "{id_col}", "{text_col}" FROM "{table}" WHERE "{id_col}" IN ({chunk})'):
            if type(i) is int and text is not None and (i not in out or str(text) < out[i]):
                out[i] = str(text)   # a repeated id: the smallest text, a rule on the data
    return out


class Interner:
    """File ids -> model string ids through `strings_by_id`; an id without a row is shown as
    `<what ID>` and its rows counted by `reason`."""

    def __init__(self, strings: StringTable, skipped: Counter):
        self.strings, self.skipped = strings, skipped

    def ids(self, file_ids: np.ndarray, texts: dict[int, str], reason: str, what: str = "string") -> np.ndarray:
        file_ids = np.asarray(file_ids, np.int64)
        if not len(file_ids):
            return np.zeros(0, np.int32)
        uniq, inv = unique_sorted(file_ids, return_inverse=True)
        lut = np.empty(len(uniq), np.int32)
        for k, i in enumerate(uniq.tolist()):   # once per distinct id
            text = texts.get(i)
            lut[k] = self.strings.intern(text if text is not None else f"<{what} {i}>")
        absent = np.array([i not in texts for i in uniq.tolist()], bool)
        if absent.any():
            self.skipped[reason] += int(absent[inv].sum())
        return lut[inv.reshape(-1)]

    def texts(self, values: list[str]) -> np.ndarray:
        return self.strings.intern_many(values)


def drop_rows(cols: dict[str, np.ndarray], bad: np.ndarray, skipped: Counter, reason: str) -> dict[str, np.ndarray]:
    """The columns without the rows marked `bad`, counted under `reason`."""
    if not bad.any():
        return cols
    skipped[reason] += int(bad.sum())
    keep = ~bad
    return {k: v[keep] for k, v in cols.items()}


def drop_reversed(cols: dict[str, np.ndarray], table: str, skipped: Counter) -> dict[str, np.ndarray]:
    return drop_rows(cols, cols["end"] < cols["start"], skipped, f"{table} rows whose end is before their start")


@dataclass
class Columns:
    """What a reader hands over: one list entry per source table, concatenated here."""
    api: list[dict] = field(default_factory=list)      # start, end, pid, tid, corr, name (model string id)
    ops: list[dict] = field(default_factory=list)      # device, stream, start, end, corr, pid, name, kind
    ranges: list[dict] = field(default_factory=list)   # start, end, pid, tid, text, kind


def _cat(parts: list[dict], keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    parts = [p for p in parts if len(p["start"])]
    return {k: (np.concatenate([np.asarray(p[k]) for p in parts]) if parts else np.zeros(0, np.int64)) for k in keys}


def _threads(strings: StringTable, pid_tid: np.ndarray, mask: int, names: dict[tuple[int, int], str]):
    """Threads of the distinct (process key, OS tid) pairs, in that order, and each row's index."""
    if not len(pid_tid):
        return Threads.empty(), np.zeros(0, np.int32)
    uniq, inv = unique_rows(pid_tid, return_inverse=True)
    pids = uniq[:, 0] if mask == -1 else np.where(uniq[:, 0] >= 0, uniq[:, 0] & mask, -1)
    tnames = np.array([strings.intern(names[(int(p), int(t))]) if (int(p), int(t)) in names else -1
                       for p, t in uniq.tolist()], np.int32)
    th = Threads(pid=pids.astype(np.int64), tid=uniq[:, 1].astype(np.int64),
                 key=np.arange(len(uniq), dtype=np.int64), name=tnames)
    return th, inv.reshape(-1).astype(np.int32)


def build(source: SourceInfo, strings: StringTable, cols: Columns, devices: dict[int, str], skipped: Counter,
          pid_mask: int = -1, thread_names: dict | None = None, ranges_note: str = "no roctx ranges") -> Trace:
    """The finalized model of the readers' columns (ops and calls joined by (process, correlation);
    ops without a known process, -1, by correlation alone)."""
    a = _cat(cols.api, ("start", "end", "pid", "tid", "corr", "name"))
    o = _cat(cols.ops, ("device", "stream", "start", "end", "corr", "pid", "name", "kind"))
    r = _cat(cols.ranges, ("start", "end", "pid", "tid", "text", "kind"))
    o = drop_rows(o, (o["device"] < I32.min) | (o["device"] > I32.max), skipped, "GPU ops whose device id does not fit 32 bits")
    n_api, n_rng = len(a["start"]), len(r["start"])
    pid_tid = np.concatenate([np.stack([a["pid"], a["tid"]], 1).reshape(-1, 2),
                              np.stack([r["pid"], r["tid"]], 1).reshape(-1, 2)]).astype(np.int64)
    threads, tix = _threads(strings, pid_tid, pid_mask, thread_names or {})
    if n_api:
        name = a["name"].astype(np.int32)
        kind_of = np.zeros(len(strings), np.int8)
        for i in unique_sorted(name).tolist():   # once per distinct API name
            kind_of[i] = nm.api_kind(strings[i])
        api = ApiCalls(thread=tix[:n_api], pid=a["pid"].astype(np.int64), start=a["start"], end=a["end"],
                       corr=a["corr"].astype(np.int64), name=name, kind=kind_of[name])
    else:
        api = ApiCalls.empty()
    n_ops = len(o["start"])
    if n_ops:
        full = o["name"].astype(np.int32)
        short = np.arange(len(strings), dtype=np.int32)
        for i in unique_sorted(full[o["kind"] == OP_KERNEL]).tolist():   # once per distinct kernel name
            short[i] = strings.intern(nm.kernel_short_name(strings[i]))
        ops = GpuOps(device=o["device"].astype(np.int32), stream=o["stream"].astype(np.int64), start=o["start"],
                     end=o["end"], corr=o["corr"].astype(np.int64), pid=o["pid"].astype(np.int64), name=short[full],
                     full_name=full, kind=o["kind"].astype(np.int8), api=np.full(n_ops, -1, np.int32))
    else:
        ops = GpuOps.empty()
    if n_rng:
        rt = tix[n_api:]
        ranges = Ranges(thread=rt, start=r["start"], end=r["end"],
                        depth=range_depths(rt.astype(np.int64), r["start"], r["end"]),
                        text=r["text"].astype(np.int32), domain=np.full(n_rng, -1, np.int32),
                        kind=r["kind"].astype(np.int8))
    else:
        ranges = Ranges.empty()
    used = sorted(set(unique_sorted(ops.device).tolist()))
    trace = Trace(source=source, strings=strings, ops=ops, api=api, ranges=ranges, threads=threads,
                  overheads=Overheads.empty(), devices={d: devices.get(d) or f"GPU {d}" for d in used})
    trace.has_cuda_tables = bool(n_ops or n_api)
    trace.missing.extend(_missing(n_ops, n_api, n_rng, ranges_note))
    if skipped:
        source.extra["skipped"] = dict(sorted(skipped.items()))
    finalize(trace, match_process=bool(n_ops) and bool((ops.pid != -1).all()))
    return trace


def _missing(n_ops: int, n_api: int, n_rng: int, ranges_note: str) -> list[str]:
    out = []
    if not n_ops and not n_api:
        out.append("no GPU activity and no HIP API calls: no API row, no HW row, no kernel table, no queue depth")
    elif not n_ops:
        out.append("no GPU ops (kernel dispatches, copies or fills): no HW row, no kernel table, no queue depth")
    elif not n_api:
        out.append("no HIP API calls (captured without HIP API tracing): launch costs and queue depth unavailable")
    if not n_rng:
        out.append(f"{ranges_note}: phase attribution and range jumps unavailable")
    return out


def pushpop(n: int) -> np.ndarray:
    return np.full(n, RANGE_PUSHPOP, np.int8)
