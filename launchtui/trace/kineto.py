"""Reader for PyTorch-profiler (Kineto) Chrome-trace JSON, 2021 to 2026 (docs: kineto.md).

msgspec first splits the event array into raw slices, then decodes them a chunk at a time into
typed structs holding only the fields we use (unknown keys are skipped in C), with `ts`/`dur`
kept as raw number tokens so the µs decimals convert to int ns exactly (float64 loses the ns part
of 16-digit epoch timestamps). Each chunk is reduced to columns (kineto_columns.py) and freed,
which bounds memory; this module assembles the columns into the model.
"""
from __future__ import annotations

import gzip
import re
import zlib
from collections import Counter
from pathlib import Path

import sys

import msgspec
import numpy as np

from launchtui.errors import TraceError
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.grouping import unique_rows
from launchtui.trace import graph_ids, kineto_stacks
from launchtui.trace import names as nm
from launchtui.trace.kineto_columns import SKIP_DEVICE, SKIP_NOT_COMPLETE, concat, extract
from launchtui.trace.kineto_events import (MAX_ABS_NS, SKIP_ARGS, SKIP_TIME, export_note,
                                           exported_python_frames, foreign_chrome, num)
from launchtui.trace.join import finalize
from launchtui.trace.model import (OP_KERNEL, OVERHEAD_COMMAND_BUFFER_FULL, RANGE_PUSHPOP, RANGE_STARTEND, ApiCalls,
                                   GpuOps, Overheads, Ranges, SourceInfo, StringTable, Threads, Trace)
from launchtui.trace.nesting import range_depths

MAX_DUR_NS = 7 * 24 * 3600 * 10**9  # longer durations are CUPTI overflow (HTA drops them too)

# reasons an event is skipped (counted in trace.source.extra["skipped"], shown by `info`)
SKIP_FIELD_TYPE = "event field of the wrong type (ph, cat, name, pid or tid)"
SKIP_BAD_TEXT = "event not decodable (e.g. invalid UTF-8 in a string)"
SKIP_ARTEFACT = "GPU op with ts 0 and dur 0 (a profiler artefact)"
SKIP_OVERFLOW = "GPU op with a negative duration or one over 7 days (CUPTI overflow)"
# with no event kept, any of these means the events were there but unusable: a bad trace, not an empty one
_UNUSABLE = (SKIP_FIELD_TYPE, SKIP_TIME, SKIP_ARGS, SKIP_DEVICE, SKIP_NOT_COMPLETE)

class _Event(msgspec.Struct, gc=False):
    # args stay raw: most events' args (shapes, call stacks) are never needed, and the few we
    # need are decoded afterwards in one batch per role
    ph: str | None = ""
    cat: str | None = ""
    name: str | int | float | None = ""
    pid: int | str | None = 0
    tid: int | str | None = 0
    ts: msgspec.Raw = msgspec.Raw(b"0")
    dur: msgspec.Raw = msgspec.Raw(b"0")
    args: msgspec.Raw = msgspec.Raw(b"{}")


class _DeviceProp(msgspec.Struct):
    id: int | str | None = -1
    name: str | None = ""


class _Doc(msgspec.Struct):
    # first pass: every event stays an undecoded slice of the input (one small object each); the
    # slices are decoded into _Event structs a chunk at a time. The other top-level fields stay raw
    # too, so one of an unexpected type is ignored (and counted) instead of failing the trace.
    traceEvents: list[msgspec.Raw] | None = None
    baseTimeNanoseconds: msgspec.Raw = msgspec.Raw(b"null")
    deviceProperties: msgspec.Raw = msgspec.Raw(b"null")
    schemaVersion: msgspec.Raw = msgspec.Raw(b"null")
    distributedInfo: msgspec.Raw = msgspec.Raw(b"null")
    launchtui: msgspec.Raw = msgspec.Raw(b"null")      # launchtui's chrome export: where it came from


def _field(raw: msgspec.Raw, typ, skipped: Counter, what: str):
    """A top-level field decoded as `typ`; None (counted) when it has another type."""
    try:
        return msgspec.json.decode(raw, type=typ | None)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        skipped[f"top-level {what} of an unexpected type (ignored)"] += 1
        return None


def _read_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as e:
            raise TraceError(path, f"truncated or corrupt gzip data ({e})") from None
    return data


