"""User-facing errors: one line naming the file and the problem, exit status 2."""
from __future__ import annotations


class TraceError(Exception):
    """A problem with the user's input. `str()` is the one line printed to the user."""

    exit_code = 2

    def __init__(self, path, problem: str):
        self.path = str(path) if path is not None else None
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path else problem)


class UsageError(TraceError):
    """Bad option values (unknown device, empty trim window, existing output file)."""

    def __init__(self, problem: str, path=None):
        super().__init__(path, problem)
