"""Source attribution: from kernel launch to the line of user code (docs/definitions.md §S1-§S3).

A launch's call site is the innermost *user* frame of its call stack (§S2); the whole stack stays
available. Work is per distinct stack node, then one gather per launch.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass

import numpy as np

from launchtui.analysis import iterations as itr
from launchtui.analysis import memo
from launchtui.analysis.config import CONFIG
from launchtui.analysis.exposed import launch_devices
from launchtui.analysis.launches import launched_kernels, name_ids
from launchtui.analysis.select import WHOLE, Selection, time_window
from launchtui.trace.arrays import unique_sorted
from launchtui.trace.grouping import dense_groups
from launchtui.trace.model import STACK_BACKWARD, Trace
from launchtui.trace.order import string_ranks
from launchtui.trace.stacks import stack_frames

NO_USER_HINT = ("the stacks hold no user frame under the rule of definitions.md §S2 (every frame is library "
                "code); --source-filter +TEXT marks files containing TEXT as user code")
RECORD_HINT = ("no call stacks in this trace: record them with torch.profiler.profile(with_stack=True), "
               "or nsys profile --python-backtrace=cuda --cudabacktrace=all")
TOP_KERNELS = 3

_FRAME_RE = re.compile(r"^(?P<file>.*?)\((?P<line>\d+)\): (?P<func>.*)$")
_NATIVE_RE = re.compile(r"^(?P<func>.*) \[(?P<file>[^\[\]]*)\]$")  # Nsight: "symbol [module]"
_SYSTEM_DIRS = ("/usr/", "/lib", "/opt/", "/snap/", "/nix/")
_LIBRARY_PATH_RE = re.compile(r"site-packages|dist-packages|/lib/python\d|torchinductor|^<|^\[")
# top-level packages treated as framework internals, besides the standard library
LIBRARY_PACKAGES = frozenset({"torch", "torchgen", "functorch", "triton", "numpy", "typing_extensions",
                              "_pytest", "pytest", "nvtx", "cuda", "apex", "transformer_engine"})


def parse_frame(frame: str) -> tuple[str, int, str]:
    """'dir/file.py(42): fn' -> ('dir/file.py', 42, 'fn'); native 'fn [module]' -> (module, 0, fn)
    (line 0: unknown); other frames (Python built-ins) -> (frame, -1, '')."""
    m = _FRAME_RE.match(frame)
    if m is not None:
        return m["file"], int(m["line"]), m["func"]
    m = _NATIVE_RE.match(frame)
    if m is not None:
        return m["file"], 0, m["func"]
    return frame, -1, ""


def site_label(frame: str) -> str:
    """'file:line function' ('file function' when the line is unknown), as tables show call sites."""
    f, line, fn = parse_frame(frame)
    return (f"{f}:{line} {fn}" if line > 0 else (f"{f} {fn}" if line == 0 else f)).rstrip()


@dataclass(frozen=True)
class SourceFilter:
    """Which frames are user code (§S2). `--source-filter` tokens: `-TEXT` marks files containing
    TEXT as library, `+TEXT` as user (wins), `none` drops the default library rule."""
    library: tuple[str, ...] = ()
    user: tuple[str, ...] = ()
    defaults: bool = True

    @classmethod
    def parse(cls, spec: str | None) -> "SourceFilter":
        if not spec:
            return cls()
        lib, usr, defaults = [], [], True
        for tok in re.split(r"[,\s]+", spec.strip()):
            if not tok:
                continue
            if tok == "none":
                defaults = False
            elif tok[0] == "+" and len(tok) > 1:
                usr.append(tok[1:])
            elif tok[0] == "-" and len(tok) > 1:
                lib.append(tok[1:])
            else:
                raise ValueError(f"--source-filter: {tok!r} is not +TEXT, -TEXT or none")
        return cls(tuple(lib), tuple(usr), defaults)

    def is_user(self, frame: str) -> bool:
        file, line, _ = parse_frame(frame)
        if any(u in file for u in self.user):
            return line >= 0
        if line < 0 or any(x in file for x in self.library):
            return False
        if not self.defaults:
            return True
        if _LIBRARY_PATH_RE.search(file):
            return False
        if not file.endswith(".py"):  # a native frame: the application's own binary is user code
            base = file.rsplit("/", 1)[-1]
            return not (file.startswith(_SYSTEM_DIRS) or (base.startswith("lib") and ".so" in base)
                        or not file.startswith("/") or file[:1] == "[")
        top = file.lstrip("/").split("/", 1)[0].removesuffix(".py")
        return top not in LIBRARY_PACKAGES and top not in sys.stdlib_module_names

    def to_json(self) -> dict:
        return {"library": list(self.library), "user": list(self.user), "defaults": self.defaults}


def user_nodes(trace: Trace, flt: SourceFilter = SourceFilter()) -> np.ndarray:
    """Per stack node: the nearest node at or above it whose frame is user code, -1 when none
    (kept in the trace's memo per filter and stack table size: the TUI asks on every cursor move)."""
    return memo.of(trace).get(("analysis.sources.user_nodes", flt, len(trace.stacks)),
                              lambda: _user_nodes(trace, flt))


def _user_nodes(trace: Trace, flt: SourceFilter) -> np.ndarray:
    st = trace.stacks
    n = len(st)
    if n == 0:
        return np.zeros(0, np.int64)
    frames, inv = dense_groups(st.frame)
    is_user = np.fromiter((flt.is_user(trace.strings[int(f)]) for f in frames), bool, len(frames))[inv]
    out = np.where(is_user, np.arange(n), -1)
    cur = st.parent.astype(np.int64)
    todo = (out < 0) & (cur >= 0)
    while todo.any():  # one round per stack level
        hit = todo & is_user[np.maximum(cur, 0)]
        out[hit] = cur[hit]
        todo &= ~hit
        cur = np.where(todo, st.parent[np.maximum(cur, 0)], -1)
        todo &= cur >= 0
    return out


def launch_sites(trace: Trace, api_rows: np.ndarray, flt: SourceFilter = SourceFilter()):
    """(stack node, user node) per API row; -1 where none."""
    if not len(trace.stacks) or len(trace.api_stacks) != len(trace.api):
        none = np.full(len(api_rows), -1, np.int64)
        return none, none.copy()
    node = trace.api_stacks.node[api_rows].astype(np.int64)
    un = user_nodes(trace, flt)
    return node, np.where(node >= 0, un[np.maximum(node, 0)], -1)


def iterations(trace: Trace, sel: Selection = WHOLE) -> tuple[int, str]:
    """(count, source) of the record's iterations (definitions.md §V1: `ProfilerStep#N`, a step-like
    range, else a repeating launch sequence, judged on the device with the most launches) that
    overlap the selection; (0, "none") when none is found, so the table is per window."""
    it = itr.find(trace, None, next(iter(launch_devices(trace, sel.devices)), None))
    if it.source == itr.SOURCE_NONE:
        return 0, it.source
    w = time_window(sel, trace)
    n = int(((it.end > w[0]) & (it.start < w[1])).sum()) if w is not None else len(it)
    return n, it.source + (" (heuristic)" if it.heuristic else "")


def source_table(trace: Trace, sel: Selection = WHOLE, flt: SourceFilter = SourceFilter(),
                 limit: int = CONFIG.table_limit, names: str = CONFIG.names) -> dict:
    """Call sites of the selected kernel launches: launches, launch-API time, per iteration, and
    the kernels each site launches most (definitions.md §S3)."""
    k = launched_kernels(trace, sel)
    ops, api = trace.ops, trace.api
    a = ops.api[k]
    node, site = launch_sites(trace, a, flt)
    n = len(k)
    iters, iter_source = iterations(trace, sel)
    cover = {"launches": n, "with_stack": int((node >= 0).sum()), "attributed": int((site >= 0).sum()),
             "via_backward": int((trace.api_stacks.via[a] == STACK_BACKWARD).sum()) if (node >= 0).any() else 0}
    cover["attributed_fraction"] = round(cover["attributed"] / n, 4) if n else 0.0
    doc = {"stacks": trace.source.extra.get("stacks", ""), "coverage": cover, "iterations": iters,
           "iteration_source": iter_source, "per": "iteration" if iters else "window", "filter": flt.to_json(), "sites": [],
           "hint": RECORD_HINT if not len(trace.stacks) else ""}
    m = site >= 0
    if not m.any():
        if cover["with_stack"]:
            doc["hint"] = NO_USER_HINT
        return doc
    frame_of = trace.stacks.frame[site[m]]
    keys, inv = dense_groups(frame_of)
    dur = (api.end[a] - api.start[a])[m]
    count = np.bincount(inv, minlength=len(keys))
    api_ns = np.bincount(inv, weights=dur, minlength=len(keys))
    small = np.bincount(inv, weights=(ops.end - ops.start)[k[m]] < CONFIG.small_kernel_ns, minlength=len(keys))
    kname = name_ids(trace, names)[k[m]]
    order = np.lexsort((string_ranks(trace.strings, keys), -count))   # ties: the frame as a string
    if limit:
        order = order[:limit]
    by = np.argsort(inv, kind="stable")   # launches grouped by site: one slice per site, not a scan
    bounds = np.searchsorted(inv[by], np.arange(len(keys) + 1))
    for g in order.tolist():
        sub = kname[by[bounds[g]:bounds[g + 1]]]
        kn, kc = unique_sorted(sub, return_counts=True)
        top = np.lexsort((string_ranks(trace.strings, kn), -kc))[:TOP_KERNELS]
        frame = trace.strings[int(keys[g])]
        file, line, func = parse_frame(frame)
        doc["sites"].append({
            "site": site_label(frame), "frame": frame, "file": file, "line": line, "function": func,
            "launches": int(count[g]), "small_launches": int(small[g]),
            "launch_api_ms": round(float(api_ns[g]) / 1e6, 3),
            "launches_per_iteration": round(int(count[g]) / iters, 2) if iters else int(count[g]),
            "top_kernels": [{"kernel_name": trace.strings[int(kn[i])], "launches": int(kc[i])} for i in top],
        })
    return doc


def launch_stack(trace: Trace, api_row: int, flt: SourceFilter = SourceFilter()) -> dict | None:
    """The whole stack of one API call (innermost first) and its call site, for details views."""
    if api_row < 0 or not len(trace.stacks) or len(trace.api_stacks) != len(trace.api):
        return None
    node = int(trace.api_stacks.node[api_row])
    if node < 0:
        return None
    un = int(user_nodes(trace, flt)[node])
    return {"site": site_label(trace.strings[int(trace.stacks.frame[un])]) if un >= 0 else "",
            "frames": stack_frames(trace, node),
            "via_backward": bool(trace.api_stacks.via[api_row] == STACK_BACKWARD)}


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n - 1] + "…"


