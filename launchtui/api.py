"""pandas API for notebooks: `t = launchtui.open(path)`; every method returns a DataFrame.

The numpy model stays the core; frames are built here, at the boundary. Times are int64 ns on the
trace's own clock (`*_ns` columns) with `timedelta64[ns]` views for durations (no copy: a view of
the same int64 buffer); names are pandas categoricals over the trace's string table. Rows and
values equal the CLI's JSON (`launchtui report --json`, `report --by source --json`).
"""
from __future__ import annotations

import os

import numpy as np
import pandas as pd

from launchtui.analysis import sources as src
from launchtui.analysis.launches import launched_kernels, name_ids, small_kernel_table
from launchtui.analysis.queue import stream_series
from launchtui.analysis.select import (WHOLE, SelectionSpec, build_selection, op_mask, parse_device,
                                      time_window)
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.model import API_KIND_NAMES, OP_KERNEL, OP_KIND_NAMES, Trace

_RECORD_TABLES = ("top", "nccl", "near_misses", "streams")


def open(path: str | os.PathLike, trim: tuple[float, float] | None = None, device: int | str | None = None,
         nvtx: str | None = None, use_cache: bool = True, capture: str | os.PathLike | None = None) -> "TraceFrames":
    """Read a trace (through the same per-user cache as the CLI) into a read-only handle.

    `trim`: (a, b) seconds on the trace's clock, as `--trim A B`; `device`: a device number, or
    None for all (`--device`); `nvtx`: as `--nvtx NAME`; `capture`: a capture trace of the same
    program, as `--capture` (its labels: `captured_from()`).
    """
    from launchtui.session import Session
    session = Session.open(path, use_cache=use_cache)
    trace = session.trace
    spec = SelectionSpec(device=parse_device(device, path), trim_s=None if trim is None else
                         (float(trim[0]), float(trim[1])), nvtx=nvtx or None)
    sel = build_selection(trace, spec)
    session.commit()
    frames = TraceFrames(trace, sel, session)
    if capture is not None:
        from launchtui.capture_join import capture_join
        frames._join = capture_join(trace, capture, use_cache)
    return frames


def open_ranks(*inputs: str | os.PathLike, workers: int | None = None, use_cache: bool = True) -> pd.DataFrame:
    """One job's per-rank summary (`launchtui report DIR --json` ranks, one row per rank): a
    directory, several files or a glob. The job's kernel table, stragglers and verdict are in
    `frame.attrs`."""
    from launchtui.ranks.job import run_job
    doc = run_job([str(p) for p in inputs], workers=workers, use_cache=use_cache, progress=lambda i, r: None)
    df = pd.DataFrame(doc["ranks"])
    df.attrs.update(kernels=doc["kernels"], stragglers=doc["stragglers"], verdict=doc["verdict"])
    return df


