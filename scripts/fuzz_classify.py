"""How the fuzz campaign classes one run (scripts/fuzz.py): ok, a clean one-line error, or a defect
with a signature (traceback, hang, other exit status, invalid JSON, NaN/Infinity in JSON, noisy
stderr, more than one line on error); and the fingerprint that shows an input modified or a file
written beside it.

Signatures have paths and numbers replaced, so one defect found on many inputs counts once.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path


def fingerprint(d: Path) -> dict:
    """name -> (kind, size, sha256 of content) for everything under d (not following links)."""
    out = {}
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            p = os.path.join(root, n)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    h = hashlib.sha256(f.read()).hexdigest()
                out[p] = ("f", st.st_size, h)
            else:
                out[p] = (stat.S_IFMT(st.st_mode), 0, "")
    return out


def _strict_json(text: str):
    def bad(c):
        raise ValueError(f"non-finite number {c}")
    return json.loads(text, parse_constant=bad)


def _norm(line: str) -> str:
    line = re.sub(r"/[^\s:'\"]*", "PATH", line)
    return re.sub(r"\d+", "N", line)[:160]


def traceback_signature(err: str) -> str:
    frames = re.findall(r'File "([^"]+)", line \d+, in (\S+)', err)
    own = [(f, fn) for f, fn in frames if "launchtui" in f and "site-packages" not in f] or frames
    where = f"{Path(own[-1][0]).name}:{own[-1][1]}" if own else "?"
    last = [ln for ln in err.strip().splitlines() if ln and not ln.startswith(" ")]
    exc = last[-1].split(":")[0] if last else "?"
    return f"{exc} in {where}"


def classify(rc, out: str, err: str, timed_out: bool, wants_json: bool, to_file: bool) -> tuple[str, str]:
    """(class, signature). class is 'ok', 'clean-error' or a defect name."""
    if timed_out:
        return "hang", "hang"
    if "Traceback (most recent call last)" in err:
        return "traceback", traceback_signature(err)
    lines = err.strip().splitlines()
    if rc == 2:
        if len(lines) != 1:
            return "multi-line-error", _norm(lines[0] if lines else "<no message>")
        if not lines[0].startswith("launchtui: "):
            return "noisy-stderr", _norm(lines[0])
        if out:
            return "output-on-error", _norm(lines[0])
        return "clean-error", ""
    if rc != 0:
        return f"exit-{rc}", _norm(lines[-1] if lines else "")
    quiet = [ln for ln in lines if not (to_file and ln.startswith("launchtui: wrote "))]
    if quiet:
        return "noisy-stderr", _norm(quiet[0])
    if wants_json and not to_file:
        try:
            _strict_json(out)
        except ValueError as e:
            return ("nan-in-json" if "non-finite" in str(e) else "invalid-json"), _norm(str(e))
    return "ok", ""
