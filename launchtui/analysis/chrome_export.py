"""`launchtui export --format chrome`: a selection as Chrome Trace Event JSON in Kineto's conventions
(docs/definitions.md §13b), which Perfetto, chrome://tracing, HTA and launchtui's own Kineto reader
open.

What the file holds, and why each part is as it is:
- GPU ops as `kernel` / `gpu_memcpy` / `gpu_memset` slices, pid = device, tid = stream, with
  `args.device`, `args.stream`, `args.correlation`; the kernel's name is its demangled (full) name,
  from which Kineto's reader derives the short name again (§10).
- API calls as `cuda_runtime` / `cuda_driver` slices, ranges as `user_annotation` slices (a non-default
  NVTX domain in `args.domain`, a start/end range marked `args.nvtx: "start/end"`), Nsight's
  "command buffer full" rows as Kineto `overhead` slices named `Command Buffer Full`, all on their
  CPU thread (pid, tid); `ac2g` flows from each launch call to its ops.
- Correlation ids are unique per process only (§1) while Kineto's join uses the id alone: when two
  processes' ids overlap, each later process's ids are shifted above the earlier ones (its own span
  and density unchanged), so the join of the file is the join of the trace.
- A range export keeps, besides the selected ops, the ops in flight at its edges (overlapping the
  window, or launched before its end and started after its start) with their launch calls: the
  pending depth inside the window then equals the trace's (§5), so `--trim` with the same window on
  the file gives the range's report.
- Overlays drawn from the case record of the selection (§V): pending depth per stream (`C`
  events), blocked launches and CPU stalls (`i` events on the launching thread), iteration starts,
  and the record's device's idle gaps by cause (§V2) as slices on one track of that device.
Times are exact decimal µs from the int ns (chrome_events.us_tokens); `baseTimeNanoseconds` is the
trace's wall-clock offset where known, so the file's clock is the trace's own.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from launchtui.analysis import chrome_events as ce
from launchtui.analysis import exposed as ex
from launchtui.analysis import idle_causes as ic
from launchtui.analysis.backpressure import spikes
from launchtui.analysis.chrome_stacks import stack_events
from launchtui.analysis.cold_start import cold_start
from launchtui.analysis.graph_busy import busy_trace
from launchtui.analysis.index import trace_index
from launchtui.analysis.record import record_with_streams
from launchtui.analysis.record_options import RecordOptions
from launchtui.analysis.select import WHOLE, Selection, op_mask
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.model import OVERHEAD_COMMAND_BUFFER_FULL, RANGE_PUSHPOP, Trace

FORMAT = "chrome"
IDLE_TID = 2**31 - 2        # the per-device track of the idle gaps by cause (no CUDA stream id is this)
OP_CATS = (b"kernel", b"gpu_memcpy", b"gpu_memset")
COMMAND_BUFFER_FULL = "Command Buffer Full"    # Kineto's name for CUPTI's overhead kind
MARK_CAT = b"launchtui_marker"
IDLE_CAT = b"launchtui_gpu_idle"


@dataclass
class ExportRows:
    """The rows a chrome export writes (ascending indices) and its window."""
    ops: np.ndarray
    api: np.ndarray
    ranges: np.ndarray
    overheads: np.ndarray
    t0: int
    t1: int
    whole: bool
    context_ops: int          # ops outside the selection kept for the queue depth at the edges


def export_rows(trace: Trace, sel: Selection) -> ExportRows:
    """Everything for the whole trace; for a range: the selected ops and, on the selected devices, the
    ops overlapping the window or pending in it (their call starts before its end, they start after
    its start); the API calls overlapping the window and the launch calls of those ops; the ranges and
    command-buffer-full rows from the first of those calls to the window's end."""
    ops, api, rg, ov = trace.ops, trace.api, trace.ranges, trace.overheads
    whole = sel.t0 is None and sel.t1 is None and sel.devices is None and sel.ranges is None
    ext = trace.extent() or (0, 0)
    t0 = ext[0] if sel.t0 is None else sel.t0
    t1 = ext[1] if sel.t1 is None else sel.t1
    if whole:
        return ExportRows(np.arange(len(ops)), np.arange(len(api)), np.arange(len(rg)), np.arange(len(ov)),
                          t0, t1, True, 0)
    chosen = op_mask(trace, sel)
    on_dev = np.ones(len(ops), bool) if sel.devices is None else np.isin(ops.device, np.asarray(sel.devices))
    call_start = np.where(ops.api >= 0, api.start[np.maximum(ops.api, 0)], ops.start) if len(api) else ops.start
    overlap = (ops.start <= t1) & (ops.end >= t0)
    pending = (call_start <= t1) & (ops.start >= t0)
    edge = on_dev & (overlap | pending) & ~chosen
    o = np.flatnonzero(chosen | edge)
    launch = ops.api[o]
    a = np.union1d(np.flatnonzero((api.end >= t0) & (api.start <= t1)), launch[launch >= 0])
    lo = min(t0, int(api.start[a].min())) if len(a) else t0
    r = np.flatnonzero((rg.end >= lo) & (rg.start <= t1))
    v = np.flatnonzero((ov.end >= lo) & (ov.start <= t1))
    return ExportRows(o, a, r, v, t0, t1, False, int(edge.sum()))


