"""The launch details of every kernel in a Kineto JSON trace (grid, block, registers, shared memory,
and the input shapes of the op that launched it), for trace.op_details.

Read the way the Kineto reader reads the file (kineto.py): the event array split into raw slices in
one C-level decode, then 200k events at a time decoded into structs that hold only `cat`, `ts` and
the few `args` fields used, every other key skipped inside msgspec. No whole-document Python
objects: `json.load` of a 2M-event trace built ~2 GiB of dicts and held the GIL for all of its ~16 s,
which froze the TUI that asked (bench/MISSED.md). `ts` becomes ns by the reader's own rule
(`parse_decimal_ns`), so (start, correlation) match the model's ops exactly.
"""
from __future__ import annotations

import math
from collections import Counter
from itertools import compress
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec

from launchtui.trace.kineto import CHUNK_EVENTS, decode_slices, raw_document
from launchtui.trace.kineto_events import parse_decimal_ns


class _Event(msgspec.Struct, gc=False):
    cat: Any = ""
    ts: msgspec.Raw = msgspec.Raw(b"")
    args: msgspec.Raw = msgspec.Raw(b"null")


class _KernelArgs(msgspec.Struct, gc=False, rename={"regs": "registers per thread", "smem": "shared memory",
                                                     "ext": "External id"}):
    correlation: Any = None
    grid: Any = None
    block: Any = None
    regs: Any = None
    smem: Any = None
    ext: Any = None


class _OpArgs(msgspec.Struct, gc=False, rename={"ext": "External id", "dims": "Input Dims"}):
    ext: Any = None
    dims: Any = None


def kineto_rows(path: Path) -> list[tuple[int, int, str]]:
    """(start ns, correlation id, text) of every kernel event with any detail, in file order."""
    dims, kernels = _scan(path)
    texts: dict[str, str] = {}      # one string object per distinct text (a few dozen in a trace)
    keep = []
    for tok, a in kernels:
        text, corr = _text(a, dims), _int(a.correlation)
        if text and corr is not None and tok:
            keep.append((tok, corr, texts.setdefault(text, text)))
    ns, good = parse_decimal_ns([tok for tok, _, _ in keep], valid=True)
    return [(t, c, x) for t, (_, c, x), ok in zip(ns.tolist(), keep, good.tolist()) if ok]


def _scan(path: Path) -> tuple[dict, list]:
    """({External id: Input Dims} of the cpu ops, [(raw ts, _KernelArgs)] of the kernels)."""
    raws = raw_document(path, Counter()).traceEvents
    dims: dict = {}
    kernels: list = []
    for i in range(0, len(raws), CHUNK_EVENTS):
        events = decode_slices(raws[i:i + CHUNK_EVENTS], _Event)
        cats = [c if isinstance(c, str) else "" for c in map(attrgetter("cat"), events)]
        ops = list(compress(events, [c == "cpu_op" for c in cats]))
        for a in decode_slices(list(map(attrgetter("args"), ops)), _OpArgs):
            if _hashable(a.ext) and a.ext is not None and a.dims:
                dims.setdefault(a.ext, a.dims)
        ks = list(compress(events, [c == "kernel" for c in cats]))
        kernels.extend((bytes(e.ts), a) for e, a in
                       zip(ks, decode_slices(list(map(attrgetter("args"), ks)), _KernelArgs, placeholders=True))
                       if a is not None)
    return dims, kernels


def _text(a: _KernelArgs, dims: dict) -> str:
    """The cursor line's text; a field of an odd type (a string grid, a list of registers) is left
    out of it, not the kernel."""
    parts = []
    grid, block = _dims(a.grid), _dims(a.block)
    if grid and block:
        parts.append(f"grid {grid} block {block}")
    if isinstance(a.regs, (int, float)):
        parts.append(f"{a.regs} regs")
    if (smem := _int(a.smem)) is not None:
        parts.append(f"smem {smem:,} B")
    shapes = dims.get(a.ext) if _hashable(a.ext) else None
    if shapes:
        parts.append("inputs " + ", ".join(str(s).replace(" ", "") for s in shapes if s != []))
    return " · ".join(parts)


def _dims(v) -> str:
    """"65536×1×1" from [65536, 1, 1]; "" unless a non-empty list of numbers."""
    ints = [_int(x) for x in v] if isinstance(v, list) else []
    return "×".join(map(str, ints)) if ints and None not in ints else ""


def _int(v) -> int | None:
    """A JSON number as an int (as Python's int() takes it); None for anything else or non-finite."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or isinstance(v, float) and not math.isfinite(v):
        return None
    return int(v)


def _hashable(v) -> bool:
    return v is None or isinstance(v, (int, float, str))
