"""Many ranks: a directory of per-rank traces analysed where each is loaded, combined in the parent.

discover → engine (process pool or Dask) runs `worker.process_rank` per file → `combine` → `render`.
Workers return only `summary.rank_summary` (small, JSON-able); whole traces never cross a process.
"""
