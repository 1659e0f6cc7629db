"""The CPUs this process may run on: the one count that sizes launchtui's parallel work (the ranks'
worker pool, `report --json` computing its record beside the report)."""
from __future__ import annotations

import os


def usable_cpus() -> int:
    """The CPUs in this process's affinity mask (a batch job's share of the node, not the node's
    count); os.cpu_count() where the platform has no mask."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
