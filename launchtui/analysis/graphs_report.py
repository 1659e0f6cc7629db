"""CUDA / HIP graphs in the record, `report --json` and the Markdown page (docs/definitions.md §12):
the captures and what they recorded, the replay table, the integrity gate, and the capture page
that replaces the steady-state verdict on a trace that is mostly capture."""
from __future__ import annotations

import numpy as np

from launchtui.analysis import graph_busy
from launchtui.analysis import graphs as gr
from launchtui.analysis import intervals as iv
from launchtui.analysis.prose import short
from launchtui.analysis.queue import queue_summary
from launchtui.analysis.select import Selection
from launchtui.trace.arrays import median_of, nonzero_index
from launchtui.trace.model import API_LAUNCH, Trace

PROFILE_REPLAY = "runtime launch overhead cannot be judged here; profile the replay"


def _us(values: np.ndarray) -> dict:
    if not len(values):
        return {"median": None, "min": None, "max": None}
    return {"median": round(float(median_of(values)) / 1e3, 3), "min": round(float(values.min()) / 1e3, 3),
            "max": round(float(values.max()) / 1e3, 3)}


def _capture_json(trace: Trace, sel: Selection, cap: gr.Captures, replayed_ops: int) -> dict:
    api = trace.api
    keep = gr.window_mask(cap.start, sel)
    idx = np.flatnonzero(keep)
    launch = nonzero_index((api.kind == API_LAUNCH) & gr.window_mask(api.start, sel))
    calls = gr.window_mask(api.start[cap.captured_calls], sel)
    captured = int(calls.sum())
    # the launched work: calls captured, calls that ran eagerly, ops replayed from graphs
    work = captured + int(gr.has_op(trace)[launch].sum()) + replayed_ops
    share = captured / work if work else 0.0
    by_batch: dict = {}
    for i in idx.tolist():   # per capture
        b = by_batch.setdefault((cap.batch[i], cap.label[i]), [0, 0])
        b[0] += 1
        b[1] += int(cap.captured[i])
    rows = [{"capture": int(i) + 1, "tid": int(trace.threads.tid[cap.thread[i]]), "start_ns": int(cap.start[i]),
             "end_ns": int(cap.end[i]), "captured_launches": int(cap.captured[i]), "eager_launches": int(cap.eager[i]),
             "other_thread": int(cap.other_thread[i]),
             "label": cap.label[i] or None, "batch_size": cap.batch[i]} for i in idx.tolist()]
    return {"graphs": len(idx), "captured_launches": captured, "launch_calls": int(len(launch)),
            "captured_share": round(share, 4), "captured_time_share": None,
            "eager_in_capture": int(cap.eager[idx].sum()),
            "instantiated": cap.instantiated, "unpaired_capture_calls": cap.open_ended,
            "capture_trace": bool(len(idx)) and share >= gr.CAPTURE_TRACE_SHARE,
            "by_batch": [{"batch_size": b, "label": lab or None, "graphs": n, "captured_launches": c}
                         for (b, lab), (n, c) in sorted(by_batch.items(), key=lambda x: (x[0][0] is None, x[0][0] or 0,
                                                                                          x[0][1]))],
            "captures": rows}


def replay_json(trace: Trace, rp: gr.Replays) -> dict:
    api = trace.api
    rows = []
    ng = int(rp.graph.max()) + 1 if len(rp) else 0
    mine = np.argsort(rp.graph, kind="stable")
    bounds = np.searchsorted(rp.graph[mine], np.arange(ng + 1))
    for g in range(ng):   # per graph
        r = mine[bounds[g]:bounds[g + 1]]
        calls = rp.call[r]
        head = int(rp.head_name[r[0]])
        rows.append({"graph": g + 1, "first_op": trace.strings[head] if head >= 0 else GRAPH_LEVEL_OP, "replays": int(len(r)),
                     "ops_per_replay": _count(rp.n_ops[r]),
                     "nodes_per_call": float(median_of(rp.n_ops[r])),
                     "span_us": _us(rp.last[r] - rp.first[r]), "busy_us": _us(rp.busy[r]),
                     "node_gaps_us": _us(rp.gaps[r]), "max_node_gap_us": round(float(rp.max_gap[r].max()) / 1e3, 3),
                     "launch_api_us": _us(api.end[calls] - api.start[calls]),
                     "first_replay_ns": int(api.start[calls[0]])})
        if rp.graph_id[r[0]] >= 0:   # only traces that record graph ids (§12.2)
            rows[-1]["graph_id"] = int(rp.graph_id[r[0]])
            rows[-1]["under_recorded"] = int(rp.under[r].sum())
        if rp.level[r[0]]:   # traced at graph level: a span per replay, no node ops
            rows[-1]["graph_level"] = True
    by_id = bool((rp.graph_id >= 0).any())
    return {"graph_launches": int(len(rp)), "replayed_ops": int(rp.n_ops.sum()), "graphs": rows,
            "grouped_by": "graph id" if by_id else "op sequence"}


