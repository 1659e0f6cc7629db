"""The fuzz campaign's mutations of a seed trace's content (scripts/fuzz.py): bytes (flips,
truncation, zero runs), SQLite (schema and value surprises, WAL / hot journal state) and Kineto JSON
(wrong types, huge numbers, deep nesting, surrogates).

Each mutation writes its case's input under the directory it is given and returns (input path,
description). It draws from the case's rng only, in a fixed order: a case is reproducible from
(seed, index) alone, so a change in the number or order of the draws changes the cases a seed gives.
"""
from __future__ import annotations

import gzip
import json
import os
import random
import re
import shutil
import sqlite3
from pathlib import Path

from fuzz_kinds import BYTES_KINDS, KINETO_KINDS, SQLITE_KINDS


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
    """A copy of `seed` with one schema or value surprise in a table picked at random, or with its true
    state left in a -wal file or rolled back by a hot journal (`kind` drawn unless given)."""
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
        if kind in ("wal", "journal"):
            con.close()
            return _side_file_state(rng, out, kind), kind + " state (rows deleted, not checkpointed)"
        desc = _mutate_tables(rng, con, tables, t, cols, c, kind)
    except sqlite3.Error as e:
        desc += f" (mutation failed: {e})"
    con.close()
    return out, desc


def _mutate_tables(rng: random.Random, con, tables: dict, t: str, cols: list, c: str | None, kind: str) -> str:
    """Apply the schema or value mutation `kind` to table `t` (column `c`, picked by the caller) and
    describe it. A kind whose precondition fails (no column, a single column to drop) changes nothing
    and is described by its name; a failing statement raises sqlite3.Error to the caller, which adds
    it to that name."""
    if kind == "rename-col" and c:
        con.execute(f'ALTER TABLE "{t}" RENAME COLUMN "{c}" TO "{c}_x"')
        return f"rename {t}.{c}"
    if kind == "drop-col" and c and len(cols) > 1:
        con.execute(f'ALTER TABLE "{t}" DROP COLUMN "{c}"')
        return f"drop {t}.{c}"
    if kind == "drop-table":
        con.execute(f'DROP TABLE "{t}"')
        return f"drop {t}"
    if kind == "rename-table":
        new = rng.choice([t + "_V9", t.lower(), "X" + t])
        con.execute(f'ALTER TABLE "{t}" RENAME TO "{new}"')
        return f"rename {t} -> {new}"
    if kind == "swap-meta":
        _swap_meta_tables(rng, con, set(tables))
        return kind
    if kind in ("nulls", "nulls-schema") and c:
        where = rng.choice(["1", "rowid % 7 = 0", "rowid = 1"])
        if kind == "nulls-schema":
            _null_despite_schema(con, t, c, where)
        else:
            con.execute(f'CREATE TABLE "_fz" AS SELECT * FROM "{t}"')
            con.execute(f'UPDATE "_fz" SET "{c}" = NULL WHERE {where}')
            con.execute(f'DROP TABLE "{t}"')
            con.execute(f'ALTER TABLE "_fz" RENAME TO "{t}"')
        return f"{kind} {t}.{c} where {where}"
    if kind == "values" and c:
        v = rng.choice(VALUES)
        where = rng.choice(["1", "rowid % 5 = 0", "rowid = 1"])
        con.execute("PRAGMA ignore_check_constraints=ON")
        try:
            con.execute(f'UPDATE "{t}" SET "{c}" = {v} WHERE {where}')
        except sqlite3.IntegrityError:
            _null_despite_schema(con, t, c, where)
        return f"{t}.{c} = {v} where {where}"
    if kind == "bad-utf8":
        tt = next((x for x in tables if x.startswith("StringIds")), t)
        col = "value" if tt.startswith("StringIds") else c
        con.execute(f'UPDATE "{tt}" SET "{col}" = CAST(x\'41ff42fe\' AS TEXT) WHERE rowid % 3 = 0')
        return f"invalid UTF-8 in {tt}.{col}"
    if kind == "empty-table":
        con.execute(f'DELETE FROM "{t}"')
        return f"empty {t}"
    if kind == "thread-names":
        v = rng.choice(["1.5", "'12abc'", "-3", "1e300", "x'00'"])
        if "ThreadNames" in tables:
            con.execute(f"UPDATE ThreadNames SET nameId = {v}")
        return f"ThreadNames.nameId = {v}"
    if kind == "epoch":
        v = rng.choice(["9e999", "-9e999", "'abc'", "1e30", "1.5"])
        if "TARGET_INFO_SESSION_START_TIME" in tables:
            con.execute(f"UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = {v}")
        return f"utcEpochNs = {v}"
    return kind


def _swap_meta_tables(rng: random.Random, con, names: set) -> None:
    """Give the export's metadata table the other Nsight version's name (META_DATA_EXPORT <->
    EXPORT_META_DATA), and on a coin flip rename its `name` column to `key`."""
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


