#!/usr/bin/env python3
"""Capture launchtui's first-party GPU fixtures with PyTorch's profiler (issue 3).

    python scripts/capture_gpu_traces.py --out fixtures/gpu              # on a CUDA machine
    python scripts/capture_gpu_traces.py --out /tmp/dry --dry-run        # on the CPU, no GPU needed
    python scripts/capture_gpu_traces.py --out fixtures/gpu --remeasure  # redo MANIFEST measurements, no torch

Writes one gzipped Kineto trace per scenario (`<name>.json.gz`, at most SIZE_LIMIT_BYTES each) and
`MANIFEST.json`: GPU name, driver, torch and CUDA versions, shapes, each trace's purpose and size, and
what launchtui's own engine measured in it right after capture (for `backpressure`: the maximum
pending-launch depth the trace shows, i.e. the stream-queue limit on this GPU).

The script only reads the GPU's settings; it never changes them (no clocks, no persistence mode, no
memory fraction). torch is imported lazily, so the pure helpers (argument parsing, the trace table,
manifest building, size fitting, measurements) work without it; the project's tests rely on that.

Exit status: 0 all good; 2 no torch / no CUDA device / bad arguments; 3 traces written but a check
failed (size over the limit, engine unavailable, or a trace does not show what it is meant to show).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import gzip
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # `python scripts/capture_gpu_traces.py` puts scripts/ first, not the repo
    sys.path.insert(0, str(REPO))

MANIFEST_NAME = "MANIFEST.json"
MANIFEST_SCHEMA = 1
SIZE_LIMIT_BYTES = 2 * 1024 * 1024          # per gzipped trace
DEFAULT_STEPS = 5
REGENERATE = "python scripts/capture_gpu_traces.py --out fixtures/gpu"
EXIT_OK, EXIT_UNAVAILABLE, EXIT_CHECK_FAILED = 0, 2, 3

# What the tests (tests/test_gpu_fixtures.py) and the post-capture checks expect.
MIN_OPTIMIZER_RATIO = 10          # unfused optimizer-range launches >= 10 x fused
MIN_UNFUSED_OPTIMIZER_LAUNCHES = 1000
MIN_SATURATED_DEPTH = 1000        # backpressure: the pending depth must reach at least this
MIN_OPS_PER_GRAPH_LAUNCH = 100    # cuda_graphs: "many kernels share one cudaGraphLaunch"


# --------------------------------------------------------------------------------------------------
# The trace table
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Shapes:
    layers: int
    hidden: int
    heads: int
    ffn: int
    batch: int
    seq: int
    dtype: str

    def to_json(self) -> dict:
        return asdict(self)


# The GPU shapes: small enough that 5 profiled steps stay well under the size limit, big enough to be a
# realistic (launch-bound) transformer block. 4 layers x 16 parameter tensors + the final norm = 66 tensors.
GPU_SHAPES = Shapes(layers=4, hidden=1024, heads=16, ffn=4096, batch=8, seq=256, dtype="bfloat16")
# The dry run keeps the structure (same layers, so the same parameter tensors and the same op counts per
# step) with tiny dimensions, so a CPU finishes it in seconds.
DRY_RUN_SHAPES = Shapes(layers=4, hidden=64, heads=4, ffn=256, batch=2, seq=16, dtype="bfloat16")


@dataclass(frozen=True)
class TraceSpec:
    name: str
    purpose: str
    shows: tuple[str, ...]          # what the trace is meant to show, as checked by the tests

    @property
    def filename(self) -> str:
        return trace_filename(self.name)


SPECS: tuple[TraceSpec, ...] = (
    TraceSpec(
        "eager_adamw_unfused",
        "Eager training of a small transformer (bf16) with torch.optim.AdamW(foreach=False): the 'before' "
        "half of the fused-optimizer before/after pair.",
        ("record_function ranges forward, backward, Optimizer.step (plus PyTorch's Optimizer.step#AdamW.step)",
         "thousands of tiny per-parameter optimizer kernels in the Optimizer.step range",
         f"optimizer-range launches >= {MIN_OPTIMIZER_RATIO}x those of eager_adamw_fused")),
    TraceSpec(
        "eager_adamw_fused",
        "The same training with torch.optim.AdamW(fused=True): the 'after' half of the pair (the fix the "
        "domain brief recommends).",
        ("the same ranges as eager_adamw_unfused",
         "a handful of multi-tensor optimizer kernels per step instead of thousands")),
    TraceSpec(
        "backpressure",
        "One stream: a long GPU kernel (torch.cuda._sleep, ~50 ms) followed by ~3000 tiny kernels launched "
        "as fast as possible, so the stream's pending queue hits its hardware limit and launch calls block.",
        ("the pending-launch depth reaches the stream's limit on this GPU (recorded in the manifest)",
         "launch spikes: launch calls that block for a slot (>100 us and >10x the median)")),
    TraceSpec(
        "cuda_graphs",
        "The model's whole training step captured with torch.cuda.CUDAGraph (AdamW capturable) and replayed "
        "once per profiled step.",
        ("one cudaGraphLaunch per replay",
         "every kernel of a replay shares its cudaGraphLaunch's correlation id (joined to it)",
         f"many (>= {MIN_OPS_PER_GRAPH_LAUNCH}) GPU ops per graph launch")),
    TraceSpec(
        "sync_in_loop",
        "eager_adamw_unfused with loss.item() inside every step: a host sync per step.",
        ("a cudaStreamSynchronize (via .item()) in every ProfilerStep",
         "the pending queue drains to 0 in every step: the GPU waits for the CPU")),
)
SPEC_BY_NAME = {s.name: s for s in SPECS}
TRACE_NAMES = tuple(s.name for s in SPECS)


def trace_filename(name: str) -> str:
    return f"{name}.json.gz"


# --------------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------------

def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {v}")
    return v


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, not {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, not {text}")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="capture_gpu_traces.py",
        description="Capture launchtui's first-party GPU fixtures (gzipped Kineto traces + MANIFEST.json) "
                    "with PyTorch's profiler. Never changes the GPU's settings.")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created if missing)")
    p.add_argument("--only", nargs="+", metavar="NAME", choices=TRACE_NAMES,
                   help="capture only these traces (default: all): " + ", ".join(TRACE_NAMES))
    p.add_argument("--steps", type=_positive_int, default=DEFAULT_STEPS,
                   help=f"profiled steps (replays) per model trace ({DEFAULT_STEPS})")
    p.add_argument("--dry-run", action="store_true",
                   help="no GPU: run every trace's code path on the CPU with tiny shapes and write CPU-only "
                        "traces and the manifest, so the script is known to work up to the CUDA-only parts")
    p.add_argument("--remeasure", action="store_true",
                   help="no capture, no torch: re-read the traces already in DIR with launchtui's engine and "
                        "rewrite the manifest's measurements and checks")
    p.add_argument("--bp-sleep-ms", type=_positive_float, default=50.0,
                   help="backpressure: length of the long GPU kernel in ms (50)")
    p.add_argument("--bp-kernels", type=_positive_int, default=3000,
                   help="backpressure: tiny kernels launched behind it (3000)")
    p.add_argument("--size-limit", type=_positive_int, default=SIZE_LIMIT_BYTES, metavar="BYTES",
                   help=f"largest gzipped trace; bigger ones are slimmed, then flagged ({SIZE_LIMIT_BYTES})")
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    a = build_parser().parse_args(argv)
    a.only = list(dict.fromkeys(a.only)) if a.only else list(TRACE_NAMES)
    a.only.sort(key=TRACE_NAMES.index)          # always capture in table order
    if a.dry_run and a.remeasure:
        build_parser().error("--dry-run and --remeasure exclude each other")
    return a


# --------------------------------------------------------------------------------------------------
# Size limit: deterministic gzip, header scrub, slimming (exact: number tokens are kept byte for byte)
# --------------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------------
# Measurements with launchtui's own engine (no torch)
# --------------------------------------------------------------------------------------------------

def engine_available() -> str | None:
    """None when launchtui's engine imports, else the reason (e.g. msgspec missing)."""
    try:
        from launchtui.trace.load import read_trace  # noqa: F401
        from launchtui.trace import kineto  # noqa: F401  (needs msgspec)
        from launchtui.analysis.queue import queue_summary  # noqa: F401
    except ImportError as e:
        return f"launchtui's engine cannot be imported ({e})"
    return None


