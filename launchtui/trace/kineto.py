"""Reader for PyTorch-profiler (Kineto) Chrome-trace JSON, 2021 to 2026 (docs: kineto.md).

msgspec first splits the event array into raw slices, then decodes them a chunk at a time into
typed structs holding only the fields we use (unknown keys are skipped in C), with `ts`/`dur`
kept as raw number tokens so the µs decimals convert to int ns exactly (float64 loses the ns part
of 16-digit epoch timestamps). Each chunk is reduced to columns and freed, which bounds memory.
Column extraction uses C-level map/attrgetter and numpy, never a Python loop per event.
"""
from __future__ import annotations

import gzip
import re
import zlib
from collections import Counter
from itertools import chain, compress
from operator import attrgetter
from pathlib import Path
from typing import Any

import sys

import msgspec
import numpy as np

from launchtui.errors import TraceError
from launchtui.trace.arrays import unique_rows, unique_sorted
from launchtui.trace import kineto_stacks
from launchtui.trace import names as nm
from launchtui.trace.kineto_events import (MAX_ABS_NS, SKIP_ARGS, SKIP_TIME, decode_args, export_note, ids,
                                          keep, num, timed, timed_with_args)
from launchtui.trace.join import finalize
from launchtui.trace.model import (OP_KERNEL, OP_MEMCPY, OP_MEMSET, OVERHEAD_COMMAND_BUFFER_FULL, RANGE_PUSHPOP,
                                   RANGE_STARTEND, ApiCalls, GpuOps, Overheads, Ranges, SourceInfo, StringTable,
                                   Threads, Trace)
from launchtui.trace.nesting import range_depths

MAX_DUR_NS = 7 * 24 * 3600 * 10**9  # longer durations are CUPTI overflow (HTA drops them too)
MAX_DEVICE = 2**31 - 1  # device ids are int32 in the model

# reasons an event is skipped (counted in trace.source.extra["skipped"], shown by `info`)
SKIP_FIELD_TYPE = "event field of the wrong type (ph, cat, name, pid or tid)"
SKIP_DEVICE = "device id out of range"
SKIP_BAD_TEXT = "event not decodable (e.g. invalid UTF-8 in a string)"
SKIP_NOT_COMPLETE = "CUDA API, GPU op or annotation event that is not a complete event (ph other than X)"
SKIP_ARTEFACT = "GPU op with ts 0 and dur 0 (a profiler artefact)"
SKIP_OVERFLOW = "GPU op with a negative duration or one over 7 days (CUPTI overflow)"


class _OpArgs(msgspec.Struct, gc=False):
    correlation: int = -1
    device: int = -1
    stream: int = -1


class _ApiArgs(msgspec.Struct, gc=False):
    correlation: int = -1


# Lenient variants, used only for a batch whose args carry unexpected types.
class _LooseOpArgs(msgspec.Struct):
    correlation: int | float | str | None = -1
    device: int | float | str | None = -1
    stream: int | float | str | None = -1


class _LooseApiArgs(msgspec.Struct):
    correlation: int | float | str | None = -1


class _RangeArgs(msgspec.Struct):
    """What launchtui's chrome export adds to an annotation (definitions.md §13b): its NVTX domain and,
    for an NVTX start/end range, `nvtx: "start/end"`. Any other type reads as absent."""
    domain: Any = None
    nvtx: Any = None


_RANGE_ARG_KEYS = (b'"domain"', b'"nvtx"')
COMMAND_BUFFER_FULL = "Command Buffer Full"   # Kineto's name for CUPTI's overhead kind (§6)


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


