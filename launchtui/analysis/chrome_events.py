"""Chrome Trace Event JSON lines, formatted a column at a time (docs/definitions.md §13b).

Each kind of event is one bytes template (`%d` for ints, `%s` for pre-escaped literals), applied
to the rows by a C-level `map(template.__mod__, zip(columns))`: no Python bytecode runs per event.
Times are written as exact decimal µs from the int64 ns (sign, whole µs, `%03d` ns), never through
a float: Kineto's reader (`kineto_events.parse_decimal_ns`) gives back the same ns. Names are
escaped once per distinct string.
"""
from __future__ import annotations

import json
from itertools import repeat

import numpy as np

CHUNK = 100_000   # rows formatted at a time: bounds the per-row Python lists
END = b"},\n"     # every event line ends so; the array ends with an event written without it
TIME = b"%s%d.%03d"   # one time token: sign, whole µs, ns digits


def time_cols(ns) -> list:
    """The three columns TIME takes for int ns: 1500 -> (b"", 1, 500), -5 -> (b"-", 0, 5)."""
    ns = np.asarray(ns, np.int64)
    a = np.abs(ns)
    neg = ns < 0
    sign = np.where(neg, b"-", b"").tolist() if neg.any() else b""
    return [sign, (a // 1000).tolist(), (a % 1000).tolist()]


def us_token(ns: int) -> bytes:
    return TIME % (b"-" if ns < 0 else b"", abs(ns) // 1000, abs(ns) % 1000)


def json_string(s: str) -> bytes:
    """One JSON string literal. A lone surrogate (a name that was not valid UTF-8) becomes U+FFFD."""
    text = json.dumps(s, ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(s.encode("utf-8", "replace").decode("utf-8"), ensure_ascii=False).encode("utf-8")


def json_value(x) -> bytes:
    text = json.dumps(x, ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:   # a lone surrogate in a name: as json_string does
        return text.encode("utf-8", "replace")


def string_column(values: list[str], ids: np.ndarray) -> list[bytes]:
    """JSON literals of `values[id]` per row (-1: ""), each distinct string escaped once."""
    ids = np.asarray(ids, np.int64)
    if not len(ids):
        return []
    u, inv = np.unique(ids, return_inverse=True)
    lut = np.array([json_string(values[i]) if i >= 0 else b'""' for i in u.tolist()] + [b""], dtype=object)
    return lut[inv.reshape(-1)].tolist()


def literal_column(texts: list[str], codes: np.ndarray) -> list[bytes]:
    """JSON literals of `texts[code]` per row (a few fixed names: causes, markers)."""
    lut = np.array([json_string(t) for t in texts] + [b""], dtype=object)
    return lut[np.asarray(codes, np.int64)].tolist()


def col(x):
    """A template column: an array or list per row, or one value for every row."""
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, list):
        return x
    return repeat(x)


def rows(template: bytes, *cols) -> bytes:
    """`template % row` for every row of the columns (see `col`), joined."""
    return b"".join(map(template.__mod__, zip(*map(col, cols))))


def chunks(n: int):
    """Row slices of at most CHUNK rows covering range(n)."""
    for i in range(0, n, CHUNK):
        yield slice(i, min(n, i + CHUNK))


def complete_events(cat: bytes, pid, tid, start, end, names: list[bytes], args: bytes = b"", *args_cols) -> bytes:
    """`X` events {"ph":"X","cat":C,"pid":P,"tid":T,"ts":..,"dur":..[,"args":{ARGS}],"name":N}; `args`:
    the args object's members as a template (without braces) filled from `args_cols`."""
    start = np.asarray(start, np.int64)
    dur = np.asarray(end, np.int64) - start
    tpl = (b'{"ph":"X","cat":"' + cat + b'","pid":%d,"tid":%d,"ts":' + TIME + b',"dur":' + TIME
           + (b',"args":{' + args + b'}' if args else b"") + b',"name":%s' + END)
    return rows(tpl, pid, tid, *time_cols(start), *time_cols(dur), *args_cols, names)


def instant_events(cat: bytes, scope: bytes, pid, tid, t, names: list[bytes], args: bytes = b"", *args_cols) -> bytes:
    tpl = (b'{"ph":"i","s":"' + scope + b'","cat":"' + cat + b'","pid":%d,"tid":%d,"ts":' + TIME
           + (b',"args":{' + args + b'}' if args else b"") + b',"name":%s' + END)
    return rows(tpl, pid, tid, *time_cols(t), *args_cols, names)


def flow_events(ph: bytes, pid, tid, t, ids) -> bytes:
    """Kineto's launch links: `s` at the call, `f` (binding to the enclosing slice) at the GPU op."""
    bp = b',"bp":"e"' if ph == b"f" else b""
    tpl = b'{"ph":"' + ph + b'","id":%d,"pid":%d,"tid":%d,"ts":' + TIME + b',"cat":"ac2g","name":"ac2g"' + bp + END
    return rows(tpl, ids, pid, tid, *time_cols(t))


def counter_events(name: bytes, series: bytes, pid: int, t, v) -> bytes:
    """`C` events of one counter track (Perfetto and chrome://tracing draw one track per pid + name)."""
    tpl = b'{"ph":"C","name":' + name + b',"pid":%d,"ts":' + TIME + b',"args":{"' + series + b'":%d}' + END
    return rows(tpl, int(pid), *time_cols(t), v)


def metadata_event(name: str, pid, tid, args: dict) -> bytes:
    """One `M` event (process/thread names and labels, sort indices)."""
    return (b'{"ph":"M","name":' + json_string(name) + b',"pid":%d,"tid":%d,"args":' % (int(pid), int(tid))
            + json_value(args) + END)
