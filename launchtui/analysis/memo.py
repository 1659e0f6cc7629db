"""The in-memory tier of derived results: one keyed memo per live trace, the only one in launchtui.

`of(trace)` is the trace's `TraceMemo`. Everything launchtui derives from a loaded trace and keeps in
memory lives there under a hashable key: the typed index (analysis/index.py), the user-frame nodes
(analysis/sources.py) and every result the session (session.py) holds, whose memory tier this is.
So a result is found by its key whoever asks (an analysis or a view, one session or another on the
same trace), never by convention between two private dicts.

Invariants:
- a `Trace` stays plain data: the memo is kept beside it, by identity (a Trace is mutable, not
  hashable), and goes when the trace is collected;
- `get(key, compute)` computes each key once, under that key's lock, so workers asking at the same
  time wait for one computation; different keys compute concurrently;
- a value, once kept, is never replaced (`put` keeps the first): results are read-only and every
  holder sees the same object. Only a memo scoped to one command (analysis/shared.py) drops values
  early, to free memory; the trace's memo never does.
"""
from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, Hashable

MISS = object()   # `peek`: nothing kept under the key

_MEMOS: dict[int, TraceMemo] = {}   # id(trace) -> its memo, while the trace lives
_MEMOS_LOCK = threading.Lock()


class TraceMemo:
    """The derived results of one trace, by key (see the module docstring)."""

    def __init__(self) -> None:
        self._values: dict[Hashable, Any] = {}
        self._locks: dict[Hashable, threading.Lock] = {}
        self._lock = threading.Lock()

    def peek(self, key: Hashable):
        """The value kept under `key`, else MISS."""
        return self._values.get(key, MISS)

    def get(self, key: Hashable, compute: Callable[[], Any]):
        """The value under `key`, computed by `compute()` and kept on the first ask."""
        value = self._values.get(key, MISS)
        if value is not MISS:
            return value
        with self.lock(key):
            value = self._values.get(key, MISS)
            if value is MISS:
                value = self._values[key] = compute()
        return value

    def put(self, key: Hashable, value):
        """Keep `value` under `key` unless a value is kept already; returns the one kept."""
        with self._lock:
            return self._values.setdefault(key, value)

    def keys(self) -> list[Hashable]:
        """The keys of the values kept now."""
        with self._lock:
            return list(self._values)

    def drop(self, which: Callable[[Hashable], bool]) -> None:
        """Forget the values whose key `which` accepts (a scoped memo freeing memory early)."""
        with self._lock:
            for key in [k for k in self._values if which(k)]:
                del self._values[key]

    def lock(self, key: Hashable) -> threading.Lock:
        """The lock that serialises computing `key` (the session holds it across its disk tier)."""
        with self._lock:
            return self._locks.setdefault(key, threading.Lock())


def of(trace) -> TraceMemo:
    """The memo of `trace`, made on first use and dropped when the trace is collected."""
    key = id(trace)
    memo = _MEMOS.get(key)
    if memo is None:
        with _MEMOS_LOCK:
            memo = _MEMOS.get(key)
            if memo is None:
                memo = _MEMOS[key] = TraceMemo()
                weakref.finalize(trace, _MEMOS.pop, key, None)
    return memo