# Roles by category. Legacy 2021 names are capitalised; other spellings are matched lower-cased.
ROLE_NONE, ROLE_API, ROLE_KERNEL, ROLE_MEMCPY, ROLE_MEMSET, ROLE_RANGE, ROLE_LEGACY_OP, ROLE_OVERHEAD = range(8)
_ROLE_BY_CAT = {"cuda_runtime": ROLE_API, "runtime": ROLE_API, "cuda_driver": ROLE_API,
                "kernel": ROLE_KERNEL, "gpu_memcpy": ROLE_MEMCPY, "memcpy": ROLE_MEMCPY,
                "gpu_memset": ROLE_MEMSET, "memset": ROLE_MEMSET, "user_annotation": ROLE_RANGE,
                "operator": ROLE_LEGACY_OP, "overhead": ROLE_OVERHEAD}
_OP_KIND = {ROLE_KERNEL: OP_KERNEL, ROLE_MEMCPY: OP_MEMCPY, ROLE_MEMSET: OP_MEMSET}
# 2021 traces record record_function ranges as plain operators: those are the names that are not
# namespaced ops (aten::add), autograd nodes (AddmmBackward0), in-place ops (detach_) or Triton
# launcher calls
_LEGACY_NOT_RANGE_RE = re.compile(r"::|Backward\d*$|_$|^triton_")


def _read_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as e:
            raise TraceError(path, f"truncated or corrupt gzip data ({e})") from None
    return data


def _as_int_array(values) -> tuple[np.ndarray, np.ndarray]:
    """Id values of `args` -> (int64, valid). Valid: ints, integral floats (`7.0`) and integer strings
    (`"7"`) within ±2**62, and null (absent: -1). Anything else (`2.5`, `"abc"`, out of range) gives -1
    and valid False: a truncated or guessed id would join the wrong rows."""
    a = np.asarray(values) if len(values) else np.zeros(0, np.int64)
    if a.dtype.kind == "i":
        return a.astype(np.int64, copy=False), np.ones(len(a), bool)   # the typed decode's plain ints
    out, ok = np.full(len(values), -1, np.int64), np.ones(len(values), bool)
    for i, v in enumerate(values):  # rare fallback for malformed args only
        x = _int_value(v)
        if x is not None and abs(x) <= MAX_ABS_NS:
            out[i] = x
        else:
            ok[i] = False
    return out, ok


def _int_value(v) -> int | None:
    """An id from one args value (None for one that is not an integer); null reads as -1 (absent)."""
    if v is None:
        return -1
    if isinstance(v, str):
        v = v.strip()
        try:
            return int(v)
        except ValueError:
            try:
                v = float(v)
            except ValueError:
                return None
    if isinstance(v, float):
        return int(v) if v.is_integer() else None   # NaN and inf are not integers
    return v if isinstance(v, int) and not isinstance(v, bool) else None


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


def _decode_events(raws: list, skipped: Counter) -> list:
    """Raw event slices -> _Event structs in one C-level call; an event with a field of the wrong
    type is skipped and counted (decoded one by one only in that rare case)."""
    buf = b"[" + b",".join(raws) + b"]"
    try:
        return msgspec.json.decode(buf, type=list[_Event])
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        pass  # e.g. invalid UTF-8 inside one event's string: only that event is skipped
    del buf
    out = []
    for raw in raws:  # rare fallback: some event has an odd field
        try:
            out.append(msgspec.json.decode(raw, type=_Event))
        except (msgspec.ValidationError, RecursionError):  # ValidationError subclasses DecodeError
            skipped[SKIP_FIELD_TYPE] += 1
        except msgspec.DecodeError:
            skipped[SKIP_BAD_TEXT] += 1
    return out


CHUNK_EVENTS = 200_000  # events decoded into structs at a time: bounds peak memory


def _pick(events: list, mask: np.ndarray, skipped: Counter) -> list:
    sub = list(compress(events, mask.tolist()))
    if sub and set(map(attrgetter("ph"), sub)) != {"X"}:
        n = len(sub)
        sub = [e for e in sub if e.ph == "X"]  # rare: non-complete events in a data category
        skipped[SKIP_NOT_COMPLETE] += n - len(sub)
    return sub


def _names(evs: list) -> list[str]:
    return list(map(str, map(attrgetter("name"), evs)))