def render_sources(doc: dict, limit_kernels: int = TOP_KERNELS) -> list[str]:
    c = doc["coverage"]
    out = ["-- Call sites of kernel launches (innermost user frame) --"]
    if doc["hint"]:
        out.append(f"note: {doc['hint']}")
    out.append(f"{c['attributed']} of {c['launches']} launches attributed to a user frame "
               f"({100 * c['attributed_fraction']:.1f} %); {c['with_stack']} have a stack"
               + (f", {c['via_backward']} through the forward op (backward)" if c["via_backward"] else "")
               + (f"; stacks from {doc['stacks']}" if doc["stacks"] else ""))
    if not doc["sites"]:
        return out
    if doc["per"] == "iteration":
        out.append(f"per iteration: {doc['iterations']} iterations from {doc['iteration_source']} "
                   "(the record's, definitions.md §V1)")
    per = f"/iter ({doc['iterations']})" if doc["per"] == "iteration" else "/window"
    w = min(max([len("Call site")] + [len(s["site"]) for s in doc["sites"]]), 90)
    small_h = f"<{CONFIG.small_kernel_ns / 1000:g}µs"
    head = (f"{'Call site':<{w}} {'Launches':>9} {small_h:>8} {'API(ms)':>9} {'Launches' + per:>{max(16, len(per) + 9)}}"
            "  Top kernels")
    out += [head, "-" * len(head)]
    for s in doc["sites"]:
        name = s["site"] if len(s["site"]) <= w else "…" + s["site"][-(w - 1):]
        top = ", ".join(f"{_clip(k['kernel_name'], 48)} ×{k['launches']}" for k in s["top_kernels"][:limit_kernels])
        out.append(f"{name:<{w}} {s['launches']:>9} {s['small_launches']:>8} {s['launch_api_ms']:>9.3f} "
                   f"{s['launches_per_iteration']:>{max(16, len(per) + 9)}}  {top}")
    return out


