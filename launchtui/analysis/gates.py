"""`--fail-if` gates on a diff (definitions.md §D): `METRIC OP VALUE`, e.g.

    launches_per_iter>+5%      relative change: (after − before) / before, in percent
    exposed_overhead_ms>+0.5   signed number: the change after − before, in the metric's unit
    share>0.10                 unsigned number: the after value itself

OP is one of > >= < <=. Several gates: repeat `--fail-if`, or separate them with commas. A gate
whose figure the traces do not provide is an error, never a silent pass.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from launchtui.analysis.diff import METRICS
from launchtui.errors import UsageError

ALIASES = {"launches": "launches_per_iter", "overhead_share": "share", "exposed_overhead": "exposed_overhead_ms",
           "iteration": "iteration_ms", "graph_launches": "graph_launches_per_iter"}
_GATE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(>=|<=|>|<)\s*([+-]?)\s*(\d+(?:\.\d*)?|\.\d+)\s*(%?)\s*$")
_OPS = {">": lambda x, y: x > y, ">=": lambda x, y: x >= y, "<": lambda x, y: x < y, "<=": lambda x, y: x <= y}


class GateError(UsageError):
    """A gate that does not parse or cannot be evaluated (exit status 2)."""


@dataclass(frozen=True)
class Gate:
    text: str
    metric: str
    op: str
    value: float
    mode: str        # "rel" (percent change), "delta" (signed change) or "abs" (after value)

    def describe(self) -> str:
        return {"rel": "relative change", "delta": "change", "abs": "after value"}[self.mode]


def parse_gate(text: str) -> Gate:
    m = _GATE.match(text)
    if not m:
        raise GateError(f"--fail-if {text!r}: expected METRIC OP VALUE, e.g. launches_per_iter>+5%, "
                        "exposed_overhead_ms>+0.5 or share>0.10")
    name, op, sign, num, pct = m.groups()
    metric = ALIASES.get(name, name)
    if metric not in METRICS:
        raise GateError(f"--fail-if {text!r}: unknown metric {name!r}; choose from {', '.join(METRICS)}")
    value = float(num) * (-1 if sign == "-" else 1)
    mode = "rel" if pct else "delta" if sign else "abs"
    return Gate(text.strip(), metric, op, value, mode)


def parse_gates(exprs) -> list[Gate]:
    """Gates from `--fail-if` values (each may hold several, separated by commas)."""
    return [parse_gate(part) for e in exprs or () for part in e.split(",") if part.strip() or not e.strip()]


def observed(gate: Gate, doc: dict) -> float:
    """The figure a gate compares: percent change, change, or after value."""
    c = doc["per_iteration"].get(gate.metric)
    if c is None or c["after"] is None or (gate.mode != "abs" and c["before"] is None):
        raise GateError(f"--fail-if {gate.text!r}: {METRICS[gate.metric][0]} is not available for these traces")
    if gate.mode == "abs":
        return c["after"]
    if gate.mode == "delta":
        return c["delta"]
    if c["rel"] is None:   # before was 0, after is not: an unbounded relative change
        return math.copysign(math.inf, c["delta"])
    return c["rel"] * 100.0


def evaluate(gates: list[Gate], doc: dict) -> list[tuple[Gate, float]]:
    """The gates that trip, each with the figure it saw (errors first, so a bad gate never hides)."""
    seen = [(g, observed(g, doc)) for g in gates]
    return [(g, x) for g, x in seen if _OPS[g.op](x, g.value)]


def tripped_line(gate: Gate, x: float, doc: dict) -> str:
    c = doc["per_iteration"][gate.metric]
    unit = {"rel": " %", "delta": "", "abs": ""}[gate.mode]
    return (f"gate tripped: {gate.text} ({METRICS[gate.metric][0]} {gate.describe()} {x:+.4g}{unit}; "
            f"before {c['before']:.6g}, after {c['after']:.6g})")
