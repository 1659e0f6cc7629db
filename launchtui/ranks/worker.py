"""What runs on a worker for one rank: load (through the normal cache), summarise, return small."""
from __future__ import annotations

import os
import time


def process_rank(path: str, use_cache: bool = True) -> dict:
    """One rank's result: never raises for a bad trace (the others go on); timing kept apart.

    `meta_rank` is the rank the trace's own metadata states (Kineto distributedInfo.rank), or None.
    """
    from launchtui.errors import TraceError
    from launchtui.ranks.summary import rank_summary
    from launchtui.session import Index, Session, default_record
    t0 = time.perf_counter()
    out = {"file": path, "meta_rank": None, "status": "ok", "error": None, "summary": None}
    try:
        session = Session.open(path, use_cache=use_cache)
        trace = session.trace
        rank = trace.source.extra.get("rank")
        out["meta_rank"] = int(rank) if isinstance(rank, (int, float)) and not isinstance(rank, bool) else None
        if not trace.has_cuda_tables:
            raise TraceError(path, "no CUDA activity in this trace (no CUDA API calls or GPU ops)")
        session.get(Index())
        record = default_record()   # as `report --json` stores it: read when there, stored when not
        out["summary"] = rank_summary(trace, session.get(record)[0])
        session.commit(record)   # the model and, beside it, the index and the record, as the CLI stores them
    except TraceError as e:
        out.update(status="error", error=e.problem)
    except MemoryError:
        out.update(status="error", error="out of memory reading this trace")
    except Exception as e:  # a reader bug on one rank must not sink the job; say what it was
        out.update(status="error", error=f"internal error: {type(e).__name__}: {e}")
    out["seconds"] = round(time.perf_counter() - t0, 3)
    out["pid"] = os.getpid()
    return out
