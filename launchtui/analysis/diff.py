"""Before/after comparison of two traces' case records (definitions.md §D), pure and JSON-ready.

Input per side: the case record (`launchtui-record/1`), the per-iteration tables of
`iteration_tables.iteration_tables` and the trace's source facts. Nothing here reads a trace, so
an Nsight export compares against a Kineto trace as readily as two files of one format.

* Per iteration: before, after, delta and relative change of each record figure.
* Streams pair by device (the n-th device id of each run) and order of first use within it: ids
  differ between runs and vendors, so each pair says how it was matched.
* Kernels match on the distinguishing name; phases on the emit_nvtx-normalised range name.
* The verdict compares the iteration-time change against the runs' own iteration spread.
"""
from __future__ import annotations

import math

from launchtui.analysis.config import CONFIG

SCHEMA = "launchtui-diff/1"
LAUNCH_BOUND_SHARE = CONFIG.launch_bound_share   # the record's own threshold (definitions.md §V9)
WHOLE_SOURCES = ("none", "whole window")   # the record's source when no iteration marks were found
PARTIAL_SHARE = 0.5   # heuristic iterations covering less of the window than this are partial (§D3)

# gate name -> (label, unit, where in the record)
METRICS = {
    "launches_per_iter": ("launches", "", ("per_iteration", "launches")),
    "launch_api_ms": ("launch-API time", "ms", ("per_iteration", "launch_api_ms")),
    "exposed_overhead_ms": ("exposed launch overhead", "ms", ("per_iteration", "exposed_overhead_ms")),
    "share": ("exposed share of the iteration", "share", ("overhead_share",)),
    "amdahl_bound": ("Amdahl bound", "x", ("amdahl_bound",)),
    "iteration_ms": ("iteration time", "ms", ("per_iteration", "iteration_ms")),
    "gpu_busy_ms": ("GPU busy", "ms", ("per_iteration", "gpu_busy_ms")),
    "gpu_idle_ms": ("GPU idle", "ms", ("per_iteration", "gpu_idle_ms")),
    "host_bound_ms": ("GPU waiting on the host", "ms", ("idle_by_cause", "host_bound", "per_iteration_ms")),
    "host_bound_share": ("host-bound share of the iteration", "share", ("idle_by_cause", "host_bound", "share")),
    "graph_launches_per_iter": ("graph launches", "", None),   # from the iteration tables
}
KERNEL_FIELDS = ("launches_per_iteration", "graph_ops_per_iteration", "avg_api_us", "avg_queue_us", "avg_kernel_us")
WINDOW_FIELDS = ("launches", "graph_ops", "avg_api_us", "avg_queue_us", "avg_kernel_us")


def _num(v):
    """A record figure: a number, or the median of a {median, min, max} summary; None if absent."""
    if isinstance(v, dict):
        v = v.get("median")
    if v is None or isinstance(v, bool):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def _get(rec: dict, path):
    v = rec
    for k in path:
        if not isinstance(v, dict):
            return None
        v = v.get(k)
    return _num(v)


def _r(x, nd=6):
    return None if x is None else round(float(x), nd) + 0.0   # + 0.0: no "-0.0" in the output


def change(before, after) -> dict:
    """before, after, delta = after - before, rel = delta / before (None: undefined)."""
    if before is None or after is None:
        return {"before": _r(before), "after": _r(after), "delta": None, "rel": None}
    d = after - before
    rel = d / before if before else (0.0 if d == 0 else None)
    return {"before": _r(before), "after": _r(after), "delta": _r(d), "rel": _r(rel)}


def per_iteration(side_b: dict, side_a: dict) -> dict:
    out = {}
    # an empty record's CPU-side figures (definitions.md §V11: any device's launches) do not compare
    rb, ra = ({} if s["record"].get("empty") else s["record"] for s in (side_b, side_a))
    for key, (_, _, path) in METRICS.items():
        if path is None:
            b = side_b["tables"].get("graph_launches_per_iteration")
            a = side_a["tables"].get("graph_launches_per_iteration")
        else:
            b, a = _get(rb, path), _get(ra, path)
        if b is None and a is None and key in ("gpu_busy_ms", "gpu_idle_ms", "host_bound_ms", "host_bound_share"):
            continue
        out[key] = change(b, a)
    return out


