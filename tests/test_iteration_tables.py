"""The diff's stream table (analysis/iteration_tables.stream_order) against a plain-Python reading of
the same ops: any device and stream ids (negative, past 2^40, sparse), a subset or all streams."""
from __future__ import annotations

import numpy as np
import pytest

from launchtui.analysis.iteration_tables import stream_order


class _Ops:
    def __init__(self, device, stream, start):
        self.device, self.stream, self.start = device, stream, start

    def __len__(self):
        return len(self.start)


class _Trace:
    def __init__(self, device, stream, start):
        self.ops = _Ops(np.asarray(device, np.int32), np.asarray(stream, np.int64), np.asarray(start, np.int64))


def _expected(device, stream, start, keep):
    first: dict = {}
    for d, s, t in zip(device, stream, start):
        if keep and (d, s) not in keep:
            continue
        first[(d, s)] = min(first.get((d, s), t), t)
    devs = sorted({d for d, _ in first})
    rows = []
    for d in devs:
        mine = sorted((t, s) for (dd, s), t in first.items() if dd == d)   # ties: the lower stream id
        rows += [{"device_id": d, "stream_id": s, "first_use_ns": t, "device_rank": devs.index(d), "stream_rank": r}
                 for r, (t, s) in enumerate(mine)]
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_stream_order_is_a_plain_reading_of_the_ops(seed):
    rng = np.random.default_rng(seed)
    n = 2000
    dev_ids = rng.choice([0, 1, 3, 7, 2**20], size=3, replace=False)
    stream_ids = rng.choice([-1, 0, 7, 13, 2**33, 2**41 + 5, 2**62], size=5, replace=False)
    device = rng.choice(dev_ids, n).tolist()
    stream = rng.choice(stream_ids, n).tolist()
    start = rng.permutation(n * 3)[:n].tolist()          # distinct starts: the order is the data's
    tr = _Trace(device, stream, start)
    assert stream_order(tr) == _expected(device, stream, start, None)
    assert stream_order(tr, set()) == _expected(device, stream, start, None)    # empty: every stream
    pairs = sorted(set(zip(device, stream)))
    keep = set(pairs[::2]) | {(99, 99), (int(dev_ids[0]), 12345)}            # absent pairs are ignored
    assert stream_order(tr, keep) == _expected(device, stream, start, keep)
    assert stream_order(_Trace([], [], [])) == []
