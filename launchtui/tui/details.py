"""Text for the details panel: what lies under the time cursor on the selected row.

Pure Python over engine arrays (no Textual); every lookup is a searchsorted, O(log N).
"""
from __future__ import annotations

import numpy as np

from launchtui.analysis import lanes as lanes_fn
from launchtui.analysis import nvtx, sources
from launchtui.analysis.index import trace_index
from launchtui.analysis.prose import marker_name
from launchtui.analysis.queue import depth_before_launch
from launchtui.trace.model import API_KIND_NAMES, OP_KIND_NAMES, Trace
from launchtui.tui.format import fmt_duration

fmt_d = fmt_duration


def fmt_time(t: int, origin: int | None) -> str:
    """Exact ns (integer arithmetic: epoch clocks exceed float64's exact range)."""
    t = int(t)
    if origin is not None:
        d = t - int(origin)
        sign = "+" if d >= 0 else "-"
        ms, ns = divmod(abs(d), 1_000_000)
        return f"{sign}{ms:,}.{ns:06d} ms"
    sign = "-" if t < 0 else ""
    s, ns = divmod(abs(t), 1_000_000_000)
    return f"{sign}{s}.{ns:09d} s"


def thread_label(trace: Trace, th: int) -> str:
    if th < 0 or th >= len(trace.threads):
        return "?"
    tid = int(trace.threads.tid[th])
    nid = int(trace.threads.name[th])
    name = trace.strings[nid] if nid >= 0 else ""
    return f"{tid} ({name})" if name else str(tid)


def _nvtx_path(trace: Trace, thread: int, t: int) -> str:
    if not len(trace.ranges):
        return "NVTX: none in this trace"
    r = int(nvtx.innermost_at(trace, np.array([thread]), np.array([t], np.int64))[0])
    return f"NVTX: {nvtx.path_text(trace, r, shown=True)}" if r >= 0 else "NVTX: (outside every range)"


def describe_op(trace: Trace, k: int, origin: int | None) -> list[str]:
    ops, api = trace.ops, trace.api
    name = trace.strings[int(ops.name[k])]
    full = trace.strings[int(ops.full_name[k])]
    dur = int(ops.end[k] - ops.start[k])
    kind = OP_KIND_NAMES[int(ops.kind[k])]
    small = f" (small: < {fmt_d(lanes_fn.SMALL_KERNEL_NS)})" if kind == "kernel" and dur < lanes_fn.SMALL_KERNEL_NS else ""
    l1 = (f"{kind} {name}  {fmt_d(dur)}{small}  GPU {int(ops.device[k])} stream {int(ops.stream[k])}"
          f"  at {fmt_time(int(ops.start[k]), origin)}")
    a = int(ops.api[k])
    if a >= 0:
        adur = int(api.end[a] - api.start[a])
        q = int(ops.start[k] - api.end[a])
        dbl = int(depth_before_launch(trace)[k])
        qtxt = f"queue {fmt_d(q)}" if q >= 0 else "queue none (started before the call returned)"
        l2 = (f"launched by {trace.strings[int(api.name[a])]} {fmt_d(adur)} on thread "
              f"{thread_label(trace, int(api.thread[a]))}  {qtxt}  pending before launch {dbl}")
        l3 = _site(trace, a) + _nvtx_path(trace, int(api.thread[a]), int(api.start[a]))
    else:
        l2 = "no launch call in the trace (launched before the capture window?)"
        l3 = "NVTX: unknown without the launch call"
    if full != name:
        l3 += f"   │ {full}"
    return [l1, l2, l3]


