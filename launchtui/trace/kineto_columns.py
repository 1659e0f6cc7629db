"""Per-chunk column extraction for the Kineto reader (kineto.py): decoded events -> columns per role.

An event's role comes from its category (CUDA API call, kernel, memcpy, memset, annotation, legacy
operator, overhead). Each role's events are picked from the chunk, their times and the few `args`
fields launchtui reads are decoded in one batch per role, and rows with unusable values are dropped
and counted by reason in `skipped`. Column extraction uses C-level map/attrgetter and numpy, never a
Python loop per event.
"""
from __future__ import annotations

import re
from collections import Counter
from itertools import chain, compress
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from launchtui.trace import kineto_stacks
from launchtui.trace.kineto_events import MAX_ABS_NS, SKIP_ARGS, decode_args, ids, keep, timed, timed_with_args
from launchtui.trace.model import OP_KERNEL, OP_MEMCPY, OP_MEMSET

MAX_DEVICE = 2**31 - 1  # device ids are int32 in the model

# reasons an event is skipped (counted in trace.source.extra["skipped"], shown by `info`)
SKIP_DEVICE = "device id out of range"
SKIP_NOT_COMPLETE = "CUDA API, GPU op or annotation event that is not a complete event (ph other than X)"


class _OpArgs(msgspec.Struct, gc=False, rename={"graph": "graph id"}):
    correlation: int = -1
    device: int = -1
    stream: int = -1
    graph: int = -1        # CUDA graph id of a replayed kernel (newer PyTorch; definitions §12.2)


class _ApiArgs(msgspec.Struct, gc=False):
    correlation: int = -1


# Lenient variants, used only for a batch whose args carry unexpected types.
class _LooseOpArgs(msgspec.Struct, rename={"graph": "graph id"}):
    correlation: int | float | str | None = -1
    device: int | float | str | None = -1
    stream: int | float | str | None = -1
    graph: Any = -1


class _LooseApiArgs(msgspec.Struct):
    correlation: int | float | str | None = -1


class _RangeArgs(msgspec.Struct):
    """What launchtui's chrome export adds to an annotation (definitions.md §13b): its NVTX domain and,
    for an NVTX start/end range, `nvtx: "start/end"`. Any other type reads as absent."""
    domain: Any = None
    nvtx: Any = None


_RANGE_ARG_KEYS = (b'"domain"', b'"nvtx"')
COMMAND_BUFFER_FULL = "Command Buffer Full"   # Kineto's name for CUPTI's overhead kind (§6)


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


def _pick(events: list, mask: np.ndarray, skipped: Counter) -> list:
    sub = list(compress(events, mask.tolist()))
    if sub and set(map(attrgetter("ph"), sub)) != {"X"}:
        n = len(sub)
        sub = [e for e in sub if e.ph == "X"]  # rare: non-complete events in a data category
        skipped[SKIP_NOT_COMPLETE] += n - len(sub)
    return sub


def _names(evs: list) -> list[str]:
    return list(map(str, map(attrgetter("name"), evs)))


def extract(events: list, skipped: Counter) -> dict:
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
        graph = list(map(attrgetter("graph"), args))
        if args and type(args[0]) is not _OpArgs:   # loose decode: a list or object is no id
            graph = [v if v is None or isinstance(v, (int, float, str)) else "?" for v in graph]
        graph, ok_graph = _as_int_array(graph)
        # graph id 0 or one that is no id reads as none (§12.2): Kineto writes 0 on plain kernels
        graph = np.where(ok_graph & (graph > 0), graph, -1)
        cols = {"start": start, "end": end, "dur": dur, "kind": kind, "device": dev, "stream": stream,
                "corr": corr, "name": _names(op_ev), "graph": graph}
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


def concat(parts: list[dict], role: str) -> dict | None:
    """One role's columns from every chunk's `extract`, joined in chunk order; None when no chunk has it."""
    chunks = [p[role] for p in parts if role in p]
    if not chunks:
        return None
    return {k: (list(chain.from_iterable(c[k] for c in chunks)) if isinstance(chunks[0][k], list)
                else np.concatenate([c[k] for c in chunks])) for k in chunks[0]}
