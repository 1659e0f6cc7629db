"""Shared test fixtures: paths to ../shared (optional) and the synthetic generator."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LAUNCHTUI_SHARED") or Path(__file__).resolve().parents[2] / "shared")
SKIP_SHARED = "../shared not found: real-sample tests need the shared reference folder"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own per-user cache directory."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))


@pytest.fixture(scope="session")
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip(SKIP_SHARED)
    return SHARED


def sample(rel: str) -> Path:
    p = SHARED / "samples" / rel
    if not p.exists():
        pytest.skip(SKIP_SHARED if not SHARED.is_dir() else f"sample {rel} missing from ../shared")
    return p


def snapshot(path: Path):
    """(size, mtime_ns, bytes hash) of a file, to prove a command left it untouched."""
    import hashlib
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest()
