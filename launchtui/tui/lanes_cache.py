"""How the TUI's timeline lanes, marks and idle row are stored as flat files of arrays: the codec of
the MAPPED queries in tui/queries.py (the session writes and maps the files beside the model entry).

Their arrays are as large as the model's columns, so they are mapped, not unpickled: a warm open
pages in only what the visible window's searchsorted calls touch. Only the lane classes below are
stored (no pickle): anything else, or a skeleton that does not parse, raises.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from launchtui.analysis.backpressure import Episode
from launchtui.analysis.idle_lane import CauseSet, IdleLane
from launchtui.analysis.intervals import Intervals, RangeMax
from launchtui.analysis.lanes import ApiLane, ArrayEvents, HwLane, LaneEvents, Lanes, NvtxLane, QueueLane, Rest

_CLASSES = {c.__name__: c for c in (Lanes, ApiLane, HwLane, QueueLane, NvtxLane, Episode, Intervals, RangeMax,
                                     ArrayEvents, LaneEvents, Rest, IdleLane, CauseSet)}
_SLOTS = {Intervals: ("s", "e", "cum"), RangeMax: ("v", "B", "empty", "levels"), ArrayEvents: ("idx", "s", "e"),
          LaneEvents: ("idx", "cum", "src"), Rest: ("all", "others"),   # LaneEvents: not the trace's columns
          CauseSet: ("s", "cum")}


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


def encode_lanes(value: tuple[Lanes, list]) -> tuple[dict, dict]:
    """(skeleton, arrays) of (lanes, marks). The queue rows view the index's series: only their
    sparse tables and peaks are stored (building them read every series value)."""
    lanes, marks = value
    arrays: dict = {}
    seen: dict = {}
    skeleton = {"lanes": _encode(dataclasses.replace(lanes, queue={}), arrays, seen),
                "marks": _encode(marks, arrays, seen),
                "queue": [[d, st, len(q.v), q.peak, q.peak_t, q.vmax.B, q.vmax.empty,
                           _encode(list(q.vmax.levels), arrays, seen)] for (d, st), q in lanes.queue.items()]}
    return skeleton, arrays


def decode_lanes(skeleton: dict, arrays: dict, trace) -> tuple[Lanes, list]:
    """(lanes, marks) back from `encode_lanes`, their arrays memory-mapped; the queue rows view
    `trace`'s index series again (lanes.queue_lanes)."""
    from launchtui.analysis.lanes import queue_lanes
    lanes = _decode(skeleton["lanes"], arrays, trace)
    stored = {(d, st): (n, peak, peak_t, block, empty, _decode(levels, arrays, trace))
              for d, st, n, peak, peak_t, block, empty, levels in skeleton["queue"]}
    lanes.queue = queue_lanes(trace, stored)
    return lanes, _decode(skeleton["marks"], arrays, trace)


def encode_idle(lane: IdleLane) -> tuple[dict, dict]:
    arrays: dict = {}
    return _encode(lane, arrays), arrays


def decode_idle(skeleton, arrays: dict, trace) -> IdleLane:
    lane = _decode(skeleton, arrays, trace)
    if not isinstance(lane, IdleLane):
        raise TypeError("not an idle lane")
    return lane
