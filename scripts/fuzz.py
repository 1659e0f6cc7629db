#!/usr/bin/env python3
"""Seeded mutation fuzzer for launchtui's promise on bad input (issue 12).

Every case mutates one seed trace (real samples under ../shared/samples, or traces from the
`fixtures/` generator) or the command line around it, then runs `info`, `report --json` and/or
`export` as subprocesses with a timeout, and classes each run:

  ok            exit 0, clean stdout (strict JSON where JSON is asked for), quiet stderr
  clean-error   exit 2, stdout empty, exactly one stderr line `launchtui: ...`
  defect        traceback, hang, other exit status, invalid JSON, NaN/Infinity in JSON, noisy
                stderr, more than one line on error, input modified, file written beside the input

Families: bytes (flips, truncation), sqlite (schema and value surprises, WAL / hot journal),
kineto (wrong types, huge numbers, deep nesting, surrogates), cli (odd option values, `-o`
targets, env limits), special (FIFO, directory, device node, symlink, odd names, cache entries
replaced, fake nsys).

A case is reproducible from (seed, index) alone: `scripts/fuzz.py --seed S --case N --keep`.
`--cover` runs one case per family and mutation kind instead of random draws (the CI campaign,
tests/test_fuzz.py); the random campaign (`--cases N` or `--minutes M`) is the long one.
The summary (summary.json + a printed table) lists defect signatures, deduplicated, each with
its first case's command line and saved input under OUT/repro/.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED_SAMPLES = Path(os.environ.get("LAUNCHTUI_SHARED") or ROOT.parent / "shared") / "samples"
FAMILIES = ("bytes", "sqlite", "kineto", "cli", "special")
SMALL_BYTES = 3_000_000  # seeds above this are used only by the byte family with --big
# The kinds each family draws from (a repeated kind is drawn more often).
BYTES_KINDS = ["flip", "flip", "truncate", "zero-run", "flip-inner"]
SQLITE_KINDS = ["rename-col", "drop-col", "drop-table", "rename-table", "swap-meta", "nulls", "nulls-schema",
                "values", "values", "bad-utf8", "wal", "journal", "empty-table", "thread-names", "epoch"]
KINETO_KINDS = ["args-type", "num-field", "id-huge", "surrogate", "deep", "drop-field", "top-level", "name-type",
                "ph-odd", "all-bad"]
OPTION_KINDS = ["trim", "max-avg-us", "spike-us", "spike-factor", "min-launches", "limit", "thresholds", "device",
                "nvtx", "output", "env"]
OUTPUT_KINDS = ["empty", "exists", "dir", "devfull", "devnull", "missing-dir", "long", "newline", "symlink", "fifo",
                "ok"]
SPECIAL_KINDS = ["fifo", "directory", "devnull", "devzero", "symlink", "dangling", "loop", "newline-name",
                 "nonutf8-name", "long-name", "through-file", "cache-fifo", "cache-dir", "stale-tmp", "nsys-hang",
                 "nsys-garbage", "cache-garbage"]


def cover_plan(families=FAMILIES) -> list[tuple[str, str]]:
    """(family, kind) once per distinct kind: `--cover` case i is plan[i]. The cli family's kinds are
    its options, `-o` split by target kind."""
    kinds = {"bytes": BYTES_KINDS, "sqlite": SQLITE_KINDS, "kineto": KINETO_KINDS, "special": SPECIAL_KINDS,
             "cli": [k for k in OPTION_KINDS if k != "output"] + [f"output:{t}" for t in OUTPUT_KINDS]}
    return [(f, k) for f in families for k in dict.fromkeys(kinds[f])]


# --- seeds --------------------------------------------------------------------------------
def collect_seeds(work: Path, samples: Path | None, big: bool, max_bytes: int = SMALL_BYTES) -> dict[str, list[Path]]:
    """{'sqlite': [...], 'kineto': [...], 'rep': [...]} from the generator and the shared samples."""
    sys.path.insert(0, str(ROOT))
    from fixtures import synth
    gen = work / "generated"
    gen.mkdir(parents=True, exist_ok=True)
    cfg = synth.default_config(iterations=1, layers=2, params=8, burst_launches=60, eval_steps=1)
    paths = synth.make_trace_files(gen, variants="all", cfg=cfg)
    seeds: dict[str, list[Path]] = {"sqlite": [], "kineto": [], "rep": []}
    for (fmt, _), p in sorted(paths.items()):
        seeds["sqlite" if fmt == "nsys" else "kineto"].append(Path(p))
    if samples and samples.is_dir():
        for p in sorted(samples.rglob("*")):
            if not p.is_file() or p.name.endswith(".md"):
                continue
            if p.suffix == ".nsys-rep":
                seeds["rep"].append(p)
            elif p.stat().st_size <= max_bytes or big:
                seeds["sqlite" if p.suffix == ".sqlite" else "kineto"].append(p)
    return seeds


# --- mutations: each returns (input path, extra files to create beside it, description) ----
def _read_json_bytes(p: Path) -> bytes:
    data = p.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def mut_bytes(rng: random.Random, seed: Path, d: Path, kind: str | None = None) -> tuple[Path, str]:
    data = bytearray(seed.read_bytes())
    kind = kind or rng.choice(BYTES_KINDS)
    if kind == "flip-inner" and data[:2] == b"\x1f\x8b":  # flip inside the JSON, keep gzip valid
        data = bytearray(gzip.decompress(bytes(data)))
        kind = "flip"
        regz = True
    else:
        regz = False
    if kind == "flip":
        n = rng.choice([1, 2, 8, 64])
        for _ in range(n):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        desc = f"{n} bit flips"
    elif kind == "truncate":
        cut = rng.randrange(1, max(2, len(data)))
        del data[cut:]
        desc = f"truncated at {cut}"
    else:
        i = rng.randrange(len(data))
        n = rng.choice([16, 512, 4096])
        data[i:i + n] = bytes(min(n, len(data) - i))
        desc = f"{n} zero bytes at {i}"
    out = d / seed.name
    out.write_bytes(gzip.compress(bytes(data), mtime=0) if regz else bytes(data))
    return out, desc


def _tables(con) -> dict[str, list[tuple]]:
    out = {}
    for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"):
        out[t] = list(con.execute(f'PRAGMA table_info("{t}")'))
    return out


def _pick_table(rng, tables, prefer=("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
                                     "NVTX_EVENTS", "StringIds", "ThreadNames", "META_DATA_EXPORT",
                                     "EXPORT_META_DATA", "TARGET_INFO_SESSION_START_TIME",
                                     "TARGET_INFO_GPU", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                     "CUPTI_ACTIVITY_KIND_OVERHEAD")):
    names = [t for t in tables if re.sub(r"_V\d+$", "", t) in prefer]
    return rng.choice(names if names and rng.random() < 0.85 else list(tables))


def _null_despite_schema(con, table, col, where):
    """Put NULLs into a NOT NULL column while the schema still declares it NOT NULL."""
    sql = con.execute("SELECT sql FROM sqlite_master WHERE name=?", (table,)).fetchone()[0]
    con.execute(f'CREATE TABLE "_fz" AS SELECT * FROM "{table}"')
    con.execute(f'UPDATE "_fz" SET "{col}" = NULL WHERE {where}')
    con.execute(f'DROP TABLE "{table}"')
    con.execute(f'ALTER TABLE "_fz" RENAME TO "{table}"')
    con.commit()
    con.execute("PRAGMA writable_schema=ON")
    con.execute("UPDATE sqlite_master SET sql=? WHERE name=?", (sql, table))
    con.commit()


VALUES = ["'abc'", "'12abc'", "1.5", "-1", "0", "9223372036854775807", "-9223372036854775808", "1e308",
          "9e999", "-9e999", "x'ff00fe'", "CAST(x'ff41fe' AS TEXT)", "''", "'\u2028'", "NULL"]


def mut_sqlite(rng: random.Random, seed: Path, d: Path, kind: str | None = None) -> tuple[Path, str]:
    out = d / seed.name
    shutil.copyfile(seed, out)
    kind = kind or rng.choice(SQLITE_KINDS)
    con = sqlite3.connect(out, isolation_level=None)
    con.execute("PRAGMA journal_mode=DELETE")
    tables = _tables(con)
    if not tables:
        con.close()
        return out, "no tables"
    t = _pick_table(rng, tables)
    cols = [c[1] for c in tables[t]]
    c = rng.choice(cols) if cols else None
    desc = kind
    try:
        if kind == "rename-col" and c:
            con.execute(f'ALTER TABLE "{t}" RENAME COLUMN "{c}" TO "{c}_x"')
            desc = f"rename {t}.{c}"
        elif kind == "drop-col" and c and len(cols) > 1:
            con.execute(f'ALTER TABLE "{t}" DROP COLUMN "{c}"')
            desc = f"drop {t}.{c}"
        elif kind == "drop-table":
            con.execute(f'DROP TABLE "{t}"')
            desc = f"drop {t}"
        elif kind == "rename-table":
            new = rng.choice([t + "_V9", t.lower(), "X" + t])
            con.execute(f'ALTER TABLE "{t}" RENAME TO "{new}"')
            desc = f"rename {t} -> {new}"
        elif kind == "swap-meta":
            names = set(tables)
            if "META_DATA_EXPORT" in names:
                con.execute('ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA'
                            if "EXPORT_META_DATA" not in names else 'DROP TABLE META_DATA_EXPORT')
            elif "EXPORT_META_DATA" in names:
                con.execute('ALTER TABLE EXPORT_META_DATA RENAME TO META_DATA_EXPORT')
            if rng.random() < 0.5:
                m = "META_DATA_EXPORT" if "META_DATA_EXPORT" in {r[0] for r in con.execute(
                    "SELECT name FROM sqlite_master")} else "EXPORT_META_DATA"
                try:
                    con.execute(f'ALTER TABLE "{m}" RENAME COLUMN name TO key')
                except sqlite3.OperationalError:
                    pass
        elif kind in ("nulls", "nulls-schema") and c:
            where = rng.choice(["1", "rowid % 7 = 0", "rowid = 1"])
            if kind == "nulls-schema":
                _null_despite_schema(con, t, c, where)
            else:
                con.execute(f'CREATE TABLE "_fz" AS SELECT * FROM "{t}"')
                con.execute(f'UPDATE "_fz" SET "{c}" = NULL WHERE {where}')
                con.execute(f'DROP TABLE "{t}"')
                con.execute(f'ALTER TABLE "_fz" RENAME TO "{t}"')
            desc = f"{kind} {t}.{c} where {where}"
        elif kind == "values" and c:
            v = rng.choice(VALUES)
            where = rng.choice(["1", "rowid % 5 = 0", "rowid = 1"])
            con.execute("PRAGMA ignore_check_constraints=ON")
            try:
                con.execute(f'UPDATE "{t}" SET "{c}" = {v} WHERE {where}')
            except sqlite3.IntegrityError:
                _null_despite_schema(con, t, c, where)
            desc = f"{t}.{c} = {v} where {where}"
        elif kind == "bad-utf8":
            tt = next((x for x in tables if x.startswith("StringIds")), t)
            col = "value" if tt.startswith("StringIds") else c
            con.execute(f'UPDATE "{tt}" SET "{col}" = CAST(x\'41ff42fe\' AS TEXT) WHERE rowid % 3 = 0')
            desc = f"invalid UTF-8 in {tt}.{col}"
        elif kind == "empty-table":
            con.execute(f'DELETE FROM "{t}"')
            desc = f"empty {t}"
        elif kind == "thread-names":
            v = rng.choice(["1.5", "'12abc'", "-3", "1e300", "x'00'"])
            if "ThreadNames" in tables:
                con.execute(f"UPDATE ThreadNames SET nameId = {v}")
            desc = f"ThreadNames.nameId = {v}"
        elif kind == "epoch":
            v = rng.choice(["9e999", "-9e999", "'abc'", "1e30", "1.5"])
            if "TARGET_INFO_SESSION_START_TIME" in tables:
                con.execute(f"UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = {v}")
            desc = f"utcEpochNs = {v}"
        elif kind in ("wal", "journal"):
            con.close()
            return _side_file_state(rng, out, kind), kind + " state (rows deleted, not checkpointed)"
    except sqlite3.Error as e:
        desc += f" (mutation failed: {e})"
    con.close()
    return out, desc


def _side_file_state(rng, db: Path, kind: str) -> Path:
    """A database whose true state lives partly in a -wal file or is rolled back by a hot journal."""
    victim = None
    con = sqlite3.connect(db, isolation_level=None)
    for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'"):
        if t.startswith("CUPTI_ACTIVITY_KIND_KERNEL") or (victim is None and t.startswith("CUPTI_")):
            victim = t
    victim = victim or "StringIds"
    if kind == "wal":
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA wal_autocheckpoint=0")
        con.execute(f'DELETE FROM "{victim}" WHERE rowid % 2 = 0')
        snap = db.with_name("snap-" + db.name)
        shutil.copyfile(db, snap)
        shutil.copyfile(str(db) + "-wal", str(snap) + "-wal")  # copied while the writer holds it
        con.close()
    else:
        con.execute("PRAGMA cache_size=1")  # spill dirty pages into the file before commit
        con.execute("BEGIN")
        con.execute(f'DELETE FROM "{victim}" WHERE rowid % 2 = 0')
        con.execute(f'UPDATE "{victim}" SET rowid = rowid WHERE 0')
        snap = db.with_name("snap-" + db.name)
        shutil.copyfile(db, snap)
        if os.path.exists(str(db) + "-journal"):
            shutil.copyfile(str(db) + "-journal", str(snap) + "-journal")
        con.execute("ROLLBACK")
        con.close()
    db.unlink()
    for side in ("-wal", "-shm", "-journal"):
        Path(str(db) + side).unlink(missing_ok=True)
    return snap


DEEP = 100_000


def mut_kineto(rng: random.Random, seed: Path, d: Path, kind: str | None = None) -> tuple[Path, str]:
    try:
        doc = json.loads(_read_json_bytes(seed))
    except (ValueError, OSError):
        return mut_bytes(rng, seed, d)
    events = doc.get("traceEvents", doc) if isinstance(doc, dict) else doc
    if isinstance(events, list) and len(events) > 4000:  # keep cases fast: a slice of the trace
        start = rng.randrange(0, len(events) - 4000)
        events = events[start:start + 4000]
        if isinstance(doc, dict):
            doc["traceEvents"] = events
    idx = [i for i, e in enumerate(events) if isinstance(e, dict) and e.get("ph") == "X"] if isinstance(
        events, list) else []
    kind = kind or rng.choice(KINETO_KINDS)
    marker = {}  # placeholders replaced with raw JSON after dumping

    def raw(text):
        k = f"@@RAW{len(marker)}@@"
        marker[k] = text
        return k

    picks = rng.sample(idx, min(len(idx), rng.choice([1, 3, 50]))) if idx else []
    if kind == "all-bad":
        picks = idx
    for i in picks:
        e = events[i]
        if kind == "args-type" or kind == "all-bad":
            e["args"] = rng.choice(["a string", 7, [1, 2], None, True, {"correlation": "x", "stream": [1]},
                                    {"device": 1.5e300, "stream": -2}, {"correlation": {"a": 1}}])
        elif kind == "num-field":
            e[rng.choice(["ts", "dur"])] = rng.choice(["abc", "kernel", raw("1e400"), raw("-1e400"), None,
                                                       True, raw("123456789012345678901234567890"), -5,
                                                       [1], {"x": 1}, raw("1.5e3"), "12.5"])
        elif kind == "id-huge":
            e.setdefault("args", {})
            if isinstance(e["args"], dict):
                e["args"][rng.choice(["stream", "device", "correlation"])] = rng.choice(
                    [1234567890123456789, raw("123456789012345678901234567890"), -1, 1.5, raw("1e400"), "9x"])
            e[rng.choice(["pid", "tid"])] = rng.choice([raw("123456789012345678901234567890"), 1.5, None, [],
                                                         "stream 99999999999999999999"])
        elif kind == "surrogate":
            e["name"] = raw('"bad \\ud800 name"') if rng.random() < 0.5 else raw('"\\udfff"')
        elif kind == "deep":
            e["args"] = raw("[" * DEEP + "]" * DEEP) if rng.random() < 0.7 else raw('{"a":' * DEEP + "1" + "}" * DEEP)
        elif kind == "drop-field":
            for f in rng.sample(["ts", "dur", "cat", "name", "args", "pid", "tid", "ph"], 2):
                e.pop(f, None)
        elif kind == "name-type":
            e["name"] = rng.choice([None, 5, [1], {"a": 1}, 1.5, ""])
            e["cat"] = rng.choice([None, 5, "KERNEL", "Kernel", [1]]) if rng.random() < 0.3 else e.get("cat")
        elif kind == "ph-odd":
            e["ph"] = rng.choice(["B", "E", "i", None, 3, ""])
    if kind == "top-level" and isinstance(doc, dict):
        which = rng.choice(["traceEvents", "deviceProperties", "baseTimeNanoseconds", "distributedInfo",
                            "schemaVersion"])
        doc[which] = rng.choice([{"a": 1}, "x", 5, None, [1, "a"], raw("1e400"), raw("-1e400")])
    text = json.dumps(doc)
    for k, v in marker.items():
        text = text.replace(json.dumps(k), v)
    out = d / seed.name
    data = text.encode()
    out.write_bytes(gzip.compress(data, compresslevel=1, mtime=0) if seed.name.endswith(".gz") else data)
    return out, f"{kind} on {len(picks)} events"


# --- command lines ------------------------------------------------------------------------
ODD_FLOATS = ["nan", "inf", "-inf", "1e308", "-1e308", "1e400", "0", "-0", "-1", "1e-320", "NaN", "Infinity"]
ODD_INTS = ["-1", "0", "99999999999999999999999", "1e3", "x", "1000000000"]


def odd_options(rng: random.Random, cmd: str, d: Path, kind: str | None = None) -> tuple[list[str], dict]:
    """Random odd options for a report/export command line, plus env overrides; one option of
    `kind` (an OPTION_KINDS entry, or output:TARGET) when given."""
    opts, env = [], {}
    for _ in range(1 if kind else rng.choice([1, 1, 2, 3])):
        k = kind or rng.choice(OPTION_KINDS)
        if k == "trim":
            opts += ["--trim", rng.choice(ODD_FLOATS + ["1.5"]), rng.choice(ODD_FLOATS + ["2"])]
        elif k in ("max-avg-us", "spike-us", "spike-factor"):
            opts += [f"--{k}", rng.choice(ODD_FLOATS)]
        elif k in ("min-launches", "limit"):
            opts += [f"--{k}", rng.choice(ODD_INTS)]
        elif k == "thresholds":
            opts += ["--thresholds"] + [rng.choice(ODD_INTS + ["1000", "1020"]) for _ in range(rng.choice([1, 2, 3]))]
        elif k == "device":
            opts += ["--device", rng.choice(["-1", "99999999999999999999", "nan", "0", "all", "ALL", "1.5", ""])]
        elif k == "nvtx":
            opts += ["--nvtx", rng.choice(["", "\n", "%", ".*", "[", "\x1b[31m", "\udcff", "step"])]
        elif k.startswith("output"):
            opts += output_target(rng, d, k.partition(":")[2] or None)
        else:
            env["LAUNCHTUI_CACHE_MAX_MB"] = rng.choice(["inf", "nan", "-1", "abc", "1e400", "0", ""])
    return opts, env


def output_target(rng: random.Random, d: Path, kind: str | None = None) -> list[str]:
    kind = kind or rng.choice(OUTPUT_KINDS)
    out = d / "out"
    out.mkdir(exist_ok=True)
    force = ["--force"] if rng.random() < 0.5 else []
    if kind == "empty":
        return ["-o", ""] + force
    if kind == "exists":
        (out / "x.json").write_text("old")
        return ["-o", str(out / "x.json")] + force
    if kind == "dir":
        return ["-o", str(out)] + force
    if kind == "devfull":
        return ["-o", "/dev/full"] + force
    if kind == "devnull":
        return ["-o", "/dev/null"] + force
    if kind == "missing-dir":
        return ["-o", str(out / "no" / "x.json")] + force
    if kind == "long":
        return ["-o", str(out / ("a" * 300 + ".json"))] + force
    if kind == "newline":
        return ["-o", str(out / "a\nb.json")] + force
    if kind == "symlink":
        (out / "target.txt").write_text("keep")
        if not (out / "link.json").is_symlink():  # a case may draw this target for several commands
            (out / "link.json").symlink_to(out / "target.txt")
        return ["-o", str(out / "link.json")] + force
    if kind == "fifo":
        if not (out / "f.json").exists():  # a case may draw this target for several commands
            os.mkfifo(out / "f.json")
        return ["-o", str(out / "f.json")] + force
    return ["-o", str(out / "x.json")] + force


# --- special files ------------------------------------------------------------------------
FAKE_NSYS_HANG = "#!/bin/sh\nsleep 600\n"
FAKE_NSYS_GARBAGE = "#!/bin/sh\nfor a; do out=$last; last=$a; done\n" \
                    "while [ $# -gt 0 ]; do [ \"$1\" = --output ] && o=$2; shift; done\n" \
                    "printf 'garbage, not sqlite' > \"$o\"; exit 0\n"


def special_input(rng: random.Random, seeds: dict, d: Path, case_dir: Path,
                  kind: str | None = None) -> tuple[Path, str, dict, str | None]:
    """(input path, description, env, pre-step) for one special-file case."""
    good = rng.choice(seeds["sqlite"] + seeds["kineto"])
    kind = kind or rng.choice(SPECIAL_KINDS)
    env, pre = {}, None
    if kind == "fifo":
        p = d / "t.sqlite"
        os.mkfifo(p)
    elif kind == "directory":
        p = d / "dir.sqlite"
        p.mkdir()
    elif kind == "devnull":
        p = Path("/dev/null")
    elif kind == "devzero":
        p = Path("/dev/zero")
    elif kind == "symlink":
        p = d / ("link" + good.suffix)
        p.symlink_to(good)
    elif kind == "dangling":
        p = d / "dangling.sqlite"
        p.symlink_to(d / "nowhere")
    elif kind == "loop":
        p = d / "loop.sqlite"
        p.symlink_to(p)
    elif kind == "newline-name":
        p = d / ("a\nb" + good.suffix)
        shutil.copyfile(good, p)
    elif kind == "nonutf8-name":
        raw = os.fsencode(str(d)) + b"/bad\xff\xfename" + os.fsencode(good.suffix)
        shutil.copyfile(good, raw)
        p = Path(os.fsdecode(raw))
    elif kind == "long-name":
        p = d / ("x" * 300 + ".sqlite")
    elif kind == "through-file":
        shutil.copyfile(good, d / "file")
        p = d / "file" / "x.sqlite"
    elif kind in ("cache-fifo", "cache-dir", "stale-tmp", "cache-garbage"):
        p = d / good.name
        shutil.copyfile(good, p)
        pre = kind  # the runner fills the cache first, then damages it
    else:  # fake nsys
        reps = seeds["rep"]
        if not reps:
            p = d / "fake.nsys-rep"
            p.write_bytes(b"NVIDIA Tegra Profiler Report 2026@1@1@204 " + bytes(256))
        else:
            p = d / rng.choice(reps).name
            shutil.copyfile(rng.choice(reps), p)
        bindir = case_dir / "bin"
        bindir.mkdir()
        (bindir / "nsys").write_text(FAKE_NSYS_HANG if kind == "nsys-hang" else FAKE_NSYS_GARBAGE)
        (bindir / "nsys").chmod(0o755)
        env = {"PATH": f"{bindir}:{os.environ.get('PATH', '')}", "LAUNCHTUI_NSYS_TIMEOUT_S": "1"}
    return p, kind, env, pre


def damage_cache(kind: str, cache: Path) -> None:
    models = cache / "launchtui" / "models"
    entries = list(models.glob("*.model")) if models.is_dir() else []
    for e in entries:
        e.unlink()
        if kind == "cache-fifo":
            os.mkfifo(e)
        elif kind == "cache-dir":
            e.mkdir()
        elif kind == "cache-garbage":
            e.write_bytes(b"PK\x03\x04 garbage")
    if kind == "stale-tmp":
        models.mkdir(parents=True, exist_ok=True)
        old = models / ".tmp-stale123.model"
        old.write_bytes(bytes(1000))
        t = time.time() - 7 * 86400
        os.utime(old, (t, t))


# --- running and classing -----------------------------------------------------------------
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


class Case:
    """Case `index` of campaign `seed`; `family` and `kind` fixed by the cover plan, else drawn."""
    def __init__(self, seed: int, index: int, family: str | None = None, kind: str | None = None):
        self.seed, self.index, self.family, self.kind = seed, index, family, kind
        self.rng = random.Random(f"launchtui-fuzz:{seed}:{index}")


def build_case(case: Case, seeds: dict, families: tuple, case_dir: Path, max_runs: int = 3) -> dict:
    rng, kind = case.rng, case.kind
    fam = case.family or rng.choice(families)
    d = case_dir / "in"
    d.mkdir(parents=True)
    env, pre, opts, opts_env = {}, None, [], {}
    if fam == "bytes":
        pool = seeds["sqlite"] + seeds["kineto"]
        if kind == "flip-inner":  # a flip inside the JSON needs a gzip seed
            pool = [p for p in pool if p.name.endswith(".gz")] or pool
        src = rng.choice(pool)
        path, desc = mut_bytes(rng, src, d, kind)
    elif fam == "sqlite":
        src = rng.choice(seeds["sqlite"])
        path, desc = mut_sqlite(rng, src, d, kind)
    elif fam == "kineto":
        src = rng.choice(seeds["kineto"])
        path, desc = mut_kineto(rng, src, d, kind)
    elif fam == "cli":
        src = rng.choice(seeds["sqlite"] + seeds["kineto"])
        path = d / src.name
        shutil.copyfile(src, path)
        desc = "odd options"
    else:
        path, desc, env, pre = special_input(rng, seeds, d, case_dir, kind)
        src = None
    cmds = []
    # a cli kind is an option: a covering case runs a command that takes it (info takes none)
    runs = ["report", "export"] if fam == "cli" and kind else ["info", "report", "export"]
    for cmd in rng.sample(runs, min(max_runs, len(runs), rng.choice([1, 2, 2, 3]))):
        args = [cmd, str(path)]
        if cmd == "info":
            args.append("--json") if rng.random() < 0.6 else None
        elif cmd == "report":
            args.append("--json") if rng.random() < 0.7 else None
        if fam == "cli" and cmd != "info":
            o, e = odd_options(rng, cmd, case_dir, kind)
            args += o
            opts_env.update(e)
        elif fam == "cli":
            _, e = odd_options(rng, cmd, case_dir, kind)
            opts_env.update(e)
        cmds.append(args)
    return {"family": fam, "kind": kind, "families": ",".join(families), "seed_file": str(src) if src else None,
            "input": str(path), "desc": desc, "env": {**env, **opts_env}, "pre": pre, "cmds": cmds, "input_dir": str(d)}


_RUNNERS = threading.local()   # --runner fork: one preloaded server per campaign thread
_OPEN_RUNNERS: list = []
RUNNER = {"kind": "spawn"}     # main() sets it from --runner


def run_one(args: list[str], env: dict, cwd: Path, timeout: float):
    if RUNNER["kind"] == "fork":
        runner = getattr(_RUNNERS, "runner", None)
        if runner is None:
            from fork_runner import ForkRunner
            runner = _RUNNERS.runner = ForkRunner()
            _OPEN_RUNNERS.append(runner)
        return runner.run(args, env, cwd, timeout)
    try:
        p = subprocess.run([sys.executable, "-m", "launchtui"] + args, capture_output=True, cwd=cwd, env=env,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), False
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b"").decode("utf-8", "replace"), (e.stderr or b"").decode("utf-8", "replace"), True


def execute(case: Case, seeds: dict, families: tuple, work: Path, timeout: float, max_runs: int = 3) -> dict:
    case_dir = work / f"case-{case.index}"
    if case_dir.exists():
        shutil.rmtree(case_dir)
    case_dir.mkdir(parents=True)
    spec = build_case(case, seeds, families, case_dir, max_runs)
    cache = case_dir / "cache"
    cwd = case_dir / "cwd"
    cwd.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(cache), **spec["env"]}
    env.pop("COLUMNS", None)
    if spec["pre"]:
        run_one(["info", spec["input"]], {**env, "LAUNCHTUI_CACHE_MAX_MB": "2048"}, cwd, timeout)
        run_one(["report", spec["input"]], {**env, "LAUNCHTUI_CACHE_MAX_MB": "2048"}, cwd, timeout)
        damage_cache(spec["pre"], cache)
    before = fingerprint(Path(spec["input_dir"]))
    runs = []
    for args in spec["cmds"]:
        t0 = time.monotonic()
        rc, out, err, hung = run_one(args, env, cwd, timeout)
        to_file = "-o" in args
        wants_json = args[0] == "export" or "--json" in args
        cls, sig = classify(rc, out, err, hung, wants_json, to_file)
        runs.append({"args": args, "rc": rc, "class": cls, "sig": sig, "s": round(time.monotonic() - t0, 2),
                     "stderr": err[-2000:]})
    after = fingerprint(Path(spec["input_dir"]))
    if spec["pre"] == "stale-tmp":
        stale = cache / "launchtui" / "models" / ".tmp-stale123.model"
        if stale.exists():
            runs.append({"args": ["<cache>"], "rc": None, "class": "stale-temporary-kept",
                         "sig": "stale .tmp-* not swept", "s": 0, "stderr": ""})
    changed = [p for p in before if p in after and before[p] != after[p]]
    added = [p for p in after if p not in before and not p.endswith(("-shm",))]
    added += [p for p in after if p not in before and p.endswith("-shm")]
    if changed:
        runs.append({"args": ["<input>"], "rc": None, "class": "input-modified", "sig": "input modified",
                     "s": 0, "stderr": repr(changed[:3])})
    if added:
        runs.append({"args": ["<input>"], "rc": None, "class": "written-beside-input",
                     "sig": "file written beside the input", "s": 0, "stderr": repr(added[:3])})
    return {"index": case.index, **spec, "runs": runs}


OK_CLASSES = {"ok", "clean-error"}


def save_repro(result: dict, run: dict, repro_root: Path, seed: int) -> str:
    key = hashlib.sha1(f"{run['class']}|{run['sig']}".encode()).hexdigest()[:10]
    d = repro_root / key
    if d.exists():
        return str(d)
    d.mkdir(parents=True)
    inp = Path(result["input"])
    try:
        if inp.is_file() and not inp.is_symlink() and inp.stat().st_size < 20_000_000:
            shutil.copyfile(inp, d / ("input" + "".join(inp.suffixes[-2:])))
    except OSError:
        pass
    (d / "case.json").write_text(json.dumps({
        "replay": f"scripts/fuzz.py --seed {seed} --families {result['families']} --case {result['index']} --keep"
                  + (" --cover" if result.get("kind") else ""),
        "family": result["family"], "mutation": result["desc"], "seed_file": result["seed_file"],
        "env": result["env"], "args": run["args"], "class": run["class"], "signature": run["sig"],
        "stderr": run["stderr"]}, indent=1, ensure_ascii=True))
    return str(d)


def summarize(results: list[dict], out: Path, seed: int, elapsed: float) -> dict:
    per = defaultdict(Counter)
    sigs: dict[tuple, dict] = {}
    n_runs = 0
    for r in results:
        for run in r["runs"]:
            n_runs += run["args"][0] not in ("<input>", "<cache>")
            per[r["family"]][run["class"]] += 1
            if run["class"] not in OK_CLASSES:
                k = (run["class"], run["sig"])
                if k not in sigs:
                    sigs[k] = {"class": run["class"], "signature": run["sig"], "count": 0,
                               "first_case": r["index"], "family": r["family"],
                               "repro": save_repro(r, run, out / "repro", seed)}
                sigs[k]["count"] += 1
    defects = sum(s["count"] for s in sigs.values())
    bad_cases = sum(any(run["class"] not in OK_CLASSES for run in r["runs"]) for r in results)
    summary = {"seed": seed, "cases": len(results), "indices": _ranges([r["index"] for r in results]), "runs": n_runs, "elapsed_s": round(elapsed, 1),
               "defect_runs": defects, "defect_cases": bad_cases,
               "by_family": {f: dict(c) for f, c in sorted(per.items())},
               "kinds": sorted({f"{r['family']}/{r['kind']}" for r in results if r.get("kind")}),
               "signatures": sorted(sigs.values(), key=lambda s: -s["count"])}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, ensure_ascii=True))
    return summary


def _ranges(ix: list[int]) -> list[list[int]]:
    """Sorted indices as [first, last] runs: which cases a (partial) summary covers."""
    out = []
    for i in sorted(set(ix)):  # parts may overlap
        if out and i == out[-1][1] + 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def merge_summaries(parts: list[dict]) -> dict:
    """One campaign's summary from the summaries of its parts (same seed, disjoint indices)."""
    assert len({p["seed"] for p in parts}) == 1, "parts of one campaign share a seed"
    fam: dict = defaultdict(Counter)
    sigs: dict = {}
    for p in parts:
        for f, c in p["by_family"].items():
            fam[f].update(c)
        for s in p["signatures"]:
            k = (s["class"], s["signature"])
            if k in sigs:
                sigs[k]["count"] += s["count"]
                sigs[k]["first_case"] = min(sigs[k]["first_case"], s["first_case"])
            else:
                sigs[k] = dict(s)
    idx = [i for p in parts for a, b in p.get("indices", []) for i in range(a, b + 1)]
    return {"seed": parts[0]["seed"], "cases": sum(p["cases"] for p in parts), "indices": _ranges(idx),
            "runs": sum(p["runs"] for p in parts), "elapsed_s": round(max(p["elapsed_s"] for p in parts), 1),
            "defect_runs": sum(p["defect_runs"] for p in parts), "defect_cases": sum(p["defect_cases"] for p in parts),
            "by_family": {f: dict(c) for f, c in sorted(fam.items())},
            "kinds": sorted({k for p in parts for k in p.get("kinds", [])}),
            "signatures": sorted(sigs.values(), key=lambda s: -s["count"])}


