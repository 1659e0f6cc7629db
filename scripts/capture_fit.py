"""The size limit on a captured trace (scripts/capture_gpu_traces.py): deterministic gzip, the header
scrub (host name, temporary path) and slimming by event category.

Slimming is exact: the trace is rewritten with every number token kept byte for byte (16-digit µs
timestamps do not survive a float round trip), and it drops only event categories launchtui's
Kineto reader never reads, so a slimmed trace reads the same as the full one.
"""
from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field

from capture_table import SIZE_LIMIT_BYTES


def gzip_bytes(data: bytes) -> bytes:
    """Deterministic gzip (no file name, mtime 0): the same trace gives the same bytes."""
    return gzip.compress(data, compresslevel=9, mtime=0)


_HOST_RE = re.compile(r'("host_name"\s*:\s*)"(?:[^"\\]|\\.)*"')
_TRACE_NAME_RE = re.compile(r'("traceName"\s*:\s*)"(?:[^"\\]|\\.)*"')


def scrub_header(text: str, trace_name: str) -> str:
    """Replace the capture machine's host name and the temporary export path (Kineto header keys)."""
    text = _HOST_RE.sub(lambda m: m.group(1) + '"redacted"', text, count=1)
    return _TRACE_NAME_RE.sub(lambda m: m.group(1) + json.dumps(trace_name), text, count=1)


class _Num(str):
    """A JSON number token kept as its text, so 16-digit µs timestamps survive a rewrite exactly."""


def _dump(o, out: list) -> None:
    if isinstance(o, _Num):
        out.append(str(o))
    elif isinstance(o, dict):
        out.append("{")
        first = True
        for k, v in o.items():
            if not first:
                out.append(",")
            first = False
            out.append(json.dumps(k))
            out.append(":")
            _dump(v, out)
        out.append("}")
    elif isinstance(o, list):
        out.append("[")
        for i, v in enumerate(o):
            if i:
                out.append(",\n" if isinstance(v, dict) else ",")
            _dump(v, out)
        out.append("]")
    else:
        out.append(json.dumps(o))


def exact_loads(data: bytes | str):
    """json.loads that keeps every float token as text (ints are exact in Python anyway)."""
    if isinstance(data, bytes):
        data = data.decode("utf-8")
    return json.loads(data, parse_float=_Num, parse_constant=_Num)


def exact_dumps(doc) -> bytes:
    out: list[str] = []
    _dump(doc, out)
    return "".join(out).encode("utf-8")


# Slimming levels, applied cumulatively only when the raw trace is over the limit. None of the dropped
# events is read by launchtui (its Kineto reader uses cuda_runtime/cuda_driver, kernel/memcpy/memset and
# user_annotation events only).
SLIM_LEVELS: tuple[tuple[str, frozenset[str]], ...] = (
    ("drop python stacks and instant events", frozenset({"python_function", "cpu_instant_event", "[memory]"})),
    ("drop ATen cpu_op events and forward/backward flows", frozenset({"cpu_op", "fwdbwd"})),
    ("drop CPU->GPU flow arrows and GPU-row annotation copies", frozenset({"ac2g", "gpu_user_annotation"})),
)


def _event_cat(e) -> str:
    if not isinstance(e, dict):
        return ""
    if e.get("ph") == "i" and e.get("name") == "[memory]":
        return "[memory]"
    return str(e.get("cat", "")).lower()


def slim_events(doc: dict, drop: frozenset[str]) -> dict[str, int]:
    """Remove events whose category is in `drop` (in place); returns counts removed per category."""
    events = doc.get("traceEvents") or []
    kept, removed = [], {}
    for e in events:
        c = _event_cat(e)
        if c in drop:
            removed[c] = removed.get(c, 0) + 1
        else:
            kept.append(e)
    doc["traceEvents"] = kept
    return removed


@dataclass
class Fitted:
    data: bytes                      # gzipped trace to write
    raw_size: int                    # uncompressed bytes of what was written
    gz_size: int
    within_limit: bool
    slimmed: list = field(default_factory=list)   # [{"step": ..., "removed": {...}}]

    def to_json(self) -> dict:
        return {"size_bytes": self.gz_size, "uncompressed_bytes": self.raw_size,
                "within_limit": self.within_limit, "slimmed": self.slimmed or None}


def fit_to_limit(raw: bytes, limit: int = SIZE_LIMIT_BYTES) -> Fitted:
    """Gzip the trace as written; if that is over `limit`, slim it level by level until it fits."""
    gz = gzip_bytes(raw)
    if len(gz) <= limit:
        return Fitted(gz, len(raw), len(gz), True)
    doc = exact_loads(raw)
    steps = []
    data = raw
    for label, cats in SLIM_LEVELS:
        removed = slim_events(doc, cats)
        if not removed:
            continue
        steps.append({"step": label, "removed": dict(sorted(removed.items()))})
        data = exact_dumps(doc)
        gz = gzip_bytes(data)
        if len(gz) <= limit:
            return Fitted(gz, len(data), len(gz), True, steps)
    return Fitted(gz, len(data), len(gz), False, steps)
