"""The TUI's timeline lanes and marks, stored beside the model entry they were built from.

Building them costs seconds on a large trace (figures: bench/MISSED.md) and
their arrays are as large as the model's columns, so they go in one flat file next to the entry
(`<entry>.lanes`, trace/flatfile.py) and open memory-mapped: a warm open pages in only what the
visible window's searchsorted calls touch. The file's header names the entry (device, inode, size: a rebuilt entry is a new file),
launchtui's code fingerprint and the options the marks were found with; any difference, or a file
that does not parse, means build them again. Only the lane classes below are stored (no pickle).
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

from launchtui.analysis.backpressure import Episode
from launchtui.analysis.idle_lane import CauseSet, IdleLane
from launchtui.analysis.intervals import Intervals, RangeMax
from launchtui.analysis.lanes import ApiLane, ArrayEvents, HwLane, LaneEvents, Lanes, NvtxLane, QueueLane, Rest

SUFFIX = ".lanes"
IDLE_SUFFIX = ".idle"      # + the device id: the idle row of the record's device (idle_lane.py)
_CLASSES = {c.__name__: c for c in (Lanes, ApiLane, HwLane, QueueLane, NvtxLane, Episode, Intervals, RangeMax,
                                     ArrayEvents, LaneEvents, Rest, IdleLane, CauseSet)}
_SLOTS = {Intervals: ("s", "e", "cum"), RangeMax: ("v", "B", "empty", "levels"), ArrayEvents: ("idx", "s", "e"),
          LaneEvents: ("idx", "cum", "src"), Rest: ("all", "others"),   # LaneEvents: not the trace's columns
          CauseSet: ("s", "cum")}


def path_for(entry: Path) -> Path:
    return entry.with_name(entry.name + SUFFIX)


def _identity(entry: Path, options) -> dict:
    from launchtui.result_cache import _code_fingerprint
    st = os.stat(entry)   # not its mtime: every warm open marks the entry as used
    return {"entry": [st.st_dev, st.st_ino, st.st_size], "code": _code_fingerprint().hex(),
            "options": repr(options)}


def _encode(obj, arrays: dict, seen: dict | None = None):
    """A JSON skeleton of `obj`; its arrays go to `arrays` under generated names, once each (a lane's
    busy set shares its start/end arrays: stored once, mapped once)."""
    seen = {} if seen is None else seen
    if isinstance(obj, np.ndarray):
        name = seen.get(id(obj))
        if name is None:
            name = seen[id(obj)] = f"a{len(arrays)}"
            arrays[name] = obj
        return {"@a": name}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (int, float, str, bool)) or obj is None:
        return obj
    if isinstance(obj, (list, tuple)):
        items = [_encode(v, arrays, seen) for v in obj]
        return items if isinstance(obj, list) else {"@t": items}
    if isinstance(obj, dict):
        return {"@d": [[_encode(k, arrays, seen), _encode(v, arrays, seen)] for k, v in obj.items()]}
    cls = type(obj)
    if cls.__name__ not in _CLASSES or _CLASSES[cls.__name__] is not cls:
        raise TypeError(f"cannot store {cls.__name__}")
    names = _SLOTS.get(cls) or [f.name for f in dataclasses.fields(obj)]
    return {"@c": cls.__name__, "f": {n: _encode(getattr(obj, n), arrays, seen) for n in names}}


def _decode(node, arrays: dict, trace):
    if isinstance(node, list):
        return [_decode(v, arrays, trace) for v in node]
    if not isinstance(node, dict):
        return node
    if "@a" in node:
        return arrays[node["@a"]]
    if "@t" in node:
        return tuple(_decode(v, arrays, trace) for v in node["@t"])
    if "@d" in node:
        return {_decode(k, arrays, trace): _decode(v, arrays, trace) for k, v in node["@d"]}
    cls = _CLASSES[node["@c"]]
    fields = {k: _decode(v, arrays, trace) for k, v in node["f"].items()}
    if cls is LaneEvents:   # read through the trace's own columns again
        if fields["src"] not in ("ops", "api"):
            raise ValueError(f"unknown lane source {fields['src']!r}")
        table = getattr(trace, fields["src"])
        if len(fields["idx"]) and int(fields["idx"][-1]) >= len(table):
            raise ValueError("lane events beyond the trace's table")
        return LaneEvents(fields["idx"], fields["cum"], fields["src"], table.start, table.end)
    if cls in _SLOTS:   # built from stored state, not recomputed by __init__
        obj = cls.__new__(cls)
        for k in _SLOTS[cls]:
            setattr(obj, k, fields[k])
        return obj
    return cls(**fields)


def load(entry: Path | None, options, trace) -> tuple[Lanes, list] | None:
    """(lanes, marks) stored beside `entry` for `options`, memory-mapped; None when absent or stale.
    The queue rows view `trace`'s index series (lanes.queue_lanes); only their sparse tables and
    peaks are stored, so a reopen does not read every series value to build them."""
    if entry is None:
        return None
    from launchtui.analysis.lanes import queue_lanes
    from launchtui.trace import flatfile
    try:
        header, arrays = flatfile.read(path_for(entry))
        if header.get("identity") != _identity(entry, options):
            return None
        lanes = _decode(header["lanes"], arrays, trace)
        stored = {(d, st): (n, peak, peak_t, block, empty, _decode(levels, arrays, trace))
                  for d, st, n, peak, peak_t, block, empty, levels in header["queue"]}
        lanes.queue = queue_lanes(trace, stored)
        return lanes, _decode(header["marks"], arrays, trace)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(entry: Path | None, options, lanes: Lanes, marks: list) -> None:
    """Write them beside `entry` (atomically; a full or read-only cache never fails the TUI)."""
    if entry is None:
        return
    from launchtui.trace import flatfile
    arrays: dict = {}
    try:
        seen: dict = {}
        header = {"identity": _identity(entry, options),
                  "lanes": _encode(dataclasses.replace(lanes, queue={}), arrays, seen),
                  "marks": _encode(marks, arrays, seen),
                  # the queue rows view the index's series: only their sparse tables and peaks
                  "queue": [[d, st, len(q.v), q.peak, q.peak_t, q.vmax.B, q.vmax.empty,
                             _encode(list(q.vmax.levels), arrays, seen)] for (d, st), q in lanes.queue.items()]}
        from launchtui.trace.cache import max_bytes
        if sum(a.nbytes for a in arrays.values()) + entry.stat().st_size > max_bytes():
            return   # the cache's bound holds the entry with what is stored beside it
        flatfile.write(path_for(entry), header, arrays)
    except (OSError, TypeError, ValueError):
        pass


def _idle_path(entry: Path, device: int) -> Path:
    return entry.with_name(f"{entry.name}{IDLE_SUFFIX}{device}")


def load_idle(entry: Path | None, device: int, inputs: str, trace) -> IdleLane | None:
    """The idle row stored beside `entry` for `inputs` (a digest of the record's device, iterations
    and options), memory-mapped; None when absent or stale. Building it costs seconds at 5M ops
    (the record's gaps and causes once more), and its arrays are a few per gap."""
    if entry is None:
        return None
    from launchtui.trace import flatfile
    try:
        header, arrays = flatfile.read(_idle_path(entry, device))
        if header.get("identity") != _identity(entry, inputs):
            return None
        lane = _decode(header["lane"], arrays, trace)
        return lane if isinstance(lane, IdleLane) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store_idle(entry: Path | None, inputs: str, lane: IdleLane) -> None:
    """Write it beside `entry` (atomically; one file per device, the last inputs win)."""
    if entry is None:
        return
    from launchtui.trace import flatfile
    arrays: dict = {}
    try:
        header = {"identity": _identity(entry, inputs), "lane": _encode(lane, arrays)}
        from launchtui.trace.cache import max_bytes
        if sum(a.nbytes for a in arrays.values()) + entry.stat().st_size > max_bytes():
            return
        flatfile.write(_idle_path(entry, lane.device), header, arrays)
    except (OSError, TypeError, ValueError):
        pass
