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

The parts, beside this file: capture_table.py (the traces, shapes and thresholds), capture_fit.py
(gzip, header scrub, slimming), capture_measure.py (launchtui's measurements and the checks),
capture_manifest.py, capture_environment.py (torch, GPU, driver) and capture_workloads.py (what is
profiled). The names the tests use are importable from this module as before.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # `python scripts/capture_gpu_traces.py` puts scripts/ first, not the repo
    sys.path.insert(0, str(REPO))
SCRIPTS = Path(__file__).resolve().parent
if str(SCRIPTS) not in sys.path:  # loaded by its path (tests/test_capture_script.py): its parts must import
    sys.path.insert(0, str(SCRIPTS))

# Every public name of the one-file script stays importable from here (the tests load it as one module).
from capture_environment import Unavailable, environment, import_torch, kineto_metadata  # noqa: E402,F401
from capture_fit import (SLIM_LEVELS, Fitted, exact_dumps, exact_loads, fit_to_limit, gzip_bytes,  # noqa: E402,F401
                         scrub_header, slim_events)
from capture_manifest import build_manifest, read_manifest, write_json_atomic  # noqa: E402,F401
from capture_measure import (backpressure_needs_retry, check_expectations, engine_available,  # noqa: E402,F401
                             independent_pending_limit, measure_trace, step_drains)
from capture_table import (DEFAULT_STEPS, DRY_RUN_SHAPES, GPU_SHAPES, MANIFEST_NAME, MANIFEST_SCHEMA,  # noqa: E402,F401
                           MIN_OPS_PER_GRAPH_LAUNCH, MIN_OPTIMIZER_RATIO, MIN_SATURATED_DEPTH,
                           MIN_UNFUSED_OPTIMIZER_LAUNCHES, REGENERATE, SIZE_LIMIT_BYTES, SPEC_BY_NAME, SPECS,
                           TRACE_NAMES, Shapes, TraceSpec, trace_filename)
from capture_workloads import (Ctx, capture_backpressure, capture_eager, capture_graphs, make_model,  # noqa: E402,F401
                               time_launch_burst)

EXIT_OK, EXIT_UNAVAILABLE, EXIT_CHECK_FAILED = 0, 2, 3


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
# Capture (torch imported lazily, by run_capture)
# --------------------------------------------------------------------------------------------------

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

