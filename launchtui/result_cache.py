"""The store's mechanism: where results live, how they are keyed, read, written and evicted. What is
stored and when is session.py's (its queries); this module knows no analysis.

Finished outputs of `report`, `record` and `info` are cached beside the model they were computed from.

A warm `report --json` then recomputes nothing and never loads the model: it stats the trace and
the model entry, reads one small file and writes it (bench/README.md: flat in the trace's size).

A result is keyed by everything its text depends on: the command and every option as parsed (the
trace path as typed too, since outputs name it), the trace's identity (resolved path, size, mtime:
the model cache's own key, FORMAT_VERSION included), the model entry it was computed beside (its
inode and size: an entry rebuilt or replaced gets a new one, so its results are never reused), and
a fingerprint of launchtui's code (every module's size and mtime) and of numpy's and msgspec's files,
so any code, schema or version change invalidates them. Only successful runs are stored, only when
their model entry exists (a trace without CUDA activity is not cached, nor are its results); the
model entry is marked as used on a hit, as loading it would. `--no-cache` neither reads nor writes.

The session's results are keyed by code, model entry and every input of theirs (`key_of`), not by
the path as typed (session.py gives a result that names it the one opened now): pickled
beside the text results (`load_pickle` / `store_pickle`), or flat files of arrays beside the model
entry, memory-mapped (`load_mapped` / `store_mapped`: `<entry>.<slot>`, evicted with it). Every
path is under paths.cache_dir(), which is used only when it belongs to the user and no one else may
write to it: nothing here unpickles or maps a file another user could have planted.
"""
from __future__ import annotations

import functools
import hashlib
import os
import stat
from pathlib import Path
from types import SimpleNamespace

from launchtui.analysis.memo import MISS  # load_pickle / load_mapped: nothing stored (or not readable)

COMMANDS = ("report", "record", "info")
MAX_TEXT_BYTES = 8 * 2**20    # larger outputs are recomputed, not stored
MAX_RESULTS = 512             # files kept in results/, least recently used go first ...
MAX_TOTAL_BYTES = 64 * 2**20  # ... and at most this much in all
_NOT_KEYED = ("output", "force")  # where the text goes, not what it says


def results_dir() -> Path:
    from launchtui.paths import cache_dir
    return cache_dir() / "results"


@functools.cache
def code_fingerprint() -> bytes:
    """launchtui's modules (size, mtime) and numpy's / msgspec's installed files, found without
    importing them (an upgrade rewrites them). Walked once per process: every key of a TUI open
    (model entry, index, lanes, record, table, idle row) asks for it, from four threads; code
    edited while a process runs keys the next process's results."""
    from importlib.util import find_spec
    h = hashlib.sha256()
    for pkg in ("numpy", "msgspec"):
        spec = find_spec(pkg)
        if spec is not None and spec.origin:
            st = os.stat(spec.origin)
            h.update(b"%s|%d|%d;" % (os.fsencode(spec.origin), st.st_size, st.st_mtime_ns))
    root = Path(__file__).resolve().parent
    stack = [root]
    while stack:
        d = stack.pop()
        with os.scandir(d) as it:
            for e in sorted(it, key=lambda e: e.name):
                if e.is_dir(follow_symlinks=False) and e.name != "__pycache__":
                    stack.append(Path(e.path))
                elif e.name.endswith(".py"):
                    st = e.stat()
                    h.update(b"%s|%d|%d;" % (os.fsencode(os.path.relpath(e.path, root)), st.st_size,
                                             st.st_mtime_ns))
    return h.digest()


def _entry(args) -> Path | None:
    """The model cache entry of `args.trace` when it is a regular file, else None."""
    from launchtui.trace.cache_key import entry_path
    path = Path(args.trace)
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None
        return entry_path(path, st)
    except (OSError, ValueError):
        return None


def _key(cmd: str, args, entry: Path) -> str | None:
    opts = sorted((k, repr(v)) for k, v in vars(args).items() if k not in _NOT_KEYED and not k.startswith("_"))
    return _hash((cmd, opts), entry)


def _hash(inputs, entry: Path) -> str | None:
    """The key of a result computed from `inputs` (repr'd) beside the model entry; None without one."""
    try:
        est = os.lstat(entry)
    except OSError:
        return None
    if not stat.S_ISREG(est.st_mode):
        return None
    h = hashlib.sha256(code_fingerprint())
    h.update(repr((inputs, entry.name, est.st_dev, est.st_ino, est.st_size)).encode("utf-8", "surrogateescape"))
    return h.hexdigest()[:40]


def model_entry(trace_path) -> Path | None:
    """The model cache entry of a trace file when it exists (results are stored only beside one)."""
    entry = _entry(SimpleNamespace(trace=trace_path))
    return entry if entry is not None and entry.is_file() else None




def key_of(inputs, entry: Path) -> str | None:
    """The key of a result computed from `inputs` (repr'd) beside the model entry; None without one."""
    return _hash(inputs, entry)