def _optimizer_selection(trace):
    from launchtui.analysis import nvtx
    from launchtui.analysis.select import range_selection
    hits = nvtx.search(trace, "Optimizer.step")
    return range_selection(trace, hits, "Optimizer.step") if len(hits) else None


def _steps(trace):
    """Indices of ProfilerStep#N ranges, in time order."""
    import numpy as np
    rg = trace.ranges
    if not len(rg):
        return np.zeros(0, np.int64)
    ids = [i for i, s in enumerate(trace.strings.values) if s.startswith("ProfilerStep#")]
    return np.nonzero(np.isin(rg.text, ids))[0]


def step_drains(trace) -> list[dict]:
    """Per ProfilerStep: does the busiest stream's pending depth return to 0 inside it, and at the end
    of a sync call (cudaStreamSynchronize & co.) made in it?"""
    import numpy as np
    from launchtui.analysis.queue import stream_series
    from launchtui.trace.model import API_SYNC
    ops, api, rg = trace.ops, trace.api, trace.ranges
    series = {(s.device, s.stream): s for s in stream_series(trace)}
    out = []
    matched = ops.api >= 0
    a_start = np.where(matched, api.start[np.maximum(ops.api, 0)], -1) if len(api) else np.full(len(ops), -1)
    for i in _steps(trace).tolist():
        s0, s1, th = int(rg.start[i]), int(rg.end[i]), int(rg.thread[i])
        in_step = matched & (a_start >= s0) & (a_start < s1)
        row = {"step": trace.strings[int(rg.text[i])], "launches": int(in_step.sum()), "min_depth": None,
               "syncs": 0, "drained_at_sync": False}
        if in_step.any():
            pairs, counts = np.unique(np.stack([ops.device[in_step].astype(np.int64), ops.stream[in_step]]),
                                      axis=1, return_counts=True)
            dev, stream = (int(x) for x in pairs[:, int(np.argmax(counts))])
            s = series.get((dev, stream))
            first = int(a_start[in_step].min())
            if s is not None:
                lo, hi = np.searchsorted(s.t, [first, s1])
                vals = s.v[lo:hi]
                row["min_depth"] = int(vals.min()) if len(vals) else None
                sync = np.nonzero((api.kind == API_SYNC) & (api.thread == th) & (api.start >= first)
                                  & (api.start < s1))[0]
                row["syncs"] = int(len(sync))
                if len(sync):
                    row["drained_at_sync"] = bool((s.value_at(api.end[sync]) == 0).any())
        out.append(row)
    return out


