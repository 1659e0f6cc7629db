""".nsys-rep / .qdrep reports: exported to SQLite with NVIDIA's `nsys`, into the user cache.

The report header names the producing version, so we can say which nsys is needed even when none
is installed. The export never lands beside the report; it is reused while the report is unchanged.
"""
from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from launchtui.errors import TraceError
from launchtui.paths import cache_dir

MAGIC = b"NVIDIA Tegra Profiler Report "


def report_version(path: Path) -> str:
    """Producer version from the header: '2026.1.1.204', or 'old container (<= 2023.1)'."""
    with open(path, "rb") as f:
        head = f.read(128)
    rest = head[len(MAGIC):]
    m = re.match(rb"(\d{4})@(\d+)@(\d+)@(\d+)", rest)
    if m:
        return ".".join(x.decode() for x in m.groups())
    if rest.startswith(b"1."):
        return "old container (<= 2023.1)"
    return "unknown"


def export_target(path: Path) -> Path:
    st = path.stat()
    key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()
    digest = hashlib.sha256(key).hexdigest()[:20]
    return cache_dir() / "nsys-export" / f"{path.stem}-{digest}.sqlite"


def export_command(path: Path, out: Path) -> list[str]:
    return ["nsys", "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out), str(path)]


def export_report(path: Path, progress=None) -> Path:
    """SQLite export of a report, made once per (path, size, mtime) in the cache directory."""
    progress = progress or (lambda stage, rows: None)
    out = export_target(path)
    if out.exists() and out.stat().st_size > 0:
        progress("reusing cached nsys export", 0)
        return out
    nsys = shutil.which("nsys")
    if nsys is None:
        cmd = "nsys export --type sqlite --output " + shlex.quote(str(path.with_suffix(".sqlite"))) + " " \
              + shlex.quote(str(path))
        raise TraceError(path, f"Nsight report (version {report_version(path)}) needs NVIDIA nsys to read; "
                               f"nsys is not on PATH. Run: {cmd}  then open the .sqlite file")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + f".tmp{os.getpid()}.sqlite")
    progress(f"running nsys export (report version {report_version(path)})", 0)
    if sys.stderr.isatty():  # progress for a person; scripts get only the result or one error line
        print(f"launchtui: exporting {path} with nsys into {out.parent} ...", file=sys.stderr, flush=True)
    try:
        proc = subprocess.run([nsys] + export_command(path, tmp)[1:],
                              capture_output=True, text=True)
    except OSError as e:
        raise TraceError(path, f"could not run nsys ({e})") from None
    if proc.returncode != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        msg = (proc.stderr or proc.stdout or "").strip().splitlines()
        detail = msg[-1] if msg else f"exit status {proc.returncode}"
        raise TraceError(path, f"nsys export failed (report version {report_version(path)}; an older nsys "
                               f"cannot read newer reports): {detail}")
    os.replace(tmp, out)
    progress("nsys export done", 0)
    return out