def idle_causes(side_b: dict, side_a: dict) -> dict:
    """Per cause of GPU idle (definitions.md §V2): ms per iteration (the mean over each record's
    steady iterations) before and after, so a diff says what the GPU stopped (or started) waiting for."""
    ib, ia = (s["record"].get("idle_by_cause") or {} for s in (side_b, side_a))
    if not ib and not ia:
        return {}
    mb, ma = ib.get("mean_per_iteration_ms") or {}, ia.get("mean_per_iteration_ms") or {}
    return {c: change(mb.get(c), ma.get(c)) for c in sorted(set(mb) | set(ma))}


def _stream_facts(rec: dict, st: dict) -> dict:
    for r in rec.get("streams") or []:
        if r.get("device_id") == st["device_id"] and r.get("stream_id") == st["stream_id"]:
            return r
    return {}


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def match_streams(side_b: dict, side_a: dict) -> list[dict]:
    """Stream pairs by (device rank, first-use rank), with the record's class, depth and limit."""
    sb = {(s["device_rank"], s["stream_rank"]): s for s in side_b["tables"]["streams"]}
    sa = {(s["device_rank"], s["stream_rank"]): s for s in side_a["tables"]["streams"]}
    out = []
    for key in sorted(set(sb) | set(sa)):
        b, a = sb.get(key), sa.get(key)
        row = {"device_rank": key[0], "stream_rank": key[1]}
        if b and a:
            same = b["device_id"] == a["device_id"] and b["stream_id"] == a["stream_id"]
            row["matched_by"] = (f"{_ordinal(key[0] + 1)} device"
                                 + ("" if b["device_id"] == a["device_id"] else
                                    f" (id {b['device_id']} → {a['device_id']})")
                                 + f", {_ordinal(key[1] + 1)} stream by first use"
                                 + (" (same ids)" if same else ""))
        else:
            row["matched_by"] = f"unmatched: only {'before' if b else 'after'} has a {_ordinal(key[1] + 1)} stream " \
                                f"on its {_ordinal(key[0] + 1)} device"
        for name, s, side in (("before", b, side_b), ("after", a, side_a)):
            if s is None:
                row[name] = None
                continue
            f = _stream_facts(side["record"], s)
            row[name] = {"device_id": s["device_id"], "stream_id": s["stream_id"],
                         "queue_class": f.get("queue_class"), "max_depth": f.get("max_depth"),
                         "observed_limit": f.get("observed_limit"), "blocked_launches": f.get("blocked_launches")}
        out.append(row)
    return out


def match_kernels(side_b: dict, side_a: dict) -> dict:
    """Kernels gone, new and changed over the iterations, matched on the distinguishing name."""
    return _match(side_b["tables"]["kernels"], side_a["tables"]["kernels"], KERNEL_FIELDS)


def match_window_kernels(side_b: dict, side_a: dict) -> dict:
    """The same over each side's whole window (launches and graph ops as totals), so kernels that
    run outside the iterations, or iterations that hold few of them, hide no change (§D2)."""
    wb, wa = ((s["tables"].get("window") or {}) for s in (side_b, side_a))
    out = _match(wb.get("kernel_rows") or [], wa.get("kernel_rows") or [], WINDOW_FIELDS)
    out["kernels"] = change(wb.get("kernels"), wa.get("kernels"))
    return out


