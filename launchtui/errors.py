"""User-facing errors: one line naming the file and the problem, exit status 2."""
from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")


def printable(text) -> str:
    """One printable line: control characters (a newline in a file name) escaped as \\n, \\x1b ...,
    and undecodable file-name bytes (surrogate escapes) shown as \\xff, so messages and JSON stay
    one line of valid UTF-8."""
    s = str(text)
    if _CONTROL.search(s):
        s = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), s)
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        s = s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace") if not _lone(s) else \
            s.encode("utf-8", "backslashreplace").decode("utf-8")
    return s


def _lone(s: str) -> bool:
    """True when the string holds surrogates that are not file-name byte escapes (U+DC80..U+DCFF)."""
    return any(0xD800 <= ord(c) <= 0xDFFF and not 0xDC80 <= ord(c) <= 0xDCFF for c in s)


class TraceError(Exception):
    """A problem with the user's input. `str()` is the one line printed to the user."""

    exit_code = 2

    def __init__(self, path, problem: str):
        self.path = str(path) if path is not None else None
        self.problem = problem
        super().__init__(f"{printable(self.path)}: {printable(problem)}" if self.path else printable(problem))


class UsageError(TraceError):
    """Bad option values (unknown device, empty trim window, existing output file)."""

    def __init__(self, problem: str, path=None):
        super().__init__(path, problem)


def memory_message(needed_bytes: int | None = None) -> str:
    """The one line for a MemoryError: how much the read needs, when known."""
    need = f"; it needs about {needed_bytes / 2**20:,.0f} MiB" if needed_bytes else ""
    return f"not enough memory to read this trace{need} (raise the memory limit: ulimit -v, cgroup, job request)"