def describe_api(trace: Trace, a: int, lane, origin: int | None) -> list[str]:
    api, ops = trace.api, trace.ops
    dur = int(api.end[a] - api.start[a])
    name = trace.strings[int(api.name[a])]
    spike = ""
    if lane is not None and lane.spike_ns and dur > lane.spike_ns and int(api.kind[a]) == 1:
        spike = f"  ! LAUNCH SPIKE (> {fmt_d(lane.spike_ns)}; thread median {fmt_d(lane.median_ns)})"
    l1 = (f"{name} ({API_KIND_NAMES[int(api.kind[a])]})  {fmt_d(dur)}  thread "
          f"{thread_label(trace, int(api.thread[a]))}  at {fmt_time(int(api.start[a]), origin)}{spike}")
    # the op(s) it launched: ops with api == a (ops are few per call; searchsorted on the call's corr)
    hit = _ops_of_call(trace, a)
    if len(hit):
        k = int(hit[0])
        dbl = int(depth_before_launch(trace)[k])
        q = int(ops.start[k] - api.end[a])
        more = f" (+{len(hit) - 1} more ops)" if len(hit) > 1 else ""
        l2 = (f"launched {OP_KIND_NAMES[int(ops.kind[k])]} {trace.strings[int(ops.name[k])]}{more} on GPU "
              f"{int(ops.device[k])} stream {int(ops.stream[k])}  pending at the call {dbl}  "
              f"queue {fmt_d(q) if q >= 0 else 'none'}")
    else:
        l2 = "no GPU op in the trace for this call"
    return [l1, l2, _site(trace, a) + _nvtx_path(trace, int(api.thread[a]), int(api.start[a]))]


def _site(trace: Trace, a: int) -> str:
    """'from file:line function (c: stack) │ ' for a call with a user frame in its stack (§S2)."""
    site = sources.site_of_api(trace, a)
    return f"from {site} (c: stack)  │ " if site else ""


def _ops_of_call(trace: Trace, a: int) -> np.ndarray:
    """GPU ops launched by API call a (the trace's index, built at load: O(log N) per lookup)."""
    return trace_index(trace).ops_of_call(a)


def prepare(trace: Trace) -> None:
    """Build the lookups the panel needs (off the UI thread, at load time)."""
    trace_index(trace)


def describe_range(trace: Trace, r: int, origin: int | None) -> list[str]:
    rg = trace.ranges
    dur = int(rg.end[r] - rg.start[r])
    occ = nvtx.occurrences(trace, int(rg.text[r]))
    pos = int(np.searchsorted(occ, r)) + 1
    return [f"range {nvtx.range_name(trace, r, shown=True)}  {fmt_d(dur)}  occurrence {pos}/{len(occ)}  thread "
            f"{thread_label(trace, int(rg.thread[r]))}  at {fmt_time(int(rg.start[r]), origin)}",
            f"path: {nvtx.path_text(trace, r, shown=True)}",
            "o: pick a range name   [ / ]: previous / next occurrence   O: optimizer phase"]


def describe_queue(trace: Trace, lane, t0: int, t1: int, marks, origin: int | None, threshold: int) -> list[str]:
    at = int(lane.value_at(np.array([t0], np.int64))[0])
    mx = int(lane.bin_max(np.array([t0, max(t1, t0 + 1)], np.int64))[0])
    flag = "  ≥ threshold: launches may block" if mx >= threshold else ""
    l1 = (f"pending launches on GPU {lane.device} stream {lane.stream}: {at} at the cursor, max {mx} in this "
          f"cell{flag}")
    l2 = f"stream peak {lane.peak} at {fmt_time(lane.peak_t, origin)}  (threshold {threshold})"
    l3 = "b / B: next / previous backpressure episode or launch spike"
    for e in marks:
        if e.kind == "queue" and e.device == lane.device and e.stream == lane.stream and e.start <= t0 <= e.end:
            l3 = (f"inside a {e.level} episode: {fmt_d(e.end - e.start)}, max depth {e.max_depth}, "
                  f"worst launch {fmt_d(e.worst_api_ns)}")
            break
    return [l1, l2, l3]


