"""The fuzz campaign's special inputs (scripts/fuzz.py, the special family): FIFOs, directories,
device nodes, symlinks, odd file names, cache entries replaced before the run, and a fake `nsys` on
PATH that hangs or writes garbage.

Draws come from the case's rng only, in a fixed order, so a case stays reproducible from
(seed, index) alone.
"""
from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path

from fuzz_kinds import SPECIAL_KINDS


FAKE_NSYS_HANG = "#!/bin/sh\nsleep 600\n"
FAKE_NSYS_GARBAGE = "#!/bin/sh\nfor a; do out=$last; last=$a; done\n" \
                    "while [ $# -gt 0 ]; do [ \"$1\" = --output ] && o=$2; shift; done\n" \
                    "printf 'garbage, not sqlite' > \"$o\"; exit 0\n"


def special_input(rng: random.Random, seeds: dict, d: Path, case_dir: Path,
                  kind: str | None = None) -> tuple[Path, str, dict, str | None]:
    """(input path, description, env, pre-step) for one special-file case."""
    good = rng.choice(seeds["sqlite"] + seeds["kineto"])
    kind = kind or rng.choice(SPECIAL_KINDS)
    env, pre = {}, None
    if kind == "fifo":
        p = d / "t.sqlite"
        os.mkfifo(p)
    elif kind == "directory":
        p = d / "dir.sqlite"
        p.mkdir()
    elif kind == "devnull":
        p = Path("/dev/null")
    elif kind == "devzero":
        p = Path("/dev/zero")
    elif kind == "symlink":
        p = d / ("link" + good.suffix)
        p.symlink_to(good)
    elif kind == "dangling":
        p = d / "dangling.sqlite"
        p.symlink_to(d / "nowhere")
    elif kind == "loop":
        p = d / "loop.sqlite"
        p.symlink_to(p)
    elif kind == "newline-name":
        p = d / ("a\nb" + good.suffix)
        shutil.copyfile(good, p)
    elif kind == "nonutf8-name":
        raw = os.fsencode(str(d)) + b"/bad\xff\xfename" + os.fsencode(good.suffix)
        shutil.copyfile(good, raw)
        p = Path(os.fsdecode(raw))
    elif kind == "long-name":
        p = d / ("x" * 300 + ".sqlite")
    elif kind == "through-file":
        shutil.copyfile(good, d / "file")
        p = d / "file" / "x.sqlite"
    elif kind in ("cache-fifo", "cache-dir", "stale-tmp", "cache-garbage"):
        p = d / good.name
        shutil.copyfile(good, p)
        pre = kind  # the runner fills the cache first, then damages it
    else:  # fake nsys
        reps = seeds["rep"]
        if not reps:
            p = d / "fake.nsys-rep"
            p.write_bytes(b"NVIDIA Tegra Profiler Report 2026@1@1@204 " + bytes(256))
        else:
            p = d / rng.choice(reps).name
            shutil.copyfile(rng.choice(reps), p)
        bindir = case_dir / "bin"
        bindir.mkdir()
        (bindir / "nsys").write_text(FAKE_NSYS_HANG if kind == "nsys-hang" else FAKE_NSYS_GARBAGE)
        (bindir / "nsys").chmod(0o755)
        env = {"PATH": f"{bindir}:{os.environ.get('PATH', '')}", "LAUNCHTUI_NSYS_TIMEOUT_S": "1"}
    return p, kind, env, pre


def damage_cache(kind: str, cache: Path) -> None:
    models = cache / "launchtui" / "models"
    entries = list(models.glob("*.model")) if models.is_dir() else []
    for e in entries:
        e.unlink()
        if kind == "cache-fifo":
            os.mkfifo(e)
        elif kind == "cache-dir":
            e.mkdir()
        elif kind == "cache-garbage":
            e.write_bytes(b"PK\x03\x04 garbage")
    if kind == "stale-tmp":
        models.mkdir(parents=True, exist_ok=True)
        old = models / ".tmp-stale123.model"
        old.write_bytes(bytes(1000))
        t = time.time() - 7 * 86400
        os.utime(old, (t, t))
