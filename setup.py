"""Only the optional C helpers live here; everything else is in pyproject.toml.

`optional=True`: where one cannot compile (no compiler, no Python headers, no dlopen) the install
still succeeds with a warning, and launchtui reads SQLite through its pure-Python path
(launchtui/trace/native_columns.py) and searches through numpy (launchtui/trace/sorted_search.py).
The C files need no SQLite or numpy headers.
"""
import sys

from setuptools import Extension, setup

setup(ext_modules=[
    Extension(
        "launchtui.trace._sqlite_scan",
        sources=["launchtui/trace/_sqlite_scan.c"],
        libraries=["dl"] if sys.platform.startswith("linux") else [],
        optional=True,
    ),
    Extension(
        "launchtui.trace._sorted_search",
        sources=["launchtui/trace/_sorted_search.c"],
        optional=True,
    ),
])
