"""Reader for PyTorch-profiler (Kineto) Chrome-trace JSON, 2021 to 2026 (docs: kineto.md).

msgspec decodes only the fields we use into typed structs (unknown keys are skipped in C), with
`ts`/`dur` kept as raw number tokens so the µs decimals convert to int ns exactly (float64 loses
the ns part of 16-digit epoch timestamps). Column extraction uses C-level map/attrgetter and
numpy, never a Python loop per event.
"""
from __future__ import annotations

import gzip
import re
import zlib
from operator import attrgetter
from pathlib import Path

import msgspec
import numpy as np

from launchtui.errors import TraceError
from launchtui.trace import names as nm
from launchtui.trace.join import finalize
from launchtui.trace.model import (OP_KERNEL, OP_MEMCPY, OP_MEMSET, RANGE_PUSHPOP, ApiCalls, GpuOps,
                                   Overheads, Ranges, SourceInfo, StringTable, Threads, Trace)
from launchtui.trace.nesting import range_depths

MAX_DUR_NS = 7 * 24 * 3600 * 10**9  # longer durations are CUPTI overflow (HTA drops them too)


class _Args(msgspec.Struct):
    correlation: int = -1
    device: int = -1
    stream: int = -1
    cbid: int = -1


class _Event(msgspec.Struct):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: msgspec.Raw = msgspec.Raw(b"0")
    dur: msgspec.Raw = msgspec.Raw(b"0")
    args: _Args = msgspec.field(default_factory=_Args)


class _DeviceProp(msgspec.Struct):
    id: int = -1
    name: str = ""


class _Doc(msgspec.Struct):
    traceEvents: list[_Event] | None = None
    baseTimeNanoseconds: int | None = None
    deviceProperties: list[_DeviceProp] | None = None
    schemaVersion: int | None = None
    distributedInfo: dict | None = None


# Lenient variants for traces whose args carry unexpected types (decoded only on failure).
class _LooseArgs(msgspec.Struct):
    correlation: int | float | str | None = -1
    device: int | float | str | None = -1
    stream: int | float | str | None = -1
    cbid: int | float | str | None = -1


class _LooseEvent(_Event):
    args: _LooseArgs = msgspec.field(default_factory=_LooseArgs)
    name: str | int | float | None = ""
    cat: str | None = ""
    ph: str | None = ""


class _LooseDoc(_Doc):
    traceEvents: list[_LooseEvent] | None = None
    deviceProperties: list | None = None


# category (lower-case) -> role; legacy 2021 names are capitalised and are lowered first
_API_CATS = {"cuda_runtime", "runtime", "cuda_driver"}
_OP_CATS = {"kernel": OP_KERNEL, "gpu_memcpy": OP_MEMCPY, "memcpy": OP_MEMCPY,
            "gpu_memset": OP_MEMSET, "memset": OP_MEMSET}
_RANGE_CATS = {"user_annotation"}
# 2021 traces record record_function ranges as plain operators
_LEGACY_RANGE_RE = re.compile(r"^(ProfilerStep#|Optimizer\.|## )")


def _read_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as e:
            raise TraceError(path, f"truncated or corrupt gzip data ({e})") from None
    return data


def parse_decimal_ns(tokens: list[bytes]) -> np.ndarray:
    """µs number tokens (e.g. b'1712195495521133.783') -> exact int64 ns, vectorised."""
    n = len(tokens)
    if n == 0:
        return np.zeros(0, np.int64)
    a = np.array(tokens, dtype="S")
    odd = np.strings.find(a, b"e") >= 0
    odd |= np.strings.find(a, b"E") >= 0
    neg = np.strings.startswith(a, b"-")
    body = np.where(neg, np.strings.lstrip(a, b"-"), a)
    ip, _, fp = np.strings.partition(body, b".")
    ip = np.where(ip == b"", b"0", ip)
    frac = np.strings.ljust(fp, 3, b"0").astype("S3")  # ns digits; sub-ns digits are dropped
    ok = ~odd
    out = np.zeros(n, np.int64)
    out[ok] = ip[ok].astype(np.int64) * 1000 + frac[ok].astype(np.int64)
    out = np.where(neg, -out, out)
    if odd.any():  # exponent notation: rare, not exact-representable anyway
        out[odd] = np.round(a[odd].astype(np.float64) * 1000).astype(np.int64)
    return out


def _as_int_array(values) -> np.ndarray:
    """Int-like values (ints, floats or numeric strings) -> int64; others -> -1."""
    try:
        return np.asarray(values, dtype=np.int64)
    except (ValueError, TypeError, OverflowError):
        out = np.full(len(values), -1, np.int64)
        for i, v in enumerate(values):  # rare fallback for malformed args only
            try:
                out[i] = int(float(v))
            except (ValueError, TypeError):
                pass
        return out


