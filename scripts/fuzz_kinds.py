"""The fuzz campaign's families and the mutation kinds each one draws from (scripts/fuzz.py).

A random case draws its family and kind with `rng.choice` over these sequences, so their content
and order are part of every case's identity: a case is reproducible from (seed, index) alone only
while they stay as they are (adding, removing or reordering a kind changes the cases drawn).
"""
from __future__ import annotations

FAMILIES = ("bytes", "sqlite", "kineto", "cli", "special")
# The kinds each family draws from (a repeated kind is drawn more often).
BYTES_KINDS = ["flip", "flip", "truncate", "zero-run", "flip-inner"]
SQLITE_KINDS = ["rename-col", "drop-col", "drop-table", "rename-table", "swap-meta", "nulls", "nulls-schema",
                "values", "values", "bad-utf8", "wal", "journal", "empty-table", "thread-names", "epoch"]
KINETO_KINDS = ["args-type", "num-field", "id-huge", "surrogate", "deep", "drop-field", "top-level", "name-type",
                "ph-odd", "all-bad"]
OPTION_KINDS = ["trim", "max-avg-us", "spike-us", "spike-factor", "min-launches", "limit", "thresholds", "device",
                "nvtx", "output", "env"]
OUTPUT_KINDS = ["empty", "exists", "dir", "devfull", "devnull", "missing-dir", "long", "newline", "symlink", "fifo",
                "ok"]
SPECIAL_KINDS = ["fifo", "directory", "devnull", "devzero", "symlink", "dangling", "loop", "newline-name",
                 "nonutf8-name", "long-name", "through-file", "cache-fifo", "cache-dir", "stale-tmp", "nsys-hang",
                 "nsys-garbage", "cache-garbage"]


def cover_plan(families=FAMILIES) -> list[tuple[str, str]]:
    """(family, kind) once per distinct kind: `--cover` case i is plan[i]. The cli family's kinds are
    its options, `-o` split by target kind."""
    kinds = {"bytes": BYTES_KINDS, "sqlite": SQLITE_KINDS, "kineto": KINETO_KINDS, "special": SPECIAL_KINDS,
             "cli": [k for k in OPTION_KINDS if k != "output"] + [f"output:{t}" for t in OUTPUT_KINDS]}
    return [(f, k) for f in families for k in dict.fromkeys(kinds[f])]
