"""The fuzz campaign's odd command lines (scripts/fuzz.py, the cli family): option values at and past
their limits, `-o` targets of every kind, and odd values of the environment's cache limit.

Draws come from the case's rng only, in a fixed order, so a case stays reproducible from
(seed, index) alone.
"""
from __future__ import annotations

import os
import random
from pathlib import Path

from fuzz_kinds import OPTION_KINDS, OUTPUT_KINDS


ODD_FLOATS = ["nan", "inf", "-inf", "1e308", "-1e308", "1e400", "0", "-0", "-1", "1e-320", "NaN", "Infinity"]
ODD_INTS = ["-1", "0", "99999999999999999999999", "1e3", "x", "1000000000"]


def odd_options(rng: random.Random, cmd: str, d: Path, kind: str | None = None) -> tuple[list[str], dict]:
    """Random odd options for a report/export command line, plus env overrides; one option of
    `kind` (an OPTION_KINDS entry, or output:TARGET) when given."""
    opts, env = [], {}
    for _ in range(1 if kind else rng.choice([1, 1, 2, 3])):
        k = kind or rng.choice(OPTION_KINDS)
        if k == "trim":
            opts += ["--trim", rng.choice(ODD_FLOATS + ["1.5"]), rng.choice(ODD_FLOATS + ["2"])]
        elif k in ("max-avg-us", "spike-us", "spike-factor"):
            opts += [f"--{k}", rng.choice(ODD_FLOATS)]
        elif k in ("min-launches", "limit"):
            opts += [f"--{k}", rng.choice(ODD_INTS)]
        elif k == "thresholds":
            opts += ["--thresholds"] + [rng.choice(ODD_INTS + ["1000", "1020"]) for _ in range(rng.choice([1, 2, 3]))]
        elif k == "device":
            opts += ["--device", rng.choice(["-1", "99999999999999999999", "nan", "0", "all", "ALL", "1.5", ""])]
        elif k == "nvtx":
            opts += ["--nvtx", rng.choice(["", "\n", "%", ".*", "[", "\x1b[31m", "\udcff", "step"])]
        elif k.startswith("output"):
            opts += output_target(rng, d, k.partition(":")[2] or None)
        else:
            env["LAUNCHTUI_CACHE_MAX_MB"] = rng.choice(["inf", "nan", "-1", "abc", "1e400", "0", ""])
    return opts, env


def output_target(rng: random.Random, d: Path, kind: str | None = None) -> list[str]:
    kind = kind or rng.choice(OUTPUT_KINDS)
    out = d / "out"
    out.mkdir(exist_ok=True)
    force = ["--force"] if rng.random() < 0.5 else []
    if kind == "empty":
        return ["-o", ""] + force
    if kind == "exists":
        (out / "x.json").write_text("old")
        return ["-o", str(out / "x.json")] + force
    if kind == "dir":
        return ["-o", str(out)] + force
    if kind == "devfull":
        return ["-o", "/dev/full"] + force
    if kind == "devnull":
        return ["-o", "/dev/null"] + force
    if kind == "missing-dir":
        return ["-o", str(out / "no" / "x.json")] + force
    if kind == "long":
        return ["-o", str(out / ("a" * 300 + ".json"))] + force
    if kind == "newline":
        return ["-o", str(out / "a\nb.json")] + force
    if kind == "symlink":
        (out / "target.txt").write_text("keep")
        if not (out / "link.json").is_symlink():  # a case may draw this target for several commands
            (out / "link.json").symlink_to(out / "target.txt")
        return ["-o", str(out / "link.json")] + force
    if kind == "fifo":
        if not (out / "f.json").exists():  # a case may draw this target for several commands
            os.mkfifo(out / "f.json")
        return ["-o", str(out / "f.json")] + force
    return ["-o", str(out / "x.json")] + force