def _head_bytes(path: Path, n: int) -> bytes:
    """The first `n` bytes of the (decompressed) file: enough to tell who wrote it, without
    reading or inflating the rest."""
    with path.open("rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    try:
        with (gzip.open(path, "rb") if gz else path.open("rb")) as f:
            return f.read(n)
    except (EOFError, OSError, zlib.error):
        return b""


# a lone UTF-16 surrogate escape (a valid pair is matched first and kept)
_SURROGATE_RE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _replace_lone_surrogates(data: bytes) -> tuple[bytes, int]:
    """Lone surrogate escapes (`"\\ud800"`, invalid in UTF-8) -> U+FFFD; valid pairs are kept."""
    n = 0

    def fix(m):
        nonlocal n
        if len(m.group()) == 12:
            return m.group()
        n += 1
        return rb"\ufffd"
    return _SURROGATE_RE.sub(fix, data), n


def _decode(path: Path, data: bytes, skipped: Counter) -> _Doc:
    try:
        try:
            return msgspec.json.decode(data, type=_Doc)
        except msgspec.DecodeError:
            if not _SURROGATE_RE.search(data):
                raise
            data, n = _replace_lone_surrogates(data)  # rare: only after a failed decode
            if not n:
                raise
            doc = msgspec.json.decode(data, type=_Doc)
            skipped["lone UTF-16 surrogate in a string (replaced by U+FFFD)"] += n
            return doc
    except msgspec.ValidationError as e:
        raise TraceError(path, f"JSON is not a Chrome/Kineto trace ({e})") from None
    except msgspec.DecodeError as e:
        raise TraceError(path, f"invalid or truncated JSON ({e})") from None
    except RecursionError:
        raise TraceError(path, f"JSON nested deeper than the decoder allows (about "
                               f"{sys.getrecursionlimit()} levels); a profiler never writes that") from None


def decode_slices(raws: list, typ, skipped: Counter | None = None, placeholders: bool = False) -> list:
    """Raw JSON slices -> one `typ` each, in one C-level call. Where some slice is not one (rare:
    a field of the wrong type, invalid UTF-8 in a string), decoded one by one: a bad slice is
    counted by reason in `skipped` and left out, or None in its place (`placeholders`)."""
    buf = b"[" + b",".join(raws) + b"]"
    try:
        return msgspec.json.decode(buf, type=list[typ])
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        pass  # only the odd slices are dropped
    del buf
    out = []
    for raw in raws:  # rare fallback: some slice has an odd field
        try:
            out.append(msgspec.json.decode(raw, type=typ))
            continue
        except (msgspec.ValidationError, RecursionError):  # ValidationError subclasses DecodeError
            reason = SKIP_FIELD_TYPE
        except msgspec.DecodeError:
            reason = SKIP_BAD_TEXT
        if skipped is not None:
            skipped[reason] += 1
        if placeholders:
            out.append(None)
    return out


CHUNK_EVENTS = 200_000  # events decoded into structs at a time: bounds peak memory
_ROLES = ("api", "ops", "ranges", "overheads", "py", "op")   # extract's and kineto_stacks.extract's keys


def read_kineto(path: Path, source: SourceInfo, progress=None) -> Trace:
    progress = progress or (lambda stage, rows: None)
    skipped: Counter = Counter()
    doc, parts = _decode_in_chunks(path, skipped, progress)
    top = _top_level(doc, skipped)
    if not any(parts) and any(r in skipped for r in _UNUSABLE):
        raise TraceError(path, "no usable events: " + _skip_summary(skipped))
    _describe_source(source, top, doc.launchtui)
    cols = {role: concat(parts, role) for role in _ROLES}
    del parts
    trace = _model(source, cols, top["deviceProperties"], skipped, progress)
    if skipped:
        source.extra["skipped"] = dict(sorted(skipped.items()))
    finalize(trace, match_process=False)
    progress("joined", len(trace.ops))
    kineto_stacks.build(trace, cols["py"], cols["op"])
    if not len(trace.api) and not len(trace.ops) and (hint := foreign_chrome(_head_bytes(path, 1 << 20))):
        source.extra["foreign"] = hint
        trace.missing[:] = [f"no GPU activity launchtui can read: {hint}" if m.startswith("no GPU activity")
                            else m for m in trace.missing]
    return trace


def raw_document(path: Path, skipped: Counter, progress=None) -> _Doc:
    """The whole file decoded once, each event left an undecodable raw slice (`_Doc`); a bare
    event array (the old Chrome trace form) is taken as the trace's events."""
    data = _read_bytes(path)
    if progress is not None:
        progress("decompressed", len(data))
    stripped = data.lstrip()
    if stripped[:1] == b"[":
        data = b'{"traceEvents":' + stripped + b"}"
    del stripped
    doc = _decode(path, data, skipped)
    if doc.traceEvents is None:
        raise TraceError(path, "JSON is not a Chrome/Kineto trace (no traceEvents array)")
    return doc


def _decode_in_chunks(path: Path, skipped: Counter, progress) -> tuple[_Doc, list[dict]]:
    """The document (its event array emptied) and each chunk's columns (`extract`), in event order."""
    doc = raw_document(path, skipped, progress)
    raw_events = doc.traceEvents
    doc.traceEvents = None
    total = len(raw_events)
    parts = []
    for i in range(0, total, CHUNK_EVENTS):  # one iteration per chunk of 200k events
        events = decode_slices(raw_events[i:i + CHUNK_EVENTS], _Event, skipped)   # odd events counted, left out
        parts.append(extract(events, skipped))
        del events
        progress("decoded events", min(i + CHUNK_EVENTS, total))
    return doc, parts


def _top_level(doc: _Doc, skipped: Counter) -> dict:
    """The top-level fields besides the events; one of an unexpected type or out of range is None
    (counted in `skipped`)."""
    top = {"baseTimeNanoseconds": _field(doc.baseTimeNanoseconds, int, skipped, "baseTimeNanoseconds"),
           "schemaVersion": _field(doc.schemaVersion, int | str, skipped, "schemaVersion"),
           "distributedInfo": _field(doc.distributedInfo, dict, skipped, "distributedInfo"),
           "deviceProperties": _field(doc.deviceProperties, list[_DeviceProp], skipped, "deviceProperties")}
    base_ns = top["baseTimeNanoseconds"]
    if base_ns is not None and not abs(base_ns) < MAX_ABS_NS:
        skipped["top-level baseTimeNanoseconds out of range (ignored)"] += 1
        top["baseTimeNanoseconds"] = None
    return top


def _describe_source(source: SourceInfo, top: dict, export_raw: msgspec.Raw) -> None:
    """Format, producer, schema version, wall clock, rank and a chrome export's origin."""
    base_ns, schema, dist = top["baseTimeNanoseconds"], top["schemaVersion"], top["distributedInfo"]
    source.format = "kineto-json"
    source.producer = "PyTorch profiler (Kineto)"
    source.version = f"schema {schema}" if schema is not None else "schema unknown"
    if base_ns is not None:
        source.wall_offset_ns = int(base_ns)
        source.extra["clock"] = "relative to baseTimeNanoseconds"
    else:
        source.wall_offset_ns = 0
        source.extra["clock"] = "Unix epoch µs"
    if dist:
        source.extra["rank"] = dist.get("rank", 0)
    if (note := export_note(export_raw)) is not None:
        source.extra["exported"] = note
    if (frames := exported_python_frames(export_raw)) is not None:
        source.extra["python_frames"] = frames      # the source ran under the Python tracer


def _model(source: SourceInfo, cols: dict, dev_props: list | None, skipped: Counter, progress) -> Trace:
    """The model from the joined columns, before finalize. Strings are interned in a fixed order
    (API names, GPU op names, range domains and texts), so string ids do not depend on anything else."""
    strings = StringTable()
    a, o, r = cols["api"], cols["ops"], cols["ranges"]
    n_api = len(a["start"]) if a else 0
    n_rng = len(r["start"]) if r else 0
    threads, upairs, tinv = _threads(a, r)
    api = _api_calls(a, tinv[:n_api], strings) if n_api else ApiCalls.empty()
    progress("API calls", n_api)
    ops = _gpu_ops(o, strings, skipped) if o else GpuOps.empty()
    progress("GPU ops", len(ops))
    ranges = _ranges(r, tinv[n_api:], strings) if n_rng else Ranges.empty()
    trace = Trace(source=source, strings=strings, ops=ops, api=api, ranges=ranges, threads=threads,
                  overheads=_overheads(cols["overheads"], upairs), devices=_devices(dev_props, ops))
    if o and (o["graph"] >= 0).any():   # graph ids only where some op has one (§12.2)
        trace.op_graph = graph_ids.narrow(o["graph"][_kept_ops(o)])
    trace.has_cuda_tables = bool(len(ops) or n_api)
    _note_missing(trace, n_api, n_rng)
    return trace


def _threads(a: dict | None, r: dict | None) -> tuple[Threads, np.ndarray, np.ndarray]:
    """Threads: the (pid, tid) pairs of API calls and ranges, interned densely. Also the pairs, and
    per API call then per range its int32 index into them."""
    pid = np.concatenate([x["pid"] for x in (a, r) if x] or [np.zeros(0, np.int64)])
    tid = np.concatenate([x["tid"] for x in (a, r) if x] or [np.zeros(0, np.int64)])
    upairs, tinv = unique_rows(np.stack([pid, tid], axis=1), return_inverse=True)
    tinv = tinv.reshape(-1).astype(np.int32)
    threads = Threads(pid=upairs[:, 0].copy(), tid=upairs[:, 1].copy(),
                      key=np.arange(len(upairs), dtype=np.int64), name=np.full(len(upairs), -1, np.int32))
    return threads, upairs, tinv


def _api_calls(a: dict, thread: np.ndarray, strings: StringTable) -> ApiCalls:
    names = strings.intern_many(a["name"])
    lut = np.zeros(len(strings), np.int8)
    for i in unique_sorted(names).tolist():  # once per distinct API name
        lut[i] = nm.api_kind(strings[i])
    return ApiCalls(thread=thread, pid=a["pid"], start=a["start"], end=a["end"], corr=a["corr"],
                    name=names, kind=lut[names])


def _kept_ops(o: dict, skipped: Counter | None = None) -> np.ndarray:
    """Which op events stay: `ts: 0, dur: 0` artefacts and CUPTI overflow durations do not
    (counted in `skipped` when given)."""
    artefact = (o["start"] == 0) & (o["dur"] == 0)
    overflow = (o["dur"] < 0) | (o["dur"] >= MAX_DUR_NS)
    if skipped is not None:
        for reason, m in ((SKIP_ARTEFACT, artefact), (SKIP_OVERFLOW, overflow)):
            if m.any():
                skipped[reason] += int(m.sum())
    return ~(artefact | overflow)


def _gpu_ops(o: dict, strings: StringTable, skipped: Counter) -> GpuOps:
    """GPU ops with kernel short names; `ts: 0, dur: 0` artefacts and CUPTI overflow durations are
    dropped and counted."""
    n = len(o["start"])
    kept = _kept_ops(o, skipped)
    full = strings.intern_many(o["name"])
    lut = np.arange(len(strings), dtype=np.int32)
    for i in unique_sorted(full[o["kind"] == OP_KERNEL]).tolist():  # once per distinct kernel name
        lut[i] = strings.intern(nm.kernel_short_name(strings[i]))
    return GpuOps(device=o["device"], stream=o["stream"], start=o["start"], end=o["end"], corr=o["corr"],
                  pid=np.full(n, -1, np.int64), name=lut[full], full_name=full, kind=o["kind"],
                  api=np.full(n, -1, np.int32)).take(np.nonzero(kept)[0])


def _devices(dev_props: list | None, ops: GpuOps) -> dict[int, str]:
    """Name per device the ops use: from deviceProperties, else "GPU <id>"."""
    devices = {}
    for d in dev_props or []:
        did = num(d.id) if d.id is not None else -1
        if did >= 0:
            devices[did] = str(d.name or "")
    used = sorted(set(unique_sorted(ops.device).tolist()))
    return {d: devices.get(d, f"GPU {d}") for d in used}


def _note_missing(trace: Trace, n_api: int, n_rng: int) -> None:
    """Lines on what the trace lacks and what that disables."""
    if not len(trace.ops) and not n_api:
        trace.missing.append("no GPU activity (CPU-only trace): no API row, no HW row, no kernel table, "
                             "no queue depth")
    elif not len(trace.ops):
        trace.missing.append("no GPU ops: no HW row, no kernel table, no queue depth")
    elif not n_api:
        trace.missing.append("no CUDA runtime events: launch costs and queue depth unavailable")
    if not n_rng:
        trace.missing.append("no user annotations (record_function ranges): phase attribution unavailable")


def _ranges(r: dict, r_thread: np.ndarray, strings: StringTable) -> Ranges:
    """Annotations as ranges, nested per (thread, NVTX domain) as Nsight nests them."""
    n = len(r["start"])
    has_dom = any(d is not None for d in r["domain"])
    dom = (np.array([strings.intern(d) if d is not None else -1 for d in r["domain"]], np.int32) if has_dom
           else np.full(n, -1, np.int32))
    group = r_thread.astype(np.int64)
    if has_dom:
        group = group * (int(dom.max()) + 2) + dom + 1
    return Ranges(thread=r_thread, start=r["start"], end=r["end"], depth=range_depths(group, r["start"], r["end"]),
                  text=strings.intern_many(r["name"]), domain=dom,
                  kind=np.where(r["start_end"], RANGE_STARTEND, RANGE_PUSHPOP).astype(np.int8))


def _overheads(ovh: dict | None, upairs: np.ndarray) -> Overheads:
    """Command-buffer-full rows on the thread (pid, tid) of the API calls and ranges (-1 for another)."""
    if not ovh:
        return Overheads.empty()
    index = {(int(p), int(t)): i for i, (p, t) in enumerate(upairs.tolist())}
    pairs = list(zip(ovh["pid"].tolist(), ovh["tid"].tolist()))
    thread = np.array([index.get(x, -1) for x in pairs], np.int32)   # overhead rows are few
    n = len(thread)
    return Overheads(thread=thread, start=ovh["start"], end=ovh["end"], corr=ovh["corr"],
                     type=np.full(n, OVERHEAD_COMMAND_BUFFER_FULL, np.int32))


def _skip_summary(skipped: Counter) -> str:
    return "; ".join(f"{n:,} {reason}" for reason, n in sorted(skipped.items()))
