"""Intermediate results that `report --json` needs in both the report and the case record,
computed once per command: the kernel groups (definitions.md §3-§4), the launch spikes (§6) and
the graph facts (§12), so the two documents do not each pay for them (bench/MISSED.md: the
record's cold CPU).

The mechanism is the memo's (analysis/memo.py); only the lifetime differs. These results hold
per-launch arrays, so they live for one command, not as long as the trace: the record drops the
groups before its peak stages (`release_groups`). A caller without a `Shared` gets a private one,
so results never depend on whether one was passed.
"""
from __future__ import annotations

import copy

import numpy as np

from launchtui.analysis.backpressure import Episode, Options, spikes
from launchtui.analysis.graphs_report import graphs_facts
from launchtui.analysis.launches import KernelGroups, groups_on_devices, kernel_groups
from launchtui.analysis.memo import MISS, TraceMemo
from launchtui.analysis.select import Selection
from launchtui.cpus import usable_cpus
from launchtui.trace.model import Trace


# `report --json` computes its report and its record at once (side_by_side) up to this many GPU
# ops: the two stages' transients then coexist (their cost: bench/MISSED.md), so past this they
# run one after the other and a 20M trace's peak stays the record's alone (issue 24's 3 GiB)
SIDE_BY_SIDE_MAX_OPS = 8_000_000


def side_by_side(trace: Trace) -> bool:
    """Whether the report and the record may compute at once: a second CPU to run on, and a trace
    small enough that both stages' transients fit beside each other (SIDE_BY_SIDE_MAX_OPS)."""
    return usable_cpus() >= 2 and len(trace.ops) <= SIDE_BY_SIDE_MAX_OPS


class Shared:
    """One command's memo of a trace's kernel groups and spikes, keyed by their inputs."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self._memo = TraceMemo()
        self._hold_groups = False

    def hold_groups(self) -> None:
        """Keep the groups for the whole command, for two stages computing at once: neither
        drops them under the other (`release_groups` does nothing), and each cut is taken from
        the one computation (`kernel_groups_on`)."""
        self._hold_groups = True

    def kernel_groups(self, sel: Selection, names: str = "short") -> KernelGroups:
        return self._memo.get(("groups", sel, names), lambda: kernel_groups(self.trace, sel, names))

    def kernel_groups_on(self, sel: Selection, devices: list[int], names: str = "short") -> KernelGroups:
        """`kernel_groups(trace, sel.with_devices(devices), names)`: cut from the selection's groups
        when they are already here (the same table), else computed for those devices only."""
        have = self.kernel_groups(sel, names) if self._hold_groups else self._memo.peek(("groups", sel, names))
        if have is not MISS:
            return groups_on_devices(have, devices)
        return kernel_groups(self.trace, sel.with_devices(devices), names)

    def release_groups(self) -> None:
        """Drop the groups (per-launch arrays): the record's later stages are its peak memory.
        Nothing while they are held (`hold_groups`)."""
        if not self._hold_groups:
            self._memo.drop(lambda key: key[0] == "groups")

    def held(self) -> set[str]:
        """What is kept now: "groups", "spikes", "graphs"."""
        return {key[0] for key in self._memo.keys()}

    def spikes(self, sel: Selection, opt: Options) -> list[Episode]:
        return self._memo.get(("spikes", sel, opt), lambda: spikes(self.trace, sel, opt))

    def graphs(self, sel: Selection) -> tuple[dict | None, np.ndarray]:
        """`graphs_report.graphs_facts(trace, sel)`, computed once. Each call gets its own copy of
        the document: the record adds its scope and eager remainder to its copy, which the report's
        must not show."""
        doc, flagged = self._memo.get(("graphs", sel), lambda: graphs_facts(self.trace, sel))
        return copy.deepcopy(doc), flagged
