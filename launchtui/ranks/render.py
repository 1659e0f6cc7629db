"""Markdown rendering of a `launchtui-ranks/1` document (the default output of `report DIR`)."""
from __future__ import annotations

MAX_KERNELS = 15


def _f(v, nd: int = 1) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return str(v)


def render_markdown(doc: dict) -> str:
    out = [f"# {doc['verdict']}", ""]
    out.append("| rank | from | launches/iter | launch API ms/iter | exposed ms | share | queue class | "
               "max depth | iter median ms | file |")
    out.append("|---:|---|---:|---:|---:|---:|---|---:|---:|---|")
    for r in doc["ranks"]:
        if r["status"] != "ok":
            out.append(f"| {r['rank']} | {r['rank_from']} | error: {r['error']} | | | | | | | {r['file']} |")
            continue
        share = f"{r['exposed_share'] * 100:.0f}%" if r["exposed_share"] is not None else "–"
        out.append(f"| {r['rank']} | {r['rank_from']} | {_f(r['launches_per_iter'])} | "
                   f"{_f(r['launch_api_ms_per_iter'], 3)} | {_f(r['exposed_overhead_ms'], 3)} | {share} | "
                   f"{r['queue_class'] or '–'} | {r['max_depth']} | {_f(r['iteration_median_ms'], 3)} | {r['file']} |")
    out += ["", "## Stragglers", ""]
    if not doc["stragglers"]:
        out.append("(none)")
    for s in doc["stragglers"]:
        out.append(f"- rank {s['rank']}: {s['reason']}")
    ks = doc["kernels"]
    out += ["", f"## Kernels across ranks (top {min(len(ks), MAX_KERNELS)} of {len(ks)} by launch-API time)", ""]
    if ks:
        out.append("| kernel | ranks | launches mean | min | max | worst | API µs mean | min | max | worst |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for k in ks[:MAX_KERNELS]:
            ln, ap = k["launches"], k["avg_api_us"]
            name = (k["kernel_name"] if len(k["kernel_name"]) <= 60 else k["kernel_name"][:59] + "…").replace("|", "\\|")
            out.append(f"| {name} | {k['ranks']} | {ln['mean']:,.1f} | {ln['min']:,.0f} | {ln['max']:,.0f} | "
                       f"{ln['worst_rank']} | {ap['mean']:.2f} | {ap['min']:.2f} | {ap['max']:.2f} | {ap['worst_rank']} |")
    else:
        out.append("(no launched kernels)")
    return "\n".join(out) + "\n"
