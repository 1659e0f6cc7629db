"""Atomic output files: written beside their target under a temporary name, then renamed."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from launchtui.errors import UsageError


def dumps(doc) -> str:
    """Deterministic JSON: same trace and options give byte-identical output."""
    return json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def write_atomic(path: str | os.PathLike, text: str, force: bool = False) -> Path:
    """Write `text` to `path` atomically; refuse to replace an existing file unless `force`."""
    path = Path(path)
    if path.exists() and not force:
        raise UsageError(f"{path} exists; use --force to replace it", path)
    if path.is_dir():
        raise UsageError(f"{path} is a directory", path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"directory {parent} does not exist", path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if not force and path.exists():
            raise UsageError(f"{path} exists; use --force to replace it", path)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path