def _decode(path: Path, data: bytes):
    try:
        return msgspec.json.decode(data, type=_Doc)
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError as e:
        raise TraceError(path, f"invalid or truncated JSON ({e})") from None
    try:
        return msgspec.json.decode(data, type=_LooseDoc)
    except msgspec.ValidationError as e:
        raise TraceError(path, f"JSON is not a Chrome/Kineto trace ({e})") from None
    except msgspec.DecodeError as e:
        raise TraceError(path, f"invalid or truncated JSON ({e})") from None


def read_kineto(path: Path, source: SourceInfo, progress=None) -> Trace:
    progress = progress or (lambda stage, rows: None)
    data = _read_bytes(path)
    progress("decompressed", len(data))
    stripped = data.lstrip()
    if stripped[:1] == b"[":  # bare event array (old Chrome trace form)
        data = b'{"traceEvents":' + stripped + b"}"
    doc = _decode(path, data)
    del data, stripped
    if doc.traceEvents is None:
        raise TraceError(path, "JSON is not a Chrome/Kineto trace (no traceEvents array)")
    events = doc.traceEvents
    progress("decoded events", len(events))

    source.format = "kineto-json"
    source.producer = "PyTorch profiler (Kineto)"
    source.version = f"schema {doc.schemaVersion}" if doc.schemaVersion is not None else "schema unknown"
    if doc.baseTimeNanoseconds is not None:
        source.wall_offset_ns = int(doc.baseTimeNanoseconds)
        source.extra["clock"] = "relative to baseTimeNanoseconds"
    else:
        source.wall_offset_ns = 0
        source.extra["clock"] = "Unix epoch µs"
    if doc.distributedInfo:
        source.extra["rank"] = doc.distributedInfo.get("rank", 0)

    strings = StringTable()
    ev = np.empty(len(events), dtype=object)
    ev[:] = events
    del events
    ph = np.array(list(map(attrgetter("ph"), ev)), dtype=object)
    cat = np.array(list(map(str.lower, map(str, map(attrgetter("cat"), ev)))), dtype=object)
    is_x = ph == "X"
    ucats = set(np.unique(cat[is_x]).tolist()) if is_x.any() else set()

    def select(cats):
        m = is_x & np.isin(cat, [c for c in cats if c in ucats])
        return ev[m], cat[m]

    # --- API calls ----------------------------------------------------------------
    api_ev, _ = select(_API_CATS)
    # --- GPU ops ------------------------------------------------------------------
    op_ev, op_cat = select(set(_OP_CATS))
    # --- ranges -------------------------------------------------------------------
    rng_ev, _ = select(_RANGE_CATS)
    if "operator" in ucats:
        leg, _ = select({"operator"})
        names = np.array(list(map(str, map(attrgetter("name"), leg))), dtype="U")
        keep = np.zeros(len(leg), bool) if not len(leg) else (
            np.strings.startswith(names, "ProfilerStep#") | np.strings.startswith(names, "Optimizer.")
            | np.strings.startswith(names, "## "))
        rng_ev = np.concatenate([rng_ev, leg[keep]])

    def times(evs):
        ts = parse_decimal_ns(list(map(bytes, map(attrgetter("ts"), evs))))
        dur = parse_decimal_ns(list(map(bytes, map(attrgetter("dur"), evs))))
        return ts, ts + dur, dur

    # Threads: (pid, tid) pairs of API calls and ranges; ids may be ints or strings in 2021 traces.
    cpu_ev = np.concatenate([api_ev, rng_ev])
    pid_s = np.array(list(map(str, map(attrgetter("pid"), cpu_ev))), dtype="U")
    tid_s = np.array(list(map(str, map(attrgetter("tid"), cpu_ev))), dtype="U")
    key_s = np.strings.add(np.strings.add(pid_s, "/"), tid_s) if len(cpu_ev) else np.zeros(0, "U1")
    ukeys, tinv = np.unique(key_s, return_inverse=True)
    tinv = tinv.reshape(-1).astype(np.int32)
    upid = np.array([_num(k.split("/", 1)[0]) for k in ukeys.tolist()], np.int64)
    utid = np.array([_num(k.split("/", 1)[1]) for k in ukeys.tolist()], np.int64)
    threads = Threads(pid=upid, tid=utid, key=np.arange(len(ukeys), dtype=np.int64),
                      name=np.full(len(ukeys), -1, np.int32))

    # API
    n_api = len(api_ev)
    if n_api:
        a_start, a_end, _ = times(api_ev)
        a_args = list(map(attrgetter("args"), api_ev))
        a_names = strings.intern_many(list(map(str, map(attrgetter("name"), api_ev))))
        kinds_by_id = {i: nm.api_kind(strings[i]) for i in np.unique(a_names).tolist()}
        lut = np.zeros(len(strings), np.int8)
        for i, k in kinds_by_id.items():
            lut[i] = k
        a_kind = lut[a_names]
        api = ApiCalls(thread=tinv[:n_api], pid=upid[tinv[:n_api]], start=a_start, end=a_end,
                       corr=_as_int_array(list(map(attrgetter("correlation"), a_args))),
                       name=a_names, kind=a_kind)
    else:
        api = ApiCalls.empty()
    progress("API calls", n_api)

    # GPU ops
    if len(op_ev):
        o_start, o_end, o_dur = times(op_ev)
        o_args = list(map(attrgetter("args"), op_ev))
        kind = np.zeros(len(op_ev), np.int8)
        for c, k in _OP_CATS.items():
            kind[op_cat == c] = k
        # drop `ts: 0, dur: 0` artefacts and CUPTI overflow durations
        keep = ~((o_start == 0) & (o_dur == 0)) & (o_dur >= 0) & (o_dur < MAX_DUR_NS)
        full_names = list(map(str, map(attrgetter("name"), op_ev)))
        full = strings.intern_many(full_names)
        short_of = {i: strings.intern(nm.kernel_short_name(strings[i])) for i in np.unique(full).tolist()}
        lut = np.zeros(len(strings), np.int32)
        for i, s in short_of.items():
            lut[i] = s
        is_kernel = kind == OP_KERNEL
        short = np.where(is_kernel, lut[full], full).astype(np.int32)
        dev = _as_int_array(list(map(attrgetter("device"), o_args)))
        pid_dev = _as_int_array([_num(p) for p in map(attrgetter("pid"), op_ev)]) if (dev < 0).any() else dev
        dev = np.where(dev >= 0, dev, pid_dev)
        stream = _as_int_array(list(map(attrgetter("stream"), o_args)))
        if (stream < 0).any():
            tid_stream = np.array([_num(t) for t in map(attrgetter("tid"), op_ev)], np.int64)
            stream = np.where(stream >= 0, stream, tid_stream)
        corr = _as_int_array(list(map(attrgetter("correlation"), o_args)))
        n = len(op_ev)
        ops = GpuOps(device=dev, stream=stream, start=o_start, end=o_end, corr=corr,
                     pid=np.full(n, -1, np.int64), name=short, full_name=full, kind=kind,
                     api=np.full(n, -1, np.int64)).take(np.nonzero(keep)[0])
    else:
        ops = GpuOps.empty()
    progress("GPU ops", len(ops))

    # Ranges
    n_rng = len(rng_ev)
    if n_rng:
        r_start, r_end, _ = times(rng_ev)
        r_thread = tinv[n_api:]
        text = strings.intern_many(list(map(str, map(attrgetter("name"), rng_ev))))
        ranges = Ranges(thread=r_thread, start=r_start, end=r_end,
                        depth=range_depths(r_thread.astype(np.int64), r_start, r_end), text=text,
                        domain=np.full(n_rng, -1, np.int32), kind=np.full(n_rng, RANGE_PUSHPOP, np.int8))
    else:
        ranges = Ranges.empty()

    devices = {}
    for d in doc.deviceProperties or []:
        did = d.id if isinstance(d, _DeviceProp) else (d.get("id", -1) if isinstance(d, dict) else -1)
        name = d.name if isinstance(d, _DeviceProp) else (d.get("name", "") if isinstance(d, dict) else "")
        if did is not None and int(did) >= 0:
            devices[int(did)] = str(name)
    used = sorted(set(np.unique(ops.device).tolist()))
    devices = {d: devices.get(d, f"GPU {d}") for d in used}

    trace = Trace(source=source, strings=strings, ops=ops, api=api, ranges=ranges, threads=threads,
                  overheads=Overheads.empty(), devices=devices)
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
    finalize(trace, match_process=False)
    progress("joined", len(ops))
    return trace


_DIGITS = re.compile(r"-?\d+")


def _num(v) -> int:
    """pid/tid value -> int: ints pass, strings like '25738' or 'stream 7' give their number."""
    if isinstance(v, int):
        return v
    m = _DIGITS.search(str(v))
    return int(m.group()) if m else -1