def build_source_report(trace: Trace, sel: Selection = WHOLE, flt: SourceFilter = SourceFilter(),
                        limit: int = CONFIG.table_limit, names: str = CONFIG.names) -> dict:
    """`launchtui report --by source` as one JSON document."""
    from launchtui.analysis.report import SCHEMA_VERSION, launch_totals, trace_json
    return {"schema_version": SCHEMA_VERSION, "by": "source", "trace": trace_json(trace, sel),
            "options": {"limit": limit, "names": names, "source_filter": flt.to_json()},
            "launches": launch_totals(trace, sel), "sources": source_table(trace, sel, flt, limit, names)}


def render_source_report(doc: dict) -> str:
    t, src = doc["trace"], doc["trace"]["source"]
    out = [f"{src['path']}  ({src['producer']} {src['version']})"]
    if t["window_s"]:
        out.append(f"window {t['window_s'][0]:.6f} s to {t['window_s'][1]:.6f} s on the trace clock; "
                   f"selection: {t['selection']['label']}")
    out.append("")
    out += render_sources(doc["sources"])
    return "\n".join(out) + "\n"


def op_sites(trace: Trace, sel: Selection = WHOLE, flt: SourceFilter = SourceFilter()) -> np.ndarray:
    """Per GPU op: the frame string id of its call site, for the selected kernel launches; -1 else."""
    out = np.full(len(trace.ops), -1, np.int64)
    k = launched_kernels(trace, sel)
    _, site = launch_sites(trace, trace.ops.api[k], flt)
    ok = site >= 0
    out[k[ok]] = trace.stacks.frame[site[ok]]
    return out


