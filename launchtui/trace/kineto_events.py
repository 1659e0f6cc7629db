"""Kineto event primitives shared by the reader (kineto.py) and the stack extractor
(kineto_stacks.py): exact µs-token -> ns parsing, batched args decoding, and the drop-and-count
helpers behind the `skipped` reasons. Kept apart so the two modules do not import each other."""
from __future__ import annotations

import re
from collections import Counter
from itertools import compress
from operator import attrgetter

import msgspec
import numpy as np

MAX_ABS_NS = 2**62  # |ts| and dur bound: ts + dur stays inside int64
SKIP_TIME = "ts or dur not a finite number in range"
SKIP_ARGS = "args not an object, or correlation/device/stream of the wrong type"


def parse_decimal_ns(tokens: list[bytes], valid: bool = False):
    """µs number tokens (e.g. b'1712195495521133.783') -> exact int64 ns, vectorised.

    Tokens that are not numbers (`"abc"`, `null`, `[1]`), or whose value is not finite or lies
    outside ±2**62 ns (`1e400`), give 0; with `valid=True` the mask of good tokens comes back too.
    """
    n = len(tokens)
    if n == 0:
        return (np.zeros(0, np.int64), np.ones(0, bool)) if valid else np.zeros(0, np.int64)
    a = np.array(tokens, dtype="S")
    odd = np.strings.find(a, b"e") >= 0
    odd |= np.strings.find(a, b"E") >= 0
    neg = np.strings.startswith(a, b"-")
    body = np.where(neg, np.strings.lstrip(a, b"-"), a)
    ip, _, fp = np.strings.partition(body, b".")
    ip = np.where(ip == b"", b"0", ip)
    # plain decimals: digits only, at most 16 integer digits (µs), which keeps ns inside int64
    ok = ~odd & np.strings.isdigit(ip) & (np.strings.isdigit(fp) | (fp == b"")) & (np.strings.str_len(ip) <= 16)
    ok &= (np.strings.str_len(ip) < 16) | (ip < b"4611686018427387")
    frac = np.strings.ljust(fp, 3, b"0").astype("S3")  # ns digits; sub-ns digits are dropped
    out = np.zeros(n, np.int64)
    out[ok] = ip[ok].astype(np.int64) * 1000 + frac[ok].astype(np.int64)
    out = np.where(neg, -out, out)
    if odd.any():  # exponent notation: rare, not exact-representable anyway
        for i in np.flatnonzero(odd).tolist():  # rare tokens only
            try:
                v = float(a[i]) * 1000
            except ValueError:
                continue
            if abs(v) < MAX_ABS_NS:  # NaN and inf fail
                out[i] = round(v)
                ok[i] = True
    if not valid:
        return out
    return out, ok & (np.abs(out) < MAX_ABS_NS)


def decode_args(raws: list, typ, loose):
    """Decode many raw `args` objects in one C-level call (a JSON array of them).

    Returns (args, ok): an args value that is not an object, or has fields of the wrong type,
    gives a default struct and ok False (decoded one by one only in that rare case).
    """
    if not raws:
        return [], np.ones(0, bool)
    buf = b"[" + b",".join(map(bytes, raws)) + b"]"
    # DecodeError too: a raw value the outer decode passed over whole can still fail on its own
    # (a bit flip inside a string: invalid UTF-8 or escape); it is then decoded one by one below
    try:
        return msgspec.json.decode(buf, type=list[typ]), np.ones(len(raws), bool)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        pass
    try:
        return msgspec.json.decode(buf, type=list[loose]), np.ones(len(raws), bool)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        pass
    out, ok = [], np.ones(len(raws), bool)
    for i, raw in enumerate(raws):  # rare: some args are not objects
        try:
            out.append(msgspec.json.decode(raw, type=loose))
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            out.append(loose())
            ok[i] = False
    return out, ok


def timed(evs: list, skipped: Counter):
    """(events with valid ts and dur, start, end, dur); the others are counted as skipped."""
    ts, ok_ts = parse_decimal_ns(list(map(bytes, map(attrgetter("ts"), evs))), valid=True)
    dur, ok_dur = parse_decimal_ns(list(map(bytes, map(attrgetter("dur"), evs))), valid=True)
    ok = ok_ts & ok_dur
    if not ok.all():
        skipped[SKIP_TIME] += int((~ok).sum())
        evs = list(compress(evs, ok.tolist()))
        ts, dur = ts[ok], dur[ok]
    return evs, ts, ts + dur, dur


