"""One file of named arrays that opens by memory-mapping: a warm open costs what it touches, not
the model's size (figures: bench/MISSED.md).

Layout: MAGIC, the JSON header's length (8 bytes, little-endian), the JSON header (the caller's
fields plus "arrays": name -> [dtype, shape, offset]), then each array's bytes at a 64-byte-aligned
offset. Mapped copy-on-write: an array written in place changes the process's copy, never the file.
"""
from __future__ import annotations

import json
import mmap
import os
import tempfile
from pathlib import Path

import numpy as np

MAGIC = b"LAUNCHTUI-ARRAYS\n"
ALIGN = 64


def _padded(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def write(dest: Path, header: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write atomically: a temporary in dest's directory, then os.replace."""
    arrays = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    table, off = {}, 0
    for k, v in arrays.items():
        if v.dtype.hasobject:
            raise TypeError(f"{k}: object arrays cannot be stored")
        table[k] = [v.dtype.str, list(v.shape), off]
        off = _padded(off + v.nbytes)
    head = json.dumps({**header, "arrays": table}).encode()
    base = _padded(len(MAGIC) + 8 + len(head))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=dest.suffix, dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(MAGIC + len(head).to_bytes(8, "little") + head)
            for k, v in arrays.items():
                fh.seek(base + table[k][2])
                fh.write(memoryview(v).cast("B") if v.nbytes else b"")
            fh.truncate(base + off)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read(src: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(header, arrays mapped from the file). ValueError for a file that is not one of ours or is
    cut short."""
    with open(src, "rb") as fh:
        if fh.read(len(MAGIC)) != MAGIC:
            raise ValueError("not a launchtui array file")
        n = int.from_bytes(fh.read(8), "little")
        head = fh.read(n)
        if len(head) != n:
            raise ValueError("truncated header")
        header = json.loads(head)
        size = os.fstat(fh.fileno()).st_size
        base = _padded(len(MAGIC) + 8 + n)
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY) if size > base else None
    arrays = {}
    for k, (dt, shape, off) in header.pop("arrays").items():
        dtype = np.dtype(dt)
        if dtype.hasobject:
            raise ValueError(f"{k}: object dtype")
        count = int(np.prod(shape, dtype=np.int64))
        if base + off + count * dtype.itemsize > size or off < 0:
            raise ValueError(f"{k}: past the end of the file")
        a = np.frombuffer(mm, dtype, count, base + off) if count else np.zeros(0, dtype)
        arrays[k] = a.reshape(shape)
    return header, arrays