def print_summary(s: dict) -> None:
    classes = sorted({c for f in s["by_family"].values() for c in f}, key=lambda c: (c not in OK_CLASSES, c))
    print(f"seed {s['seed']}: {s['cases']} cases {s.get('indices')}, {s['runs']} runs in {s['elapsed_s']} s; "
          f"{s['defect_cases']} cases with defects ({s['defect_runs']} defect runs, "
          f"{len(s['signatures'])} signatures)")
    print(f"{'family':<8} " + " ".join(f"{c:>13}" for c in classes))
    for f, c in s["by_family"].items():
        print(f"{f:<8} " + " ".join(f"{c.get(k, 0):>13}" for k in classes))
    for sig in s["signatures"]:
        print(f"  {sig['count']:>4} × {sig['class']}: {sig['signature']}  (case {sig['first_case']}, "
              f"{sig['family']}; {sig['repro']})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=200, help="number of cases (default 200)")
    ap.add_argument("--minutes", type=float, help="run until this many minutes have passed (overrides --cases)")
    ap.add_argument("--case", type=int, help="run only this case index (a reproducer)")
    ap.add_argument("--cover", action="store_true", help="one case per family and mutation kind (the CI "
                    "campaign: the kinds that find defect classes, without the random repeats); ignores --cases")
    ap.add_argument("--start", type=int, default=0, help="first case index (split one campaign over processes)")
    ap.add_argument("--merge", nargs="+", type=Path, metavar="SUMMARY", help="add up summary.json files of one "
                    "campaign run in parts, print the total and exit")
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma-separated subset of " + ",".join(FAMILIES))
    ap.add_argument("--samples", type=Path, default=SHARED_SAMPLES, help="real samples (default ../shared/samples, or $LAUNCHTUI_SHARED/samples)")
    ap.add_argument("--no-samples", action="store_true", help="generated traces only")
    ap.add_argument("--big", action="store_true", help="also mutate samples over 3 MB (slow)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds before a run counts as a hang (30)")
    ap.add_argument("--jobs", type=int, default=1, help="cases run in parallel (1)")
    ap.add_argument("--runner", choices=("fork", "spawn"), default="fork",
                    help="fork: each run forked from a preloaded interpreter (scripts/fork_runner.py); "
                         "spawn: a new `python -m launchtui` process per run (fork)")
    ap.add_argument("--runs-per-case", type=int, default=3, help="at most this many commands per case (3)")
    ap.add_argument("--max-seed-bytes", type=int, default=SMALL_BYTES, help="largest shared sample used (3 MB)")
    ap.add_argument("--out", type=Path, help="summary and reproducers (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep every case's files")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    RUNNER["kind"] = a.runner
    if a.merge:
        total = merge_summaries([json.loads(p.read_text()) for p in a.merge])
        print_summary(total)
        return 1 if total["defect_runs"] else 0
    families = tuple(f for f in a.families.split(",") if f)
    if not set(families) <= set(FAMILIES):
        ap.error(f"--families: choose from {', '.join(FAMILIES)}")
    plan = cover_plan(families) if a.cover else []
    if a.case is not None and a.cover and not 0 <= a.case < len(plan):
        ap.error(f"--case: a --cover campaign has cases 0-{len(plan) - 1}")
    out = a.out or Path(tempfile.mkdtemp(prefix=f"launchtui-fuzz-{a.seed}-"))
    out.mkdir(parents=True, exist_ok=True)
    work = out / "cases"
    seeds = collect_seeds(out / "seeds", None if a.no_samples else a.samples, a.big, a.max_seed_bytes)
    t0 = time.monotonic()
    deadline = t0 + a.minutes * 60 if a.minutes else None
    indices = [a.case] if a.case is not None else list(range(len(plan))) if a.cover else None

    def job(i):
        r = execute(Case(a.seed, i, *(plan[i] if plan else ())), seeds, families, work, a.timeout, a.runs_per_case)
        if not a.keep:
            shutil.rmtree(work / f"case-{i}", ignore_errors=True)
        return r

    results = []
    # SIGTERM/Ctrl-C stop the campaign early: the summary then covers the finished cases
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    pool = ThreadPoolExecutor(max_workers=max(1, a.jobs))
    todo = iter(indices) if indices is not None else (i for i in range(a.start, 10**9))

    def more(i) -> bool:
        return indices is not None or (time.monotonic() < deadline if deadline else a.start + i < a.cases)
    try:
        pending, submitted = set(), 0
        while True:
            while len(pending) < max(1, a.jobs) and more(submitted):
                k = next(todo, None)
                if k is None:
                    break
                pending.add(pool.submit(job, k))
                submitted += 1
            if not pending:
                break
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:  # a slow case does not hold the others back
                done = f.result()
                results.append(done)
                if len(results) % 100 == 0:
                    print(f"{len(results)} cases done in {time.monotonic() - t0:.0f} s", flush=True)
                bad = [r for r in done["runs"] if r["class"] not in OK_CLASSES]
                if bad and not a.quiet:
                    print(f"case {done['index']} {done['family']} ({done['desc']}): "
                          + "; ".join(f"{r['class']} {r['sig']}" for r in bad), flush=True)
    except KeyboardInterrupt:
        print(f"stopped early: {len(results)} cases finished", flush=True)
    pool.shutdown(wait=False, cancel_futures=True)
    for runner in _OPEN_RUNNERS:
        runner.close()
    _OPEN_RUNNERS.clear()
    results.sort(key=lambda r: r["index"])
    summary = summarize(results, out, a.seed, time.monotonic() - t0)
    summary["out"] = str(out)
    print_summary(summary)
    print(f"summary: {out / 'summary.json'}")
    return 1 if summary["defect_runs"] else 0


if __name__ == "__main__":
    sys.exit(main())
