"""Where a trace's model cache entry lives: numpy-free, so a cached result can be found without
loading numpy or the model (launchtui/result_cache.py)."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from launchtui.paths import cache_dir

FORMAT_VERSION = 6


def models_dir() -> Path:
    return cache_dir() / "models"


def entry_path(path: Path, st: os.stat_result) -> Path:
    # fsencode: a file name that is not UTF-8 keys by its bytes
    key = b"v%d|%s|%d|%d" % (FORMAT_VERSION, os.fsencode(path.resolve()), st.st_size, st.st_mtime_ns)
    return models_dir() / (hashlib.sha256(key).hexdigest()[:32] + ".npz")
