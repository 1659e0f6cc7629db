"""Finished outputs of `report`, `record` and `info`, cached beside the model they were computed from.

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

The TUI stores its first computed state the same way (`memo`): the verdict's record and the kernel
table's rows for a selection and settings, pickled beside the text results in the user's private cache,
keyed like them (code, model entry, every input), so a warm open shows them without recomputing.
"""
from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from types import SimpleNamespace

COMMANDS = ("report", "record", "info")
MAX_TEXT_BYTES = 8 * 2**20    # larger outputs are recomputed, not stored
MAX_RESULTS = 512             # files kept in results/, least recently used go first ...
MAX_TOTAL_BYTES = 64 * 2**20  # ... and at most this much in all
_NOT_KEYED = ("output", "force")  # where the text goes, not what it says


def results_dir() -> Path:
    from launchtui.paths import cache_dir
    return cache_dir() / "results"


def _code_fingerprint() -> bytes:
    """launchtui's modules (size, mtime) and numpy's / msgspec's installed files, found without
    importing them (an upgrade rewrites them)."""
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
    h = hashlib.sha256(_code_fingerprint())
    h.update(repr((inputs, entry.name, est.st_dev, est.st_ino, est.st_size)).encode("utf-8", "surrogateescape"))
    return h.hexdigest()[:40]


def model_entry(trace_path) -> Path | None:
    """The model cache entry of a trace file when it exists (results are stored only beside one)."""
    entry = _entry(SimpleNamespace(trace=trace_path))
    return entry if entry is not None and entry.is_file() else None


MISS = object()   # lookup(): nothing stored


def memo(kind: str, inputs, entry: Path | None, compute):
    """`compute()`, or its stored value for the same `kind`, `inputs` (compared by repr) and model
    entry. The value is pickled: the files are the user's own, in the private cache directory, and
    any change of launchtui's code or of the entry gives a new key. `entry` None: just compute."""
    value = lookup(kind, inputs, entry)
    if value is MISS:
        value = compute()
        remember(kind, inputs, entry, value)
    return value


def lookup(kind: str, inputs, entry: Path | None):
    """The value `memo` stored for these, else `MISS` (also without an entry)."""
    key = _hash((kind, inputs), entry) if entry is not None else None
    if key is None:   # no entry, or it is gone or not a regular file
        return MISS
    import pickle
    data = _read_bytes(results_dir() / f"{key}.pkl")
    if data is not None:
        try:
            return pickle.loads(data)
        except Exception:  # a truncated or foreign file: recompute (and overwrite it)
            pass
    return MISS


def remember(kind: str, inputs, entry: Path | None, value) -> None:
    """Store `value` as `memo` would have (nothing without an entry or when it does not pickle)."""
    key = _hash((kind, inputs), entry) if entry is not None else None
    if key is None:
        return
    import pickle
    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return
    _store_bytes(key, data, ".pkl")


# Results that `report` computes anyway and the TUI's first open needs: stored by `report` under
# these kinds, read by the TUI (same inputs, same code: the same values).
RECORD = "record"          # (record, CPU-stall API indices) for (trace path, Selection, RecordOptions)
BACKPRESSURE = "backpressure"   # analysis.backpressure.backpressure() for (Selection, Options)
KERNEL_GROUPS = "kernel-groups"  # launches.KernelGroups totals (group_totals) for (Selection, names)
SELECTION_STATS = "selection-stats"   # the TUI's stats line (selection_stats_of) for (Selection, Options)


def selection_stats_of(launches: dict, queues: list[dict], threshold: int) -> dict:
    """The TUI's stats line from a report's `launches` (report.launch_totals) and `queues`
    (queue_summary, as JSON; its thresholds include `threshold`): launch totals and the deepest
    queue (the first stream of that depth), with its time at or above `threshold`. One function
    for both, so `report` stores what the TUI would compute (0.36 s at 5M kernels)."""
    peak = max(queues, key=lambda q: q["max_depth"]) if queues else None
    return {
        "launches": launches["kernel_launches"],
        "launch_api_ms": launches["launch_api_ms"],
        "queue_peak": peak["max_depth"] if peak else 0,
        "queue_peak_stream": (peak["device_id"], peak["stream_id"]) if peak else None,
        "time_above_ns": peak["time_at_or_above_ns"].get(str(threshold), 0) if peak else 0,
    }


def group_totals(gr):
    """Kernel groups without their per-launch arrays: what the table's rows read (kilobytes, not
    the 80 MB of launch indices at 5M kernels)."""
    import dataclasses

    import numpy as np
    return dataclasses.replace(gr, op_idx=np.zeros(0, np.int64), op_group=np.zeros(0, np.int64))


def record_inputs(trace, sel, opt) -> tuple:
    """The record names its trace as opened (its `source`), so the path is part of its inputs."""
    return (str(trace.source.path), sel, opt)


def record_and_stalls(trace, sel, opt, shared=None) -> tuple[dict, dict]:
    """The case record and {API index: what it is} of its spikes that are not blocked calls (CPU
    stalls, cold starts, slow calls without a pattern: the TUI's stall marks, §V3's words);
    `shared`: the report's analysis.shared.Shared."""
    from launchtui.analysis.record import record_with_streams
    doc, streams = record_with_streams(trace, sel, opt, shared)
    return doc, {e.worst_api: v.spike_words.get(e.worst_api, "") for v in streams for e in v.unblocked_spikes()}


def run_cached(cmd: str, args, handler, emit) -> int:
    """Run `handler(args)`, or emit its cached text when this exact result was computed before."""
    if getattr(args, "no_cache", False) or cmd not in COMMANDS:
        return handler(args)
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


def _store_bytes(key: str, data: bytes, suffix: str) -> None:
    """Write atomically; a full or read-only cache directory never fails the command."""
    if len(data) > MAX_TEXT_BYTES:
        return
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
    except OSError:
        pass


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