def describe_idle(trace: Trace, lane, t0: int, origin: int | None, pending: int | None = None) -> list[str]:
    ev = lane.ev
    i = int(ev.n_start(np.int64(t0), "right"))
    prev_end = int(ev.end_at(i - 1)) if i > 0 else None
    nxt = int(ev.start_at(i)) if i < len(ev) else None
    parts = [f"GPU {lane.device} stream {lane.stream} idle at {fmt_time(t0, origin)}"]
    if prev_end is not None:
        parts.append(f"previous op ended {fmt_d(t0 - prev_end)} before")
    if nxt is not None:
        parts.append(f"next starts in {fmt_d(nxt - t0)}")
    why = ""
    if pending:   # idle with launched work queued: not waiting on the host (§V2 dependency)
        why = (f"{pending:,} launched op{'s' if pending != 1 else ''} pending on the stream while it is idle: "
               "the GPU waits with work queued (a dependency: an event, another stream, a collective), "
               "not on the host")
    elif pending == 0:
        why = "nothing pending on the stream: the GPU waits for the host to launch"
    return ["; ".join(parts), why, ""]


def describe_mark(trace: Trace, e, pos: int, n: int, origin: int | None) -> str:
    where = nvtx.path_text(trace, e.range_idx, shown=True) if e.range_idx >= 0 else "no NVTX range"
    if e.kind == "queue":
        return (f"mark {pos}/{n}: queue {e.level} on GPU {e.device} stream {e.stream}, "
                f"{fmt_d(e.end - e.start)}, max depth {e.max_depth}, {e.launches} launches, worst launch "
                f"{fmt_d(e.worst_api_ns)}  [{where}]")
    extra = " (Nsight: command buffer full)" if e.command_buffer_full else ""
    on = (f"on GPU {e.device} stream {e.stream}, pending {e.max_depth}" if e.device >= 0
          else "(its GPU op is not in the trace)")
    return f"mark {pos}/{n}: launch spike {fmt_d(e.worst_api_ns)} {on}{extra}  [{where}]"


def phase_text(phase: str, share: float) -> str:
    """The row's main NVTX range in words that match its share: "mostly" only for a majority
    (definitions.md §T4)."""
    pct = f"{share * 100:.0f} %" if share >= 0.005 else "<1 %"
    phase = marker_name(phase)
    if share > 0.5:
        return f"mostly launched inside {phase} ({pct} of launches)"
    return f"no range holds most launches; the largest share is {phase} ({pct} of launches)"


def describe_row(row: dict, selection_label: str) -> list[str]:
    """The table row under the table cursor, with the reading rules of domain.md §5."""
    api, q, k = row["avg_api_us"], row["avg_queue_us"], row["avg_kernel_us"]
    l1 = (f"{row['kernel_name']} on GPU {row['device_id']}: {row['launch_count']:,} launches in {selection_label}"
          f"  API avg {api:,.1f} µs (max {row['max_api_us']:,.1f}, total {row['total_api_ms']:,.3f} ms)  queue avg "
          f"{q:,.1f} µs ({row['queue_count']:,} queued)  kernel avg {k:,.3f} µs")
    notes = []
    if row.get("is_nccl"):
        notes.append("NCCL: part of the collective protocol; analyse with communication, not fusion")
    elif k < api:
        notes.append("kernel < launch call: launching costs more CPU than the kernel costs GPU → fusion candidate")
    if q < 5:
        notes.append("queue ≈ 0: the queue runs dry, the GPU waits on the CPU's launches")
    elif q >= 50:
        notes.append("queue high: the GPU has a backlog (not idle because of these launches)")
    if row["max_api_us"] > 100 and row["max_api_us"] > 10 * max(api, 0.1):
        notes.append(f"launch spikes up to {row['max_api_us']:,} µs: backpressure (full queue) or lazy loading")
    phase = row.get("nvtx_range")
    l3 = f"phase: {phase_text(phase, row.get('nvtx_share', 0.0))}" if phase else \
        "phase: none at this level (no range inside the iteration's own encloses these launches; P changes the level)"
    return [l1, "; ".join(notes) or "no launch-overhead signal in this row", l3 + "   │ Enter: show on the timeline"]
