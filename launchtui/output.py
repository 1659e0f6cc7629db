"""Atomic output files: written beside their target under a temporary name, then renamed.

Only regular files are ever replaced: a symlink, device node, FIFO or directory at the target is
refused (with or without --force), so `-o /dev/full --force` cannot turn a device into a file.
The file gets the permissions the user's umask gives a new file, like any shell redirection.
"""
from __future__ import annotations

import errno
import gzip
import json
import math
import os
import re
import stat
import tempfile
from pathlib import Path

import msgspec

from launchtui.errors import UsageError, printable

GZIP_LEVEL = 6   # zlib's default: on trace JSON twice as fast as level 9 for a file ~8 % larger

_KIND = {stat.S_IFLNK: "a symbolic link", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device",
         stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory"}


def dumps(doc) -> str:
    """Deterministic JSON: same trace and options give byte-identical output.

    Byte for byte what `json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False)` writes, encoded
    by msgspec, which is much faster (bench/README.md). NaN and infinities are refused
    (ValueError, as `allow_nan=False` does): options are validated at parse time, so one here is a bug,
    not a user error. Undecodable file-name bytes are escaped (`\\xff`).
    """
    try:
        return _fast_dumps(doc)
    except (TypeError, ValueError, OverflowError, UnicodeError, msgspec.EncodeError):
        pass  # the standard library decides: the same text, or the error json.dumps raises
    text = json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a file name with bytes that are not UTF-8
        text = json.dumps(_printable_strings(doc), indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    return text


# msgspec writes floats in shortest round-trip form like repr(), but spells exponents differently
# (1e16 / 0.00001 / 1.5e-7 vs repr's 1e+16 / 1e-05 / 1.5e-07). Every token that can differ contains
# an `e` or starts with `0.0000` (checked over 400k random floats of every magnitude: tests/test_output.py).
# In the indented text a number is the last thing on its line, while a string value ends in `"`, so
# `...e12,\n` and `0.0000...\n` only match numbers; each is rewritten with repr(). Two patterns
# with a literal first byte keep the scan near memchr speed.
_EXP_TAIL = re.compile(rb"e[-+]?\d+,?\n")
_SMALL_TAIL = re.compile(rb"0\.0000\d*,?\n")
_NUMBER_BYTES = frozenset(b"0123456789.-+e")
# A non-finite float64 in msgpack: 0xcb, then ±inf (7ff0.../fff0...) or the quiet NaN Python and
# numpy produce (7ff8.../fff8...). The six zero bytes keep integers' payloads from matching (a uint64
# holding cb 7f fa would send a report down the slow walk); a NaN with a non-zero payload, which only
# reinterpreted raw bytes give, would be written as null instead of refused.
_NONFINITE = re.compile(rb"\xcb[\x7f\xff][\xf0\xf8]\x00{6}")


def _fast_dumps(doc) -> str:
    """msgspec encoding identical to the standard library's; raises where the result could differ."""
    if _NONFINITE.search(msgspec.msgpack.encode(doc)) and _has_nonfinite(doc):
        raise ValueError("Out of range float values are not JSON compliant")
    # raises UnicodeEncodeError on lone surrogates, TypeError on keys the standard library would coerce
    text = msgspec.json.format(msgspec.json.encode(doc), indent=1) + b"\n"
    if _EXP_TAIL.search(text) or _SMALL_TAIL.search(text):
        text = _python_floats(text)
    return text.decode()


def _python_floats(text: bytes) -> bytes:
    """Number tokens that end a line and may be spelled unlike repr() rewritten with repr()."""
    ends = sorted({m.start() for m in _EXP_TAIL.finditer(text)} | {m.start() for m in _SMALL_TAIL.finditer(text)})
    out, last = [], 0
    for pos in ends:
        start = pos
        while text[start - 1] in _NUMBER_BYTES:
            start -= 1
        end = text.index(b"\n", pos)
        if text[end - 1] == ord(","):
            end -= 1
        if start < last:
            continue
        out += (text[last:start], repr(float(text[start:end])).encode())
        last = end
    out.append(text[last:])
    return b"".join(out)


def _has_nonfinite(x) -> bool:
    if isinstance(x, float):
        return not math.isfinite(x)
    if isinstance(x, dict):
        return any(_has_nonfinite(k) or _has_nonfinite(v) for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return any(_has_nonfinite(v) for v in x)
    return False


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
    def write(fd: int) -> None:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    return _write_atomic(path, force, write)


def write_atomic_chunks(path: str | os.PathLike, chunks, force: bool = False, compress: bool = False) -> Path:
    """Write the byte chunks to `path` atomically, gzip-compressed when `compress` (a fixed header:
    no name, mtime 0, so the same content gives the same bytes); the rules of `write_atomic`. The
    chunks are compressed and written on a second thread while the next is made (`pipelined`)."""
    def write(fd: int) -> None:
        with os.fdopen(fd, "wb") as raw:
            if compress:
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=GZIP_LEVEL) as f:
                    pipelined(chunks, f.write)
            else:
                pipelined(chunks, raw.write)
            raw.flush()
            os.fsync(raw.fileno())
    return _write_atomic(path, force, write)


def pipelined(chunks, sink, depth: int = 2) -> None:
    """`sink(c)` for every chunk in order, on a writer thread while this one makes the next chunk:
    making a chunk holds the GIL (formatting), while zlib and the write release it, so the two share
    the CPUs. At most `depth` chunks wait between them. What either side raises ends both and is
    raised here, after the writer has stopped (so the caller may remove a partial file)."""
    import queue
    import threading
    pending: queue.Queue = queue.Queue(maxsize=depth)
    failed: list[BaseException] = []

    def drain() -> None:
        try:
            while (c := pending.get()) is not None:
                sink(c)
        except BaseException as e:   # re-raised in the caller's thread
            failed.append(e)
            while pending.get() is not None:   # let the maker finish its put and see the failure
                pass
    writer = threading.Thread(target=drain, name="launchtui-write", daemon=True)
    writer.start()
    try:
        for c in chunks:
            if failed:
                break
            pending.put(c)
    finally:
        pending.put(None)
        writer.join()
    if failed:
        raise failed[0]


def _write_atomic(path: str | os.PathLike, force: bool, write) -> Path:
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
            write(fd)
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