def _match(rows_b: list, rows_a: list, fields: tuple) -> dict:
    kb = {r["kernel_name"]: r for r in rows_b}
    ka = {r["kernel_name"]: r for r in rows_a}
    count, graph = fields[0], fields[1]

    def row(r):
        return {"kernel_name": r["kernel_name"], **{f: _r(r.get(f), 3) for f in fields}}

    gone = [row(kb[n]) for n in kb if n not in ka]
    new = [row(ka[n]) for n in ka if n not in kb]
    changed, same = [], 0
    for n in sorted(set(kb) & set(ka)):
        diffs = {f: change(kb[n].get(f), ka[n].get(f)) for f in fields}
        if all(d["before"] == d["after"] for d in diffs.values()):
            same += 1
            continue
        changed.append({"kernel_name": n, **diffs})

    def total(r):
        return (r[count] or 0) + (r[graph] or 0)

    gone.sort(key=lambda r: (-total(r), r["kernel_name"]))
    new.sort(key=lambda r: (-total(r), r["kernel_name"]))
    changed.sort(key=lambda r: (-abs(r[count]["delta"] or 0), -abs(r[graph]["delta"] or 0), r["kernel_name"]))
    return {"gone": gone, "new": new, "changed": changed, "unchanged": same}


def coverage(side: dict) -> dict:
    """How much of the side's window its iterations cover; `partial` when they are a heuristic's
    and cover less than PARTIAL_SHARE of it (§D3: the verdict then does not rest on them alone)."""
    w = side["tables"].get("window") or {}
    it = side["record"].get("iterations") or {}
    share = w.get("iteration_share")
    return {"window_ms": _r(w.get("ms")), "kernels": w.get("kernels"), "iterations_ms": _r(w.get("iterations_ms")),
            "iteration_share": _r(share, 4), "heuristic": bool(it.get("heuristic")),
            "partial": bool(it.get("heuristic")) and share is not None and share < PARTIAL_SHARE}


def match_phases(side_b: dict, side_a: dict) -> list[dict]:
    pb = {r["phase"]: r["launches_per_iteration"] for r in side_b["tables"]["phases"]}
    pa = {r["phase"]: r["launches_per_iteration"] for r in side_a["tables"]["phases"]}
    rows = [{"phase": p, "launches_per_iteration": change(pb.get(p, 0.0), pa.get(p, 0.0))} for p in set(pb) | set(pa)]
    rows.sort(key=lambda r: (-abs(r["launches_per_iteration"]["delta"]),
                             -r["launches_per_iteration"]["before"], r["phase"] or ""))
    return rows


def launch_class(rec: dict) -> str:
    """'launch-bound', 'partly launch-bound', 'not launch-bound' or 'unknown' for one side's record:
    the record's own `launch_bound_level` (definitions.md §V9), else its `launch_bound` (null: too
    little activity to judge); records without either fall back to the share."""
    level = rec.get("launch_bound_level")
    if isinstance(level, str) and level:
        return level
    lb = rec.get("launch_bound")
    if isinstance(lb, bool):
        return "launch-bound" if lb else "not launch-bound"
    if "launch_bound" in rec:
        return "unknown"
    share = _num(rec.get("overhead_share"))
    if share is None:
        return "unknown"
    return "launch-bound" if share >= LAUNCH_BOUND_SHARE else "not launch-bound"


def _pct(rel) -> str:
    if rel is None:
        return "n/a"
    nd = 2 if 0 < abs(rel) < 0.001 else 1     # −0.05 %, not −0.0 %
    return f"{'+' if rel > 0 else '−' if rel < 0 else '±'}{abs(rel) * 100:.{nd}f} %"


def _count(x) -> str:
    return f"{x:,.0f}" if abs(x - round(x)) < 0.05 else f"{x:,.1f}"


def _noise_ns(side: dict) -> tuple[float, int]:
    it = side["record"].get("iterations") or {}
    lo, hi, n = it.get("min_ns"), it.get("max_ns"), it.get("count") or 0
    return (float(hi - lo) / 2 if lo is not None and hi is not None else 0.0), n


