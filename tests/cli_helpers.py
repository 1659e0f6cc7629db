"""Helpers for the in-process CLI tests of bad input (tests/test_fuzz*.py, test_string_ids.py): run
`launchtui` and read its output, the one-line error every refusal must be, JSON that must hold no
NaN or Infinity, a tiny Kineto document, and a copy of the demo export altered by SQL (never the
bundled file itself)."""
from __future__ import annotations

import json
import shutil
import sqlite3

from fixtures.synth import DEMO_DIR
from launchtui.cli import main


def run(args, capsys, monkeypatch, tmp_path):
    """(exit status, stdout, stderr) of `launchtui ARGS` run in process from `tmp_path`."""
    monkeypatch.chdir(tmp_path)
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line(rc, err, needle):
    """The one-line error (exit status 2, `launchtui: ...` naming `needle`) that `err` must be."""
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("launchtui: ") and needle in lines[0], err
    return lines[0]


def strict_json(text):
    def bad(c):
        raise AssertionError(f"non-finite number {c} in JSON")
    return json.loads(text, parse_constant=bad)


def kineto_doc(n=6):
    ev = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 100 + i * 10,
           "dur": 3, "args": {"correlation": i}} for i in range(n)]
    ev += [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 105 + i * 10, "dur": 2,
            "args": {"correlation": i, "device": 0, "stream": 7}} for i in range(n)]
    return {"traceEvents": ev}


def demo_copy(tmp_path, *sql, writable_schema=False):
    """fixtures/demo/demo.sqlite copied into `tmp_path` and changed by the statements `sql`."""
    p = tmp_path / "t.sqlite"
    shutil.copy(DEMO_DIR / "demo.sqlite", p)
    con = sqlite3.connect(p)
    if writable_schema:
        con.execute("PRAGMA writable_schema=ON")
    for q in sql:
        con.execute(q)
    con.commit()
    con.close()
    return p
