"""Markdown page of a `launchtui-diff/1` document: readable in a terminal, pasteable into a PR."""
from __future__ import annotations

import numpy as np

from launchtui.analysis.diff import METRICS, WHOLE_SOURCES, _count, _pct

MAX_ROWS = 15
MAX_NAME = 90      # kernel names beyond this are cut in the page (the JSON keeps them whole)


def _ms(x: float) -> str:
    """Milliseconds: 3 decimals; below 0.1 ms 3 significant digits (a 40 ns kernel is 0.00004, not 0.000)."""
    if abs(x) >= 0.1 or x == 0:
        return f"{x:,.3f}"
    return np.format_float_positional(x, precision=3, unique=True, fractional=False, trim="-")


def _val(x, unit: str) -> str:
    if x is None:
        return "n/a"
    if unit == "share":
        return f"{x * 100:.1f} %"
    if unit == "x":
        return f"{x:.2f}×"
    if unit == "ms":
        return _ms(x)
    return _count(x)


def _delta(c: dict, unit: str) -> str:
    d = c["delta"]
    if d is None:
        return "n/a"
    if unit == "share":
        return ("+" if d > 0 else "−" if d < 0 else "±") + f"{abs(d) * 100:.1f} pt"
    sign = "+" if d > 0 else "−" if d < 0 else "±"
    return sign + _val(abs(d), unit)


def _name(s: str) -> str:
    return s if len(s) <= MAX_NAME else s[:MAX_NAME - 1] + "…"


def _us(x) -> str:
    return "–" if x is None else f"{x:,.1f}"


def _arrow(c: dict, fmt) -> str:
    return f"{fmt(c['before'])} → {fmt(c['after'])}" if c["before"] != c["after"] else fmt(c["before"])


def _side_line(label: str, h: dict) -> str:
    src, it = h["source"], h["iterations"] or {}
    med = it.get("median_ns")
    spread = (f", {_ms(it['min_ns'] / 1e6)}–{_ms(it['max_ns'] / 1e6)} ms"
              if it.get("count", 0) > 1 and it.get("min_ns") is not None else "")
    devs = h.get("devices") or []
    dev = (f"device {h['device_id']}" + (f" (of {', '.join(map(str, devs))})" if len(devs) > 1 else "") + "; "
           if h.get("device_id") is not None else "")
    w = h.get("window") or {}
    cover = ""
    if w.get("window_ms") is not None and w.get("iteration_share") is not None:
        cover = (f"; the iterations cover {_ms(w['iterations_ms'])} ms of its {_ms(w['window_ms'])} ms window "
                 f"({w['iteration_share'] * 100:.1f} %{', partial' if w.get('partial') else ''}); "
                 f"{w['kernels']:,} kernels in the window")
    n = it.get("count", 0)
    its = (f"no iteration marks (the whole window, {_ms(med / 1e6)} ms)" if it.get("source") in WHOLE_SOURCES else
           f"{n} iteration{'s' if n != 1 else ''} from {it.get('source', '?')}, median {_ms(med / 1e6)} ms{spread}"
           if med is not None else "")
    return (f"- **{label}**: `{src.get('path', '?')}` ({src.get('format', '?')}); {dev}{its}{cover}" if med is not None else
            f"- **{label}**: `{src.get('path', '?')}` ({src.get('format', '?')}); no iterations{cover}")


def _more(n: int) -> list[str]:
    return [f"\n… and {n - MAX_ROWS} more (all in `--json`)"] if n > MAX_ROWS else []


def _window_md(w: dict) -> list[str]:
    """The whole window's kernels: gone and new with their launches, the largest changes."""
    k = w["kernels"]
    out = ["", f"## Kernels over the whole window: {_count(k['before'] or 0)} → {_count(k['after'] or 0)} "
           f"({_pct(k['rel'])}); {len(w['gone'])} gone, {len(w['new'])} new, {len(w['changed'])} changed, "
           f"{w['unchanged']} unchanged", ""]
    for title, rows in (("Gone (in before only)", w["gone"]), ("New (in after only)", w["new"])):
        if rows:
            out += [f"### {title}", "", "| kernel | launches | graph ops | avg API µs | avg kernel µs |",
                    "|---|---:|---:|---:|---:|"]
            out += [f"| `{_name(r['kernel_name'])}` | {_count(r['launches'])} | {_count(r['graph_ops'])} "
                    f"| {_us(r['avg_api_us'])} | {_us(r['avg_kernel_us'])} |" for r in rows[:MAX_ROWS]]
            out += _more(len(rows)) + [""]
    if w["changed"]:
        out += ["### Changed (before → after)", "", "| kernel | launches | graph ops | avg API µs | avg kernel µs |",
                "|---|---:|---:|---:|---:|"]
        out += [f"| `{_name(r['kernel_name'])}` | {_arrow(r['launches'], _count)} | {_arrow(r['graph_ops'], _count)} "
                f"| {_arrow(r['avg_api_us'], _us)} | {_arrow(r['avg_kernel_us'], _us)} |" for r in w["changed"][:MAX_ROWS]]
        out += _more(len(w["changed"]))
    return out


