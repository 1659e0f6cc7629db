"""Queue class per stream from evidence in the trace, never from a constant (docs/definitions.md §V3).

Judged within each iteration (time outside them, warm-up or profiler setup, never counts), then per
stream: the class most iterations fall in, ties to the more severe; the count per class is kept.
The depth a call is judged at counts its own entry and the stream's pre-capture backlog (§5).
- Blocked calls: the slow launch calls that cluster at the stream's ceiling and return as a
  pending op starts, or that Nsight flagged 'command buffer full' (ceiling.py), found over the
  calls inside the iterations together (a few per iteration are too few to judge alone).
- Per iteration: *saturated* when it holds >= MIN_BLOCKED blocked calls or one Nsight flagged;
  *dry* when it has >= MIN_LAUNCHES launches on the stream and >= DRY_LAUNCH_SHARE of them are
  dry (the op starts within L + DRY_SLACK_NS of its call returning: the GPU waited for the call),
  or nothing is pending on the stream for >= EMPTY_SHARE of the iteration; *backlogged* when it
  has >= MIN_LAUNCHES launches, nothing is pending for < NEAR_EMPTY_SHARE of it and its launch
  calls find a median depth >= BACKLOG_DEPTH (the GPU always has work queued: GPU-bound or
  waiting on a dependency); else *normal*.
- The other slow calls: *cold starts* (cold_start.py) apart; at depth <= SHALLOW_DEPTH *CPU
  stalls* (the host was slow inside the call, not the queue); deeper ones *slow calls, no pattern*.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby

import numpy as np

from launchtui.analysis import ceiling as ce
from launchtui.analysis import intervals as iv
from launchtui.analysis import stream_calls as sc
from launchtui.analysis.backpressure import Episode, Options, command_buffer_full_ids, spikes
from launchtui.analysis.cold_start import SHALLOW_DEPTH, ColdStart, cold_start
from launchtui.analysis.idle_causes import device_latency
from launchtui.analysis.intervals import in_window_order, in_windows
from launchtui.analysis.queue import StreamSeries, backlog_starts, depth_before_launch, stream_series
from launchtui.analysis.stream_calls import DRY_SLACK_NS
from launchtui.trace.arrays import median_of
from launchtui.trace.model import API_LAUNCH, Trace

MIN_BLOCKED = 3           # blocked calls that make an iteration saturated (any Nsight-flagged one does)
MIN_LAUNCHES = 10         # fewer launches on a stream in an iteration are too little evidence for dry
DRY_LAUNCH_SHARE = 0.5
EMPTY_SHARE = 0.4
NEAR_EMPTY_SHARE = 0.05   # backlogged: nothing pending for less than this share of the iteration
BACKLOG_DEPTH = 32        # backlogged: the median launch call finds at least this many ops ahead
CLASSES = ("saturated", "dry", "backlogged", "normal")   # most severe first: ties go to it


@dataclass
class StreamVerdict:
    device_id: int
    stream_id: int
    queue_class: str          # one of CLASSES
    max_depth: int
    observed_limit: int | None
    blocked_launches: int
    cpu_stalls: int
    reason: str
    launches: int = 0
    dry_launch_share: float | None = None    # launches whose op started as the call returned
    empty_time_share: float | None = None    # iteration time with nothing pending on the stream
    dry_within_us: float | None = None       # L + DRY_SLACK_NS
    command_buffer_full: int = 0
    band: tuple[int, int] | None = None      # the blocked calls' depth band around observed_limit
    cold_starts: int = 0
    slow_no_pattern: int = 0
    ceiling: dict | None = None              # the evidence (ceiling.Ceiling.to_json), None without any
    iteration_classes: dict = field(default_factory=dict)   # class -> iterations judged so
    stalls: list = field(default_factory=list, repr=False)          # Episodes: CPU stalls inside
    blocked_calls: list = field(default_factory=list, repr=False)   # ApiCalls indices
    outside_stalls: list = field(default_factory=list, repr=False)  # Episodes outside, not blocked
    other_spikes: list = field(default_factory=list, repr=False)    # Episodes inside: cold, no pattern
    outside_max_depth: int | None = None     # deeper outside the iterations than inside: that depth
    outside_blocked: int = 0                 # launch calls blocked outside the iterations
    spike_words: dict = field(default_factory=dict, repr=False)   # API index -> what the spike is (§V3)
    outside: dict | None = None              # what the timeline marks outside the iterations (§V3)

    def to_json(self) -> dict:
        r = lambda x: None if x is None else round(x, 4)   # noqa: E731
        return {"device_id": self.device_id, "stream_id": self.stream_id, "queue_class": self.queue_class,
                "max_depth": self.max_depth, "observed_limit": self.observed_limit,
                "band": list(self.band) if self.band else None,
                "blocked_launches": self.blocked_launches, "cpu_stalls": self.cpu_stalls,
                "cold_starts": self.cold_starts, "slow_no_pattern": self.slow_no_pattern,
                "launches": self.launches, "dry_launch_share": r(self.dry_launch_share),
                "empty_time_share": r(self.empty_time_share), "dry_within_us": self.dry_within_us,
                "command_buffer_full": self.command_buffer_full, "reason": self.reason,
                "iteration_classes": self.iteration_classes, "ceiling": self.ceiling,
                "outside_max_depth": self.outside_max_depth, "outside_blocked": self.outside_blocked,
                "outside": self.outside}

    def one_line(self) -> str:
        return f"device {self.device_id} stream {self.stream_id}: {self.queue_class} — {self.reason}"

    def unblocked_spikes(self) -> list:
        """Every launch spike on the stream that is not a blocked call (the timeline's stall marks)."""
        return self.stalls + self.other_spikes + self.outside_stalls


def _max_in_windows(s: StreamSeries, starts: np.ndarray, ends: np.ndarray) -> int:
    """The stream's largest pending depth inside the iterations."""
    if not len(s.t):
        return 0
    at_start = s.value_at(starts)
    if in_window_order(s.t, starts, ends):
        # each iteration's changes are one slice of the series: a max per slice (reduceat over the
        # slice bounds a_0, b_0, a_1, ...; the odd results, between iterations, are dropped)
        a = np.searchsorted(s.t, starts, side="left")
        b = np.searchsorted(s.t, ends, side="left")
        ne = b > a
        inside = 0
        if ne.any():
            bounds = np.stack([a[ne], b[ne]], axis=1).ravel()
            if bounds[-1] == len(s.v):    # reduceat's last slice runs to the end anyway
                bounds = bounds[:-1]
            inside = int(np.maximum.reduceat(s.v, bounds)[0::2].max())
        return int(max(at_start.max(initial=0), inside))
    inside = s.v[in_windows(s.t, starts, ends) >= 0]
    return int(max(at_start.max(initial=0), inside.max(initial=0)))


def _empty_runs(s: StreamSeries, backlog: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The time in [lo, hi) with nothing pending on the stream, as a disjoint sorted set: depth 0
    before the first change and in each run of consecutive zero steps, and only once the
    pre-capture backlog has started (its ops are pending from the window start)."""
    zero = (s.v == 0).view(np.int8)
    edge = np.diff(zero, prepend=np.int8(0), append=np.int8(0))
    first = np.flatnonzero(edge == 1)            # step index where a run begins
    past = np.flatnonzero(edge == -1)            # step index one past its end
    del edge
    rs = np.empty(len(first) + 1, np.int64)
    re = np.empty(len(first) + 1, np.int64)
    rs[0], re[0] = min(lo, int(s.t[0])), int(s.t[0])
    rs[1:] = s.t[first]
    re[1:] = s.t[np.minimum(past, len(s.t) - 1)]
    re[1:][past == len(s.t)] = max(hi, int(s.t[-1]))   # the last run lasts past the last change
    if len(backlog):
        np.maximum(rs, int(backlog[-1]), out=rs)
    keep = re > rs
    return rs[keep], re[keep]


def _share(num, den) -> float | None:
    return float(num) / float(den) if den > 0 else None


@dataclass
class _Inputs:
    """What every stream's judgement reads."""
    starts: np.ndarray
    ends: np.ndarray
    dbl: np.ndarray                 # queue.depth_before_launch
    cbf_ids: np.ndarray             # API indices Nsight flagged 'command buffer full', sorted
    cold_calls: frozenset           # API indices of cold-start calls
    spikes: dict                    # (device, stream) -> its spike Episodes
    threshold: int                  # the backpressure threshold the timeline marks episodes at (§6)


def classify(trace: Trace, starts: np.ndarray, ends: np.ndarray, opt: Options = Options(), devices=None,
             sp: list[Episode] | None = None, cold: ColdStart | None = None) -> list[StreamVerdict]:
    """One verdict per (device, stream) with launched ops, in (device, stream) order, judged within
    each iteration [starts_k, ends_k) (time outside them never counts) and then over the
    iterations: the class most iterations fall in, ties to the more severe (definitions §V3).
    `sp`: spikes(trace, opt=opt) of the whole trace, `cold`: cold_start(trace, sp), when the caller
    has them. L is each device's submission latency (idle_causes.device_latency)."""
    sp = spikes(trace, opt=opt) if sp is None else sp
    if cold is not None:
        cold_calls = frozenset(cold.calls.tolist())
    elif any(0 <= e.max_depth < SHALLOW_DEPTH for e in sp):   # else no spike can be a cold start
        cold_calls = frozenset(cold_start(trace, sp).calls.tolist())
    else:
        cold_calls = frozenset()
    by_stream: dict = {}
    for e in sp:
        by_stream.setdefault((e.device, e.stream), []).append(e)
    x = _Inputs(np.asarray(starts, np.int64), np.asarray(ends, np.int64), depth_before_launch(trace),
                command_buffer_full_ids(trace), cold_calls, by_stream, opt.threshold)
    out = []
    for dev, series in groupby(stream_series(trace), key=lambda s: s.device):   # (device, stream) order
        if devices is not None and dev not in devices:
            continue
        series = list(series)
        ons = sc.streams_ops(trace, dev, [s.stream for s in series])
        latency = device_latency(trace, dev, lambda: ons).ns
        for s, on in zip(series, ons):
            v = _judge_stream(trace, s, on, x, latency)
            if v is not None:
                out.append(v)
    return out


def _iteration_classes(s: StreamSeries, calls: sc.Calls, blocked: np.ndarray, cbf: np.ndarray,
                       backlog: np.ndarray, x: _Inputs) -> tuple[np.ndarray, dict]:
    """Per iteration: the class code (index into CLASSES), and the counts it was judged from."""
    starts, ends = x.starts, x.ends
    n_it = len(starts)
    k_1 = calls.k + 1          # 0: outside the iterations, a bin dropped (no filtered copies)
    per = lambda sel: np.bincount(k_1[sel], minlength=n_it + 1)[1:]   # noqa: E731 - per iteration
    f = {"launches": np.bincount(k_1, minlength=n_it + 1)[1:], "dry": per(calls.dry),
         "blocked": per(blocked), "cbf": per(cbf), "length": ends - starts}
    rs, re = _empty_runs(s, backlog, int(starts.min()), int(ends.max()))
    f["empty"] = iv.measure_in(rs, re, starts, ends)
    f["median_depth"] = _median_per_iteration(calls, n_it)
    sat = (f["cbf"] > 0) | (f["blocked"] >= MIN_BLOCKED)
    enough = f["launches"] >= MIN_LAUNCHES
    dry = enough & ((f["dry"] >= DRY_LAUNCH_SHARE * f["launches"]) | (f["empty"] >= EMPTY_SHARE * f["length"]))
    backlogged = enough & (f["empty"] < NEAR_EMPTY_SHARE * f["length"]) & (f["median_depth"] >= BACKLOG_DEPTH)
    return np.select([sat, dry, backlogged], [0, 1, 2], 3), f


def _median_per_iteration(calls: sc.Calls, n_it: int) -> np.ndarray:
    """The (lower) median depth of the stream's launch calls in each iteration, 0 without any:
    the calls ranked by (iteration, depth) at once, then each iteration's middle one."""
    inside = calls.k >= 0
    out = np.zeros(n_it, np.int64)
    if not inside.any():
        return out
    k, d = calls.k[inside], calls.depth[inside]
    del inside
    n = np.bincount(k, minlength=n_it)
    has = np.flatnonzero(n)
    mid = (n[has] - 1) // 2                  # the lower middle's rank inside its iteration
    lo = int(d.min())
    span = int(d.max()) - lo + 1
    if n_it * span >= 2**62:                 # no room for one integer key
        out[has] = d[np.lexsort((d, k))][(np.cumsum(n) - n)[has] + mid]
        return out
    key = k.astype(np.int64, copy=False)     # (iteration, depth) as one integer, in k's place
    key *= span
    key += d
    key -= lo
    del k, d
    if n_it * span <= 2 * len(key):          # depths span a few hundred values: a count per pair
        at_or_below = np.cumsum(np.bincount(key, minlength=n_it * span).reshape(n_it, span)[has], axis=1)
        out[has] = np.argmax(at_or_below > mid[:, None], axis=1) + lo
    else:
        key.sort()
        out[has] = key[(np.cumsum(n) - n)[has] + mid] % span + lo
    return out


def _judge_stream(trace: Trace, s: StreamSeries, on: np.ndarray, x: _Inputs, latency: int) -> StreamVerdict | None:
    """The stream's verdict (None: no launched op on it); `on`: its ops in start order."""
    backlog = backlog_starts(trace, on)
    calls = sc.stream_calls(trace, on, x.dbl, backlog, x.starts, x.ends, latency + DRY_SLACK_NS)
    if calls is None:
        return None
    eps = sorted(x.spikes.get((s.device, s.stream), []), key=lambda e: e.worst_api)
    slow = sc.positions_of(calls.api, np.fromiter((e.worst_api for e in eps), np.int64, len(eps)))
    cbf = sc.positions_of(calls.api, x.cbf_ids)
    inside = calls.k >= 0
    slack = latency + ce.RETURN_SLACK_NS
    c_in = sc.judge_scope(trace, calls, on, inside, slow, cbf, slack)
    c_out = sc.judge_scope(trace, calls, on, ~inside, slow, cbf, slack)
    del inside
    cls_k, f = _iteration_classes(s, calls, c_in.blocked, cbf[calls.k[cbf] >= 0], backlog, x)
    counts = np.bincount(cls_k, minlength=len(CLASSES))
    cls = CLASSES[int(np.argmax(counts))]      # argmax takes the first (most severe) of ties
    won = cls_k == CLASSES.index(cls)          # the stream's evidence: pooled over its class's iterations
    kinds = _sort_spikes(eps, calls, c_in, c_out, x.cold_calls)
    max_depth = _max_in_windows(s, x.starts, x.ends)
    top = int(s.v.max()) if len(s.v) else 0
    out_depth = top if top > max_depth else None
    v = StreamVerdict(
        s.device, s.stream, cls, max_depth, c_in.depth if c_in.found else None, len(c_in.blocked),
        len(kinds["stall"]), "", launches=int(f["launches"].sum()),
        dry_launch_share=_share(f["dry"][won].sum(), f["launches"][won].sum()),
        empty_time_share=_share(f["empty"][won].sum(), f["length"][won].sum()),
        dry_within_us=round((latency + DRY_SLACK_NS) / 1e3, 3), command_buffer_full=int(f["cbf"].sum()),
        band=c_in.band if c_in.found else None, cold_starts=_cold_calls_inside(calls, x.cold_calls),
        slow_no_pattern=len(kinds["none"]),
        ceiling=c_in.to_json(len(backlog), latency) if c_in.slow_deep or c_in.command_buffer_full else None,
        iteration_classes={c: int(n) for c, n in zip(CLASSES, counts)}, stalls=kinds["stall"],
        blocked_calls=calls.api[c_in.blocked].tolist(), outside_stalls=kinds["outside"],
        other_spikes=kinds["cold"] + kinds["none"], outside_max_depth=out_depth, spike_words=kinds["words"],
        outside_blocked=len(c_out.blocked) if out_depth is not None else 0)
    if out_depth is not None and (v.outside_blocked or out_depth >= x.threshold):
        v.outside = {"max_depth": out_depth, "blocked": v.outside_blocked, "range": _range_at_max(trace, s)}
    dur = trace.api.end[v.blocked_calls] - trace.api.start[v.blocked_calls]
    v.reason = _reason(v, c_in, int(f["launches"].max()), len(x.starts), len(backlog),
                       float(median_of(dur)) / 1e3 if len(dur) else 0.0,
                       int(median_of(f["median_depth"][won])) if won.any() else 0)
    return v


def _cold_calls_inside(calls: sc.Calls, cold: frozenset) -> int:
    """The stream's cold-start launch calls inside the iterations: calls, as the record counts its
    slow first launches (one spike episode can hold several)."""
    if not cold:
        return 0
    inside = calls.api[calls.k >= 0]
    return int(np.isin(inside, np.fromiter(cold, np.int64, len(cold))).sum())
def _range_at_max(trace: Trace, s: StreamSeries) -> str | None:
    """The innermost NVTX range of the launch call that took the stream to its deepest point (the
    depth rises at a launch call's start), None without one."""
    from launchtui.analysis import nvtx
    if not len(s.v):
        return None
    t = int(s.t[int(np.argmax(s.v))])
    api = trace.api
    hit = np.flatnonzero((api.start == t) & (api.kind == API_LAUNCH))
    if not len(hit):
        return None
    r = int(nvtx.innermost_at(trace, api.thread[hit[:1]], api.start[hit[:1]])[0])
    return nvtx.range_name(trace, r) if r >= 0 else None


def _sort_spikes(eps: list, calls: sc.Calls, c_in: ce.Ceiling, c_out: ce.Ceiling, cold: frozenset) -> dict:
    """The stream's spikes by what they are: blocked ones are left out; inside the iterations a
    cold start, a CPU stall (at depth <= SHALLOW_DEPTH) or no pattern; outside, any not blocked."""
    blocked = set(calls.api[c_in.blocked].tolist()) | set(calls.api[c_out.blocked].tolist())
    ids = np.fromiter((e.worst_api for e in eps), np.int64, len(eps))     # sorted, as `eps` is
    pos = np.minimum(np.searchsorted(calls.api, ids), max(len(calls.api) - 1, 0))
    out = {"stall": [], "cold": [], "none": [], "outside": [], "words": {}}
    for e, p in zip(eps, pos.tolist()):   # spikes are rare events
        if calls.api[p] != e.worst_api or e.worst_api in blocked:
            continue
        d = int(calls.depth[p])
        if calls.k[p] < 0:
            out["outside"].append(e)
            kind = "cold" if e.worst_api in cold else "stall" if d <= SHALLOW_DEPTH else "none"
        elif e.worst_api in cold:
            out["cold"].append(e)
            kind = "cold"
        else:
            kind = "stall" if d <= SHALLOW_DEPTH else "none"
            out[kind].append(e)
        out["words"][e.worst_api] = spike_words(kind, d, calls.k[p] < 0)
    return out


def spike_words(kind: str, depth: int, outside: bool) -> str:
    """What a launch spike that is not a blocked call is, by the §V3 depth rule (the record's
    counts, the timeline's `b` and the details line read these words)."""
    where = " outside the iterations" if outside else ""
    if kind == "cold":
        return f"cold start (first launch, depth {depth}){where}"
    if kind == "stall":
        return f"CPU stall, not backpressure (slow launch at depth {depth} <= {SHALLOW_DEPTH}){where}"
    return (f"slow launch at depth {depth}, not a blocked call (no full-queue pattern: "
            f"neither backpressure nor a CPU stall){where}")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def _blocked_words(v: StreamVerdict, c: ce.Ceiling, median_us: float) -> str:
    if not c.clustered:
        return (f"Nsight recorded 'command buffer full' for {c.command_buffer_full} launch calls "
                f"(median depth {c.depth})")
    out = (f"{v.blocked_launches} launch calls blocked (median {median_us:.0f} µs) at depth {c.depth} "
           f"(band {c.band[0]}-{c.band[1]}): {c.in_band} of {c.slow_deep} slow calls at depth >= "
           f"{ce.DEEP_DEPTH} sit there and {_pct(c.returns_share)} of them return as a pending op starts "
           f"(normal calls: {_pct(c.baseline)})")
    if c.command_buffer_full:
        out += f"; Nsight recorded 'command buffer full' for {c.command_buffer_full}"
    return out


def _reason(v: StreamVerdict, c_in: ce.Ceiling, most: int, n_it: int, backlog: int, median_us: float,
            median_depth: int = 0) -> str:
    """The verdict's evidence in words (definitions.md §V3); `most`: the most launches in one iteration."""
    queue = (f"{_pct(v.dry_launch_share)} of launches start within {v.dry_within_us:g} µs of their call "
             f"returning; nothing pending {_pct(v.empty_time_share)} of the time")
    if v.queue_class == "saturated":
        bits = [_blocked_words(v, c_in, median_us)]
    elif v.launches == 0:
        bits = ["no launches inside the iterations"]
    elif most < MIN_LAUNCHES:
        per = f", at most {most} per iteration" if n_it > 1 else ""
        bits = [f"too few launches to judge ({v.launches}{per}); max pending {v.max_depth}"]
    else:
        bits = [queue if v.queue_class == "dry" else f"max pending {v.max_depth}; {queue}"]
        if v.queue_class == "backlogged":
            bits[0] = (f"never near empty: launch calls find a median {median_depth} ops ahead, max pending "
                       f"{v.max_depth}; nothing pending {_pct(v.empty_time_share)} of the time (the GPU has "
                       f"work queued: GPU-bound or waiting on a dependency)")
        if c_in.found:       # blocked calls in too few iterations to make the class
            bits.append(_blocked_words(v, c_in, median_us))
    if c_in.slow_deep and not c_in.found:
        bits.append(f"no full queue: {c_in.why_not}")
    if backlog and (c_in.found or c_in.slow_deep):
        bits.append(f"the depth counts {backlog:,} ops launched before the capture until they start")
    if n_it > 1:
        bits.append("iterations: " + ", ".join(f"{int(n)} {c}" for c, n in v.iteration_classes.items() if n))
    for n, words in ((v.cpu_stalls, f"CPU stall{'s' if v.cpu_stalls != 1 else ''} (slow launch at depth "
                                    f"<= {SHALLOW_DEPTH})"),
                     (v.cold_starts, f"cold start{'s' if v.cold_starts != 1 else ''} (first launches)"),
                     (v.slow_no_pattern, f"slow call{'s' if v.slow_no_pattern != 1 else ''}, no pattern")):
        if n:
            bits.append(f"{n} {words}")
    if v.outside_blocked:   # deeper outside the iterations with blocked calls there: said, not judged
        bits.append(f"outside the iterations (not judged) pending reaches {v.outside_max_depth} and "
                    f"{v.outside_blocked} launch calls block there")
    return "; ".join(bits)