def _count(v: np.ndarray) -> dict:
    return {"median": float(median_of(v)), "min": int(v.min()), "max": int(v.max())}


GRAPH_LEVEL = "CUDA graphs traced at graph level"
GRAPH_LEVEL_OP = "(graph-level replay: no node ops)"   # a graph-level row's `first_op` (§12.2)


def _integrity(trace: Trace, rp: gr.Replays) -> dict:
    """Graph launches whose replay the trace did not record, or recorded in part (definitions.md
    §12.3 integrity gate). `in_iterations` is filled by the record: only those inside the judged
    iterations stop it. A graph-level replay with a span is recorded: its span is GPU busy (§12.2);
    one whose graph-level record has no timing is not."""
    recorded_gpu = len(trace.ops) or len(trace.graph_spans)
    n_unrec = len(rp.unrecorded) if recorded_gpu else 0
    n_under = int(rp.under.sum())
    n_level = int(rp.level.sum())
    gs = trace.graph_spans
    untimed = (np.isin(rp.unrecorded, gs.api[~graph_busy.timed(gs)]) if n_unrec and len(gs)
               else np.zeros(n_unrec, bool))
    n_untimed = int(untimed.sum())
    n_total = n_unrec + len(rp)
    parts = []
    if n_untimed:
        parts.append(f"{n_untimed:,} of {n_total:,} graph launches have a graph-level record without timing "
                     "(CUPTI did not collect it): their GPU time is unknown")
    if n_unrec - n_untimed:
        why = ("Nsight traced the graphs at graph level (--cuda-graph-trace=graph) and the launch has no graph-level "
               "record either" if any(m.startswith(GRAPH_LEVEL) for m in trace.missing)
               else "the trace did not keep their replay")
        parts.append(f"{n_unrec - n_untimed:,} of {n_total:,} graph launches recorded no GPU op ({why})")
    if n_under:
        parts.append(f"{n_under:,} of {n_total:,} graph launches recorded fewer ops than their graph's "
                     "usual replay (under-recorded)")
    reason = "; ".join(parts) + ": the GPU idle around them is not measurable" if parts else None
    doc = {"flagged_replays": n_unrec + n_under, "unrecorded_replays": n_unrec,
           "unrecorded_ns": [int(trace.api.start[c]) for c in rp.unrecorded[:20].tolist()] if n_unrec else [],
           "in_iterations": None, "ok": not (n_unrec or n_under), "reason": reason}
    if n_level or n_untimed:   # only traces with graph-level replays: others' JSON unchanged
        doc["graph_level_replays"] = n_level
        doc["untimed_replays"] = n_untimed
    if (rp.graph_id >= 0).any():   # only traces that record graph ids can show a short replay
        doc["under_recorded_replays"] = n_under
        doc["under_recorded_ns"] = [int(trace.api.start[c]) for c in rp.call[rp.under][:20].tolist()]
    return doc


def scope_integrity(trace: Trace, g: dict, unrecorded: np.ndarray, index_of) -> None:
    """Count the flagged replays (`unrecorded`: their graph-launch rows, unrecorded and
    under-recorded) inside the judged iterations (`index_of`: Iterations.index_of); the gate holds
    when none is."""
    it = g["integrity"]
    if not it["flagged_replays"]:
        return
    n = int((index_of(trace.api.start[unrecorded]) >= 0).sum())
    it["in_iterations"] = n
    it["ok"] = n == 0
    if n == 0:
        it["reason"] += "; none lies inside the judged iterations"


def _eager(trace: Trace, sel: Selection, rp: gr.Replays) -> dict:
    """Launch calls that ran eagerly (a GPU op, not a graph launch) against ops replayed from graphs."""
    api = trace.api
    launch = np.flatnonzero((api.kind == API_LAUNCH) & gr.window_mask(api.start, sel) & gr.has_op(trace))
    replayed = int(rp.n_ops.sum())
    total = len(launch) + replayed
    return {"eager_launch_calls": int(len(launch)), "replayed_ops": replayed,
            "graphed_share": round(replayed / total, 4) if total else None}


