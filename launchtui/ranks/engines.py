"""Where the per-rank work runs: the standard library's process pool, or a Dask cluster.

Both map `worker.process_rank` over file paths and hand back results in input order; `on_done(i,
result)` is called as each finishes (progress). Workers read files by path (a shared file system
for a cluster) and return only the small summary, so nothing large crosses a process or the network.
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context

from launchtui.cpus import usable_cpus
from launchtui.errors import UsageError
from launchtui.ranks.worker import process_rank

ENV_SCHEDULER = "LAUNCHTUI_DASK_SCHEDULER"


def _lost(path: str, why: str) -> dict:
    return {"file": path, "meta_rank": None, "status": "error", "error": why, "summary": None}


def _pool_round(paths: list[str], todo: list[int], workers: int, use_cache: bool, results: list, on_done) -> list[int]:
    """One pool over `todo`; returns the indices whose worker died (a death breaks the whole pool,
    so these include ranks that were merely in flight beside the one that killed it)."""
    broken = []
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(todo))), mp_context=get_context("fork")) as ex:
        futs = {ex.submit(process_rank, paths[i], use_cache): i for i in todo}
        for f in as_completed(futs):
            i = futs[f]
            try:
                results[i] = f.result()
            except BrokenProcessPool:
                broken.append(i)
                continue
            on_done(i, results[i])
    return sorted(broken)


def run_pool(paths: list[str], workers: int, use_cache: bool, on_done) -> tuple[list[dict], dict]:
    """Process pool (fork: no re-import per worker). The ranks of a broken pool are retried once in a
    fresh pool, then each alone in its own process, so only a rank that kills its worker every time
    is named as lost."""
    results: list[dict | None] = [None] * len(paths)
    todo = _pool_round(paths, list(range(len(paths))), workers, use_cache, results, on_done)
    if todo:
        todo = _pool_round(paths, todo, workers, use_cache, results, on_done)
    for i in todo:
        if _pool_round(paths, [i], 1, use_cache, results, on_done):
            results[i] = _lost(paths[i], "worker process died while reading this rank (three times)")
            on_done(i, results[i])
    return results, {"engine": "process-pool", "workers": workers, "scheduler": None}


def _client(address: str | None, workers: int):
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise UsageError("the Dask engine needs the cluster extra: pip install 'launchtui[cluster]'") from None
    if address is None:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=40)
        return Client(cluster), cluster, "local"
    try:
        if os.path.isfile(address):
            return Client(scheduler_file=address, timeout=30), None, address
        return Client(address, timeout=30), None, address
    except (OSError, TimeoutError, ValueError) as e:
        raise UsageError(f"cannot reach the Dask scheduler {address}: {e}") from None


def run_dask(paths: list[str], workers: int, use_cache: bool, on_done, address: str | None = None,
             client=None) -> tuple[list[dict], dict]:
    """Dask futures on a cluster (`address`: scheduler address or scheduler file), a given client,
    or a LocalCluster. Dask reruns the tasks of a lost worker elsewhere; a rank whose task still
    fails (e.g. KilledWorker) is named with the reason."""
    from distributed import as_completed as dask_completed
    own = client is None
    cluster = None
    where = "client"
    if own:
        client, cluster, where = _client(address, workers)
    try:
        n = len(client.scheduler_info().get("workers", {})) or workers
        futs = client.map(process_rank, [os.path.abspath(p) for p in paths], use_cache=use_cache, pure=False)
        index = {f.key: i for i, f in enumerate(futs)}
        results: list[dict | None] = [None] * len(paths)
        for f in dask_completed(futs):
            i = index[f.key]
            try:
                results[i] = f.result()
            except Exception as e:
                results[i] = _lost(paths[i], f"lost on the cluster: {type(e).__name__}: {e}")
            results[i]["file"] = paths[i]
            on_done(i, results[i])
        return results, {"engine": "dask", "workers": n, "scheduler": where}
    finally:
        if own:
            client.close()
            if cluster is not None:
                cluster.close()


def run(paths: list[str], engine: str | None = None, scheduler: str | None = None, workers: int | None = None,
        use_cache: bool = True, on_done=lambda i, r: None) -> tuple[list[dict], dict]:
    """Dispatch: a scheduler (option or $LAUNCHTUI_DASK_SCHEDULER) always means Dask; otherwise the
    process pool, measured faster than a Dask LocalCluster on one machine (bench/README.md §Many
    ranks), so the CLI offers no other local engine; `engine='dask'` exists for that benchmark."""
    scheduler = scheduler or os.environ.get(ENV_SCHEDULER) or None
    workers = workers or usable_cpus()
    t0 = time.perf_counter()
    if scheduler or engine == "dask":
        results, info = run_dask(paths, workers, use_cache, on_done, scheduler)
    else:
        results, info = run_pool(paths, workers, use_cache, on_done)
    info["wall_s"] = round(time.perf_counter() - t0, 3)
    return results, info
