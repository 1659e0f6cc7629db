"""Every default of the analyses in one place (docs/definitions.md gives each rule's reason).

`CONFIG` is what the CLI's option defaults, the report, queue, backpressure, launches, lanes and the
TUI's legend and help read. Override per run with `dataclasses.replace(CONFIG, ...)`.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AnalysisConfig:
    # small-and-frequent kernel table (definitions.md §4)
    min_launches: int = 100            # launches a (device, name) group needs
    max_avg_us: float = 10.0           # its average kernel time must be below this
    table_limit: int = 20              # rows a report shows (0 = all)
    names: str = "short"               # group by Nsight's short name, or "full" (distinguishing name)
    # pending-launch queue (§5, §6): the documented limit is ~1024 pending launches per stream
    queue_threshold: int = 1000        # depth that marks a backpressure episode ("approaching")
    queue_full: int = 1020             # depth that marks it "saturated"
    merge_gap_us: float = 1000.0       # dips below the threshold shorter than this join two episodes
    # launch spikes (§6): slower than spike_us AND spike_factor × the thread's median launch time
    spike_us: float = 100.0
    spike_factor: float = 10.0
    # case record verdict and diff (§V9): host- or launch-bound when host-bound time is at least this
    # share of the iteration and the queue runs dry (domain.md §4's "10 % of the iteration" rule)
    launch_bound_share: float = 0.10
    # what graphing would buy (§12.5)
    graph_launch_us: float = 10.0      # one graph launch call's host cost when the trace has none
    graph_node_gap_us: float = 1.0     # GPU-side gap between graphed nodes when the trace cannot measure one
    whatif_min_launches: int = 10      # eager launches per iteration a phase needs to be estimated
    whatif_iterations: int = 64        # steady iterations re-timed (evenly spaced)
    # timeline (TUI)
    small_kernel_ns: int = 10_000      # drawn as a small kernel below this duration
    nvtx_depth: int = 3                # NVTX nesting levels drawn as lanes

    @property
    def thresholds(self) -> tuple[int, int]:
        return (self.queue_threshold, self.queue_full)


CONFIG = AnalysisConfig()