def measure_trace(name: str, path: Path) -> dict:
    """What launchtui's engine sees in one trace; the fields each trace's checks use."""
    import numpy as np
    from launchtui.analysis.backpressure import backpressure
    from launchtui.analysis.launches import launched_kernels, small_kernel_table
    from launchtui.analysis.queue import queue_summary
    from launchtui.trace.load import read_trace
    from launchtui.trace.model import API_GRAPH_LAUNCH, API_LAUNCH, OP_KERNEL

    trace = read_trace(path)
    ops, api = trace.ops, trace.api
    m: dict = {
        "gpu_ops": int(len(ops)),
        "kernels": int((ops.kind == OP_KERNEL).sum()),
        "launch_calls": int((api.kind == API_LAUNCH).sum()),
        "graph_launch_calls": int((api.kind == API_GRAPH_LAUNCH).sum()),
        "unmatched_gpu_ops": int((ops.api < 0).sum()),
        "ranges": int(len(trace.ranges)),
        "profiler_steps": int(len(_steps(trace))),
        "devices": {str(k): v for k, v in trace.devices.items()},
        "missing": list(trace.missing),
    }
    qs = queue_summary(trace)
    if qs:
        top = max(qs, key=lambda q: (q.max_depth, -q.stream_id))
        m.update(max_pending_depth=top.max_depth, max_pending_stream=top.stream_id,
                 max_pending_depth_graph_as_one=top.max_depth_graph_as_one,
                 time_at_or_above_ns={str(k): v for k, v in top.time_at_or_above_ns.items()})
    else:
        m.update(max_pending_depth=0, max_pending_stream=None)
    launches = launched_kernels(trace)
    if len(launches):
        d = api.end[ops.api[launches]] - api.start[ops.api[launches]]
        m.update(launch_api_median_us=round(float(np.median(d)) / 1e3, 2),
                 launch_api_max_us=round(float(d.max()) / 1e3, 1))

    if name.startswith("eager_adamw") or name == "sync_in_loop":
        sel = _optimizer_selection(trace)
        n = int(len(launched_kernels(trace, sel))) if sel is not None else 0
        m["optimizer_launches"] = n
        m["optimizer_launches_per_step"] = round(n / m["profiler_steps"], 1) if m["profiler_steps"] else None
        m["optimizer_small_kernel_rows"] = len(small_kernel_table(trace, sel, limit=0)) if sel is not None else 0
    if name == "backpressure":
        bp = backpressure(trace)
        sp = bp["spikes"]
        m.update(spikes=len(sp), episodes=len(bp["episodes"]),
                 worst_spike_us=round(max(e.worst_api_ns for e in sp) / 1e3, 1) if sp else None,
                 max_depth_before_spike=max(e.max_depth for e in sp) if sp else None,
                 longest_kernel_ms=round(float((ops.end - ops.start)[ops.kind == OP_KERNEL].max()) / 1e6, 3)
                 if m["kernels"] else None)
    if name == "cuda_graphs":
        g = (ops.api >= 0) & (api.kind[np.maximum(ops.api, 0)] == API_GRAPH_LAUNCH) if len(api) else ops.api >= 0
        per = np.bincount(ops.api[g]) if g.any() else np.zeros(0, np.int64)
        per = per[per > 0]
        m.update(graph_launches_with_ops=int(len(per)), graph_ops=int(g.sum()),
                 ops_per_graph_launch_min=int(per.min()) if len(per) else 0,
                 ops_per_graph_launch_max=int(per.max()) if len(per) else 0)
    if name == "sync_in_loop":
        rows = step_drains(trace)
        m.update(steps_drained=sum(1 for r in rows if r["min_depth"] == 0 and r["drained_at_sync"]),
                 steps_with_sync=sum(1 for r in rows if r["syncs"]), step_drains=rows)
    return m


