"""The capture ↔ replay join (graphs_join.py) as `report --capture`'s JSON `graph_join` and text, the
TUI's "captured from" line and the record's column (docs/definitions.md §12.6)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from launchtui.analysis.graphs_join import MATCHED, REASONS, GraphJoin
from launchtui.analysis.prose import short
from launchtui.errors import printable
from launchtui.trace.model import Trace

TEXT_KERNEL_ROWS = 40


def _share(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def _label_ids(j: GraphJoin) -> tuple[np.ndarray, list]:
    """Per captured call: the id of its (kernel, op, range, site, capture label) label; the labels."""
    cap = j.captured
    ids: dict = {}
    out = np.empty(len(cap.call), np.int64)
    for i in range(len(cap.call)):   # per captured call
        key = (cap.kernel[i], cap.op[i], cap.range[i], cap.site[i], cap.labels[int(cap.capture[i])])
        out[i] = ids.setdefault(key, len(ids))
    return out, list(ids)


def _captures_text(cs: list[int]) -> str:
    """'capture 3', 'captures 2–24' (consecutive), 'captures 2, 5, 9' (1-based)."""
    if len(cs) == 1:
        return f"capture {cs[0]}"
    if cs == list(range(cs[0], cs[-1] + 1)):
        return f"captures {cs[0]}–{cs[-1]}"
    return "captures " + ", ".join(map(str, cs[:8])) + (f", … ({len(cs)})" if len(cs) > 8 else "")


def _groups(values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices sorted by value, bounds): value v's indices are order[bounds[v]:bounds[v + 1]]."""
    order = np.argsort(values, kind="stable")
    return order, np.searchsorted(values[order], np.arange(n + 1))


def _per_graph(trace: Trace, j: GraphJoin) -> list[dict]:
    rp, cap = j.replays, j.captured
    ok = j.reason == MATCHED
    rows = []
    ng = int(rp.graph.max()) + 1 if len(rp) else 0
    r_order, r_bounds = _groups(rp.graph, ng)
    o_order, o_bounds = _groups(rp.graph[j.replay] if len(j.replay) else np.zeros(0, np.int64), ng)
    for g in range(ng):   # per graph
        r = r_order[r_bounds[g]:r_bounds[g + 1]].tolist()
        m = o_order[o_bounds[g]:o_bounds[g + 1]]
        hit = m[ok[m]]
        caps = sorted({int(j.replay_capture[x]) + 1 for x in r if j.replay_capture[x] >= 0})
        why = Counter(int(x) for x in j.reason[m[~ok[m]]].tolist())
        labels = Counter(cap.labels[c - 1] for c in caps)
        size = [int(cap.bounds[c] - cap.bounds[c - 1]) for c in caps]
        sites = Counter(cap.site[int(x)] for x in j.source[hit].tolist())
        sites.pop("", None)
        rows.append({"graph": g + 1, "first_op": trace.strings[int(rp.head_name[r[0]])], "replays": len(r),
                     "ops": int(len(m)), "matched_replays": sum(j.matched_by[x] != "" for x in r),
                     "matched_ops": int(len(hit)), "by": sorted({j.matched_by[x] for x in r} - {""}),
                     "captures": caps, "captured_nodes": max(size) if size else None,
                     "capture_label": labels.most_common(1)[0][0] if labels else None,
                     "sites": [{"site": x, "ops": n} for x, n in sorted(sites.items(), key=lambda kv: (-kv[1], kv[0]))[:3]],
                     "unmatched": {REASONS[k]: n for k, n in sorted(why.items())}})
    return rows