def _extract(events: list, skipped: Counter) -> dict:
    """The columns launchtui needs from one chunk of decoded events, per role."""
    cats = list(map(attrgetter("cat"), events))
    role_of = {c: _ROLE_BY_CAT.get(str(c).lower(), ROLE_NONE) for c in set(cats)}
    roles = np.fromiter(map(role_of.__getitem__, cats), np.int8, len(cats))
    del cats
    out = {}
    api_ev = _pick(events, roles == ROLE_API, skipped)
    if api_ev:
        api_ev, start, end, _, args = timed_with_args(api_ev, _ApiArgs, _LooseApiArgs, skipped)
    if api_ev:
        corr, ok = _as_int_array(list(map(attrgetter("correlation"), args)))
        api_ev, c = keep(api_ev, {"start": start, "end": end, "corr": corr}, ok, skipped, SKIP_ARGS)
    if api_ev:
        out["api"] = {**c, "name": _names(api_ev), "pid": ids(list(map(attrgetter("pid"), api_ev))),
                      "tid": ids(list(map(attrgetter("tid"), api_ev)))}
    op_ev = _pick(events, (roles == ROLE_KERNEL) | (roles == ROLE_MEMCPY) | (roles == ROLE_MEMSET), skipped)
    if op_ev:
        op_ev, start, end, dur, args = timed_with_args(op_ev, _OpArgs, _LooseOpArgs, skipped)
    if op_ev:
        role = np.fromiter(map(role_of.__getitem__, map(attrgetter("cat"), op_ev)), np.int8, len(op_ev))
        kind = np.zeros(len(op_ev), np.int8)
        for r, k in _OP_KIND.items():
            kind[role == r] = k
        dev, ok = _as_int_array(list(map(attrgetter("device"), args)))
        if (dev < 0).any():  # GPU events' pid is the device index
            dev = np.where(dev >= 0, dev, ids(list(map(attrgetter("pid"), op_ev))))
        stream, ok_stream = _as_int_array(list(map(attrgetter("stream"), args)))
        if (stream < 0).any():  # tid is the stream (legacy: "stream 7")
            stream = np.where(stream >= 0, stream, ids(list(map(attrgetter("tid"), op_ev))))
        corr, ok_corr = _as_int_array(list(map(attrgetter("correlation"), args)))
        cols = {"start": start, "end": end, "dur": dur, "kind": kind, "device": dev, "stream": stream,
                "corr": corr, "name": _names(op_ev)}
        op_ev, cols = keep(op_ev, cols, ok & ok_stream & ok_corr, skipped, SKIP_ARGS)
        op_ev, cols = keep(op_ev, cols, cols["device"] <= MAX_DEVICE, skipped, SKIP_DEVICE)
        if op_ev:
            out["ops"] = cols
    rng_ev = _pick(events, roles == ROLE_RANGE, skipped)
    if (roles == ROLE_LEGACY_OP).any():  # 2021 traces record record_function ranges as operators
        rng_ev += [e for e in _pick(events, roles == ROLE_LEGACY_OP, skipped)
                   if not _LEGACY_NOT_RANGE_RE.search(str(e.name))]
    if rng_ev:
        rng_ev, start, end, _ = timed(rng_ev, skipped)
    if rng_ev:
        out["ranges"] = {"start": start, "end": end, "name": _names(rng_ev),
                         "pid": ids(list(map(attrgetter("pid"), rng_ev))),
                         "tid": ids(list(map(attrgetter("tid"), rng_ev))), **_range_args(rng_ev)}
    if (roles == ROLE_OVERHEAD).any():
        ov = _command_buffer_full(_pick(events, roles == ROLE_OVERHEAD, skipped), skipped)
        if ov:
            out["overheads"] = ov
    out.update(kineto_stacks.extract(events, skipped))  # python frames, call stacks, backward links
    return out


