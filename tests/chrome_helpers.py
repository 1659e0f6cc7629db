"""Helpers for the chrome-export tests: run the CLI in process, load an export with its number tokens
kept as text, and diff two JSON documents path by path."""
from __future__ import annotations

import contextlib
import gzip
import io
import json
from decimal import Decimal

from launchtui.cli import main


def cli(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in args])
    return rc, out.getvalue(), err.getvalue()


def cli_json(*args) -> dict:
    """A command's JSON, through the test's own cache: the first command on a file reads it and the
    next ones map its model (the warm open, equal to a read); a command repeated on the same file
    gives its stored output, which tests/test_result_cache.py holds equal to a computed one."""
    rc, out, err = cli(*args)
    assert rc == 0, err
    return json.loads(out)


def export(trace, out, *extra) -> dict:
    """`launchtui export TRACE --format chrome -o OUT ...`, then the file loaded with every number token
    as its text (`"ts": "1500.250"`), so tests can check exactness."""
    rc, _, err = cli("export", trace, "--format", "chrome", "-o", out, "--no-cache", *extra)
    assert rc == 0, err
    return load(out)


def load(path) -> dict:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data, parse_float=str, parse_int=str)


def ns(token: str) -> int:
    """An exact µs token -> int ns."""
    v = Decimal(token) * 1000
    assert v == v.to_integral_value(), token
    return int(v)


def diff(a, b, path: str = "") -> list[tuple[str, object, object]]:
    """(path, a value, b value) where the documents differ; lists of equal length element by element."""
    out: list = []
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append((f"{path}/{k}", a.get(k, "<absent>"), b.get(k, "<absent>")))
            else:
                out += diff(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, f"{path}[{i}]")
    elif a != b:
        out.append((path, a, b))
    return out


# What differs between a trace and its chrome export by design (README "Chrome trace export"):
# - the source identity (path, size, mtime, format, producer, version);
# - the reader's wording of what a format lacks (`missing`), and the launching thread's CPU busy
#   share, which needs CPU sampling that only Nsight carries (with the conclusion and verdict
#   lines that quote it, when the original had it);
# - a wall clock the original did not know (null) reads as Kineto's absolute clock (0);
# - events the original's reader skipped are not in the model, so not in the file (`skipped`);
# - how the stacks were found: the file carries them as `Call stack` operators.
FORMAT_PATHS = ("/source/", "/trace/missing", "/launch_thread_cpu", "/trace/skipped", "/record/skipped",
                "/sources/stacks")


def unexpected(a: dict, b: dict) -> list:
    """The differences between two documents (report, record) that are not FORMAT_PATHS."""
    cpu = (a.get("record", a).get("launch_thread_cpu") or {}).get("available")
    out = []
    for p, x, y in diff(a, b):
        if any(s in p for s in FORMAT_PATHS) or (p.endswith("/skipped") and p.count("/") == 1):
            continue
        if p.endswith("/wall_offset_ns") and x is None and y == 0:
            continue
        if cpu and (p.endswith("/conclusion") or "/verdict" in p):
            continue
        out.append((p, x, y))
    return out
