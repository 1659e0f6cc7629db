"""The developer guide's size rules hold in the package and in the code around it (the bench, the
scripts, the fixture generator, the tests): no module over 500 lines and no function over 80, except
the entries of ALLOWED, each with its reason. An entry that no longer exceeds its limit fails too, so
the list only shrinks."""
from __future__ import annotations

import ast
from functools import cache

from conftest import ROOT

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
TREES = ("launchtui", "bench", "scripts", "fixtures", "tests")   # under ROOT
SKIPPED = ("bench/data/",)   # generated, git-ignored

# "path" (a module over MAX_MODULE_LINES) or "path::qualified.name" (a function over
# MAX_FUNCTION_LINES), paths relative to the repository root -> why it may be so for now.
ALLOWED = {
}


def oversized(path, text: str) -> dict[str, int]:
    """{"path" or "path::qualified.name": lines} of the module and the functions (methods and nested
    ones included, decorators not counted) over their limits."""
    out = {}
    n = len(text.splitlines())
    if n > MAX_MODULE_LINES:
        out[str(path)] = n

    def visit(node, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}.{child.name}" if prefix else child.name
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = child.end_lineno - child.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    out[f"{path}::{name}"] = length
            visit(child, name)

    visit(ast.parse(text), "")
    return out


@cache   # both tests read it: one parse of ~300 modules, not two
def _tree_oversized() -> dict[str, int]:
    out = {}
    for tree in TREES:
        for p in sorted((ROOT / tree).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if not rel.startswith(SKIPPED):
                out.update(oversized(rel, p.read_text(encoding="utf-8")))
    return out


def test_modules_and_functions_stay_within_the_limits():
    over = {k: n for k, n in _tree_oversized().items() if k not in ALLOWED}
    assert not over, ("over the limits (modules > %d lines, functions > %d; split them, or add an entry with "
                      "its reason to ALLOWED): %s" % (MAX_MODULE_LINES, MAX_FUNCTION_LINES, over))


def test_every_allowed_entry_is_still_needed_and_has_a_reason():
    over = _tree_oversized()
    stale = sorted(k for k in ALLOWED if k not in over)
    assert not stale, f"within the limits now: remove from ALLOWED: {stale}"
    assert all(reason.strip() for reason in ALLOWED.values())


def test_the_measure_counts_module_lines_and_each_function_with_its_qualified_name():
    body = "\n".join(f"    x{i} = {i}" for i in range(79))
    short = f"def f():\n{body}\n    return 0\n"                      # 81 lines: 1 def + 79 + 1 return
    assert oversized("m.py", short) == {"m.py::f": 81}
    assert oversized("m.py", f"def f():\n{body}\n") == {}             # 80 lines: at the limit
    nested = f"class C:\n    def g(self):\n        @staticmethod\n        def h():\n" + \
             "\n".join(f"            y{i} = {i}" for i in range(80)) + "\n        return h\n"
    assert oversized("m.py", nested) == {"m.py::C.g.h": 81, "m.py::C.g": 84}
    assert oversized("m.py", "x = 1\n" * 501) == {"m.py": 501}
    assert oversized("m.py", "x = 1\n" * 500) == {}
