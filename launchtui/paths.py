"""Per-user locations. launchtui never writes beside a trace."""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/launchtui, else ~/.cache/launchtui."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "launchtui"
