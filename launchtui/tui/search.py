"""`/` while the timeline has focus: jump to the next GPU op whose name contains the text
(case-insensitive), on the shown device(s), after the cursor; Enter on the same text again goes to
the one after. The match is per distinct name, then one searchsorted over the ops' starts."""
from __future__ import annotations

import numpy as np


def matching_names(trace, text: str) -> np.ndarray:
    """String ids whose text contains `text`, case-insensitively (a loop per distinct name)."""
    t = text.lower()
    ids = np.unique(np.concatenate([trace.ops.name, trace.ops.full_name]))
    ids = ids[ids >= 0]
    return np.array([i for i in ids.tolist() if t in trace.strings[i].lower()], np.int64)


def next_op(trace, text: str, after: int, device: int | None, direction: int = 1) -> int:
    """The GPU op after (before, direction -1) time `after` whose short or full name contains
    `text`, on `device` (None: any); -1 when there is none."""
    ops = trace.ops
    ids = matching_names(trace, text)
    if not len(ids) or not len(ops):
        return -1
    hit = np.isin(ops.name, ids) | np.isin(ops.full_name, ids)
    if device is not None:
        hit &= ops.device == device
    k = np.flatnonzero(hit)
    if not len(k):
        return -1
    st = ops.start[k]
    if direction > 0:
        later = k[st > after]
        return int(later[np.argmin(ops.start[later])]) if len(later) else -1
    earlier = k[st < after]
    return int(earlier[np.argmax(ops.start[earlier])]) if len(earlier) else -1
