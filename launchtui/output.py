"""Atomic output files: written beside their target under a temporary name, then renamed.

Only regular files are ever replaced: a symlink, device node, FIFO or directory at the target is
refused (with or without --force), so `-o /dev/full --force` cannot turn a device into a file.
The file gets the permissions the user's umask gives a new file, like any shell redirection.
"""
from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path

from launchtui.errors import UsageError, printable

_KIND = {stat.S_IFLNK: "a symbolic link", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device",
         stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory"}


def dumps(doc) -> str:
    """Deterministic JSON: same trace and options give byte-identical output.

    NaN and infinities are refused (`allow_nan=False`): options are validated at parse time, so
    one here is a bug, not a user error. Undecodable file-name bytes are escaped (`\\xff`).
    """
    text = json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a file name with bytes that are not UTF-8
        text = json.dumps(_printable_strings(doc), indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    return text


def _printable_strings(x):
    if isinstance(x, str):
        return printable(x)
    if isinstance(x, dict):
        return {_printable_strings(k): _printable_strings(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_printable_strings(v) for v in x]
    return x


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


def _refuse(path: Path, problem: str):
    raise UsageError(problem, path)


def write_atomic(path: str | os.PathLike, text: str, force: bool = False) -> Path:
    """Write `text` to `path` atomically; refuse to replace an existing file unless `force`."""
    if not str(path):
        raise UsageError("-o: empty output file name (omit -o to write to stdout)")
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        _refuse(path, _write_problem(e, path.parent))
    if st is not None:
        kind = _KIND.get(stat.S_IFMT(st.st_mode))
        if kind:
            _refuse(path, f"is {kind}, not a regular file; not replaced (write to a regular file or stdout)")
        if not force:
            _refuse(path, f"{path} exists; use --force to replace it")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        _refuse(path, f"directory {parent} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=parent)
    except OSError as e:
        _refuse(path, _write_problem(e, parent))
    try:
        try:
            os.fchmod(fd, 0o666 & ~_umask())
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            if not force and os.path.lexists(path):
                _refuse(path, f"{path} exists; use --force to replace it")
            os.replace(tmp, path)
        except OSError as e:
            _refuse(path, _write_problem(e, parent))
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def _write_problem(e: OSError, parent: Path) -> str:
    if e.errno in (errno.EACCES, errno.EPERM):
        return f"cannot write in {parent} (permission denied)"
    if e.errno == errno.ENAMETOOLONG:
        return "file name too long"
    if e.errno == errno.ENOSPC:
        return "no space left on the device"
    if e.errno == errno.EROFS:
        return f"cannot write in {parent} (read-only file system)"
    return f"cannot write ({e.strerror or e})"