def _kernels(trace: Trace, j: GraphJoin) -> list[dict]:
    """Per (graph, node, captured label): the matched replayed kernels, in graph then node order."""
    ok = np.flatnonzero(j.reason == MATCHED)
    if not len(ok):
        return []
    lid, labels = _label_ids(j)
    g = j.replays.graph[j.replay[ok]]
    node, lab = j.node[ok], lid[j.source[ok]]
    order = np.lexsort((lab, node, g))
    keys = np.stack([g[order], node[order], lab[order]])
    heads = np.flatnonzero(np.r_[True, (keys[:, 1:] != keys[:, :-1]).any(axis=0)])
    counts = np.diff(np.append(heads, len(order)))
    rows = []
    for h, n in zip(heads.tolist(), counts.tolist()):   # per row of the table
        k = int(j.op[ok[order[h]]])
        kernel, op, rng, site, clabel = labels[int(keys[2, h])]
        rows.append({"graph": int(keys[0, h]) + 1, "node": int(keys[1, h]) + 1,
                     "kernel": trace.strings[int(trace.ops.name[k])], "replays": int(n), "captured_op": op or None,
                     "range": rng or None, "site": site or None, "capture_label": clabel or None,
                     "captured_kernel": kernel})
    return rows


def join_document(trace: Trace, j: GraphJoin) -> dict:
    """`report --json`'s `graph_join` (§12.6)."""
    ok = j.reason == MATCHED
    ops_n, matched = int(len(j.op)), int(ok.sum())
    graphs = _per_graph(trace, j)
    why = Counter(int(x) for x in j.reason[~ok].tolist())
    by = Counter(j.matched_by[int(r)] for r in j.replay[ok].tolist())
    used = {int(c) for c in j.replay_capture.tolist() if c >= 0}
    named = sum(k is not None for k in j.captured.kernel)
    return {"capture_trace": printable(j.capture_path),
            "method": _method(j.node_ids),
            "node_ids": j.node_ids,
            "captures": j.n_captures, "captured_launches": int(len(j.captured.call)),
            "captured_launches_named": int(named), "captures_matched": len(used),
            "replays": int(len(j.replays)), "matched_replays": int(sum(b != "" for b in j.matched_by)),
            "unrecorded_replays": int(len(j.replays.unrecorded)),
            "graphs": len(graphs), "matched_graphs": sum(1 for g in graphs if g["ops"] and g["matched_ops"] == g["ops"]),
            "replayed_ops": ops_n, "matched_ops": matched, "matched_share": _share(matched, ops_n),
            "matched_by": dict(sorted(by.items())),
            "unmatched": {REASONS[k]: n for k, n in sorted(why.items())},
            "per_graph": graphs, "kernels": _kernels(trace, j)}


def _method(ids: dict) -> str:
    if ids.get("used"):
        return "graph node id, then kernel sequence for the replays without one (§12.6)"
    return f"kernel sequence: node ids not used ({ids.get('why') or 'none read'}) (§12.6)"


def ids_line(d: dict) -> str:
    """'node ids: 75 of 75 replayed ops carry one, 75 matched by it' or why they were not used."""
    ids = d.get("node_ids") or {}
    if not ids.get("used"):
        return f"node ids not used: {ids.get('why') or 'none read'}"
    return (f"node ids: {ids['replayed_ops_with_id']:,} of {d['replayed_ops']:,} replayed ops carry one, "
            f"{ids['matched_ops']:,} matched by it ({ids['captured_calls_with_id']:,} captured calls created a node)")


def share_line(d: dict) -> str:
    """'matched 361 of 361 replayed ops (100.0 %), 3 of 3 graphs, 25 of 25 replays'."""
    pct = f" ({d['matched_share']:.1%})" if d["matched_share"] is not None else ""
    by = ", ".join(f"{n:,} by {k}" for k, n in d["matched_by"].items())
    return (f"matched {d['matched_ops']:,} of {d['replayed_ops']:,} replayed ops{pct}, {d['matched_graphs']} of "
            f"{d['graphs']} graphs, {d['matched_replays']:,} of {d['replays']:,} replays" + (f" ({by})" if by else ""))