def verdict(side_b: dict, side_a: dict, per: dict, kernels: dict, phases: list, streams: list,
            window: dict | None = None) -> dict:
    """The iterations' verdict (`_iteration_verdict`), led by the whole window's kernel changes
    when either side's iterations are partial, and naming them whenever kernels came or went."""
    out = _iteration_verdict(side_b, side_a, per, kernels, phases, streams, window)
    if not window or out["status"] in ("unknown",) and "cannot compare" in out["line"]:
        return out
    cov = [coverage(side_b), coverage(side_a)]
    partial = any(c["partial"] for c in cov)
    out["partial_iterations"] = partial
    moved = bool(window["gone"] or window["new"] or window["changed"]) or window["kernels"]["delta"] not in (0, 0.0, None)
    if partial and moved:
        shares = " and ".join(f"{c['iteration_share'] * 100:.1f} %" for c in cov if c["iteration_share"] is not None)
        out["line"] = (f"{_window_line(window, cov)}. The iterations are partial (a repeating launch sequence "
                       f"covering {shares} of the windows), so over them only: {out['line']}")
        out["status"] = "changed"
    elif {r["kernel_name"] for r in window["gone"] + window["new"]} - {r["kernel_name"] for r in kernels["gone"] + kernels["new"]}:
        out["line"] += f"; outside the iterations, {_window_line(window, cov)}"   # came or went there only
    return out


def _names(rows: list, key: str, limit: int = 3) -> str:
    s = ", ".join(f"`{r['kernel_name']}` ({_count(r[key] + (r.get('graph_ops') or 0))})" for r in rows[:limit])
    return s + (f" and {len(rows) - limit} more" if len(rows) > limit else "")


def _window_line(w: dict, cov: list) -> str:
    """'whole window: kernels 2,540 → 3,113 (+22.6 %); gone: `a` (57); new: …; 18 changed;
    window 396.068 → 713.373 ms'."""
    k = w["kernels"]
    parts = [f"whole window: kernels {_count(k['before'] or 0)} → {_count(k['after'] or 0)} ({_pct(k['rel'])})"]
    if w["gone"]:
        parts.append(f"gone: {_names(w['gone'], 'launches')}")
    if w["new"]:
        parts.append(f"new: {_names(w['new'], 'launches')}")
    parts.append(f"{len(w['changed'])} changed")
    if all(c["window_ms"] is not None for c in cov):
        parts.append(f"window {cov[0]['window_ms']:,.3f} → {cov[1]['window_ms']:,.3f} ms")
    return "; ".join(parts)


def _iteration_verdict(side_b: dict, side_a: dict, per: dict, kernels: dict, phases: list, streams: list,
                       window: dict | None) -> dict:
    cb, ca = launch_class(side_b["record"]), launch_class(side_a["record"])
    classes = f"{cb} → {ca}" if cb != ca else cb if cb != "unknown" else ""
    nb, cnt_b = _noise_ns(side_b)
    na, cnt_a = _noise_ns(side_a)
    noise_ms = max(nb, na) / 1e6
    identical = (all(c["delta"] in (0.0, None) for c in per.values()) and not kernels["gone"]
                 and not kernels["new"] and not kernels["changed"]
                 and all(p["launches_per_iteration"]["delta"] == 0 for p in phases)
                 and not (window and (window["gone"] or window["new"] or window["changed"]
                                      or window["kernels"]["delta"] not in (0, 0.0, None))))
    it, ln, ex = per["iteration_ms"], per["launches_per_iter"], per["exposed_overhead_ms"]
    out = {"before_class": cb, "after_class": ca, "iteration_noise_ms": _r(noise_ms)}
    empty = [(n, x["record"]["empty"]) for n, x in (("before", side_b), ("after", side_a)) if x["record"].get("empty")]
    if empty:
        out.update(status="unknown", line="cannot compare: " + "; ".join(f"{n} has {why}" for n, why in empty))
        return out
    if identical:
        out.update(status="no_change", line="no change: every per-iteration figure, kernel and phase is identical")
        return out
    what = _what_changed(ln, ex)
    d_it = it["delta"]
    one = min(cnt_b, cnt_a) <= 1
    whole = any((x["record"].get("iterations") or {}).get("source") in WHOLE_SOURCES for x in (side_b, side_a))
    if d_it is None:
        out.update(status="unknown", line=f"{classes + ': ' if classes else ''}the fix {what}; iteration time "
                                          "not available")
        return out
    if d_it < 0 and -d_it > noise_ms:
        status, tail = "improved", f"iteration {_pct(it['rel'])}"
    elif d_it > 0 and d_it > noise_ms:
        status, tail = "regressed", f"iteration {_pct(it['rel'])}"
    else:
        status, tail = "no_improvement", None
    if tail:
        line = f"{classes + ': ' if classes else ''}the fix {what}; {tail}" if status == "improved" else \
            f"regression{' (' + classes + ')' if classes else ''}: the change {what}; {tail}"
        if whole:
            line += " (no iteration marks: whole capture windows compared, so time includes whatever else ran)"
        elif one:
            line += " (one iteration per run: no spread to judge noise by)"
    else:
        why = _no_improvement_reason(side_b, ln, streams)
        line = (f"no improvement{' (' + classes + ')' if classes else ''}: the fix {what}, but iteration time moved {_pct(it['rel'])}, within the runs' "
                f"iteration spread (±{noise_ms:.3f} ms){'; ' + why if why else ''}")
    out.update(status=status, line=line)
    return out


