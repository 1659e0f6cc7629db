"""Cost of reading call stacks (definitions.md §S1): Kineto read time with and without the stack
extraction, in one process, alternating runs; prints the ratio (medians).

    python bench/stacks_cost.py TRACE.json.gz [runs]
"""
from __future__ import annotations

import statistics
import sys
import time

from launchtui.trace import kineto_stacks
from launchtui.trace.load import read_trace


def main() -> None:
    path, runs = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    real_extract, real_build = kineto_stacks.extract, kineto_stacks.build
    with_s, without = [], []
    for _ in range(runs):
        t = time.perf_counter()
        tr = read_trace(path)
        with_s.append(time.perf_counter() - t)
        kineto_stacks.extract, kineto_stacks.build = (lambda *a: {}), (lambda *a: None)
        try:
            t = time.perf_counter()
            read_trace(path)
            without.append(time.perf_counter() - t)
        finally:
            kineto_stacks.extract, kineto_stacks.build = real_extract, real_build
    a, b = statistics.median(with_s), statistics.median(without)
    print(f"{path}: {len(tr.api)} API calls, {len(tr.stacks)} stack nodes; read {a:.2f} s with stacks, "
          f"{b:.2f} s without: ratio {a / b:.2f}")


if __name__ == "__main__":
    main()