def _range_args(evs: list) -> dict:
    """Per range: its NVTX domain (None: the default one) and whether it is a start/end range, from
    the args launchtui's chrome export writes; one C-level scan when no range carries them."""
    n = len(evs)
    buf = b"".join(map(bytes, map(attrgetter("args"), evs)))
    if not any(buf.find(k) >= 0 for k in _RANGE_ARG_KEYS):
        return {"domain": [None] * n, "start_end": np.zeros(n, bool)}
    args, _ = decode_args(list(map(attrgetter("args"), evs)), _RangeArgs, _RangeArgs)
    dom = [a.domain if isinstance(a.domain, str) else None for a in args]
    return {"domain": dom, "start_end": np.fromiter((a.nvtx == "start/end" for a in args), bool, n)}


def _command_buffer_full(evs: list, skipped: Counter) -> dict | None:
    """Kineto `overhead` events named Command Buffer Full (CUPTI's overhead kind, which launchtui's
    chrome export writes for Nsight's rows): launch calls that waited for queue space (§6)."""
    evs = [e for e in evs if e.name == COMMAND_BUFFER_FULL]
    if evs:
        evs, start, end, _, args = timed_with_args(evs, _ApiArgs, _LooseApiArgs, skipped)
    if not evs:
        return None
    corr, ok = _as_int_array(list(map(attrgetter("correlation"), args)))
    evs, c = keep(evs, {"start": start, "end": end, "corr": corr}, ok, skipped, SKIP_ARGS)
    if not evs:
        return None
    return {**c, "pid": ids(list(map(attrgetter("pid"), evs))), "tid": ids(list(map(attrgetter("tid"), evs)))}


def _concat(parts: list[dict], role: str) -> dict | None:
    chunks = [p[role] for p in parts if role in p]
    if not chunks:
        return None
    return {k: (list(chain.from_iterable(c[k] for c in chunks)) if isinstance(chunks[0][k], list)
                else np.concatenate([c[k] for c in chunks])) for k in chunks[0]}


