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
import signal
import sqlite3
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
    key = b"%s|%d|%d" % (os.fsencode(path.resolve()), st.st_size, st.st_mtime_ns)  # any bytes a name holds
    digest = hashlib.sha256(key).hexdigest()[:20]
    return cache_dir() / "nsys-export" / f"{path.stem}-{digest}.sqlite"


def export_command(path: Path, out: Path) -> list[str]:
    return ["nsys", "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out), str(path)]


DEFAULT_TIMEOUT_S = 3600  # a big report exports in minutes; a hung nsys must not hang us


def export_timeout_s() -> float:
    """LAUNCHTUI_NSYS_TIMEOUT_S (seconds), else one hour; unparsable or non-positive: the default."""
    try:
        v = float(os.environ.get("LAUNCHTUI_NSYS_TIMEOUT_S", DEFAULT_TIMEOUT_S))
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return v if 0 < v < 1e9 else DEFAULT_TIMEOUT_S


def valid_export(path: Path) -> bool:
    """True when `path` is an SQLite database with Nsight tables: what `nsys export` exits 0
    without (a crash, a full disk, a wrapper script) must not be cached as the report's export."""
    try:
        with open(path, "rb") as f:
            if f.read(16) != b"SQLite format 3\x00":
                return False
        from launchtui.trace.registry import NSIGHT_MARKERS
        from launchtui.trace.sqlite_columns import connect_readonly
        con = connect_readonly(path)
        try:
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            con.close()
        return any(m in names for m in NSIGHT_MARKERS)
    except (OSError, sqlite3.Error, ValueError):  # ValueError: undecodable text in a corrupt schema
        return False


def _run(cmd: list[str], timeout: float) -> tuple[int, str]:
    """Run nsys in its own process group, so a timeout ends it and anything it started."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            text=True, errors="replace", start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return proc.returncode, out


_VERSION_HINT = re.compile(r"version|newer|unsupported|not supported|incompatible", re.I)


def export_report(path: Path, progress=None) -> Path:
    """SQLite export of a report, made once per (path, size, mtime) in the cache directory."""
    progress = progress or (lambda stage, rows: None)
    out = export_target(path)
    if out.exists():
        if valid_export(out):
            progress("reusing cached nsys export", 0)
            return out
        out.unlink(missing_ok=True)  # an earlier export left garbage: make it again
    version = report_version(path)
    nsys = shutil.which("nsys")
    if nsys is None:
        beside = path.with_suffix(".sqlite")
        if beside.is_file():
            hint = f"{beside.name} is beside it: open that, if it is this report's export"
        else:
            hint = "Run: nsys export --type sqlite --output " + shlex.quote(str(beside)) + " " \
                   + shlex.quote(str(path)) + "  then open the .sqlite file"
        raise TraceError(path, f"Nsight report (version {version}) needs NVIDIA nsys to read; "
                               f"nsys is not on PATH. {hint}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # XDG_CACHE_HOME a file, read-only, ...
        raise TraceError(path, f"cannot create the export directory {out.parent} ({e.strerror}); "
                               "set XDG_CACHE_HOME to a writable directory") from None
    from launchtui.trace.cache import sweep_stale_temporaries
    sweep_stale_temporaries(out.parent, "*.tmp*.sqlite*")
    tmp = out.with_name(out.stem + f".tmp{os.getpid()}.sqlite")
    progress(f"running nsys export (report version {version})", 0)
    if sys.stderr.isatty():  # progress for a person; scripts get only the result or one error line
        print(f"launchtui: exporting {path} with nsys into {out.parent} ...", file=sys.stderr, flush=True)
    timeout = export_timeout_s()
    try:
        rc, text = _run([nsys] + export_command(path, tmp)[1:], timeout)
    except subprocess.TimeoutExpired:
        tmp.unlink(missing_ok=True)
        raise TraceError(path, f"nsys export did not finish in {timeout:g} s and was stopped "
                               "(LAUNCHTUI_NSYS_TIMEOUT_S sets the limit)") from None
    except OSError as e:
        raise TraceError(path, f"could not run nsys ({e})") from None
    if rc != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        msg = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
        detail = msg[-1].strip() if msg else f"exit status {rc}"
        why = "; an older nsys cannot read newer reports" if _VERSION_HINT.search(text or "") else ""
        raise TraceError(path, f"nsys export failed (report version {version}{why}): {detail}")
    if not valid_export(tmp):
        tmp.unlink(missing_ok=True)
        raise TraceError(path, "nsys export exited 0 but wrote no Nsight SQLite export (not cached; "
                               "check the nsys installation)")
    os.replace(tmp, out)
    progress("nsys export done", 0)
    return out


def read_report(path: Path, source, progress=None):
    """Read a report through its SQLite export (cached beside the other exports in the user cache);
    the trace shows the report's producing version, and the exporting nsys's."""
    from launchtui.trace.nsys_sqlite import read_nsys_sqlite
    sqlite_path = export_report(path, progress)
    trace = read_nsys_sqlite(sqlite_path, source, progress)
    trace.source.extra["report_version"] = report_version(path)
    trace.source.extra["exported_by_nsys"] = trace.source.version
    trace.source.version = f"report {report_version(path)}"
    return trace