def _what_changed(ln: dict, ex: dict) -> str:
    """'removed N launches/iter (−x %) and y ms of exposed overhead', in the directions found."""
    verb = {True: "removed", False: "added"}
    ov = f"{abs(ex['delta']):.3f} ms of exposed overhead" if ex["delta"] else ""
    if not ln["delta"]:
        return "left launches per iteration unchanged" + (f" and {verb[ex['delta'] < 0]} {ov}" if ov else "")
    text = f"{verb[ln['delta'] < 0]} {_count(abs(ln['delta']))} launches/iter ({_pct(ln['rel'])})"
    if ov:
        text += f" and {ov}" if (ex["delta"] < 0) == (ln["delta"] < 0) else f" but {verb[ex['delta'] < 0]} {ov}"
    return text


def _no_improvement_reason(side_b: dict, ln: dict, streams: list) -> str:
    """Why fewer launches did not shorten the step, from the before run's record: a small exposed
    share (the GPU, not launching, set the pace), else a saturated queue."""
    if not ln["delta"] or ln["delta"] > 0:
        return ""
    rec = side_b["record"]
    share = _num(((rec.get("idle_by_cause") or {}).get("host_bound") or {}).get("share"))
    if share is None:     # records from before idle by cause (definitions.md §V2)
        share = _num(rec.get("overhead_share"))
    if share is not None and share < LAUNCH_BOUND_SHARE:
        idle = (rec.get("idle_by_cause") or {}).get("share") or {}
        dom = max(idle, key=lambda c: (idle[c], c)) if idle else None
        return (f"the GPU waited on the host only {share * 100:.1f} % of the iteration before"
                + (f" (most of its idle was {dom.replace('_', ' ')}, {idle[dom] * 100:.1f} %)" if dom and idle[dom] else "")
                + ", so launches did not set the pace")
    sat = [s["before"] for s in streams if s["before"] and s["before"].get("queue_class") == "saturated"]
    if sat:
        s = sat[0]
        return (f"the queue was already saturated before (device {s['device_id']} stream {s['stream_id']}), "
                "so the GPU never waited for launches")
    return ""


def side(record: dict, tables: dict, source: dict | None = None) -> dict:
    """One side of a diff: the case record, its iteration tables and source facts (path, format)."""
    return {"record": record, "tables": tables, "source": source or {}}


def build_diff(before: dict, after: dict) -> dict:
    """The `launchtui-diff/1` document for two sides made by `side()`."""
    per = per_iteration(before, after)
    streams = match_streams(before, after)
    kernels = match_kernels(before, after)
    window = match_window_kernels(before, after)
    phases = match_phases(before, after)

    def head(s):
        rec = s["record"]
        return {"source": s["source"], "iterations": rec.get("iterations"), "device_id": rec.get("device_id"),
                "devices": rec.get("devices"), "window": coverage(s),
                "launch_class": launch_class(rec)}

    return {"schema": SCHEMA, "before": head(before), "after": head(after), "per_iteration": per,
            "idle_by_cause": idle_causes(before, after),
            "streams": streams, "phases": phases, "kernels": kernels, "kernels_window": window,
            "verdict": verdict(before, after, per, kernels, phases, streams, window)}