def check_expectations(traces: dict[str, dict]) -> list[str]:
    """Problems with what the measured traces show (empty: every captured trace shows its pattern)."""
    problems = []
    meas = {n: t.get("measured") or {} for n, t in traces.items()}
    for n, t in traces.items():
        if t.get("within_limit") is False:
            problems.append(f"{n}: {t.get('size_bytes')} bytes gzipped, over the {t.get('size_limit_bytes')} limit")
        if t.get("measured") is None:
            problems.append(f"{n}: not measured ({t.get('measure_error', 'engine unavailable')})")
    u, f = meas.get("eager_adamw_unfused"), meas.get("eager_adamw_fused")
    if u:
        if u.get("optimizer_launches", 0) < MIN_UNFUSED_OPTIMIZER_LAUNCHES:
            problems.append(f"eager_adamw_unfused: {u.get('optimizer_launches', 0)} optimizer-range launches, "
                            f"expected >= {MIN_UNFUSED_OPTIMIZER_LAUNCHES}")
        if f and u.get("optimizer_launches", 0) < MIN_OPTIMIZER_RATIO * max(f.get("optimizer_launches", 0), 1):
            problems.append(f"eager_adamw_unfused/fused: optimizer-range launches {u.get('optimizer_launches')} "
                            f"vs {f.get('optimizer_launches')}, expected a ratio >= {MIN_OPTIMIZER_RATIO}")
    b = meas.get("backpressure")
    if b:
        if b.get("max_pending_depth", 0) < MIN_SATURATED_DEPTH:
            problems.append(f"backpressure: max pending depth {b.get('max_pending_depth')}, expected the stream "
                            f"limit (>= {MIN_SATURATED_DEPTH})")
        if not b.get("spikes"):
            problems.append("backpressure: no launch spike (no launch call blocked)")
    g = meas.get("cuda_graphs")
    if g:
        if not g.get("graph_launches_with_ops"):
            problems.append("cuda_graphs: no GPU op is joined to a cudaGraphLaunch")
        elif g.get("ops_per_graph_launch_min", 0) < MIN_OPS_PER_GRAPH_LAUNCH:
            problems.append(f"cuda_graphs: a graph launch has only {g.get('ops_per_graph_launch_min')} ops, "
                            f"expected >= {MIN_OPS_PER_GRAPH_LAUNCH}")
    s = meas.get("sync_in_loop")
    if s:
        steps = s.get("profiler_steps", 0)
        if not steps or s.get("steps_drained", 0) != steps:
            problems.append(f"sync_in_loop: queue drained at a sync in {s.get('steps_drained', 0)} of {steps} steps")
    return problems


def independent_pending_limit(launch_ns: list[int]) -> int | None:
    """The stream's pending-launch limit from the capture's own timing loop, not from the trace.

    `launch_ns` are the wall times of consecutive tiny-kernel launch calls made while a long kernel
    holds the stream: calls return at once until the queue is full, then each waits for a slot. The
    limit is the number of calls before the first one that blocked (> 20 × the median of the first
    32 calls and > 50 µs). None when no call blocked (dry run, or the queue never filled)."""
    if len(launch_ns) < 64:
        return None
    head = sorted(launch_ns[:32])
    fast = (head[15] + head[16]) / 2
    slow = max(20 * fast, 50_000)
    for i, d in enumerate(launch_ns):
        if d > slow:
            return i
    return None


def time_launch_burst(ctx: "Ctx", cycles: int, n: int) -> list[int]:
    """Wall time of each of `n` tiny launches behind a `cycles`-long sleep kernel, unprofiled."""
    torch = ctx.torch
    stream = torch.cuda.Stream()
    x = torch.zeros(1, device=ctx.device)
    one = torch.ones(1, device=ctx.device)
    out = []
    clock = time.perf_counter_ns
    with torch.cuda.stream(stream):
        torch.cuda._sleep(cycles)
        for _ in range(n):
            t = clock()
            x.add_(one)
            out.append(clock() - t)
    ctx.sync()
    return out


def backpressure_needs_retry(measured: dict | None, n_kernels: int) -> bool:
    """True when the burst did not hit the limit: no blocking launch, or every tiny kernel fit in the queue."""
    if not measured:
        return False
    depth = measured.get("max_pending_depth", 0)
    return not measured.get("spikes") or depth >= n_kernels - 16 or depth < MIN_SATURATED_DEPTH


# --------------------------------------------------------------------------------------------------
# Manifest
# --------------------------------------------------------------------------------------------------

def build_manifest(environment: dict, shapes: Shapes, steps: int, traces: dict[str, dict], *,
                   dry_run: bool, options: dict | None = None, size_limit: int = SIZE_LIMIT_BYTES) -> dict:
    """The MANIFEST.json document. `traces` maps name -> entry (file, sizes, settings, measured...)."""
    ordered = {n: traces[n] for n in TRACE_NAMES if n in traces}
    for n, t in ordered.items():
        spec = SPEC_BY_NAME[n]
        t.setdefault("file", spec.filename)
        t.setdefault("size_limit_bytes", size_limit)
        t["purpose"] = spec.purpose
        t["shows"] = list(spec.shows)
    doc = {
        "schema": MANIFEST_SCHEMA,
        "generator": "scripts/capture_gpu_traces.py",
        "regenerate": REGENERATE,
        "dry_run": bool(dry_run),
        "captured_utc": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "environment": environment,
        "shapes": shapes.to_json(),
        "steps": steps,
        "options": options or {},
        "size_limit_bytes": size_limit,
        "traces": ordered,
        "checks": {"problems": check_expectations(ordered) if not dry_run else [],
                   "note": "dry run: CPU-only traces, GPU expectations not checked" if dry_run else
                           "checked with launchtui's engine right after capture"},
    }
    bp = ordered.get("backpressure", {}).get("measured")
    if bp and not dry_run:
        indep = ordered.get("backpressure", {}).get("independent_limit") or {}
        doc["measured_pending_limit"] = {
            "max_pending_depth": bp.get("max_pending_depth"),
            "independent_pending_limit": indep.get("pending_limit"),
            "gpu": environment.get("gpu_name"),
            "driver": environment.get("driver_version"),
            "how": "launchtui.analysis.queue.queue_summary on the backpressure trace: the deepest pending-launch "
                   "queue of any stream (kernels launched but not yet started); independent_pending_limit: "
                   "the capture's own timing loop (launch calls before the first blocking one)",
        }
    return doc


