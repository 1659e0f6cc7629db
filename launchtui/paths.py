"""Per-user locations. launchtui never writes beside a trace.

The cache holds pickled results and mapped arrays, which launchtui loads as its own: a directory
another user can write to (XDG_CACHE_HOME on a shared scratch disk of a GPU node) could feed it
crafted files. So the cache directory is used only when it belongs to this user and neither group
nor others may write to it; otherwise the run says so in one line and uses a private temporary
directory instead, removed at exit (it works, without a persistent cache)."""
from __future__ import annotations

import atexit
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

_fallback: dict[str, Path] = {}


def configured_cache_dir() -> Path:
    """$XDG_CACHE_HOME/launchtui, else ~/.cache/launchtui."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "launchtui"


def untrusted_reason(d: Path) -> str | None:
    """Why `d` may not hold the cache (another owner, writable by group or others), or None. A
    missing directory is created private first; one that cannot be created is left to the cache's
    users, which then work without it (nothing to trust or distrust)."""
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = d.stat()
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return "belongs to another user"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "is writable by group or others"
    return None


def cache_dir() -> Path:
    """The user's private cache directory: configured_cache_dir() when it is private, else (said
    once on stderr) a private temporary directory for this run."""
    d = configured_cache_dir()
    why = untrusted_reason(d)
    if why is None:
        return d
    key = str(d)
    if key not in _fallback:
        tmp = Path(tempfile.mkdtemp(prefix="launchtui-cache-"))
        atexit.register(shutil.rmtree, tmp, True)
        _fallback[key] = tmp
        shown = os.fsencode(d).decode("utf-8", "backslashreplace")   # any bytes of the name, one valid line
        print(f"launchtui: cache directory {shown} {why}: not using it (no cache this run)", file=sys.stderr)
    return _fallback[key]
