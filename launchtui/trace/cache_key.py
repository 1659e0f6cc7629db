"""Where a trace's model cache entry lives, and the sweep of killed saves' temporaries: numpy-free,
so a cached result can be found (and the directory kept clean) without loading numpy or the model
(launchtui/result_cache.py)."""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from launchtui.paths import cache_dir

FORMAT_VERSION = 15  # 7: CPU runs and samples (SCHED_EVENTS / COMPOSITE_EVENTS); 8: one memory-mapped
                     # flat file (trace/flatfile.py), not an .npz; 9: int32 ops.api and index id arrays;
                     # 10: ops.pid / api.pid as int16 indices into `processes`; 11: int32 ops.stream;
                     # 12: int32 correlation ids (ops.corr, api.corr) where they fit; 13: Nsight
                     # name ids looked up among StringIds' ids (a sparse table's names were lost);
                     # 14: hipHccModuleLaunchKernel is a launch call; 15: Kineto's Python-frame count
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