def write_json_atomic(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


def read_manifest(out: Path) -> dict | None:
    p = out / MANIFEST_NAME
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("schema") == MANIFEST_SCHEMA else None


# --------------------------------------------------------------------------------------------------
# Capture (torch imported lazily from here on)
# --------------------------------------------------------------------------------------------------

class Unavailable(Exception):
    """No torch or no CUDA device: one line, exit status 2."""


def import_torch():
    try:
        import torch
    except ImportError as e:
        raise Unavailable(f"torch is not importable ({e}); install PyTorch to capture traces") from None
    return torch


def _nvidia_smi_driver() -> str | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:  # a query only: never a setting
        r = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    line = r.stdout.strip().splitlines()[0].strip() if r.returncode == 0 and r.stdout.strip() else ""
    return line or None


def _nvml_driver() -> str | None:
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # optional source only
        return None


def environment(torch, device: str) -> dict:
    import numpy
    env = {
        "device": device,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "cudnn_version": None,
        "python_version": platform.python_version(),
        "numpy_version": numpy.__version__,
        "gpu_name": None, "gpu_count": 0, "compute_capability": None, "sm_count": None,
        "total_memory_bytes": None, "driver_version": None,
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(gpu_name=props.name, gpu_count=torch.cuda.device_count(),
                   compute_capability=f"{props.major}.{props.minor}", sm_count=props.multi_processor_count,
                   total_memory_bytes=int(props.total_memory),
                   driver_version=_nvidia_smi_driver() or _nvml_driver())
        try:
            env["cudnn_version"] = torch.backends.cudnn.version()
        except Exception:
            pass
    return env


def kineto_metadata(raw: bytes) -> dict:
    """Version keys Kineto writes into the trace header (absent on CPU-only traces)."""
    head = raw[:8192].decode("utf-8", "replace")
    out = {}
    for key in ("cupti_version", "cuda_runtime_version", "cuda_driver_version", "schemaVersion"):
        mm = re.search(r'"%s"\s*:\s*"?([^",\s}]+)' % key, head)
        if mm:
            out[key] = mm.group(1)
    return out


def make_model(torch, s: Shapes, device: str):
    nn = torch.nn
    F = torch.nn.functional
    hd = s.hidden // s.heads

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(s.hidden)
            self.q = nn.Linear(s.hidden, s.hidden)
            self.k = nn.Linear(s.hidden, s.hidden)
            self.v = nn.Linear(s.hidden, s.hidden)
            self.o = nn.Linear(s.hidden, s.hidden)
            self.ln2 = nn.LayerNorm(s.hidden)
            self.up = nn.Linear(s.hidden, s.ffn)
            self.down = nn.Linear(s.ffn, s.hidden)

        def forward(self, x):
            b, t, _ = x.shape
            h = self.ln1(x)
            q, k, v = (lin(h).view(b, t, s.heads, hd).transpose(1, 2) for lin in (self.q, self.k, self.v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(b, t, s.hidden))
            return x + self.down(F.gelu(self.up(self.ln2(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(s.layers))
            self.ln_f = nn.LayerNorm(s.hidden)

        def forward(self, x):
            for blk in self.blocks:
                x = blk(x)
            return self.ln_f(x)

    return Model().to(device=device, dtype=getattr(torch, s.dtype))


@dataclass
class Ctx:
    torch: object
    device: str
    shapes: Shapes
    steps: int
    out: Path
    tmp: Path
    dry_run: bool
    size_limit: int
    bp_sleep_ms: float
    bp_kernels: int

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def profiler(self, warmup: int, active: int, sink: dict):
        """A torch profiler over `warmup` discarded + `active` recorded steps; the trace lands in sink['raw']."""
        from torch.profiler import ProfilerActivity, profile, schedule
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        path = self.tmp / f"trace-{len(os.listdir(self.tmp))}.json"

        def ready(prof):
            prof.export_chrome_trace(str(path))
            sink["raw"] = path.read_bytes()
            path.unlink()

        return profile(activities=acts, schedule=schedule(wait=0, warmup=warmup, active=active, repeat=1),
                       on_trace_ready=ready, record_shapes=False, with_stack=False, profile_memory=False,
                       with_flops=False, with_modules=False)


def _data(ctx: Ctx, model_dtype):
    torch = ctx.torch
    g = torch.Generator(device="cpu").manual_seed(0)
    s = ctx.shapes
    x = torch.randn(s.batch, s.seq, s.hidden, generator=g).to(ctx.device, model_dtype)
    y = torch.randn(s.batch, s.seq, s.hidden, generator=g).to(ctx.device, model_dtype)
    return x, y


def _adamw(ctx: Ctx, params, **kw):
    return ctx.torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, **kw)


def capture_eager(ctx: Ctx, name: str) -> tuple[bytes, dict]:
    """eager_adamw_unfused / eager_adamw_fused / sync_in_loop."""
    torch = ctx.torch
    from torch.profiler import record_function
    F = torch.nn.functional
    torch.manual_seed(0)
    model = make_model(torch, ctx.shapes, ctx.device)
    fused = name == "eager_adamw_fused"
    opt_kw = {"fused": True} if fused else {"foreach": False}
    opt = _adamw(ctx, model.parameters(), **opt_kw)
    x, y = _data(ctx, next(model.parameters()).dtype)
    sync_each_step = name == "sync_in_loop"
    losses = []

    def step():
        with record_function("forward"):
            loss = F.mse_loss(model(x), y)
        with record_function("backward"):
            loss.backward()
        with record_function("Optimizer.step"):
            opt.step()
        opt.zero_grad(set_to_none=True)
        if sync_each_step:
            with record_function("loss.item()"):
                losses.append(loss.item())      # the host sync under test: drains the queue every step

    for _ in range(2):                          # unprofiled warm-up: lazy module loading, optimizer state
        step()
    ctx.sync()
    sink: dict = {}
    with ctx.profiler(1, ctx.steps, sink) as prof:
        for i in range(ctx.steps + 1):
            step()
            if i == ctx.steps:
                ctx.sync()                      # every kernel of the last step inside the window
            prof.step()
    settings = {"optimizer": "torch.optim.AdamW", "optimizer_kwargs": opt_kw, "loss_item_every_step": sync_each_step,
                "params": sum(p.numel() for p in model.parameters()),
                "param_tensors": sum(1 for _ in model.parameters()),
                "warmup_steps": 2, "profiler_schedule": {"wait": 0, "warmup": 1, "active": ctx.steps}}
    return sink["raw"], settings


def _sleep_cycles_per_ms(torch) -> float:
    """Calibrate torch.cuda._sleep (it spins for clock cycles) against CUDA events."""
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    best = None
    for _ in range(3):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(10_000_000)
        b.record()
        b.synchronize()
        ms = a.elapsed_time(b)
        best = ms if best is None else min(best, ms)
    return 10_000_000 / max(best, 1e-3)


def capture_backpressure(ctx: Ctx, sleep_ms: float, n_kernels: int) -> tuple[bytes, dict]:
    torch = ctx.torch
    from torch.profiler import record_function
    stream = torch.cuda.Stream() if ctx.cuda else None
    x = torch.zeros(1, device=ctx.device)
    one = torch.ones(1, device=ctx.device)          # a tensor operand: a Python scalar adds aten::to per call
    cycles = int(sleep_ms * _sleep_cycles_per_ms(torch)) if ctx.cuda else 0

    def burst(n, sleep_cycles):
        if ctx.cuda:
            with torch.cuda.stream(stream):
                torch.cuda._sleep(sleep_cycles)     # the long kernel at the head of the queue
                for _ in range(n):
                    x.add_(one)                     # tiny kernels, launched as fast as Python goes
        else:                                       # dry run: the same launch loop, no GPU queue behind it
            for _ in range(n):
                x.add_(one)

    burst(64, 1000 if ctx.cuda else 0)              # warm-up: the add kernel's module is loaded
    ctx.sync()
    sink: dict = {}
    with ctx.profiler(1, 1, sink) as prof:
        burst(8, 1000 if ctx.cuda else 0)           # profiler warm-up step (discarded)
        ctx.sync()
        prof.step()
        with record_function("backpressure_burst"):
            burst(n_kernels, cycles)
        ctx.sync()
        prof.step()
    settings = {"sleep_ms_target": sleep_ms, "sleep_cycles": cycles, "tiny_kernels": n_kernels,
                "tiny_kernel": "x.add_(one) on 1-element float32 tensors",
                "stream": "one dedicated torch.cuda.Stream" if ctx.cuda else None}
    return sink["raw"], settings


def capture_graphs(ctx: Ctx) -> tuple[bytes, dict]:
    torch = ctx.torch
    from torch.profiler import record_function
    F = torch.nn.functional
    torch.manual_seed(0)
    model = make_model(torch, ctx.shapes, ctx.device)
    # capturable=True keeps the optimizer's step counters on the GPU, as graph capture requires.
    opt_kw = {"foreach": False, "capturable": True} if ctx.cuda else {"foreach": False}
    opt = _adamw(ctx, model.parameters(), **opt_kw)
    static_x, static_y = _data(ctx, next(model.parameters()).dtype)

    def body():
        loss = F.mse_loss(model(static_x), static_y)
        loss.backward()
        opt.step()
        return loss

    if ctx.cuda:  # warm up on a side stream (PyTorch's whole-network capture recipe)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                body()
        torch.cuda.current_stream().wait_stream(s)
    else:
        for _ in range(2):
            opt.zero_grad(set_to_none=True)
            body()
    sink: dict = {}
    graph = None
    with ctx.profiler(1, ctx.steps, sink) as prof:
        # Profiler warm-up step (discarded): capture while CUPTI is already active, then one replay, so
        # instantiation and the first upload are outside the recorded steps.
        opt.zero_grad(set_to_none=True)
        if ctx.cuda:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                body()
            replay = graph.replay
        else:                                   # dry run: no graphs on the CPU; the eager step stands in
            def replay():
                opt.zero_grad(set_to_none=True)
                body()
        replay()
        ctx.sync()
        prof.step()
        for i in range(ctx.steps):
            with record_function("graph_replay"):
                replay()
            if i == ctx.steps - 1:
                ctx.sync()
            prof.step()
    settings = {"optimizer": "torch.optim.AdamW", "optimizer_kwargs": opt_kw, "replays": ctx.steps,
                "graph": "torch.cuda.CUDAGraph of forward + backward + optimizer step" if ctx.cuda else
                         "dry run: eager stand-in (no CUDA graphs on the CPU)"}
    return sink["raw"], settings


def _store(ctx: Ctx, name: str, raw: bytes) -> dict:
    fitted = fit_to_limit(scrub_header(raw.decode("utf-8"), SPEC_BY_NAME[name].filename).encode("utf-8"),
                          ctx.size_limit)
    dest = ctx.out / SPEC_BY_NAME[name].filename
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_bytes(fitted.data)
    os.replace(tmp, dest)
    entry = fitted.to_json()
    entry["size_limit_bytes"] = ctx.size_limit
    entry["kineto"] = kineto_metadata(raw)
    return entry


def _measure_into(entry: dict, name: str, path: Path, engine_error: str | None) -> None:
    if engine_error:
        entry["measured"] = None
        entry["measure_error"] = engine_error
        return
    try:
        entry["measured"] = measure_trace(name, path)
        entry.pop("measure_error", None)
    except Exception as e:  # a measurement bug must not lose a capture that cost GPU time
        entry["measured"] = None
        entry["measure_error"] = f"{type(e).__name__}: {e}"


def capture_one(ctx: Ctx, name: str, engine_error: str | None) -> dict:
    t0 = time.monotonic()
    if name == "backpressure":
        attempts = []
        sleep_ms, n = ctx.bp_sleep_ms, ctx.bp_kernels
        for attempt in range(2):  # one retry with a longer sleep and more kernels if the limit was not hit
            raw, settings = capture_backpressure(ctx, sleep_ms, n)
            entry = _store(ctx, name, raw)
            _measure_into(entry, name, ctx.out / SPEC_BY_NAME[name].filename, engine_error)
            m = entry.get("measured") or {}
            attempts.append({"sleep_ms": sleep_ms, "tiny_kernels": n, "max_pending_depth": m.get("max_pending_depth"),
                             "spikes": m.get("spikes")})
            if ctx.dry_run or attempt == 1 or not backpressure_needs_retry(entry.get("measured"), n):
                break
            print(f"  backpressure: limit not hit (depth {m.get('max_pending_depth')}, spikes {m.get('spikes')}); "
                  "retrying with a longer sleep and more kernels", flush=True)
            sleep_ms, n = sleep_ms * 3, n * 2
        settings["attempts"] = attempts
        if ctx.cuda and not ctx.dry_run:   # the limit measured without the profiler or launchtui's engine
            times = time_launch_burst(ctx, settings["sleep_cycles"], n)
            entry["independent_limit"] = {
                "pending_limit": independent_pending_limit(times), "launches": len(times),
                "how": "unprofiled burst behind a long sleep kernel; launch calls timed with perf_counter_ns; "
                       "calls before the first one > 20x the median and > 50 us"}
    else:
        raw, settings = capture_graphs(ctx) if name == "cuda_graphs" else capture_eager(ctx, name)
        entry = _store(ctx, name, raw)
        _measure_into(entry, name, ctx.out / SPEC_BY_NAME[name].filename, engine_error)
    if ctx.dry_run and name == "backpressure":
        settings["dry_run_note"] = "no torch.cuda._sleep and no stream on the CPU: only the launch loop runs"
    entry["settings"] = settings
    entry["capture_seconds"] = round(time.monotonic() - t0, 1)
    ctx.sync()
    if ctx.cuda:
        ctx.torch.cuda.empty_cache()
    return entry


def _summary_line(name: str, entry: dict) -> str:
    m = entry.get("measured") or {}
    bits = [f"{entry['size_bytes'] / 1e6:.2f} MB gz", f"{entry['capture_seconds']} s"]
    if entry.get("slimmed"):
        bits.append("slimmed")
    if not entry.get("within_limit", True):
        bits.append("OVER LIMIT")
    for k in ("kernels", "optimizer_launches", "max_pending_depth", "spikes", "graph_launches_with_ops",
              "ops_per_graph_launch_min", "steps_drained"):
        if k in m and m[k] is not None:
            bits.append(f"{k} {m[k]}")
    if entry.get("measure_error"):
        bits.append(f"not measured: {entry['measure_error']}")
    return f"  {name:<20} " + ", ".join(bits)


def run_capture(a: argparse.Namespace) -> int:
    torch = import_torch()
    if a.dry_run:
        device, shapes = "cpu", DRY_RUN_SHAPES
    else:
        if not torch.cuda.is_available():
            raise Unavailable(f"no CUDA device available (torch {torch.__version__}, CUDA "
                              f"{torch.version.cuda or 'none'}); use --dry-run to test the script on the CPU")
        device, shapes = "cuda", GPU_SHAPES
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    engine_error = engine_available()
    if engine_error:
        print(f"capture_gpu_traces: warning: {engine_error}; traces will be written unmeasured "
              "(run --remeasure where launchtui's dependencies are installed)", file=sys.stderr, flush=True)
    env = environment(torch, device)
    print(f"capture_gpu_traces: {'dry run on the CPU' if a.dry_run else env['gpu_name']}, torch {env['torch_version']}, "
          f"CUDA {env['cuda_version']}, driver {env['driver_version']}; traces: {', '.join(a.only)}", flush=True)
    previous = read_manifest(out) or {}
    traces = {n: t for n, t in (previous.get("traces") or {}).items()
              if n in SPEC_BY_NAME and n not in a.only and (out / SPEC_BY_NAME[n].filename).is_file()
              and bool(previous.get("dry_run")) == bool(a.dry_run)}
    with tempfile.TemporaryDirectory(prefix="capture-gpu-traces-") as tmp:
        ctx = Ctx(torch=torch, device=device, shapes=shapes, steps=a.steps, out=out, tmp=Path(tmp),
                  dry_run=a.dry_run, size_limit=a.size_limit, bp_sleep_ms=a.bp_sleep_ms, bp_kernels=a.bp_kernels)
        for name in a.only:
            entry = capture_one(ctx, name, engine_error)
            traces[name] = entry
            print(_summary_line(name, entry), flush=True)
            kin = entry.get("kineto")
            if kin and not env.get("kineto"):
                env["kineto"] = kin
    options = {"only": a.only, "bp_sleep_ms": a.bp_sleep_ms, "bp_kernels": a.bp_kernels}
    doc = build_manifest(env, shapes, a.steps, traces, dry_run=a.dry_run, options=options, size_limit=a.size_limit)
    write_json_atomic(out / MANIFEST_NAME, doc)
    return _finish(doc, out)


def _finish(doc: dict, out: Path) -> int:
    problems = doc["checks"]["problems"]
    lim = doc.get("measured_pending_limit")
    if lim:
        print(f"capture_gpu_traces: max pending depth on {lim['gpu']}: {lim['max_pending_depth']}", flush=True)
    print(f"capture_gpu_traces: wrote {len(doc['traces'])} traces and {MANIFEST_NAME} to {out}", flush=True)
    if doc["dry_run"]:
        print("capture_gpu_traces: dry run: CPU-only traces; GPU expectations not checked", flush=True)
        return EXIT_OK
    for p in problems:
        print(f"capture_gpu_traces: CHECK FAILED: {p}", file=sys.stderr, flush=True)
    return EXIT_CHECK_FAILED if problems else EXIT_OK


def run_remeasure(a: argparse.Namespace) -> int:
    out = Path(a.out)
    doc = read_manifest(out)
    if doc is None:
        raise Unavailable(f"{out / MANIFEST_NAME}: missing or not a schema-{MANIFEST_SCHEMA} manifest")
    engine_error = engine_available()
    if engine_error:
        raise Unavailable(engine_error)
    traces = doc.get("traces") or {}
    for name in a.only:
        path = out / SPEC_BY_NAME[name].filename
        if name not in traces or not path.is_file():
            continue
        entry = traces[name]
        entry["size_bytes"] = path.stat().st_size
        entry["within_limit"] = entry["size_bytes"] <= entry.get("size_limit_bytes", a.size_limit)
        _measure_into(entry, name, path, None)
        print(_summary_line(name, {**entry, "capture_seconds": entry.get("capture_seconds", 0)}), flush=True)
    shapes = Shapes(**doc["shapes"])
    new = build_manifest(doc.get("environment") or {}, shapes, doc.get("steps", DEFAULT_STEPS), traces,
                         dry_run=doc.get("dry_run", False), options=doc.get("options"),
                         size_limit=doc.get("size_limit_bytes", a.size_limit))
    new["captured_utc"] = doc.get("captured_utc", new["captured_utc"])
    new["remeasured_utc"] = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    write_json_atomic(out / MANIFEST_NAME, new)
    return _finish(new, out)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    try:
        return run_remeasure(a) if a.remeasure else run_capture(a)
    except Unavailable as e:
        print(f"capture_gpu_traces: {e}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