def render_markdown(doc: dict) -> str:
    v = doc["verdict"]
    out = ["# launchtui diff", "", _side_line("before", doc["before"]), _side_line("after", doc["after"]), "",
           f"**Verdict:** {v['line']}", ""]
    out += ["## Per iteration (median)", "", "| metric | before | after | Δ | Δ % |", "|---|---:|---:|---:|---:|"]
    for key, c in doc["per_iteration"].items():
        label, unit, _ = METRICS[key]
        out.append(f"| {label}{' (ms)' if unit == 'ms' else ''} | {_val(c['before'], unit)} | {_val(c['after'], unit)} "
                   f"| {_delta(c, unit)} | {_pct(c['rel'])} |")
    if doc.get("idle_by_cause"):
        out += ["", "## What the GPU waited for (ms per iteration, mean over steady iterations)", "",
                "| cause | before | after | Δ |", "|---|---:|---:|---:|"]
        for c, x in doc["idle_by_cause"].items():
            if x["before"] or x["after"]:
                out.append(f"| {c.replace('_', ' ')} | {_val(x['before'], 'ms')} | {_val(x['after'], 'ms')} "
                           f"| {_delta(x, 'ms')} |")
    out += ["", "## Streams", "", "| before (device/stream) | after (device/stream) | matched by | queue class "
            "| max depth | observed limit |", "|---|---|---|---|---:|---:|"]
    for s in doc["streams"]:
        b, a = s["before"] or {}, s["after"] or {}

        def pair(k):
            x, y = b.get(k), a.get(k)
            fx = "–" if x is None else str(x)
            fy = "–" if y is None else str(y)
            return fx if fx == fy else f"{fx} → {fy}"
        ids = [f"{x['device_id']}/{x['stream_id']}" if x else "–" for x in (s["before"], s["after"])]
        out.append(f"| {ids[0]} | {ids[1]} | {s['matched_by']} | {pair('queue_class')} | {pair('max_depth')} "
                   f"| {pair('observed_limit')} |")
    ph = [p for p in doc["phases"] if p["launches_per_iteration"]["delta"]]
    out += ["", "## Phases (launches per iteration)", ""]
    if ph:
        out += ["| phase | before | after | Δ | Δ % |", "|---|---:|---:|---:|---:|"]
        for p in ph[:MAX_ROWS]:
            c = p["launches_per_iteration"]
            out.append(f"| {p['phase'] or '(outside any range)'} | {_count(c['before'])} | {_count(c['after'])} "
                       f"| {_delta(c, '')} | {_pct(c['rel'])} |")
        out += _more(len(ph))
    else:
        out.append("No phase changed its launches per iteration.")
    if doc.get("kernels_window"):
        out += _window_md(doc["kernels_window"])
    k = doc["kernels"]
    out += ["", f"## Kernels over the iterations: {len(k['gone'])} gone, {len(k['new'])} new, "
            f"{len(k['changed'])} changed, {k['unchanged']} unchanged", ""]
    for title, rows in (("Gone (in before only)", k["gone"]), ("New (in after only)", k["new"])):
        if not rows:
            continue
        out += [f"### {title}", "", "| kernel | launches/iter | graph ops/iter | avg API µs | avg queue µs "
                "| avg kernel µs |", "|---|---:|---:|---:|---:|---:|"]
        for r in rows[:MAX_ROWS]:
            out.append(f"| `{_name(r['kernel_name'])}` | {_count(r['launches_per_iteration'])} "
                       f"| {_count(r['graph_ops_per_iteration'])} | {_us(r['avg_api_us'])} | {_us(r['avg_queue_us'])} "
                       f"| {_us(r['avg_kernel_us'])} |")
        out += _more(len(rows)) + [""]
    if k["changed"]:
        out += ["### Changed (before → after)", "", "| kernel | launches/iter | graph ops/iter | avg API µs "
                "| avg queue µs | avg kernel µs |", "|---|---:|---:|---:|---:|---:|"]
        for r in k["changed"][:MAX_ROWS]:
            out.append(f"| `{_name(r['kernel_name'])}` | {_arrow(r['launches_per_iteration'], _count)} "
                       f"| {_arrow(r['graph_ops_per_iteration'], _count)} | {_arrow(r['avg_api_us'], _us)} "
                       f"| {_arrow(r['avg_queue_us'], _us)} | {_arrow(r['avg_kernel_us'], _us)} |")
        out += _more(len(k["changed"]))
    return "\n".join(out).rstrip() + "\n"
