"""What a Kineto launch call names that the model does not keep: the kernel it launches (the
runtime event's `kernel` arg, which ROCm's roctracer writes on every `hip*LaunchKernel`, captured or
not) and the CPU op that made the call (the `cpu_op` with the call's `External id`).

A captured launch (definitions.md §12.1) runs no GPU op, so this is the only place a capture trace
says which kernel a graph node holds (§12.6). Read on demand from the trace's own file, read-only;
the model stays as it is for every other use. Calls are matched on (start ns, correlation id), the
keys the reader keeps, so the lookup is exact. CUDA's Kineto records no kernel name on the call
(`available` False; the CPU op is still there); other formats give nothing.
"""
from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from launchtui.trace.kineto_events import parse_decimal_ns
from launchtui.trace.model import Trace

_RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "Runtime")
_OP_CATS = ("cpu_op", "Operator", "operator")


class _Event(msgspec.Struct, gc=False):
    cat: Any = None
    name: Any = None
    ts: msgspec.Raw = msgspec.Raw(b"null")
    args: msgspec.Raw = msgspec.Raw(b"{}")


class _Doc(msgspec.Struct, gc=False):
    traceEvents: list[_Event] | None = None


class _Args(msgspec.Struct, gc=False):
    kernel: Any = None
    correlation: Any = None
    ext: Any = msgspec.field(default=None, name="External id")
    ext_legacy: Any = msgspec.field(default=None, name="external id")

    def external(self):
        v = self.ext if self.ext is not None else self.ext_legacy
        return v if isinstance(v, int) and not isinstance(v, bool) else None


class LaunchNames:
    """Per launch call of the file (a runtime call named `…Launch…` or naming a kernel): its start
    (ns), correlation id, kernel text (None when it names none) and CPU op name ("" when none),
    sorted by (start, correlation). `error`: why the file could not be read (None when it was)."""

    def __init__(self, start, corr, kernel: list, op: list, error: str | None = None) -> None:
        order = np.lexsort((corr, start)) if len(start) else np.zeros(0, np.int64)
        self.start = np.asarray(start, np.int64)[order]
        self.corr = np.asarray(corr, np.int64)[order]
        self.kernel = [kernel[i] for i in order.tolist()]
        self.op = [op[i] for i in order.tolist()]
        self.error = error

    @property
    def available(self) -> bool:
        """Whether any launch call of the file names its kernel."""
        return any(k is not None for k in self.kernel)

    def lookup(self, trace: Trace, api_rows: np.ndarray) -> tuple[list, list]:
        """(kernel text or None, CPU op name or "") per API row of `trace` (the file's model)."""
        rows = np.asarray(api_rows, np.int64)
        t, c = trace.api.start[rows].astype(np.int64), trace.api.corr[rows].astype(np.int64)
        lo = np.searchsorted(self.start, t, side="left")
        hi = np.searchsorted(self.start, t, side="right")
        kern, ops = [None] * len(rows), [""] * len(rows)
        for j in np.flatnonzero(hi > lo).tolist():   # per asked row: the file's calls at its start
            for i in range(int(lo[j]), int(hi[j])):
                if self.corr[i] == c[j]:
                    kern[j], ops[j] = self.kernel[i], self.op[i]
                    break
        return kern, ops


def _events(path: Path) -> list:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    try:
        doc = msgspec.json.decode(data, type=_Doc)
        return doc.traceEvents or []
    except msgspec.ValidationError:
        return msgspec.json.decode(data, type=list[_Event])   # a bare event array


def _args(evs: list) -> list:
    raws = b"[" + b",".join(bytes(e.args) for e in evs) + b"]"
    try:
        return msgspec.json.decode(raws, type=list[_Args | None])
    except msgspec.ValidationError:
        out = []
        for e in evs:   # rare: some args are not objects
            try:
                out.append(msgspec.json.decode(e.args, type=_Args))
            except (msgspec.ValidationError, msgspec.DecodeError):
                out.append(None)
        return out


def read_launch_names(trace: Trace) -> LaunchNames:
    """The launch calls of `trace`'s own file, with their kernel and CPU op (Kineto JSON only)."""
    empty = np.zeros(0, np.int64)
    src = trace.source
    if src.format != "kineto-json" or not Path(src.path).is_file():
        return LaunchNames(empty, empty, [], [])
    try:
        evs = _events(Path(src.path))
    except (OSError, EOFError, msgspec.DecodeError, msgspec.ValidationError, RecursionError) as e:
        return LaunchNames(empty, empty, [], [], error=f"{type(e).__name__}: {e}")
    rt = [e for e in evs if e.cat in _RUNTIME_CATS and (b'"kernel"' in bytes(e.args) or
                                                        (isinstance(e.name, str) and "Launch" in e.name))]
    co = [e for e in evs if e.cat in _OP_CATS and isinstance(e.name, str)]
    op_of = {}
    for e, a in zip(co, _args(co)):   # per CPU op: a dict of its External id
        x = a.external() if a is not None else None
        if x is not None:
            op_of.setdefault(x, e.name)
    keep, kern, ops, corr = [], [], [], []
    for e, a in zip(rt, _args(rt)):   # per launch call
        if a is None or not isinstance(a.correlation, int):
            continue
        keep.append(bytes(e.ts))
        kern.append(a.kernel if isinstance(a.kernel, str) else None)
        corr.append(a.correlation)
        x = a.external()
        ops.append(op_of.get(x, "") if x is not None else "")
    start, ok = parse_decimal_ns(keep, valid=True)
    if not ok.all():
        m = ok.tolist()
        kern = [k for k, g in zip(kern, m) if g]
        ops = [o for o, g in zip(ops, m) if g]
        start, corr = start[ok], np.asarray(corr, np.int64)[ok]
    return LaunchNames(start, np.asarray(corr, np.int64), kern, ops)
