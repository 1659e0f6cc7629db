"""What a case record is asked for: the iteration name, the small-kernel thresholds, the phase
depth, the grouping names and the backpressure options (docs/definitions.md §V, §14)."""
from __future__ import annotations

from dataclasses import dataclass

from launchtui.analysis.backpressure import Options
from launchtui.analysis.config import CONFIG


@dataclass(frozen=True)
class RecordOptions:
    iter_name: str | None = None
    min_launches: int = CONFIG.min_launches
    max_avg_us: float = CONFIG.max_avg_us
    phase_level: int = 1
    names: str = CONFIG.names     # how the top kernels group: "short" or "full" (distinguishing) names
    top: int = 3
    backpressure: Options = Options()
