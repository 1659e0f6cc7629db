"""Nsight NVTX ranges (NVTX_EVENTS push/pop and start/end rows, domain names): read on a worker
thread as integer columns and inline texts, then interned on the main thread (nsys_sqlite)."""
from __future__ import annotations

import sqlite3
from itertools import compress

import numpy as np

from launchtui.trace.model import RANGE_PUSHPOP, RANGE_STARTEND
from launchtui.trace.nsys_strings import NULL_ID
from launchtui.trace.sqlite_columns import Packed, Unpackable, fetch_int_columns, fetch_text_column, kept_rows

NVTX_PUSHPOP, NVTX_STARTEND, NVTX_DOMAIN_CREATE = 59, 60, 75
NO_END = -2**63      # a range's NULL end as read


def read_raw(r, con: sqlite3.Connection = None):
    """NVTX ranges as raw columns (no interning) from an open reader `r` (nsys_sqlite._Reader), so
    it can run on its own connection and thread."""
    if not r.has("NVTX_EVENTS"):
        return None
    table = r.tables["NVTX_EVENTS"]
    cs = r.colset("NVTX_EVENTS")
    where = f"eventType IN ({NVTX_PUSHPOP},{NVTX_STARTEND})"
    # small fields share one column where the domain id fits: domain id, then the inline-text
    # and type bits (fewer columns); a domain id that does not fit is read apart. A range
    # without an end (open when the capture stopped) is read, then counted and left out.
    small = f"(eventType - {NVTX_PUSHPOP}) + 2 * ({'text IS NOT NULL' if 'text' in cs else '0'})"
    domain = "ifnull(domainId, 0)" if "domainId" in cs else "0"
    exprs = {"start": "start", "end": f"ifnull(end, {NO_END})", "gtid": "globalTid",
             "packed": Packed(domain, small, 2)}
    if "textId" in cs:
        exprs["text_id"] = "textId"
    try:
        c = fetch_int_columns(con, table, exprs, where, r.dropped)
        c["domain"] = c["packed"] >> 2
    except Unpackable:
        c = fetch_int_columns(con, table, {**exprs, "packed": small, "domain": domain}, where, r.dropped)
    c["type"] = np.where(c["packed"] & 1, NVTX_STARTEND, NVTX_PUSHPOP)
    c["has_text"] = (c["packed"] >> 1) & 1
    c.setdefault("text_id", np.full(len(c["start"]), -1, np.int64))
    inline = []
    if len(c["start"]) and "text" in cs and c["has_text"].any():   # the rows the integer read kept
        inline = fetch_text_column(con, table, "text", f"{where} AND {kept_rows(con, table, exprs)} AND "
                                                       "text IS NOT NULL")
        if len(inline) != int(c["has_text"].sum()):
            raise ValueError(f"{table}'s text column does not line up with its rows")
    open_ = c["end"] == NO_END
    if open_.any():
        r.skipped[f"{table} ranges without an end (open when the capture stopped; left out)"] += int(open_.sum())
        if len(inline):
            inline = list(compress(inline, (~open_[c["has_text"] == 1]).tolist()))
        c = {k: v[~open_] for k, v in c.items()}
    domains = {}
    if "domainId" in cs:
        q = (f'SELECT domainId, {"text" if "text" in cs else "NULL"}, {"textId" if "textId" in cs else "NULL"} '
             f'FROM "{table}" WHERE eventType = {NVTX_DOMAIN_CREATE}')
        domains = {d: (txt, tid if type(tid) is int else None) for d, txt, tid in con.execute(q)
                   if type(d) is int}
    return c, inline, domains


def intern(r, raw):
    """Intern the raw NVTX columns' strings (main thread only: the string table is not shared)."""
    c, inline, domains = raw
    n = len(c["start"])
    r.progress("read NVTX_EVENTS", n)
    text = np.full(n, r.strings.intern(""), np.int32)
    if len(inline):
        text[c["has_text"] == 1] = r.strings.intern_many(inline)
    by_id = (c["text_id"] != NULL_ID) & (c["has_text"] == 0)   # neither: an unnamed range
    table = r.tables["NVTX_EVENTS"]
    if by_id.any():
        text[by_id] = r.names.map(c["text_id"][by_id], what=(table, "textId"))
    dom_ids = np.full(n, -1, np.int32)
    for dom, (txt, tid) in domains.items():  # domain names: inline text or via textId
        if txt is None and tid is not None:
            (txt,) = r.names.texts([tid], (table, "textId"))
        if txt:
            dom_ids[c["domain"] == dom] = r.strings.intern(str(txt))
    kind = np.where(c["type"] == NVTX_STARTEND, RANGE_STARTEND, RANGE_PUSHPOP).astype(np.int8)
    return c, text, dom_ids, kind
