"""Intermediate results that `report --json` needs in both the report and the case record,
computed once per command: the kernel groups (definitions.md §3-§4), the launch spikes (§6) and
the graph facts (§12), so the two documents do not each pay for them (bench/MISSED.md: the
record's cold CPU).

The mechanism is the memo's (analysis/memo.py); only the lifetime differs. These results hold
per-launch arrays, so they live for one command, not as long as the trace: the record drops the
groups before its peak stages (`release_groups`). A caller without a `Shared` gets a private one,
so results never depend on whether one was passed.

A command with a second CPU may also lend the record a helper lane (`lend_lane`, `defer`): parts
of the record that are pure and independent compute on it beside the record's own thread
(definitions.md §9: the same document whoever computes them).
"""
from __future__ import annotations

import copy
import threading
from concurrent.futures import Future
from typing import Any, Callable

import numpy as np

from launchtui.analysis.backpressure import Episode, Options, spikes
from launchtui.analysis.graphs_report import graphs_facts
from launchtui.analysis.launches import KernelGroups, groups_on_devices, kernel_groups
from launchtui.analysis.memo import MISS, TraceMemo
from launchtui.analysis.select import Selection
from launchtui.cpus import usable_cpus
from launchtui.trace.model import Trace


def side_by_side() -> bool:
    """Whether `report --json` may compute its record on a second thread beside the report: a
    second CPU to run on. At every size: at 20M GPU ops the command's peak is the record's last
    stages', which run alone either way (bench/MISSED.md)."""
    return usable_cpus() >= 2


# the record's independent parts compute beside each other (`Shared.lend_lane`) up to this many
# GPU ops: their transients then add to the gap stage's, the record's peak, and past this they would
# take a report over the per-size memory budgets bench/README.md holds it to (5M: 1,000 MiB)
LANE_MAX_OPS = 2_000_000


def lane_fits(trace: Trace) -> bool:
    """Whether a helper lane may run the record's independent parts beside it (`Shared.lend_lane`):
    a second CPU, and a trace small enough that their transients fit at once (LANE_MAX_OPS)."""
    return usable_cpus() >= 2 and len(trace.ops) <= LANE_MAX_OPS


class Deferred:
    """A pure computation that runs once, on whichever thread reaches it first: the helper lane
    when it is free, else the caller of `result()`. So a stage that defers work never waits for a
    lane that is busy elsewhere, and the value is the same whoever computed it."""

    def __init__(self, compute: Callable[[], Any]):
        self._compute: Callable[[], Any] | None = compute
        self._claim = threading.Lock()
        self._done: Future = Future()

    def run(self) -> None:
        """Compute now unless another thread has claimed it; an error is kept for `result()`."""
        if not self._claim.acquire(blocking=False):
            return
        compute, self._compute = self._compute, None   # its inputs go with it
        try:
            self._done.set_result(compute())
        except BaseException as e:   # re-raised by `result`, in the caller's thread
            self._done.set_exception(e)

    def result(self):
        """The value, computed here if no thread has begun it; raises what the computation raised."""
        self.run()
        return self._done.result()


class _Lane:
    """Deferred computations run in the order offered, on one daemon thread that lives while there
    is work (started by an offer that finds none running, ended when it finds nothing left: an
    idle lane holds no thread), and on any thread that would otherwise only wait (`serve_until`).
    A daemon: an interrupted command exits without waiting for it (what it runs is only waited for
    through `Deferred.result`, which computes in the caller when no thread has begun it)."""

    def __init__(self) -> None:
        self._todo: list[Deferred] = []
        self._ready = threading.Condition()
        self._serving = False

    def offer(self, d: Deferred) -> None:
        with self._ready:
            self._todo.append(d)
            self._ready.notify_all()
            if self._serving:
                return
            self._serving = True
        threading.Thread(target=self._serve, name="launchtui-Help", daemon=True).start()

    def _serve(self) -> None:
        while True:
            with self._ready:
                if not self._todo:
                    self._serving = False
                    return
                d = self._todo.pop(0)
            d.run()

    def serve_until(self, pending: Future) -> None:
        """Run offered work in this thread as well, until `pending` is done."""
        def wake(_) -> None:
            with self._ready:
                self._ready.notify_all()
        pending.add_done_callback(wake)
        while True:
            with self._ready:
                while not self._todo and not pending.done():
                    self._ready.wait()
                if pending.done():
                    return
                d = self._todo.pop(0)
            d.run()


class Shared:
    """One command's memo of a trace's kernel groups and spikes, keyed by their inputs."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self._memo = TraceMemo()
        self._group_claims: int | None = None   # stages still to read held groups; None: not held
        self._claims_lock = threading.Lock()
        self._lane: _Lane | None = None

    def lend_lane(self) -> None:
        """Run what a stage defers (`defer`) on a helper thread beside it: for a command whose
        deferred parts may hold their transients at once (`lane_fits`), so the second CPU is not
        left idle while one thread works through them."""
        if self._lane is None:
            self._lane = _Lane()

    def lane_lent(self) -> bool:
        """Whether `defer` hands work to a helper lane (else it computes at once, in order)."""
        return self._lane is not None

    def lane_defer(self) -> Callable[[Callable[[], Any]], Deferred] | None:
        """`defer` when a helper lane is lent, else None: for a stage that splits its work only when
        another thread can take part of it, and otherwise computes it as before."""
        return self.defer if self._lane is not None else None

    def wait_helping(self, pending: Future):
        """`pending.result()`, this thread running the lane's offered work meanwhile: a thread that
        would only wait lends its CPU to the stage it waits for."""
        if self._lane is not None:
            self._lane.serve_until(pending)
        return pending.result()

    def defer(self, compute: Callable[[], Any]) -> Deferred:
        """`compute`, pure and free of shared mutable state, begun on the helper lane when one is
        lent, else computed now (in program order, so a sequential command's peak is unchanged);
        its value from the returned `Deferred.result()`."""
        d = Deferred(compute)
        if self._lane is not None:
            self._lane.offer(d)
        else:
            d.run()
        return d

    def hold_groups(self, stages: int) -> None:
        """Keep the groups until each of `stages` computing at once has released them: none drops
        them under another (`release_groups` counts down), and each cut is taken from the one
        computation (`kernel_groups_on`). The last release drops them, so a stage that outlives
        the others (the record's gaps, its peak) does not carry them (bench/MISSED.md, 20M)."""
        with self._claims_lock:
            self._group_claims = stages

    def kernel_groups(self, sel: Selection, names: str = "short") -> KernelGroups:
        return self._memo.get(("groups", sel, names), lambda: kernel_groups(self.trace, sel, names))

    def kernel_groups_on(self, sel: Selection, devices: list[int], names: str = "short") -> KernelGroups:
        """`kernel_groups(trace, sel.with_devices(devices), names)`: cut from the selection's groups
        when they are already here (the same table), else computed for those devices only."""
        held = self._group_claims is not None
        have = self.kernel_groups(sel, names) if held else self._memo.peek(("groups", sel, names))
        if have is not MISS:
            return groups_on_devices(have, devices)
        return kernel_groups(self.trace, sel.with_devices(devices), names)

    def release_groups(self) -> None:
        """This stage is done with the groups (per-launch arrays): dropped now, or, while they are
        held (`hold_groups`), when the last stage holding them releases them."""
        with self._claims_lock:
            if self._group_claims is not None:
                self._group_claims -= 1
                if self._group_claims > 0:
                    return
                self._group_claims = None
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