class TraceFrames:
    """A loaded trace and a selection; methods return DataFrames and never change the trace."""

    def __init__(self, trace: Trace, sel=WHOLE, session=None):
        from launchtui.session import Session
        self._trace = trace
        self._sel = sel
        # the trace's results: a record `report --json`, `record` or the TUI stored is read, not
        # recomputed, and one computed here is kept (in memory, and beside the model when cached)
        self._session = session if session is not None else Session(trace)
        self._join = None      # open(..., capture=): the capture ↔ replay join (definitions §12.6)

    def __repr__(self) -> str:
        t = self._trace
        return (f"<launchtui trace {t.source.path!r}: {len(t.ops)} GPU ops, {len(t.api)} API calls, "
                f"{len(t.ranges)} ranges; selection: {self._sel.label}>")

    @property
    def trace(self) -> Trace:
        """The numpy model underneath (shared with the CLI's analyses; treat as read-only)."""
        return self._trace

    @property
    def selection(self) -> dict:
        return self._sel.to_json()

    # --- helpers -------------------------------------------------------------------------------
    def _cat(self, ids: np.ndarray) -> pd.Categorical:
        """String ids -> categorical over the distinct strings used; id -1 -> missing."""
        used, codes = unique_sorted(np.asarray(ids), return_inverse=True)
        codes = codes.reshape(-1)
        if len(used) and used[0] < 0:
            used, codes = used[1:], codes - 1
        return pd.Categorical.from_codes(codes, categories=[self._trace.strings[i] for i in used.tolist()])

    @staticmethod
    def _td(ns: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(ns, np.int64).view("m8[ns]")

    # --- frames --------------------------------------------------------------------------------
    def kernels(self) -> pd.DataFrame:
        """Every selected GPU kernel: device, stream, times, short and full name, launching API row."""
        ops = self._trace.ops
        idx = np.nonzero(op_mask(self._trace, self._sel) & (ops.kind == OP_KERNEL))[0]
        start, end = ops.start[idx], ops.end[idx]
        return pd.DataFrame({
            "device": ops.device[idx], "stream": ops.stream[idx].astype(np.int64), "start_ns": start, "end_ns": end,
            "duration": self._td(end - start), "name": self._cat(ops.name[idx]),
            "full_name": self._cat(ops.full_name[idx]), "correlation": ops.corr[idx].astype(np.int64),
            "api_row": ops.api[idx],
        }, index=pd.Index(idx, name="op"))

    def launches(self) -> pd.DataFrame:
        """API calls joined to the GPU ops they launched (one row per op): API, queue and kernel
        times as definitions.md §3-§4 (queue < 0 kept here; the tables count only queue >= 0)."""
        t = self._trace
        ops, api = t.ops, t.api
        idx = np.nonzero(op_mask(t, self._sel) & (ops.api >= 0))[0]
        a = ops.api[idx]
        th = api.thread[a]
        return pd.DataFrame({
            "api_row": a, "api_name": self._cat(api.name[a]),
            "api_kind": pd.Categorical.from_codes(api.kind[a].astype(np.int8), categories=list(API_KIND_NAMES)),
            "pid": t.threads.pid[th], "tid": t.threads.tid[th], "api_start_ns": api.start[a],
            "api_end_ns": api.end[a], "api": self._td(api.end[a] - api.start[a]),
            "queue": self._td(ops.start[idx] - api.end[a]), "device": ops.device[idx],
            "stream": ops.stream[idx].astype(np.int64),
            "op_kind": pd.Categorical.from_codes(ops.kind[idx].astype(np.int8), categories=list(OP_KIND_NAMES)),
            "op_name": self._cat(ops.name[idx]), "op_start_ns": ops.start[idx], "op_end_ns": ops.end[idx],
            "op_duration": self._td(ops.end[idx] - ops.start[idx]), "correlation": ops.corr[idx].astype(np.int64),
        }, index=pd.Index(idx, name="op"))

    def small_kernels(self, min_launches: int = 100, max_avg_us: float = 10.0, names: str = "short") -> pd.DataFrame:
        """The small-and-frequent kernel table, all rows (`report --json` small_kernels, then the
        NCCL rows, with `--limit 0`)."""
        rows = small_kernel_table(self._trace, self._sel, min_launches, max_avg_us, 0, names, with_phase=True)
        df = pd.DataFrame(rows)
        if len(df):
            df["kernel_name"] = df["kernel_name"].astype("category")
        return df

    def queue_depth(self, device: int, stream: int) -> pd.DataFrame:
        """Pending launches on one stream as a step series (definitions.md §5): depth from each
        time until the next row's."""
        for s in stream_series(self._trace):
            if s.device == int(device) and s.stream == int(stream):
                t, v = s.t, s.v
                w = time_window(self._sel, self._trace)
                if w is not None:  # keep the step in effect at the window start
                    lo = max(int(np.searchsorted(t, w[0], side="right")) - 1, 0)
                    hi = int(np.searchsorted(t, w[1], side="right"))
                    t, v = t[lo:hi], v[lo:hi]
                return pd.DataFrame({"t_ns": t, "depth": v.astype(np.int32)})  # the index may hold int16
        have = ", ".join(f"({d}, {s})" for d, s in self._trace.streams())
        raise KeyError(f"no GPU ops on device {device} stream {stream}; streams: {have}")

    def nvtx(self) -> pd.DataFrame:
        """NVTX ranges (Nsight) or user annotations (Kineto) overlapping the selection."""
        t = self._trace
        rg = t.ranges
        m = np.ones(len(rg), bool)
        w = time_window(self._sel, t)
        if w is not None:
            m &= (rg.end > w[0]) & (rg.start < w[1])
        idx = np.nonzero(m)[0]
        th = rg.thread[idx]
        return pd.DataFrame({
            "text": self._cat(rg.text[idx]), "domain": self._cat(rg.domain[idx]), "pid": t.threads.pid[th],
            "tid": t.threads.tid[th], "depth": rg.depth[idx], "start_ns": rg.start[idx], "end_ns": rg.end[idx],
            "duration": self._td(rg.end[idx] - rg.start[idx]),
        }, index=pd.Index(idx, name="range"))

    def iterations(self, name: str | None = None) -> pd.DataFrame:
        """The iterations the case record uses (`record --json` iterations: `ProfilerStep#N` ranges,
        ranges named `name`, or a heuristic; `attrs` say which), with the selected kernel launches
        whose call starts inside each."""
        it = self._record_doc(iter_name=name).get("iterations") or {}
        start = np.asarray(it.get("starts_ns", []), np.int64)
        end = np.asarray(it.get("ends_ns", []), np.int64)
        k = launched_kernels(self._trace, self._sel)
        calls = np.sort(self._trace.api.start[self._trace.ops.api[k]])
        df = pd.DataFrame({"start_ns": start, "end_ns": end, "duration": self._td(end - start),
                           "launches": np.searchsorted(calls, end) - np.searchsorted(calls, start)})
        df.attrs.update({key: it.get(key) for key in ("source", "name", "heuristic", "note")})
        return df

    def sources(self, source_filter: str | None = None, names: str = "short") -> pd.DataFrame:
        """Call sites of the launches (`report --by source --json` sites, all rows); `coverage` and
        the how-to-record hint are in `frame.attrs`."""
        doc = src.source_table(self._trace, self._sel, src.SourceFilter.parse(source_filter), 0, names)
        df = pd.DataFrame(doc["sites"], columns=["site", "frame", "file", "line", "function", "launches", "small_launches",
                                                 "launch_api_ms", "launches_per_iteration", "top_kernels"])
        df.attrs.update(coverage=doc["coverage"], per=doc["per"], iterations=doc["iterations"], hint=doc["hint"])
        return df

    def record(self, **options) -> dict:
        """The case record (`launchtui record --json`) as a dict whose row lists (`top`, `nccl`,
        `near_misses`, `streams`) are DataFrames; `options` as `RecordOptions` (iter_name, top, ...)."""
        doc = dict(self._record_doc(**options))   # the session's document is shared: its copy
        for key in _RECORD_TABLES:
            if key in doc:
                doc[key] = pd.DataFrame(doc[key])
        return doc

    def _record_doc(self, **options) -> dict:
        """The case record of the selection at `options` (RecordOptions), through the session."""
        from launchtui.analysis.record_options import RecordOptions
        from launchtui.session import Record
        return self._session.get(Record(self._sel, RecordOptions(**options)))[0]

    def launch_sources(self, source_filter: str | None = None) -> pd.DataFrame:
        """Per kernel launch: its call site (innermost user frame) and innermost frame."""
        t = self._trace
        k = launched_kernels(t, self._sel)
        a = t.ops.api[k]
        node, user = src.launch_sites(t, a, src.SourceFilter.parse(source_filter))
        fr = t.stacks.frame if len(t.stacks) else np.zeros(1, np.int32)
        site = np.where(user >= 0, fr[np.maximum(user, 0)], -1)
        inner = np.where(node >= 0, fr[np.maximum(node, 0)], -1)
        used, codes = unique_sorted(site, return_inverse=True)
        codes = codes.reshape(-1)
        if len(used) and used[0] < 0:
            used, codes = used[1:], codes - 1
        return pd.DataFrame({
            "api_row": a, "kernel_name": self._cat(name_ids(t)[k]),
            "site": pd.Categorical.from_codes(codes, categories=[src.site_label(t.strings[i]) for i in used.tolist()]),
            "innermost_frame": self._cat(inner), "stack_node": node,
        }, index=pd.Index(k, name="op"))

    def captured_from(self) -> pd.DataFrame:
        """Per replayed GPU op (open(..., capture=...)): what it was captured from, or why it is
        unmatched (`report --capture --json` graph_join; definitions §12.6); the matched share and
        the per-graph table are in `frame.attrs`."""
        from launchtui.analysis.graphs_join import REASONS
        from launchtui.analysis.graphs_join_report import join_document
        j = self._join
        if j is None:
            raise ValueError("no capture trace: open the trace with launchtui.open(path, capture=CAPTURE_PATH)")
        t, cap = self._trace, j.captured
        keep = op_mask(t, self._sel)[j.op]
        s = j.source[keep]
        ok = s >= 0
        pick = lambda col: [col[int(x)] if x >= 0 else None for x in s.tolist()]   # noqa: E731 (per replayed op)
        c = np.where(ok, cap.capture[np.maximum(s, 0)] + 1, -1) if len(cap.call) else np.full(len(s), -1)
        df = pd.DataFrame({
            "replay": j.replay[keep], "graph": j.replays.graph[j.replay[keep]] + 1,
            "node": np.where(j.node[keep] >= 0, j.node[keep] + 1, -1), "kernel": self._cat(t.ops.name[j.op[keep]]),
            "matched": ok, "by": [j.matched_by[int(r)] or None for r in j.replay[keep].tolist()],
            "capture": c, "captured_op": pick(cap.op), "range": pick(cap.range), "site": pick(cap.site),
            "reason": [None if r == 0 else REASONS[int(r)] for r in j.reason[keep].tolist()],
        }, index=pd.Index(j.op[keep], name="op"))
        doc = join_document(t, j)
        doc.pop("kernels")
        df.attrs.update(doc)
        return df