def read_kineto(path: Path, source: SourceInfo, progress=None) -> Trace:
    progress = progress or (lambda stage, rows: None)
    data = _read_bytes(path)
    progress("decompressed", len(data))
    stripped = data.lstrip()
    if stripped[:1] == b"[":  # bare event array (old Chrome trace form)
        data = b'{"traceEvents":' + stripped + b"}"
    del stripped
    skipped: Counter = Counter()
    doc = _decode(path, data, skipped)
    if doc.traceEvents is None:
        raise TraceError(path, "JSON is not a Chrome/Kineto trace (no traceEvents array)")
    raw_events = doc.traceEvents
    doc.traceEvents = None
    total = len(raw_events)

    parts = []
    for i in range(0, total, CHUNK_EVENTS):  # one iteration per chunk of 200k events
        events = _decode_events(raw_events[i:i + CHUNK_EVENTS], skipped)
        parts.append(_extract(events, skipped))
        del events
        progress("decoded events", min(i + CHUNK_EVENTS, total))
    del raw_events, data
    base_ns = _field(doc.baseTimeNanoseconds, int, skipped, "baseTimeNanoseconds")
    schema = _field(doc.schemaVersion, int | str, skipped, "schemaVersion")
    dist = _field(doc.distributedInfo, dict, skipped, "distributedInfo")
    dev_props = _field(doc.deviceProperties, list[_DeviceProp], skipped, "deviceProperties")
    if base_ns is not None and not abs(base_ns) < MAX_ABS_NS:
        skipped["top-level baseTimeNanoseconds out of range (ignored)"] += 1
        base_ns = None
    if not any(parts) and any(r in skipped for r in (SKIP_FIELD_TYPE, SKIP_TIME, SKIP_ARGS, SKIP_DEVICE,
                                                    SKIP_NOT_COMPLETE)):
        raise TraceError(path, "no usable events: " + _skip_summary(skipped))

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
    if (note := export_note(doc.launchtui)) is not None:
        source.extra["exported"] = note

    strings = StringTable()
    a, o, r = _concat(parts, "api"), _concat(parts, "ops"), _concat(parts, "ranges")
    ovh = _concat(parts, "overheads")
    stack_py, stack_op = _concat(parts, "py"), _concat(parts, "op")
    del parts

    # Threads: (pid, tid) of API calls and ranges, interned densely.
    n_api = len(a["start"]) if a else 0
    n_rng = len(r["start"]) if r else 0
    pid = np.concatenate([x["pid"] for x in (a, r) if x] or [np.zeros(0, np.int64)])
    tid = np.concatenate([x["tid"] for x in (a, r) if x] or [np.zeros(0, np.int64)])
    upairs, tinv = unique_rows(np.stack([pid, tid], axis=1), return_inverse=True)
    tinv = tinv.reshape(-1).astype(np.int32)
    threads = Threads(pid=upairs[:, 0].copy(), tid=upairs[:, 1].copy(),
                      key=np.arange(len(upairs), dtype=np.int64), name=np.full(len(upairs), -1, np.int32))

    if n_api:
        names = strings.intern_many(a["name"])
        lut = np.zeros(len(strings), np.int8)
        for i in unique_sorted(names).tolist():  # once per distinct API name
            lut[i] = nm.api_kind(strings[i])
        api = ApiCalls(thread=tinv[:n_api], pid=a["pid"], start=a["start"], end=a["end"], corr=a["corr"],
                       name=names, kind=lut[names])
    else:
        api = ApiCalls.empty()
    progress("API calls", n_api)

    if o:
        n = len(o["start"])
        # drop `ts: 0, dur: 0` artefacts and CUPTI overflow durations, counted
        artefact = (o["start"] == 0) & (o["dur"] == 0)
        overflow = (o["dur"] < 0) | (o["dur"] >= MAX_DUR_NS)
        for reason, m in ((SKIP_ARTEFACT, artefact), (SKIP_OVERFLOW, overflow)):
            if m.any():
                skipped[reason] += int(m.sum())
        keep = ~(artefact | overflow)
        full = strings.intern_many(o["name"])
        lut = np.arange(len(strings), dtype=np.int32)
        for i in unique_sorted(full[o["kind"] == OP_KERNEL]).tolist():  # once per distinct kernel name
            lut[i] = strings.intern(nm.kernel_short_name(strings[i]))
        ops = GpuOps(device=o["device"], stream=o["stream"], start=o["start"], end=o["end"], corr=o["corr"],
                     pid=np.full(n, -1, np.int64), name=lut[full], full_name=full, kind=o["kind"],
                     api=np.full(n, -1, np.int32)).take(np.nonzero(keep)[0])
    else:
        ops = GpuOps.empty()
    progress("GPU ops", len(ops))

    ranges = _ranges(r, tinv[n_api:], strings) if n_rng else Ranges.empty()

    devices = {}
    for d in dev_props or []:
        did = num(d.id) if d.id is not None else -1
        if did >= 0:
            devices[did] = str(d.name or "")
    used = sorted(set(unique_sorted(ops.device).tolist()))
    devices = {d: devices.get(d, f"GPU {d}") for d in used}

    trace = Trace(source=source, strings=strings, ops=ops, api=api, ranges=ranges, threads=threads,
                  overheads=_overheads(ovh, upairs), devices=devices)
    trace.has_cuda_tables = bool(len(ops) or n_api)
    if not len(ops) and not n_api:
        trace.missing.append("no GPU activity (CPU-only trace): no API row, no HW row, no kernel table, "
                             "no queue depth")
    elif not len(ops):
        trace.missing.append("no GPU ops: no HW row, no kernel table, no queue depth")
    elif not n_api:
        trace.missing.append("no CUDA runtime events: launch costs and queue depth unavailable")
    if not n_rng:
        trace.missing.append("no user annotations (record_function ranges): phase attribution unavailable")
    if skipped:
        source.extra["skipped"] = dict(sorted(skipped.items()))
    finalize(trace, match_process=False)
    progress("joined", len(ops))
    kineto_stacks.build(trace, stack_py, stack_op)
    return trace


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