def load_pickle(key: str):
    """The value `store_pickle` stored under `key`, else MISS. The files are the user's own, in the
    private cache directory (paths.cache_dir), and any change of launchtui's code or of the model
    entry gives another key."""
    import pickle
    data = _read_bytes(results_dir() / f"{key}.pkl")
    if data is not None:
        try:
            return pickle.loads(data)
        except Exception:  # a truncated or foreign file: recompute (and overwrite it)
            pass
    return MISS


def store_pickle(key: str, value) -> bool:
    """Store `value` under `key` (nothing when it does not pickle or is too large); True if stored."""
    import pickle
    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return False
    return _store_bytes(key, data, ".pkl")


def mapped_path(entry: Path, slot: str) -> Path:
    """The flat file of `slot` beside the model entry (evicted and counted with it: trace/cache.py)."""
    return entry.with_name(f"{entry.name}.{slot}")


def _identity(entry: Path, key: str) -> dict:
    st = os.stat(entry)   # not its mtime: every warm open marks the entry as used
    return {"entry": [st.st_dev, st.st_ino, st.st_size], "code": code_fingerprint().hex(), "key": key}


def load_mapped(entry: Path, slot: str, key: str, decode):
    """`decode(skeleton, arrays)` of the flat file of `slot` when it holds `key`, else MISS (absent,
    stale, another key, or a file that does not parse or fit)."""
    from launchtui.trace import flatfile
    try:
        header, arrays = flatfile.read(mapped_path(entry, slot))
        if header.get("identity") != _identity(entry, key):
            return MISS
        return decode(header["value"], arrays)
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return MISS


def store_mapped(entry: Path, slot: str, key: str, encode, at_least: int = 0) -> bool:
    """Write `encode()` = (skeleton, arrays) as the flat file of `slot`, atomically, unless the
    entry and it would pass the model cache's bound; a full or read-only cache never fails.
    `at_least`: a lower bound on the arrays' bytes, known before `encode` builds them (a 20M
    trace's index: ~0.7 GB built for a store the bound then refused)."""
    from launchtui.trace import flatfile
    from launchtui.trace.cache import max_bytes
    try:
        room = max_bytes() - entry.stat().st_size
        if at_least > room:
            return False
        skeleton, arrays = encode()
        if sum(a.nbytes for a in arrays.values()) > room:
            return False
        flatfile.write(mapped_path(entry, slot), {"identity": _identity(entry, key), "value": skeleton}, arrays)
        return True
    except (OSError, TypeError, ValueError):
        return False


def run_cached(cmd: str, args, handler, emit) -> int:
    """Run `handler(args)`, or emit its cached text when this exact result was computed before."""
    if getattr(args, "no_cache", False) or cmd not in COMMANDS or getattr(args, "capture", None):
        return handler(args)   # --capture: the text depends on a second file the key does not name
    entry = _entry(args)
    key = _key(cmd, args, entry) if entry is not None else None
    if key is not None:
        text = _read(results_dir() / f"{key}.txt")
        if text is not None:
            emit(text, args)
            _touch(entry)
            from launchtui.trace.cache_key import sweep_stale_temporaries
            sweep_stale_temporaries(entry.parent, ".tmp-*")  # as a warm model load does
            return 0
    rc = handler(args)
    text = getattr(args, "_emitted", None)
    if rc == 0 and text is not None and entry is not None:
        key = _key(cmd, args, entry)  # the entry the handler just wrote, or the one it loaded
        if key is not None:
            _store(key, text)
    return rc


def _read(path: Path) -> str | None:
    data = _read_bytes(path)
    try:
        return None if data is None else data.decode("utf-8")
    except UnicodeError:
        return None


def _read_bytes(path: Path) -> bytes | None:
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        data = path.read_bytes()
        os.utime(path)
        return data
    except OSError:
        return None


def _touch(entry: Path) -> None:
    try:
        os.utime(entry)  # recently used: the model cache evicts it last
    except OSError:
        pass


def _store(key: str, text: str) -> None:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return
    _store_bytes(key, data, ".txt")


def _store_bytes(key: str, data: bytes, suffix: str) -> bool:
    """Write atomically; a full or read-only cache directory never fails the command."""
    if len(data) > MAX_TEXT_BYTES:
        return False
    d = results_dir()
    try:
        import tempfile
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, d / f"{key}{suffix}")
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _evict(d)
        return True
    except OSError:
        return False


def _evict(d: Path) -> None:
    from launchtui.trace.cache_key import sweep_stale_temporaries
    sweep_stale_temporaries(d, ".tmp-*")
    files = []
    for p in [*d.glob("*.txt"), *d.glob("*.pkl")]:
        try:
            st = p.stat()
        except OSError:
            continue
        files.append((st.st_mtime, st.st_size, p))
    files.sort()
    total = sum(f[1] for f in files)
    for i, (_, size, p) in enumerate(files):
        if len(files) - i <= MAX_RESULTS and total <= MAX_TOTAL_BYTES:
            break
        p.unlink(missing_ok=True)
        total -= size