def graphs_facts(trace: Trace, sel: Selection) -> tuple[dict | None, np.ndarray]:
    """(the report's and record's `graphs` key, None for a trace with neither captures nor graph
    launches, so its JSON stays as it was; the API rows of the flagged graph launches: recorded no
    op or under-recorded)."""
    cap = gr.captures(trace)
    rp = gr.replays(trace, sel)
    if not len(cap) and not len(rp) and not len(rp.unrecorded):
        return None, rp.unrecorded
    doc = {"capture": _capture_json(trace, sel, cap, int(rp.n_ops.sum())), "replays": replay_json(trace, rp),
           "integrity": _integrity(trace, rp), "eager": _eager(trace, sel, rp)}
    if len(rp):   # pending depth with each replay as one entry, beside the raw series (§5, §6)
        doc["depth"] = [{"device_id": q.device_id, "stream_id": q.stream_id, "max_depth": q.max_depth,
                         "max_depth_graph_as_one": q.max_depth_graph_as_one, "graph_ops": q.graph_ops}
                        for q in queue_summary(trace, sel) if q.graph_ops]
    c = doc["capture"]
    doc["capture_line"] = capture_line(c) if c["capture_trace"] else None
    bad = rp.under
    flagged = np.concatenate([rp.unrecorded, rp.call[bad]]) if bad.any() else rp.unrecorded
    return doc, flagged


def capture_line(c: dict) -> str:
    """'graph-capture trace: N launches captured into M graphs (batch size 8192: …); …'."""
    sizes = [b for b in c["by_batch"] if b["batch_size"] is not None]
    per = ""
    if sizes:
        per = " (" + ", ".join(f"batch size {b['batch_size']}: {b['captured_launches']:,} launches in {b['graphs']} "
                               f"graph{'s' if b['graphs'] != 1 else ''}" for b in sizes) + ")"
    return (f"graph-capture trace: {c['captured_launches']:,} launches captured into {c['graphs']:,} "
            f"graph{'s' if c['graphs'] != 1 else ''}{per}; {PROFILE_REPLAY}")


CAPTURE_NULLS = {"device_id": None, "devices": [], "iterations": None, "per_iteration": None, "per_device": None,
                 "overhead_share": None,
                 "amdahl_bound": None, "streams": [], "backpressure": None, "cpu_stalls": None, "top": [],
                 "nccl": [], "near_misses": [], "cross_checks": {}, "launch_bound": None,
                 "launch_bound_level": None,
                 "launch_thread_cpu": {"available": False, "reason": "a graph-capture trace: no steady state"}}


def capture_in_iterations(g: dict | None, starts: np.ndarray, ends: np.ndarray) -> bool:
    """Whether the judged iterations lie mostly (>= half their time) inside captures: their idle
    is the host capturing, not steady state (definitions.md §12.1). Marks `g` a capture trace."""
    caps = (g or {}).get("capture", {}).get("captures", [])
    if not caps or not len(starts):
        return False
    s, e = iv.union(np.array([c["start_ns"] for c in caps], np.int64), np.array([c["end_ns"] for c in caps], np.int64))
    total = int((ends - starts).sum())
    share = int(iv.measure_in(s, e, starts, ends).sum()) / total if total > 0 else 0.0
    c = g["capture"]
    c["captured_time_share"] = round(share, 4)
    if share < gr.CAPTURE_TRACE_SHARE:
        return False
    c["capture_trace"] = True
    g["capture_line"] = capture_line(c)
    return True


def capture_record(doc: dict, g: dict) -> dict:
    """A trace (or window) that is mostly graph capture: its own page, no steady-state verdict."""
    line = g["capture_line"]
    doc.update(CAPTURE_NULLS)
    doc.update({"graphs": g, "empty": line, "empty_reason": line, "verdict": [line], "conclusion": line})
    return doc


# --- Markdown ----------------------------------------------------------------------------------

def eager_md(e: dict, out: list[str]) -> None:
    """The page's eager-remainder lines."""
    out.append("")
    out.append(f"Eager remainder per iteration (median of {e['iterations']}): {e['eager_launches']['median']:g} eager "
               f"launch calls against {e['graph_launches']['median']:g} graph launches replaying "
               f"{e['replayed_ops']['median']:g} ops ({e['graphed_share']:.0%} of the launched work graphed)")
    for r in e["eager_kernels"]:
        site = f" — {r['site']} ({r['site_share']:.0%})" if r["site"] else ""
        out.append(f"- `{r['kernel_name'][:60]}` {r['launches_per_iteration']:g}/iteration{site}")