def site_of_api(trace: Trace, api_row: int, flt: SourceFilter = SourceFilter()) -> str:
    """'file:line function' of one API call ('' when it has none): the TUI's details line."""
    if api_row < 0 or not len(trace.stacks) or len(trace.api_stacks) != len(trace.api):
        return ""
    node = int(trace.api_stacks.node[api_row])
    un = int(user_nodes(trace, flt)[node]) if node >= 0 else -1
    return site_label(trace.strings[int(trace.stacks.frame[un])]) if un >= 0 else ""


def dominant_sites(trace: Trace, api_rows: np.ndarray, group: np.ndarray, n_groups: int,
                   flt: SourceFilter = SourceFilter()) -> list[dict | None]:
    """Per group of launches (e.g. a kernel-table row): its most frequent call site and the share
    of the group's launches it covers; None for a group with no attributed launch (§S2)."""
    out: list[dict | None] = [None] * n_groups
    _, site = launch_sites(trace, api_rows, flt)
    m = site >= 0
    if not m.any():
        return out
    frame = trace.stacks.frame[site[m]].astype(np.int64)
    g = np.asarray(group)[m].astype(np.int64)
    pairs, cnt = unique_sorted(g * (len(trace.strings) + 1) + frame, return_counts=True)
    pg, pf = np.divmod(pairs, len(trace.strings) + 1)
    total = np.bincount(np.asarray(group, np.int64), minlength=n_groups)
    order = np.lexsort((string_ranks(trace.strings, pf), -cnt, pg))  # per group: most launches, then frame text
    first = order[np.concatenate([[True], pg[order][1:] != pg[order][:-1]])]
    for i in first.tolist():  # one per group
        gi = int(pg[i])
        out[gi] = {"site": site_label(trace.strings[int(pf[i])]), "share": round(int(cnt[i]) / int(total[gi]), 4)}
    return out
