"""The MANIFEST.json written beside the captured traces (scripts/capture_gpu_traces.py): its
document, built in the trace table's order, and its atomic write and read.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path

from capture_measure import check_expectations
from capture_table import (MANIFEST_NAME, MANIFEST_SCHEMA, REGENERATE, SIZE_LIMIT_BYTES, SPEC_BY_NAME, TRACE_NAMES,
                           Shapes)


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