def correlation_shifts(trace: Trace) -> dict[int, int]:
    """OS pid -> the amount its correlation ids are raised by so that no two processes' ids overlap
    ({} when they do not, or when the trace's own join ignores processes because some op has none,
    as Kineto's and a pid-less Nsight join do: ids are then written as they are)."""
    api, ops, th = trace.api, trace.ops, trace.threads
    pid_api = th.pid[api.thread] if len(api) else np.zeros(0, np.int64)
    pid_op = trace.os_pids(trace.process_keys(ops.pid))
    pids = unique_sorted(np.concatenate([pid_api, pid_op[pid_op >= 0]]))
    if len(pids) < 2 or (pid_op < 0).any():
        return {}
    spans = []
    for p in pids.tolist():   # per process
        c = np.concatenate([api.corr[pid_api == p], ops.corr[pid_op == p]])
        spans.append((int(c.min()), int(c.max())))
    if all(spans[i][1] < spans[i + 1][0] for i in range(len(spans) - 1)):
        return {}
    out, top = {}, None
    for p, (lo, hi) in zip(pids.tolist(), spans):
        shift = 0 if top is None else max(0, top + 1 - lo)
        out[p] = shift
        top = hi + shift
    return out


def _shifted(corr: np.ndarray, pids: np.ndarray, shifts: dict[int, int]) -> np.ndarray:
    corr = np.asarray(corr, np.int64)
    if not shifts:
        return corr
    add = np.zeros(len(corr), np.int64)
    for p, s in shifts.items():   # per process
        if s:
            add[pids == p] = s
    return corr + add


@dataclass
class Overlays:
    """What the case record of the selection adds to the file."""
    device: int | None
    it_start: np.ndarray
    it_end: np.ndarray
    it_name: str
    blocked: list              # (api index, device, stream)
    stalls: list               # (api index or -1, start ns, device, stream)
    idle: tuple                # (start, end, cause code) of the device's idle pieces


def overlays(trace: Trace, sel: Selection, opt: RecordOptions) -> Overlays:
    doc, streams = record_with_streams(trace, sel, opt)
    z = np.zeros(0, np.int64)
    if doc.get("device_id") is None:
        return Overlays(None, z, z, "", [], [], (z, z, z))
    its = doc["iterations"]
    st, en = np.asarray(its["starts_ns"], np.int64), np.asarray(its["ends_ns"], np.int64)
    blocked, stalls = [], []
    for v in streams:   # per stream verdict
        blocked += [(int(a), v.device_id, v.stream_id) for a in v.blocked_calls]
        stalls += [(e.worst_api, e.start, v.device_id, v.stream_id) for e in list(v.stalls) + list(v.outside_stalls)]
    dev = int(doc["device_id"])
    return Overlays(dev, st, en, its.get("name") or its.get("source") or "", sorted(set(blocked)),
                    sorted(set(stalls)), idle_pieces(trace, dev, st, en, opt))


