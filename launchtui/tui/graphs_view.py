"""The graph table (key `R`): one row per CUDA / HIP graph of the selection, like the kernel table;
Enter marks the graph's replays on the timeline (their ops on the HW rows, their launch calls on the
API rows) and fits the view to its first replay's GPU span. Rows are the JSON `graphs.replays.graphs`
(docs/definitions.md §12.2, §12.3, §T9)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label

from launchtui.trace.arrays import median_of
from launchtui.tui.screens import MODAL_CSS

NO_GRAPHS = "No CUDA / HIP graph replays here: no graph-launch call in this selection recorded a GPU op."
COLUMNS = ("Graph", "First op", "Replays", "Ops/replay", "Span µs", "Busy µs", "Node gaps µs", "Launch call µs",
           "Integrity")


@dataclass
class GraphRows:
    rows: list            # `graphs.replays.graphs` entries, graph order
    calls: list           # per row: the API rows of its replays (graph-launch calls), start order
    integrity: list       # per row: "ok" or what is short
    unrecorded: int       # graph launches of the selection that recorded no op (not in any row)
    ops: int = 0          # replayed ops in all rows


def graph_rows(trace, sel) -> GraphRows:
    from launchtui.analysis import graphs as gr
    from launchtui.analysis.graphs_report import replay_json
    rp = gr.replays(trace, sel)
    doc = replay_json(trace, rp)
    calls, integ = [], []
    for i, row in enumerate(doc["graphs"]):   # per graph
        mine = rp.graph == i
        calls.append(rp.call[mine])
        n = rp.n_ops[mine]
        short = int((n < median_of(n)).sum())
        integ.append("graph-level" if row.get("graph_level") else "ok" if int(n.min()) == int(n.max())
                     else f"{short} short" if short else "varies")
    return GraphRows(doc["graphs"], calls, integ, len(rp.unrecorded), doc["replayed_ops"])


def _stat(d: dict, fmt: str = "{:,.1f}") -> str:
    if d["median"] is None:
        return "-"
    med, lo, hi = (fmt.format(d[k]) for k in ("median", "min", "max"))
    return med if lo == hi else f"{med} ({lo}–{hi})"


def row_cells(row: dict, integrity: str) -> tuple:
    opr = row["ops_per_replay"]
    ops = f"{opr['median']:g}" + ("" if opr["min"] == opr["max"] else f" ({opr['min']}–{opr['max']})")
    name = row["first_op"] if len(row["first_op"]) <= 36 else row["first_op"][:35] + "…"
    return (str(row["graph"]), name, f"{row['replays']:,}", ops, _stat(row["span_us"]), _stat(row["busy_us"]),
            _stat(row["node_gaps_us"]), _stat(row["launch_api_us"]), integrity)


class GraphTable(ModalScreen):
    """Dismisses with the chosen row's index, or None."""

    DEFAULT_CSS = MODAL_CSS + "GraphTable > Vertical { max-width: 160; } GraphTable DataTable { height: auto; max-height: 24; }"
    SCOPED_CSS = False
    BINDINGS = [Binding("escape,q", "cancel", "Close", id="graphs.close")]

    def __init__(self, data: GraphRows, title: str):
        super().__init__()
        self.data = data
        self.title_line = title

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_line, id="title")
            yield DataTable(id="graph-table", cursor_type="row", zebra_stripes=True)
            yield Label("Enter: mark the graph's replays on the timeline and show its first; n / N step through "
                        "its ops; Esc closes", id="hint")

    def on_mount(self) -> None:
        t = self.query_one(DataTable)
        t.add_columns(*COLUMNS)
        for row, integ in zip(self.data.rows, self.data.integrity):   # per graph
            t.add_row(*row_cells(row, integ))
        t.focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.dismiss(event.cursor_row)

    def action_cancel(self) -> None:
        self.dismiss(None)


def title_text(data: GraphRows) -> str:
    launches = sum(r["replays"] for r in data.rows)
    extra = f"; {data.unrecorded:,} graph launches recorded no op" if data.unrecorded else ""
    return (f"CUDA graphs: {len(data.rows)} graphs, {launches:,} replays, {data.ops:,} replayed ops{extra} "
            "(definitions §12.2)")


def open_graph_table(scr) -> None:
    """The `R` key of the main screen: the table, or one line when the selection has no replay."""
    from launchtui.analysis.select import WHOLE
    tr = scr.loaded.trace
    sel = scr.selection if scr.selection is not None else WHOLE
    data = graph_rows(tr, sel)
    if not data.rows:
        extra = f" ({data.unrecorded:,} graph launches recorded none)" if data.unrecorded else ""
        scr.notify(NO_GRAPHS + extra, severity="warning")
        scr.context = NO_GRAPHS
        return

    def done(i) -> None:
        if i is not None:
            mark_graph(scr, data, int(i))
    scr.app.push_screen(GraphTable(data, title_text(data)), done)


def mark_graph(scr, data: GraphRows, i: int) -> None:
    """Highlight graph i's replayed ops and their launch calls; fit the view to its first replay."""
    from launchtui.tui import lane_view
    tr = scr.loaded.trace
    calls = data.calls[i]
    mark = np.zeros(len(tr.api) + 1, bool)   # unmatched ops (-1) read the spare last slot
    mark[calls] = True
    idx = np.flatnonzero(mark[tr.ops.api])
    if scr.device is not None:
        idx = idx[tr.ops.device[idx] == scr.device]
    row = data.rows[i]
    scr.highlight_label = f"graph {row['graph']}"
    scr.timeline.highlight = lane_view.op_instances(tr, idx, with_api=True)
    first = idx[tr.ops.api[idx] == calls[0]]
    # the replay's GPU span: the HW rows are where a replay shows; its launch call may lie far ahead of it
    lo = int(tr.ops.start[first].min()) if len(first) else int(tr.api.start[calls[0]])
    hi = int(tr.ops.end[first].max()) if len(first) else int(tr.api.end[calls[0]])
    scr.timeline.fit(lo, hi)
    scr.context = (f"graph {row['graph']} ({row['first_op'][:40]}): {row['replays']:,} replays marked, first "
                   f"replay shown (n / N step through its ops, Esc clears)")
