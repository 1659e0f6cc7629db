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
from launchtui.trace.model import Trace


class Shared:
    """One command's memo of a trace's kernel groups and spikes, keyed by their inputs."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self._memo = TraceMemo()

    def kernel_groups(self, sel: Selection, names: str = "short") -> KernelGroups:
        return self._memo.get(("groups", sel, names), lambda: kernel_groups(self.trace, sel, names))

    def kernel_groups_on(self, sel: Selection, devices: list[int], names: str = "short") -> KernelGroups:
        """`kernel_groups(trace, sel.with_devices(devices), names)`: cut from the selection's groups
        when they are already here (the same table), else computed for those devices only."""
        have = self._memo.peek(("groups", sel, names))
        if have is not MISS:
            return groups_on_devices(have, devices)
        return kernel_groups(self.trace, sel.with_devices(devices), names)

    def release_groups(self) -> None:
        """Drop the groups (per-launch arrays): the record's later stages are its peak memory."""
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