def idle_pieces(trace: Trace, device: int, it_start: np.ndarray, it_end: np.ndarray, opt: RecordOptions):
    """The device's idle gaps by cause as the record measures them (record.py `_gpu_figures`: gaps
    from the device's first op to the last iteration's end, cold-start calls from the whole trace's
    spikes): `GapCauses.pieces()`."""
    spiky, trace = trace, busy_trace(trace)   # graph-level replays are busy, as in the record (§12.2)
    on = ex.device_ops(trace, device)
    calls = ex.device_launch_calls(trace, device, on)
    z = np.zeros(0, np.int64)
    if not len(on) or not len(calls) or not len(it_start):
        return z, z, z
    lo = min(int(it_start.min()), int(trace.ops.start[on].min()))
    # bounds only: the causes find each gap's ending op by their own rule (idle_causes.ending_ops)
    gaps = ex.device_gaps(trace, device, lo, int(it_end.max()), calls, full=False, ending=False)
    cold = cold_start(spiky, spikes(spiky, WHOLE, opt.backpressure))
    return ic.gap_causes(trace, on, calls, gaps.start, gaps.end, cold_calls=cold.calls).pieces()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("launchtui")
    except PackageNotFoundError:
        return "unknown"


def _header(trace: Trace, rows: ExportRows, sel: Selection) -> bytes:
    import json
    src = trace.source
    props = [{"id": d, "name": n} for d, n in sorted(trace.devices.items())]
    head = {"schemaVersion": 1, "deviceProperties": props,
            "launchtui": {"exported_by": f"launchtui {_version()}", "format": FORMAT, "source": src.to_json(),
                          "window_ns": [rows.t0, rows.t1], "selection": sel.label,
                          "devices": None if sel.devices is None else list(sel.devices),
                          "context_ops": rows.context_ops,
                          # the run's Python-tracer events: the export holds none (limits.host_tracing)
                          **({"python_frames": src.extra["python_frames"]} if src.extra.get("python_frames") else {})},
            "displayTimeUnit": "ns"}
    if src.wall_offset_ns:   # 0 or unknown: absolute times, as Kineto's older traces write
        head["baseTimeNanoseconds"] = int(src.wall_offset_ns)
    text = json.dumps(head, ensure_ascii=False, indent=None)
    return (text[:-1] + ',"traceEvents":[\n').encode("utf-8", "replace")


def _trailer(trace: Trace, t_end: int) -> bytes:
    import json
    tail = {}
    if "rank" in trace.source.extra:
        tail["distributedInfo"] = {"rank": trace.source.extra["rank"]}
    end = b'{"ph":"i","s":"g","name":"Record Window End","pid":"","tid":"","ts":' + ce.us_token(t_end) + b"}"
    extra = json.dumps(tail, ensure_ascii=False)[1:-1]
    return end + b"\n]" + (b"," + extra.encode("utf-8", "replace") if extra else b"") + b"}\n"


def chrome_chunks(trace: Trace, sel: Selection = WHOLE, opt: RecordOptions = RecordOptions()) -> Iterator[bytes]:
    """The export as byte chunks (header, events a category and CHUNK rows at a time, trailer)."""
    rows = export_rows(trace, sel)
    shifts = correlation_shifts(trace)
    yield _header(trace, rows, sel)
    yield from _metadata(trace, rows)
    yield from _api_events(trace, rows, shifts)
    yield from _op_events(trace, rows, shifts)
    yield from _range_events(trace, rows)
    yield from _overhead_events(trace, rows, shifts)
    yield from stack_events(trace, rows.api, lambda th: _thread_pid_tid(trace, th))
    yield from _flows(trace, rows, shifts)
    yield from _counters(trace, rows)
    ov = overlays(trace, sel, opt)
    yield from _markers(trace, rows, ov)
    yield from _idle(rows, ov)
    ends = [rows.t1] + [int(x.end.max()) for x, idx in ((trace.ops, rows.ops), (trace.api, rows.api)) if len(idx)]
    yield _trailer(trace, max(ends))