def keep(evs: list, cols: dict, ok: np.ndarray, skipped: Counter, reason: str):
    """Drop the events (and their already-computed columns) where `ok` is False; count them."""
    if ok.all():
        return evs, cols
    skipped[reason] += int((~ok).sum())
    return list(compress(evs, ok.tolist())), {k: (list(compress(v, ok.tolist())) if isinstance(v, list) else v[ok])
                                              for k, v in cols.items()}


def ids(values: list) -> np.ndarray:
    """pid/tid values (ints, or 2021-style strings like '25738' / 'stream 7') -> int64."""
    try:
        return np.asarray(values, dtype=np.int64)
    except (ValueError, TypeError, OverflowError):
        return np.fromiter(map(num, values), np.int64, len(values))


DIGITS = re.compile(r"-?\d+")


def num(v) -> int:
    """pid/tid value -> int: ints pass, strings like '25738' or 'stream 7' give their number;
    -1 when there is none or it does not fit int64."""
    if not isinstance(v, int):
        m = DIGITS.search(str(v))
        v = int(m.group()) if m else -1
    return v if -2**63 <= v < 2**63 else -1


def timed_with_args(evs: list, typ, loose, skipped: Counter):
    """(events, start, end, dur, args) for the events whose times and `args` are valid; the others
    are dropped and counted by reason (`timed`, then `decode_args` + `keep`)."""
    evs, start, end, dur = timed(evs, skipped)
    args, ok = decode_args(list(map(attrgetter("args"), evs)), typ, loose)
    evs, c = keep(evs, {"start": start, "end": end, "dur": dur, "args": args}, ok, skipped, SKIP_ARGS)
    return evs, c["start"], c["end"], c["dur"], c["args"]


def _export_header(raw: msgspec.Raw) -> dict | None:
    """The top-level `launchtui` object launchtui's chrome export writes, or None."""
    try:
        return msgspec.json.decode(raw, type=dict | None) or None
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return None


def exported_python_frames(raw: msgspec.Raw) -> int | None:
    """The source trace's Python-tracer event count a chrome export carries (its own file holds no
    `python_function` events, yet the run it shows ran under the tracer), or None."""
    n = (_export_header(raw) or {}).get("python_frames")
    return n if type(n) is int and n > 0 else None


def export_note(raw: msgspec.Raw) -> str | None:
    """One line on a launchtui chrome export's origin, from its top-level `launchtui` object (which
    launchtui's chrome export writes): the source trace and, for a range, the --trim that gives the
    range's figures again. None for any other file, or an object of another shape."""
    try:
        d = _export_header(raw)
        if not d:
            return None
        src, w = d.get("source") or {}, d.get("window_ns")
        name = str(src.get("path", "")).replace("\\", "/").rsplit("/", 1)[-1]
        line = f"launchtui chrome export of {name} ({src.get('producer', '?')} {src.get('version', '')})".replace(" )", ")")
        if d.get("selection") != "whole trace" and isinstance(w, list) and len(w) == 2 and all(type(x) is int for x in w):
            line += f"; range {w[0] / 1e9:.9f}-{w[1] / 1e9:.9f} s: --trim {w[0] / 1e9:.9f} {w[1] / 1e9:.9f} gives its figures"
        return line
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError, AttributeError, TypeError):
        return None


# Chrome traces that other profilers write, told apart by the args their events carry: they hold
# GPU activity, but not in Kineto's categories, so launchtui reads their databases instead
_FOREIGN_CHROME = ((b'"BeginNs"', "rocprof v1", "its results.db"),
                   (b'"KernelExecution"', "rpd2tracing (RPD)", "its .rpd database"))


def foreign_chrome(head: bytes) -> str | None:
    """'a <producer> Chrome trace: open <database> instead' when the file's first bytes show it
    was written by a profiler whose database launchtui reads; else None."""
    for marker, producer, database in _FOREIGN_CHROME:
        if marker in head:
            return f"a Chrome trace from {producer} (not in Kineto's categories): open {database} instead"
    return None
