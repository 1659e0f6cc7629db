"""Intermediate results that `report --json` needs in both the report and the case record,
computed once per command: the kernel groups (definitions.md §3-§4) and the launch spikes (§6),
so the two documents do not each pay for them (bench/MISSED.md: the record's cold CPU). A caller
without a `Shared` gets a private one, so results never depend on whether one was passed.
"""
from __future__ import annotations

from launchtui.analysis.backpressure import Episode, Options, spikes
from launchtui.analysis.launches import KernelGroups, groups_on_devices, kernel_groups
from launchtui.analysis.select import Selection
from launchtui.trace.model import Trace


class Shared:
    """Memo of one trace's kernel groups and spikes, keyed by their inputs; read-only results."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self._groups: dict[tuple, KernelGroups] = {}
        self._spikes: dict[tuple, list[Episode]] = {}

    def kernel_groups(self, sel: Selection, names: str = "short") -> KernelGroups:
        key = (sel, names)
        if key not in self._groups:
            self._groups[key] = kernel_groups(self.trace, sel, names)
        return self._groups[key]

    def kernel_groups_on(self, sel: Selection, devices: list[int], names: str = "short") -> KernelGroups:
        """`kernel_groups(trace, sel.with_devices(devices), names)`: cut from the selection's groups
        when they are already here (the same table), else computed for those devices only."""
        have = self._groups.get((sel, names))
        if have is not None:
            return groups_on_devices(have, devices)
        return kernel_groups(self.trace, sel.with_devices(devices), names)

    def release_groups(self) -> None:
        """Drop the groups (per-launch arrays): the record's later stages are its peak memory."""
        self._groups.clear()

    def spikes(self, sel: Selection, opt: Options) -> list[Episode]:
        key = (sel, opt)
        if key not in self._spikes:
            self._spikes[key] = spikes(self.trace, sel, opt)
        return self._spikes[key]
