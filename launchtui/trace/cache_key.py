"""Where a trace's model cache entry lives, and the sweep of killed saves' temporaries: numpy-free,
so a cached result can be found (and the directory kept clean) without loading numpy or the model
(launchtui/result_cache.py)."""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from launchtui.paths import cache_dir

# Bumped whenever a reader's model changes, so no cached model from older code is used (the
# versions' history is in the commit log).
FORMAT_VERSION = 20
MODEL_SUFFIX = ".model"
STALE_TMP_S = 3600  # a temporary this old belongs to a save that was killed


def models_dir() -> Path:
    return cache_dir() / "models"


def entry_path(path: Path, st: os.stat_result) -> Path:
    # fsencode: a file name that is not UTF-8 keys by its bytes
    key = b"v%d|%s|%d|%d" % (FORMAT_VERSION, os.fsencode(path.resolve()), st.st_size, st.st_mtime_ns)
    return models_dir() / (hashlib.sha256(key).hexdigest()[:32] + MODEL_SUFFIX)


def sweep_stale_temporaries(directory: Path, pattern: str, age_s: float = STALE_TMP_S) -> None:
    """Remove temporaries left by a save that was killed (`kill -9` mid-write), once they are old."""
    cutoff = time.time() - age_s
    try:
        for p in directory.glob(pattern):
            try:
                if os.lstat(p).st_mtime < cutoff:
                    p.unlink()
            except OSError:
                pass
    except OSError:
        pass