def _thread_pid_tid(trace: Trace, thread: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    th = trace.threads
    thread = np.asarray(thread, np.int64)
    ok = thread >= 0
    t = np.maximum(thread, 0)
    return np.where(ok, th.pid[t], -1), np.where(ok, th.tid[t], -1)


def _metadata(trace: Trace, rows: ExportRows) -> Iterator[bytes]:
    th = trace.threads
    used = unique_sorted(np.concatenate([trace.api.thread[rows.api], trace.ranges.thread[rows.ranges],
                                     trace.overheads.thread[rows.overheads]]).astype(np.int64))
    used = used[used >= 0]
    out = []
    for p in unique_sorted(th.pid[used]).tolist():   # per CPU process
        out += [ce.metadata_event("process_name", p, 0, {"name": f"process {p}"}),
                ce.metadata_event("process_labels", p, 0, {"labels": "CPU"})]
    for t in used.tolist():   # per thread
        if th.name[t] >= 0:
            out.append(ce.metadata_event("thread_name", th.pid[t], th.tid[t], {"name": trace.strings[int(th.name[t])]}))
    pairs = _streams(trace, rows.ops)
    for d in unique_sorted(pairs[0]).tolist():   # per device
        out += [ce.metadata_event("process_name", d, 0, {"name": trace.devices.get(d, f"GPU {d}")}),
                ce.metadata_event("process_labels", d, 0, {"labels": f"GPU {d}"}),
                ce.metadata_event("process_sort_index", d, 0, {"sort_index": 5000000 + d}),
                ce.metadata_event("thread_name", d, IDLE_TID, {"name": "GPU idle by cause (launchtui record)"}),
                ce.metadata_event("thread_sort_index", d, IDLE_TID, {"sort_index": -1})]
    for d, s in pairs.T.tolist():   # per stream
        out.append(ce.metadata_event("thread_name", d, s, {"name": f"stream {s} "}))
    yield b"".join(out)


def _streams(trace: Trace, o: np.ndarray) -> np.ndarray:
    """(2, n) distinct (device, stream) pairs of the ops `o`, sorted."""
    ops = trace.ops
    if not len(o):
        return np.zeros((2, 0), np.int64)
    st = ops.stream[o].astype(np.int64)
    lo = int(st.min())
    key = unique_sorted(ops.device[o].astype(np.int64) * (1 << 33) + (st - lo))
    return np.stack([key >> 33, (key & ((1 << 33) - 1)) + lo])


def _api_events(trace: Trace, rows: ExportRows, shifts) -> Iterator[bytes]:
    api = trace.api
    values = trace.strings.values
    for sl in ce.chunks(len(rows.api)):
        a = rows.api[sl]
        pid, tid = _thread_pid_tid(trace, api.thread[a])
        names = api.name[a]
        u, inv = np.unique(names, return_inverse=True)
        driver = np.array([_is_driver(values[i]) for i in u.tolist()], bool)[inv.reshape(-1)]
        corr = _shifted(api.corr[a], pid, shifts)
        names_b = np.array(ce.string_column(values, names) + [b""], dtype=object)[:-1]
        for flag, cat in ((False, b"cuda_runtime"), (True, b"cuda_driver")):
            m = driver == flag
            if m.any():
                yield ce.complete_events(cat, pid[m], tid[m], api.start[a][m], api.end[a][m], names_b[m].tolist(),
                                         b'"correlation":%d', corr[m])


def _is_driver(name: str) -> bool:
    """Kineto's `cuda_driver`: driver-API calls (`cuLaunchKernel`), not runtime (`cuda*`) or HIP calls."""
    return name.startswith("cu") and not name.startswith("cuda")


def _op_events(trace: Trace, rows: ExportRows, shifts) -> Iterator[bytes]:
    ops = trace.ops
    values = trace.strings.values
    pid_op = trace.os_pids(trace.process_keys(ops.pid[rows.ops])) if shifts else None
    for sl in ce.chunks(len(rows.ops)):
        o = rows.ops[sl]
        dev, st = ops.device[o], ops.stream[o]
        corr = _shifted(ops.corr[o], pid_op[sl], shifts) if shifts else ops.corr[o]
        names_b = np.array(ce.string_column(values, ops.full_name[o]) + [b""], dtype=object)[:-1]
        kind = ops.kind[o]
        # graph ids go out as Kineto's `graph id` arg, so the export reads back the same (§12.2)
        graph = trace.op_graph[o] if len(trace.op_graph) else np.full(len(o), -1, np.int64)
        for k, cat in enumerate(OP_CATS):
            for m in (kind == k) & (graph < 0), (kind == k) & (graph >= 0):
                if not m.any():
                    continue
                tpl = b'"device":%d,"stream":%d,"correlation":%d' + (b',"graph id":%d' if graph[m][0] >= 0 else b"")
                cols = (dev[m], st[m], corr[m]) + ((graph[m],) if graph[m][0] >= 0 else ())
                yield ce.complete_events(cat, dev[m], st[m], ops.start[o][m], ops.end[o][m], names_b[m].tolist(),
                                         tpl, *cols)


def _range_events(trace: Trace, rows: ExportRows) -> Iterator[bytes]:
    rg = trace.ranges
    values = trace.strings.values
    for sl in ce.chunks(len(rows.ranges)):
        r = rows.ranges[sl]
        pid, tid = _thread_pid_tid(trace, rg.thread[r])
        dom = rg.domain[r]
        start_end = rg.kind[r] != RANGE_PUSHPOP
        names_b = ce.string_column(values, rg.text[r])
        if not ((dom >= 0) | start_end).any():
            yield ce.complete_events(b"user_annotation", pid, tid, rg.start[r], rg.end[r], names_b)
            continue
        # ranges of a domain or of start/end kind: their args member by member
        dom_b = ce.string_column(values, np.where(dom >= 0, dom, -1))
        members = [b",".join(([b'"domain":' + d] if x >= 0 else []) + ([b'"nvtx":"start/end"'] if se else []))
                   for d, x, se in zip(dom_b, dom.tolist(), start_end.tolist())]
        yield ce.complete_events(b"user_annotation", pid, tid, rg.start[r], rg.end[r], names_b, b"%s", members)


def _overhead_events(trace: Trace, rows: ExportRows, shifts) -> Iterator[bytes]:
    ov = trace.overheads
    v = rows.overheads[ov.type[rows.overheads] == OVERHEAD_COMMAND_BUFFER_FULL]
    if not len(v):
        return
    pid, tid = _thread_pid_tid(trace, ov.thread[v])
    corr = _shifted(ov.corr[v], pid, shifts)
    name = ce.json_string(COMMAND_BUFFER_FULL)
    for sl in ce.chunks(len(v)):
        yield ce.complete_events(b"overhead", pid[sl], tid[sl], ov.start[v[sl]], ov.end[v[sl]], [name] * len(v[sl]),
                                 b'"correlation":%d', corr[sl])


def _flows(trace: Trace, rows: ExportRows, shifts) -> Iterator[bytes]:
    """`s` once per launching call, `f` per op it launched (a graph launch: one per op)."""
    ops, api = trace.ops, trace.api
    o = rows.ops[ops.api[rows.ops] >= 0]
    if not len(o):
        return
    calls = unique_sorted(ops.api[o])
    pid, tid = _thread_pid_tid(trace, api.thread[calls])
    corr_s = _shifted(api.corr[calls], pid, shifts)
    for sl in ce.chunks(len(calls)):
        yield ce.flow_events(b"s", pid[sl], tid[sl], api.start[calls[sl]], corr_s[sl])
    call_pid = np.full(len(api), -1, np.int64)
    call_pid[calls] = pid
    corr = _shifted(api.corr[ops.api[o]], call_pid[ops.api[o]], shifts)
    for sl in ce.chunks(len(o)):
        k = o[sl]
        yield ce.flow_events(b"f", ops.device[k], ops.stream[k], ops.start[k], corr[sl])


def _counters(trace: Trace, rows: ExportRows) -> Iterator[bytes]:
    """Pending depth per stream of the exported devices over the export's span (§5)."""
    if not len(rows.ops):
        return
    devs = set(unique_sorted(trace.ops.device[rows.ops]).tolist())
    lo = rows.t0 if not rows.whole else None
    hi = rows.t1 if not rows.whole else None
    for s in trace_index(trace).queue_series:   # per stream
        if s.device not in devs or not len(s.t):
            continue
        t, v = s.t, s.v.astype(np.int64)
        if lo is not None:
            i0, i1 = np.searchsorted(t, [lo, hi], side="right")
            first = s.value_at(np.array([lo], np.int64))
            t = np.concatenate([[lo], t[i0:i1]])
            v = np.concatenate([first, v[i0:i1]])
        name = ce.json_string(f"stream {s.stream} pending launches")
        for sl in ce.chunks(len(t)):
            yield ce.counter_events(name, b"pending", s.device, t[sl], v[sl])


def _markers(trace: Trace, rows: ExportRows, ov: Overlays) -> Iterator[bytes]:
    """Iteration starts (global), blocked launches and CPU stalls (on the launching thread)."""
    if ov.device is None:
        return
    api = trace.api
    keep = (ov.it_start >= rows.t0) & (ov.it_start <= rows.t1) if not rows.whole else np.ones(len(ov.it_start), bool)
    st = ov.it_start[keep]
    if len(st):
        names = [ce.json_string(f"Iteration Start: {n}") for n in _iteration_names(trace, ov, np.flatnonzero(keep))]
        yield ce.instant_events(MARK_CAT, b"g", ov.device, IDLE_TID, st, names)
    for what, items in (("blocked launch", [(a, int(api.start[a]), d, s) for a, d, s in ov.blocked]),
                        ("CPU stall", ov.stalls)):
        items = [x for x in items if x[0] >= 0 and (rows.whole or rows.t0 <= x[1] <= rows.t1)]
        if not items:
            continue
        a = np.array([x[0] for x in items], np.int64)
        pid, tid = _thread_pid_tid(trace, api.thread[a])
        t = np.array([x[1] for x in items], np.int64)
        yield ce.instant_events(MARK_CAT, b"t", pid, tid, t, [ce.json_string(what)] * len(items),
                                b'"device":%d,"stream":%d', [x[2] for x in items], [x[3] for x in items])


def _iteration_names(trace: Trace, ov: Overlays, which: np.ndarray) -> list[str]:
    """Each iteration's name: the range that starts it and is named like the iterations
    (`ProfilerStep#105`), else the iterations' name and number (`inference_burst #0`)."""
    rg = trace.ranges
    prefix = ov.it_name.removesuffix("#N")
    out = []
    for k in which.tolist():   # per iteration
        t = int(ov.it_start[k])
        i = int(np.searchsorted(rg.start, t))
        hits = [trace.strings[int(rg.text[j])] for j in range(i, min(i + 64, len(rg))) if rg.start[j] == t]
        hits = [h for h in hits if prefix and h.startswith(prefix) and h != ov.it_name]
        out.append(hits[0] if hits else f"{ov.it_name} #{k}")
    return out


def _idle(rows: ExportRows, ov: Overlays) -> Iterator[bytes]:
    s, e, c = ov.idle
    if ov.device is None or not len(s):
        return
    if not rows.whole:
        s, e = np.maximum(s, rows.t0), np.minimum(e, rows.t1)
        keep = e > s
        s, e, c = s[keep], e[keep], c[keep]
    for sl in ce.chunks(len(s)):
        yield ce.complete_events(IDLE_CAT, ov.device, IDLE_TID, s[sl], e[sl], ce.literal_column(list(ic.CAUSES), c[sl]))


def default_chrome_name(trace: Trace, sel: Selection) -> str:
    from pathlib import Path
    stem = Path(trace.source.path).name.split(".")[0] or "trace"
    if sel.t0 is None or sel.t1 is None:
        return f"{stem}.trace.json.gz"
    return f"{stem}.{sel.t0 / 1e9:.6f}-{sel.t1 / 1e9:.6f}.trace.json.gz"