def capture_page(doc: dict, out: list[str]) -> None:
    """The capture page's body (after the verdict line)."""
    c = doc["graphs"]["capture"]
    out += ["", f"Launch calls in the window: {c['launch_calls']:,}, of which {c['captured_launches']:,} "
                "were captured into graphs (no GPU op: recorded, not run; "
                f"{c['captured_share']:.0%} of the launched work); {c['instantiated']:,} graph instantiations; "
                f"{c['eager_in_capture']:,} launches inside a capture "
                "ran eagerly.", "",
            "| capture | thread | captured launches | ran eagerly | range | batch size |",
            "|---:|---:|---:|---:|---|---:|"]
    for r in c["captures"][:50]:
        out.append(f"| {r['capture']} | {r['tid']} | {r['captured_launches']:,} | {r['eager_launches']:,} | "
                   f"{short(r['label'] or '', 40)} | {r['batch_size'] if r['batch_size'] is not None else ''} |")
    if len(c["captures"]) > 50:
        out.append(f"| … {len(c['captures']) - 50} more | | | | | |")
    _replay_md(doc["graphs"], out)


def graphs_md(doc: dict, out: list[str]) -> None:
    """The page's CUDA graphs section (captures, replay table, integrity), when the trace has any."""
    g = doc.get("graphs")
    if not g:
        return
    out += ["", "## CUDA / HIP graphs", ""]
    c = g["capture"]
    if c["graphs"]:
        out.append(f"Captures: {c['captured_launches']:,} launches captured into {c['graphs']:,} graphs "
                   f"({c['captured_share']:.0%} of the launched work; no GPU op, not counted as launches)")
    e = g["eager"]
    if e["graphed_share"] is not None:
        out.append(f"Eager launch calls {e['eager_launch_calls']:,} · ops replayed from graphs {e['replayed_ops']:,} "
                   f"({e['graphed_share']:.0%} of the launched work)")
    _replay_md(g, out)
    if g.get("eager_per_iteration"):
        eager_md(g["eager_per_iteration"], out)
    out += [""] if g.get("depth") else []
    for q in g.get("depth", []):
        out.append(f"- device {q['device_id']} stream {q['stream_id']}: max pending {q['max_depth']:,} counting every "
                   f"replayed node, {q['max_depth_graph_as_one']:,} with each replay as one entry "
                   f"({q['graph_ops']:,} graph ops)")
    if not g["integrity"]["ok"]:
        out.append(f"\n**Integrity:** {g['integrity']['reason']}")


def _replay_md(g: dict, out: list[str]) -> None:
    r = g["replays"]
    if not r["graphs"]:
        return
    out += ["", f"Replays: {r['graph_launches']:,} graph launches, {r['replayed_ops']:,} ops, "
                f"{len(r['graphs'])} graph{'s' if len(r['graphs']) != 1 else ''} (grouped by {r['grouped_by']}: no graph id is recorded on the launch "
                "call)", "",
            "| graph | first op | replays | ops/replay (med, min–max) | span µs (med) | busy µs (med) "
            "| gaps between nodes µs (med, max) | launch call µs (med) |",
            "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for x in r["graphs"][:30]:
        o = x["ops_per_replay"]
        out.append(f"| {x['graph']} | `{short(x['first_op'], 40)}` | {x['replays']:,} | {o['median']:g} "
                   f"({o['min']}–{o['max']}) | {x['span_us']['median']:,.1f} | {x['busy_us']['median']:,.1f} | "
                   f"{x['node_gaps_us']['median']:,.1f}, {x['max_node_gap_us']:,.1f} | "
                   f"{x['launch_api_us']['median']:,.1f} |")
    if len(r["graphs"]) > 30:
        out.append(f"| … {len(r['graphs']) - 30} more | | | | | | | |")



def report_lines(g: dict | None) -> list[str]:
    """The text report's graph lines (captures, replays, integrity)."""
    if not g:
        return []
    c, r = g["capture"], g["replays"]
    out = []
    if g["capture_line"]:
        out.append(g["capture_line"])
    elif c["graphs"]:
        out.append(f"graph captures: {c['captured_launches']:,} launches captured into {c['graphs']:,} graphs "
                   f"({c['captured_share']:.0%} of the launched work)")
    if r["graph_launches"]:
        out.append(f"graph replays: {r['graph_launches']:,} graph launches, {r['replayed_ops']:,} ops, "
                   f"{len(r['graphs'])} graphs; eager launch calls {g['eager']['eager_launch_calls']:,}")
        for x in r["graphs"][:10]:
            replays = f"{x['replays']:,} replay{'' if x['replays'] == 1 else 's'}"
            out.append(f"  graph {x['graph']}: {replays} x {x['ops_per_replay']['median']:g} ops, "
                       f"span {x['span_us']['median']:,.1f} us, busy {x['busy_us']['median']:,.1f} us, "
                       f"launch call {x['launch_api_us']['median']:,.1f} us  ({short(x['first_op'], 40)})")
    if not g["integrity"]["ok"]:
        out.append(f"integrity: {g['integrity']['reason']}")
    return out
