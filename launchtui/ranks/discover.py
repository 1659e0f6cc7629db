"""Find a job's per-rank traces and say which rank each one is (and how we know)."""
from __future__ import annotations

import glob
import os
import re
from pathlib import Path

from launchtui.errors import TraceError

# Kineto *.json[.gz] (which covers *.pt.trace.json[.gz]) and Nsight SQLite exports.
SUFFIXES = (".json", ".json.gz", ".sqlite")
_NAME_RANK = re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)
_GLOB_CHARS = set("*?[")


def is_trace_name(name: str) -> bool:
    return name.lower().endswith(SUFFIXES) and not name.startswith(".")


def is_multi(inputs: list[str]) -> bool:
    """Several inputs, a directory, or a (quoted) glob: the ranks view rather than one trace."""
    return len(inputs) > 1 or any(os.path.isdir(p) or (_GLOB_CHARS & set(p) and not os.path.exists(p))
                                  for p in inputs)


def _walk(d: Path) -> tuple[list[Path], int]:
    found, other = [], 0
    for root, dirs, files in os.walk(d):
        dirs[:] = sorted(x for x in dirs if not x.startswith("."))
        for f in sorted(files):
            if is_trace_name(f):
                found.append(Path(root) / f)
            else:
                other += 1
    return found, other


def find_traces(inputs: list[str]) -> list[Path]:
    """Trace files named by `inputs` (directories searched recursively), sorted, each once."""
    out: list[Path] = []
    for p in inputs:
        path = Path(p)
        if path.is_dir():
            found, other = _walk(path)
            if not found:
                if other == 0:
                    raise TraceError(path, "empty directory: no traces to read")
                raise TraceError(path, f"no traces in this directory ({other} other files; looked for "
                                       "*.json[.gz], *.pt.trace.json[.gz], *.sqlite)")
            out += found
        elif path.exists():
            out.append(path)
        elif _GLOB_CHARS & set(p):
            hits = sorted(Path(h) for h in glob.glob(p, recursive=True) if os.path.isfile(h))
            if not hits:
                raise TraceError(p, "no file matches this pattern")
            out += hits
        else:
            raise TraceError(path, "no such file or directory")
    seen, uniq = set(), []
    for p in out:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            uniq.append(p)
    return uniq


def rank_from_name(name: str) -> int | None:
    """`rank3`, `rank-3`, `rank_3`, `worker3_…` → 3; the last such number in the name wins."""
    hits = _NAME_RANK.findall(Path(name).name)
    return int(hits[-1]) if hits else None


def assign_ranks(files: list[str], meta_ranks: list[int | None]) -> list[tuple[int, str]]:
    """(rank, rank_from) per file: its metadata, else its name, else the lowest free number in file order.

    Two files claiming one rank is an error: the combined view would silently mix two jobs or runs.
    """
    out: list[tuple[int | None, str]] = []
    for f, m in zip(files, meta_ranks):
        if m is not None:
            out.append((m, "metadata"))
        else:
            n = rank_from_name(f)
            out.append((n, "file name") if n is not None else (None, "order"))
    claimed: dict[int, list[int]] = {}
    for i, (r, _) in enumerate(out):
        if r is not None:
            claimed.setdefault(r, []).append(i)
    dups = {r: ix for r, ix in claimed.items() if len(ix) > 1}
    if dups:
        r, ix = min(dups.items())
        who = ", ".join(f"{Path(files[i]).name} ({out[i][1]})" for i in ix)
        more = f" (and {len(dups) - 1} more duplicated ranks)" if len(dups) > 1 else ""
        raise TraceError(None, f"duplicate ranks: rank {r} is claimed by {len(ix)} files: {who}{more}; "
                               "give one job's traces, one per rank")
    free = (r for r in range(len(files) + len(claimed) + 1) if r not in claimed)
    return [(r if r is not None else next(free), src) for r, src in out]
