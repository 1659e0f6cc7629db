"""The one in-memory tier (analysis/memo.py): per live trace, computed once per key, first kept wins,
gone with its trace."""
from __future__ import annotations

import gc
import threading
import time

from launchtui.analysis import memo


class _Trace:   # any object with an identity stands for a loaded trace here
    pass


def test_each_key_computes_once_across_threads():
    trace, calls, out = _Trace(), [], []

    def slow():
        calls.append(1)
        time.sleep(0.05)
        return object()

    threads = [threading.Thread(target=lambda: out.append(memo.of(trace).get("k", slow))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(out) == 8 and all(v is out[0] for v in out)


def test_put_keeps_the_first_value_and_peek_computes_nothing():
    trace = _Trace()
    m = memo.of(trace)
    assert m.peek("a") is memo.MISS
    first, second = [1], [2]
    assert m.put("a", first) is first and m.put("a", second) is first
    assert m.get("a", lambda: second) is first and memo.of(trace) is m
    assert memo.of(_Trace()).peek("a") is memo.MISS        # another trace: another memo


def test_a_traces_memo_goes_with_it():
    trace = _Trace()
    memo.of(trace).put("big", bytearray(10))
    key = id(trace)
    assert key in memo._MEMOS
    del trace
    gc.collect()
    assert key not in memo._MEMOS


def test_a_scoped_memo_drops_what_it_is_told_to():
    m = memo.TraceMemo()
    m.put(("groups", 1), "g")
    m.put(("spikes", 1), "s")
    m.drop(lambda k: k[0] == "groups")
    assert m.keys() == [("spikes", 1)] and m.peek(("groups", 1)) is memo.MISS
