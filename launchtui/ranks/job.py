"""Run a whole job: discover → engine → ranks → combine; timing and engine details under `run`."""
from __future__ import annotations

import sys

from launchtui.errors import TraceError
from launchtui.ranks import engines
from launchtui.ranks.combine import combine
from launchtui.ranks.discover import assign_ranks, find_traces


class Progress:
    """`ranks done / total` with a bar on stderr, only when it is a terminal."""

    def __init__(self, total: int, stream=None, width: int = 30):
        self.total, self.done, self.failed, self.width = total, 0, 0, width
        self.stream = stream if stream is not None else sys.stderr
        self.on = hasattr(self.stream, "isatty") and self.stream.isatty()

    def __call__(self, i: int, result: dict) -> None:
        self.done += 1
        self.failed += result["status"] != "ok"
        if self.on:
            fill = self.width * self.done // max(self.total, 1)
            bad = f", {self.failed} failed" if self.failed else ""
            self.stream.write(f"\r[{'#' * fill}{'.' * (self.width - fill)}] {self.done}/{self.total} ranks{bad}")
            if self.done == self.total:
                self.stream.write("\n")
            self.stream.flush()


def run_job(inputs: list[str], engine: str | None = None, scheduler: str | None = None,
            workers: int | None = None, use_cache: bool = True, progress=None) -> dict:
    files = [str(p) for p in find_traces(inputs)]
    on_done = progress if progress is not None else Progress(len(files))
    results, info = engines.run(files, engine, scheduler, workers, use_cache, on_done)
    if not any(r["status"] == "ok" for r in results):
        first = results[0]
        raise TraceError(inputs[0] if len(inputs) == 1 else None,
                         f"0 of {len(files)} ranks read (first: {first['file']}: {first['error']})")
    assigned = assign_ranks(files, [r["meta_rank"] for r in results])
    doc = combine(assigned, results)
    secs = [r.get("seconds", 0.0) for r in results]
    info.update(ranks=len(files), rank_seconds_sum=round(sum(secs), 3), rank_seconds_max=max(secs, default=0.0))
    doc["run"] = info
    return doc


def results_only(doc: dict) -> dict:
    """The document without `run`: what must be identical across engines."""
    return {k: v for k, v in doc.items() if k != "run"}
