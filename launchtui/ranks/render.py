"""Markdown rendering of a `launchtui-ranks/1` document (the default output of `report DIR`)."""
from __future__ import annotations

MAX_KERNELS = 15
MAX_STEPS = 20


def _f(v, nd: int = 1) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return str(v)


def _pct(v) -> str:
    return "–" if v is None else f"{v * 100:.1f}%"


def _job(doc: dict) -> list[str]:
    job = doc.get("job") or {}
    out = ["## Job", "", f"**Level:** {job.get('line') or 'cannot judge'}", ""]
    for d in job.get("differ") or []:
        out.append(f"- rank {d['rank']}'s own record: {d['level'] or 'cannot judge'} ({d['why']})")
    if job.get("fixes"):
        out += ["", "| first fixes (merged across ranks) | phase | ranks | ms/step mean | min | max |",
                "|---|---|---:|---:|---:|---:|"]
        for f in job["fixes"]:
            ms = f["ms_per_iteration"]
            out.append(f"| {f['fix'].replace('|', '/')} | {f['phase'] or '(' + f['rule'] + ')'} | {f['ranks']} | "
                       f"{ms['mean']:.3f} | {ms['min']:.3f} | {ms['max']:.3f} |")
    return out + [""]


def _skew(doc: dict) -> list[str]:
    sk = doc.get("skew") or {}
    out = ["## Step skew across ranks", ""]
    if not sk.get("comparable"):
        return out + [f"Not computed: {sk.get('why') or 'no steps'}.", ""]
    out.append(f"Steps matched by {sk['aligned_by']} on the ranks' shared clock ({', '.join(sk['clock'])}); "
               f"entry skew median {sk['entry_skew_ms']['median']:.3f} ms, "
               f"exit skew median {sk['exit_skew_ms']['median']:.3f} ms.")
    if sk.get("reason"):
        out.append(f"**Reason:** {sk['reason']['text']}.")
    out += ["", "| step | ranks | entry skew ms | first in | last in | exit skew ms | first out | last out | "
            "step-time spread ms |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for it in sk["iterations"][:MAX_STEPS]:
        out.append(f"| {it['step']} | {it['ranks']} | {it['entry_skew_ms']:.3f} | {it['first_in']} | {it['last_in']} | "
                   f"{it['exit_skew_ms']:.3f} | {it['first_out']} | {it['last_out']} | {it['step_time_spread_ms']:.3f} |")
    if len(sk["iterations"]) > MAX_STEPS:
        out.append(f"| … {sk['steps'] - MAX_STEPS} more | | | | | | | | |")
    return out + [""]


def render_markdown(doc: dict) -> str:
    out = [f"# {doc['verdict']}", ""]
    out += _job(doc) + _skew(doc)
    out += ["## Ranks", ""]
    out.append("| rank | from | level | host-bound | most idle | entry +ms | exit +ms | launches/iter | "
               "launch API ms/iter | exposed ms | share | queue class | max depth | iter median ms | file |")
    out.append("|---:|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|")
    for r in doc["ranks"]:
        if r["status"] != "ok":
            out.append(f"| {r['rank']} | {r['rank_from']} | error: {r['error']} | | | | | | | | | | | | {r['file']} |")
            continue
        dom = r["dominant_idle_cause"]
        out.append(f"| {r['rank']} | {r['rank_from']} | {r['launch_bound_level'] or 'cannot judge'} | "
                   f"{_pct(r['host_bound_share'])} | {dom['cause'] + ' ' + _pct(dom['share']) if dom else '–'} | "
                   f"{_f(r['step_entry_ms'], 3)} | {_f(r['step_exit_ms'], 3)} | {_f(r['launches_per_iter'])} | "
                   f"{_f(r['launch_api_ms_per_iter'], 3)} | {_f(r['exposed_overhead_ms'], 3)} | {_pct(r['exposed_share'])} | "
                   f"{r['queue_class'] or '–'} | {r['max_depth']} | {_f(r['iteration_median_ms'], 3)} | {r['file']} |")
    out += ["", "## Stragglers", ""]
    if not doc["stragglers"]:
        out.append("(none)")
    for s in doc["stragglers"]:
        out.append(f"- rank {s['rank']}: {s['reason']}")
    for m in doc.get("immaterial") or []:
        out.append(f"- (not a straggler) {m['text']}")
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
    out += ["", "## Per-rank conclusions", ""]
    out += [f"- rank {r['rank']}: {r['conclusion']}" for r in doc["ranks"] if r["status"] == "ok" and r["conclusion"]]
    return "\n".join(out) + "\n"
