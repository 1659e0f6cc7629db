#!/usr/bin/env python3
"""Metamorphic campaign: the same events in another layout give the same answer (definitions.md §9).

Every real sample (../shared/samples/nsys/*.sqlite, ../shared/samples/kineto/*, the SQLite
databases of ../shared/samples/rocm/) is copied to a temporary folder and rewritten by
`fixtures/layout.py` without changing its set of events (SQLite: Nsight, rocpd, RPD, rocprof v1):

  rows:SEED   SQLite: every table's rows (CUPTI, NVTX, StringIds, the others) in a seeded order
  idperm:SEED SQLite: the string ids dealt out again among themselves (dense, in another order)
  ids         SQLite: every string id renumbered id * 11 + 3,000,003 (Nsight 2026.2's sparse ids)
  events:SEED Kineto: traceEvents in a seeded order

`report --json` and `record --json` of the copy must equal those of an untouched copy byte for
byte, apart from the file's own path, size and mtime. The sample is never modified.

    python scripts/metamorphic.py                    # every sample, the default variants
    python scripts/metamorphic.py --seeds 1 2 3      # more row orders
    python scripts/metamorphic.py --only b200 --only h100_2gpu --keep OUT   # a few, keep the files
    python scripts/metamorphic.py --json summary.json

Prints one line per (sample, variant) with the first differing JSON keys, then the count that
passed; exits 1 when any differs. tests/test_metamorphic.py runs a fast subset, and all of this
with LAUNCHTUI_METAMORPHIC=all.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fixtures import layout  # noqa: E402

SAMPLES = Path(os.environ.get("LAUNCHTUI_SHARED") or ROOT.parent / "shared") / "samples"
COMMANDS = {"report": ["report", "--json"], "record": ["record", "--json"]}
IDENTITY_KEYS = ("size", "mtime_ns")   # beside "path": the file's own identity


def sample_files(samples: Path = SAMPLES) -> list[Path]:
    files = []
    if (samples / "nsys").is_dir():
        files += sorted((samples / "nsys").glob("*.sqlite"))
    if (samples / "kineto").is_dir():
        files += sorted(p for p in (samples / "kineto").iterdir() if p.is_file() and p.suffix != ".md")
    if (samples / "rocm").is_dir():   # the AMD profilers' databases (their Chrome-trace exports aside)
        files += sorted(p for p in (samples / "rocm").iterdir() if p.is_file() and layout.is_sqlite(p))
    return files


def variants(path: Path, seeds=(1,)) -> list[str]:
    if layout.is_sqlite(path):
        return [f"rows:{s}" for s in seeds] + [f"idperm:{s}" for s in seeds] + ["ids"]
    return [f"events:{s}" for s in seeds]


def transform(src: Path, dst: Path, variant: str) -> Path:
    kind, _, seed = variant.partition(":")
    if kind == "ids":
        return layout.shuffle_sqlite(src, dst, seed=None, renumber=layout.RENUMBER)
    if kind == "rows":
        return layout.shuffle_sqlite(src, dst, seed=int(seed))
    if kind == "rows+ids":
        return layout.shuffle_sqlite(src, dst, seed=int(seed), renumber=layout.RENUMBER)
    if kind == "idperm":
        return layout.shuffle_sqlite(src, dst, seed=None, permute_ids=int(seed))
    if kind == "events":
        return layout.shuffle_kineto(src, dst, seed=int(seed))
    raise ValueError(f"unknown variant {variant!r}")


def documents(path: Path, commands=COMMANDS) -> dict[str, str]:
    """Each command's stdout (exit status and stderr beside it) on `path`, normalised: the file's
    path, size and mtime replaced by placeholders."""
    from launchtui import cli
    out = {}
    for name, argv in commands.items():
        so, se = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
            try:
                rc = cli.main([argv[0], str(path), *argv[1:], "--no-cache"])
            except SystemExit as e:
                rc = e.code
        out[name] = normalise(so.getvalue(), path) + f"\n(exit {rc}) " + se.getvalue().replace(str(path), "<path>")
    return out


def normalise(text: str, path: Path) -> str:
    esc = json.dumps(str(path))[1:-1]
    text = text.replace(esc, "<path>")
    try:
        doc = json.loads(text)
    except ValueError:
        return text

    def walk(x):
        if isinstance(x, dict):
            if x.get("path") == "<path>":
                for k in IDENTITY_KEYS:
                    if k in x:
                        x[k] = f"<{k}>"
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(doc)
    return json.dumps(doc, ensure_ascii=False, indent=1)


def differing_keys(a: str, b: str, limit: int = 4) -> list[str]:
    """The first JSON paths whose values differ (text lines when not JSON)."""
    try:
        da, db = json.loads(a.split("\n(exit ")[0]), json.loads(b.split("\n(exit ")[0])
    except ValueError:
        return ["<not JSON>"]
    out: list[str] = []

    def walk(x, y, at):
        if len(out) >= limit:
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for k in list(dict.fromkeys([*x, *y])):
                walk(x.get(k, "<absent>"), y.get(k, "<absent>"), f"{at}.{k}")
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for i, (u, v) in enumerate(zip(x, y)):
                walk(u, v, f"{at}[{i}]")
        elif x != y:
            out.append(f"{at}: {_short(x)} -> {_short(y)}")
    walk(da, db, "")
    if not out and a != b:
        out.append("<exit status or stderr>")
    return out


def _short(v) -> str:
    s = json.dumps(v, ensure_ascii=False)
    return s if len(s) <= 70 else s[:67] + "..."


def check_sample(src: Path, variant_names: list[str], work: Path, keep: bool = False) -> list[dict]:
    """One untouched copy and each variant of `src` under `work`; one result per variant."""
    base_dir = work / "original"
    base_dir.mkdir(parents=True, exist_ok=True)
    base = base_dir / src.name
    shutil.copyfile(src, base)
    want = documents(base)
    results = []
    for v in variant_names:
        d = work / v.replace(":", "-")
        d.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        got = documents(transform(base, d / src.name, v))
        diffs = {k: differing_keys(want[k], got[k]) for k in want if want[k] != got[k]}
        results.append({"sample": src.name, "variant": v, "same": not diffs, "differs": diffs,
                        "seconds": round(time.perf_counter() - t, 2)})
        if not keep:
            shutil.rmtree(d, ignore_errors=True)
    if not keep:
        shutil.rmtree(base_dir, ignore_errors=True)
    return results


def run(files: list[Path], seeds=(1,), keep: Path | None = None, extra: list[str] = (),
        echo=print) -> list[dict]:
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="metamorphic-cache-")
    results = []
    with tempfile.TemporaryDirectory(prefix="metamorphic-") as tmp:
        for i, src in enumerate(files):
            work = (keep or Path(tmp)) / f"{i:02d}"
            vs = variants(src, seeds) + [v for v in extra if (v.startswith("events") != layout.is_sqlite(src))]
            for r in check_sample(src, vs, work, keep=keep is not None):
                results.append(r)
                echo(f"{'same' if r['same'] else 'DIFF':4s}  {r['sample'][:60]:60s} {r['variant']:9s} "
                     f"{r['seconds']:6.1f} s" + "".join(f"\n        {k}: {'; '.join(d)}" for k, d in r["differs"].items()))
    shutil.rmtree(os.environ["XDG_CACHE_HOME"], ignore_errors=True)
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--only", action="append", default=[], help="samples whose name contains this (repeatable)")
    ap.add_argument("--variant", action="append", default=[], help="extra variants, e.g. rows+ids:2")
    ap.add_argument("--keep", type=Path, help="keep the copies under this folder")
    ap.add_argument("--json", type=Path, help="write the results here")
    a = ap.parse_args(argv)
    files = [p for p in sample_files() if not a.only or any(o in p.name for o in a.only)]
    if not files:
        print(f"no samples under {SAMPLES}", file=sys.stderr)
        return 2
    t = time.perf_counter()
    results = run(files, a.seeds, a.keep, a.variant)
    same = sum(r["same"] for r in results)
    print(f"{same} of {len(results)} variants of {len(files)} samples gave the same report and record "
          f"({time.perf_counter() - t:.0f} s)")
    if a.json:
        a.json.write_text(json.dumps({"same": same, "total": len(results), "results": results}, indent=1))
    return 0 if same == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
