"""Issue 24's targets, each beside the previous pass (a stored results.json), and the gate that
fails a run when cold `report` at 1M got more than 20 % slower than that pass: timed against the
pass's own commit in the same run where the run has that A/B (bench/ab_gate.py), else each run
normalised by its own C scan (which the host's stretches move: bench/MISSED.md).

Used by bench/run.py; see bench/README.md ("Issue 24").
"""
from __future__ import annotations

import json
from pathlib import Path

GATE = 1.20          # cold `report` 1M may grow at most this much against the previous pass
WARM_SIZES = ("200k", "1m", "5m", "20m")
TARGET_WARM_SIZES = ("200k", "1m", "5m")


def _get(d, *keys):
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _complete(f, mode: str):
    """The TUI's complete_s (definitions.md §T10); interactive_s in results from before it, when
    that meant the same."""
    done = _get(f, "tui", mode, "complete_s")
    return done if done is not None else _get(f, "tui", mode, "interactive_s")


def _ratio(a, b, nd=2):
    return round(a / b, nd) if a is not None and b else None


def load_previous(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _marginal(f_lo, f_hi, field: str = "wall_s"):
    """Marginal µs per event of cold `report` between two files (`field`: its wall, user or sys
    seconds), None where one is missing."""
    pts = []
    for f in (f_lo, f_hi):
        ev = (f or {}).get("file_events") or _get(f, "model", "events")
        cold = _get(f, "runs", "launchtui_cold", field)
        if not ev or cold is None:
            return None
        pts.append((ev, cold))
    (e0, c0), (e1, c1) = pts
    return round((c1 - c0) / (e1 - e0) * 1e6, 3) if e1 != e0 else None


def values(res: dict | None) -> dict:
    """Issue 24's figures of one run: {target: (value, detail)}; value None where not measured."""
    F = (res or {}).get("files", {})
    n1, n5, n20 = F.get("nsys_1m"), F.get("nsys_5m"), F.get("nsys_20m")
    out = {}
    scan5 = _get(n5, "runs", "c_scan", "wall_s")
    tui5 = _get(n5, "tui", "cold", "interactive_s")
    out["Nsight 5M: cold TUI interactive ≤ 2.5× C scan"] = (_ratio(tui5, scan5), f"{tui5} s / {scan5} s")
    done5 = _get(n5, "tui", "cold", "complete_s")
    out["Nsight 5M: cold TUI complete / C scan (not a target)"] = (_ratio(done5, scan5), f"{done5} s / {scan5} s")
    for lb in WARM_SIZES:
        w = _complete(F.get(f"nsys_{lb}"), "warm")
        if lb in TARGET_WARM_SIZES:
            out[f"Nsight {lb.upper()}: warm TUI reopen ≤ 0.6 s"] = (w, "table filled, verdict and idle row shown")
        else:   # the issue bounds the reopen up to 5M; past that the default 2 GB cache may not hold it all
            out[f"Nsight {lb.upper()}: warm TUI reopen, s (not a target)"] = (
                w, "with the default cache limit (LAUNCHTUI_CACHE_MAX_MB 2048): what the cache holds is reused")
    ws = [_complete(F.get(f"nsys_{lb}"), "warm") for lb in ("200k", "1m", "5m")]
    ws = [w for w in ws if w is not None]
    out["Nsight warm TUI reopen flat: 5M − 200k ≤ 0.1 s"] = (
        round(max(ws) - min(ws), 3) if len(ws) == 3 else None, ", ".join(str(w) for w in ws))
    cold1, scan1 = _get(n1, "runs", "launchtui_cold", "wall_s"), _get(n1, "runs", "c_scan", "wall_s")
    out["Nsight 1M: cold report ≤ 1.7× C scan"] = (_ratio(cold1, scan1), f"{cold1} s / {scan1} s")
    nsa = _get(n1, "peer", "wall_s")
    out["Nsight 1M: ≥ 3× faster than nsys-ai"] = (_ratio(nsa, cold1), f"nsys-ai {nsa} s / launchtui {cold1} s")
    t20 = _get(n20, "tui", "cold", "peak_rss_mb")
    out["Nsight 20M: cold TUI peak RSS ≤ 6 GiB (MiB)"] = (t20, "")
    r20 = _get(n20, "runs", "launchtui_cold", "peak_rss_mb")
    out["Nsight 20M: cold report peak RSS ≤ 3 GiB (MiB)"] = (r20, "")
    m5, m20 = _marginal(n1, n5), _marginal(n5, n20)
    out["Nsight 20M: marginal µs/event 5M→20M ≤ 1M→5M"] = (m20, f"1M→5M {m5}")
    # the same steps in user time only: the code's own work, without the kernel's page faults, whose
    # price per page depends on the machine's recent history (a VM handing free pages to its host)
    u5, u20 = _marginal(n1, n5, "user_s"), _marginal(n5, n20, "user_s")
    out["Nsight 20M: user-time marginal, 5M→20M / 1M→5M (not a target)"] = (
        _ratio(u20, u5), f"user µs/event 1M→5M {u5}, 5M→20M {u20}")
    return out


def _ok(target: str, v, detail: str) -> bool:
    if "2.5×" in target:
        return v <= 2.5
    if "reopen ≤ 0.6" in target:
        return v <= 0.6
    if "flat" in target:
        return v <= 0.1
    if "1.7×" in target:
        return v <= 1.7
    if "≥ 3×" in target:
        return v >= 3
    if "6 GiB" in target:
        return v <= 6 * 1024
    if "3 GiB" in target:
        return v <= 3 * 1024
    if "marginal" in target:
        try:
            return v <= float(detail.split()[-1])
        except ValueError:
            return False
    return False


def rows(res: dict, previous: dict | None) -> list[dict]:
    """Every issue-24 target of this run beside the previous pass's figure."""
    now, before = values(res), values(previous)
    out = []
    for target, (v, detail) in now.items():
        status = ("pending" if v is None else "measured" if "not a target" in target
                  else "met" if _ok(target, v, detail) else "missed")
        out.append({"target": target, "measured": v, "previous": (before.get(target) or (None,))[0],
                    "status": status, "detail": detail if v is not None else "not measured in this run"})
    return out


def gate(res: dict, previous: dict | None) -> tuple[bool, str]:
    """(passed, one line): cold `report` 1M at most +20 % against the previous pass. Judged by the
    run's same-run A/B of the previous pass's commit against this tree (bench/ab_gate.py) when it
    has one; else by the ratio of the two runs' `report` / C scan ratios, which moves with the
    host (bench/MISSED.md), and the line says which."""
    ab = res.get("ab_gate") or {}
    if ab.get("status") == "ok":
        med = ab["median_wall_s"]
        return ab["ratio"] <= GATE, (
            f"bench gate: cold report 1M, this tree against {ab['baseline']} in the same run "
            f"({ab['rounds']} interleaved pairs): median {med['this tree']:.3f} s against {med['baseline']:.3f} s "
            f"({ab['ratio']:.2f}×, limit {GATE:.2f}×); across runs: {_across_runs(res, previous)}")
    ok, line = _gate_across_runs(res, previous)
    return ok, line + (f" (same-run A/B {ab['status']})" if ab.get("status") else "")


def _across_runs(res: dict, previous: dict | None) -> str:
    """The cross-run figure, shown beside the A/B and not judged."""
    return _gate_across_runs(res, previous)[1].removeprefix("bench gate: ")


def _gate_across_runs(res: dict, previous: dict | None) -> tuple[bool, str]:
    """(passed, one line): cold `report` 1M / C scan against the previous pass's, at most +20 %."""
    def norm(r):
        n1 = (r or {}).get("files", {}).get("nsys_1m")
        return _ratio(_get(n1, "runs", "launchtui_cold", "wall_s"), _get(n1, "runs", "c_scan", "wall_s"), 3)
    now, before = norm(res), norm(previous)
    cpu_now, cpu_before = (_get(r, "machine", "cpu_model") for r in (res, previous))
    if previous is not None and cpu_now != cpu_before:
        # the scan and launchtui do not scale alike across CPUs (0.38 / 0.80 / 0.40 s scans at 1M on
        # three VMs): a ratio of ratios across machines would fail or pass by the machine alone
        return True, (f"bench gate NOT CHECKED: the previous pass ran on {cpu_before!r}, this run on "
                      f"{cpu_now!r}; a full run here becomes the previous pass (bench/results.json)")
    if now is None or before is None:
        return True, (f"bench gate: not checked (cold report 1M / C scan: this run {now}, previous pass {before})")
    grew = now / before
    line = (f"bench gate: cold report 1M is {now}× the C scan against {before}× in the previous pass "
            f"({grew:.2f}×, limit {GATE:.2f}×)")
    return grew <= GATE, line


def markdown(res: dict, previous: dict | None, previous_name: str) -> str:
    ok, line = gate(res, previous)
    prev = (previous or {}).get("machine", {}).get("git") or "?"
    L = ["", "## Issue 24 targets beside the previous pass", "",
         f"Previous pass: `{previous_name}` (git {prev}, started {(previous or {}).get('started')}).", "",
         "| target | this run | previous pass | status | detail |", "|---|---:|---:|---|---|"]
    for r in rows(res, previous):
        L.append(f"| {r['target']} | {r['measured'] if r['measured'] is not None else '—'} | "
                 f"{r['previous'] if r['previous'] is not None else '—'} | {r['status']} | {r['detail']} |")
    L += ["", f"**{'PASSED' if ok else 'FAILED'}** — {line}", ""]
    return "\n".join(L)
