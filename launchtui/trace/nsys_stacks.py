"""Nsight call stacks (docs/nsys-sqlite.md §2; definitions.md §S1).

Exports recorded with `--cudabacktrace` (and `--python-backtrace=cuda`) give API rows a
`callchainId` into `CUDA_CALLCHAINS(id, symbol, module, stackDepth)`, stackDepth 0 innermost,
symbol and module through StringIds. Chains are interned level by level into the stack trie, one
dict lookup per distinct (symbol, module) pair. Frames are written `symbol [module]`; a frame of a
Python file is written `module(0): symbol` (0 = line unknown). The table's shape is from NVIDIA's
schema; how `--python-backtrace=cuda` frames appear in it is unverified (definitions.md §S5).
"""
from __future__ import annotations

import numpy as np

from launchtui.trace.grouping import unique_rows
from launchtui.trace.model import STACK_DIRECT, ApiStacks, Trace
from launchtui.trace.nsys_strings import NULL_ID, unresolved_reason
from launchtui.trace.sqlite_columns import fetch_int_columns
from launchtui.trace.stacks import StackTrie, attach_nvtx_sites


def frame_text(symbol: str, module: str) -> str:
    if module.endswith(".py"):
        return f"{module}(0): {symbol}"
    return f"{symbol} [{module}]" if module else symbol


def build(trace: Trace, reader) -> None:
    """Stacks from CUDA_CALLCHAINS (after `finalize`), else from NVTX ranges naming `file.py:line`."""
    runtime = reader.tables.get("CUPTI_ACTIVITY_KIND_RUNTIME")
    chains = reader.tables.get("CUDA_CALLCHAINS")
    if runtime and chains and "callchainId" in reader.cols[runtime] and \
            {"id", "symbol", "stackDepth"} <= reader.cols[chains]:
        _from_callchains(trace, reader, runtime, chains)
        if len(trace.stacks):
            trace.source.extra["stacks"] = "CUDA_CALLCHAINS"
            return
    attach_nvtx_sites(trace)


def _from_callchains(trace: Trace, reader, runtime: str, chains: str) -> None:
    con = reader.con
    c = fetch_int_columns(con, runtime, {"start": "start", "gtid": "globalTid", "corr": "correlationId",
                                         "chain": "callchainId"}, "callchainId IS NOT NULL AND callchainId > 0")
    if not len(c.get("chain", ())):
        return
    has_module = "module" in reader.cols[chains]
    ch = fetch_int_columns(con, chains, {"id": "id", "symbol": "symbol", "depth": "stackDepth",
                                         "module": "module" if has_module else "-1"}, "", reader.dropped)
    if not len(ch.get("id", ())):
        return
    # rows of one chain, outermost first: parent of a row = the next deeper-numbered row of its chain
    o = np.lexsort((-ch["depth"], ch["id"]))
    cid, sym, mod = ch["id"][o], ch["symbol"][o], ch["module"][o]
    same = np.concatenate([[False], cid[1:] == cid[:-1]])
    parent = np.where(same, np.arange(len(o)) - 1, -1)
    pairs, inv = unique_rows(np.stack([sym, mod], axis=1), return_inverse=True)
    inv = inv.reshape(-1)
    # symbol and module through StringIds (any ids); a module column absent or NULL is no module,
    # an id without a row is shown as `<string ID>` and its rows counted (definitions.md §H)
    sym_text, sym_missing = reader.names.table.texts(pairs[:, 0])
    mod_text, mod_missing = reader.names.table.texts(pairs[:, 1])
    no_module = pairs[:, 1] == NULL_ID
    mod_text = ["" if none else t for t, none in zip(mod_text, no_module.tolist())]
    rows = np.bincount(inv, minlength=len(pairs))
    for col, miss in (("symbol", sym_missing), ("module", mod_missing & ~no_module)):
        if miss.any():
            reader.skipped[unresolved_reason(chains, col)] += int(rows[miss].sum())
    frame_ids = np.array([trace.strings.intern(frame_text(s, m)) for s, m in zip(sym_text, mod_text)],
                         np.int64)  # once per distinct (symbol, module)
    trie = StackTrie(trace.strings)
    node = trie.add_tree(parent, frame_ids[inv])
    last = np.concatenate([cid[1:] != cid[:-1], [True]])  # the innermost row of each chain
    chain_ids, chain_node = cid[last], node[last]
    # API rows carrying a chain -> their row in the (sorted) trace: equal (process, correlation, start)
    api = trace.api
    both = np.concatenate([np.stack([trace.process_keys(api.pid), api.corr, api.start], axis=1),
                           np.stack([c["gtid"] & ~0xFFFFFF, c["corr"], c["start"]], axis=1)])
    _, inv = unique_rows(both, return_inverse=True)
    inv = inv.reshape(-1)
    row_of = np.full(len(both), -1, np.int64)
    row_of[inv[:len(api)]] = np.arange(len(api))
    rows = row_of[inv[len(api):]]
    k = np.minimum(np.searchsorted(chain_ids, c["chain"]), len(chain_ids) - 1)
    found = chain_ids[k] == c["chain"]
    if not found.all():
        reader.skipped[f"{runtime} rows whose callchainId has no {chains} rows (no call stack)"] += int((~found).sum())
    ok = (rows >= 0) & found
    api_node = np.full(len(api), -1, np.int64)
    api_node[rows[ok]] = chain_node[k[ok]]
    trace.stacks = trie.table()
    trace.api_stacks = ApiStacks(node=api_node.astype(np.int32),
                                 via=np.where(api_node >= 0, STACK_DIRECT, 0).astype(np.int8))