def render_join(d: dict, limit: int = TEXT_KERNEL_ROWS) -> list[str]:
    """The text report's section."""
    out = ["-- Capture ↔ replay join (captured from) --",
           f"capture trace {Path(d['capture_trace']).name}: {d['captures']} captures, {d['captured_launches']:,} "
           f"captured launches ({d['captured_launches_named']:,} name their kernel); {d['captures_matched']} captures "
           "matched",
           share_line(d), ids_line(d)]
    for reason, n in (d.get("node_ids") or {}).get("unresolved", {}).items():
        out.append(f"node ids unresolved: {n:,} {reason}")
    if not d["replays"]:
        out.append("no graph replay with a recorded op in this trace: nothing to label")
    for reason, n in d["unmatched"].items():
        out.append(f"unmatched: {n:,} ops: {reason}")
    if d["unrecorded_replays"]:
        out.append(f"{d['unrecorded_replays']:,} graph launches recorded no op: nothing to label (§12.3)")
    for g in d["per_graph"][:20]:
        how = f" by {', '.join(g['by'])}" if g["by"] else ""
        cap = f", {_captures_text(g['captures'])}" if g["captures"] else ""
        lab = f" ({g['capture_label']})" if g["capture_label"] else ""
        nodes = g["captured_nodes"]
        lost = f" ({nodes:,} nodes captured)" if nodes and nodes * g["replays"] != g["ops"] else ""
        out.append(f"  graph {g['graph']}: {g['replays']:,} replay{'s' if g['replays'] != 1 else ''}, "
                   f"{g['matched_ops']:,}/{g['ops']:,} ops matched{lost}"
                   f"{how}{cap}{lab}  first {short(g['first_op'], 40)}")
    rows = d["kernels"]
    if rows:
        n = len(rows) if not limit else min(limit, len(rows))
        out.append(f"  replayed kernel → captured op · call site · range ({n} of {len(rows)} rows):")
        for r in rows[:n]:
            lab = " · ".join((short(r["captured_op"] or "?", 40), short(r["site"] or "(no call site)", 70),
                              short(r["range"] or "(no range)", 40)))
            out.append(f"  g{r['graph']} #{r['node']:<3} {short(r['kernel'], 36):<36} x{r['replays']:<4} {lab}")
    return out


def captured_from(j: GraphJoin, src: np.ndarray, k: int) -> str:
    """The TUI's line for op k of the execution trace (`src`: GraphJoin.source_of_ops): "" when it
    is no replayed op, else what it was captured from (op, call site, range: the site first, as the
    line is cut at the terminal's width) or why it is unmatched."""
    if k < 0 or k >= len(src):
        return ""
    s = int(src[k])
    if s < 0:
        pos = np.flatnonzero(j.op == k)
        return f"captured from: unmatched ({REASONS[int(j.reason[pos[0]])]})" if len(pos) else ""
    cap = j.captured
    c = int(cap.capture[s])
    where = f" at {cap.site[s]}" if cap.site[s] else " (no call site)"
    rng = f" · in {short(cap.range[s], 40)}" if cap.range[s] else ""
    return (f"captured from: {cap.op[s] or '?'}{where}{rng} (capture {c + 1}"
            f"{', ' + cap.labels[c] if cap.labels[c] else ''})")


def join_markdown(d: dict) -> list[str]:
    """The record's section (`record --capture`): the share, then per graph what it was captured from."""
    out = ["## Captured from (`--capture`: capture ↔ replay join, definitions §12.6)", "",
           f"Capture trace `{Path(d['capture_trace']).name}`: {d['captures']} captures, "
           f"{d['captured_launches']:,} captured launches. {share_line(d)[0].upper()}{share_line(d)[1:]}; "
           f"{ids_line(d)}."]
    for reason, n in d["unmatched"].items():
        out.append(f"- unmatched: {n:,} ops: {reason}")
    if not d["per_graph"]:
        return out
    out += ["", "| graph | first op | replays | matched ops | captured from | main call sites (ops) |",
            "|---:|---|---:|---:|---|---|"]
    for g in d["per_graph"][:30]:
        lab = f" ({g['capture_label']})" if g["capture_label"] else ""
        src = f"{_captures_text(g['captures'])}{lab}" if g["captures"] else "none"
        sites = ", ".join(f"`{short(x['site'], 60)}` ({x['ops']:,})" for x in g["sites"]) or "–"
        out.append(f"| {g['graph']} | `{short(g['first_op'], 40)}` | {g['replays']:,} | {g['matched_ops']:,}/{g['ops']:,} "
                   f"| {src} | {sites} |")
    return out
