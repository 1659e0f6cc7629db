"""What the timeline finds for the main screen (definitions.md §T8): `/` while the timeline has
focus jumps to the next GPU op whose name contains the text (case-insensitive), on the shown
device(s), after the cursor (again: the one after); a range zoom keeps the judged GPU's HW row in
view; the kernel at the cursor gets its launch details (trace.op_details), read in a worker."""
from __future__ import annotations

import numpy as np

from launchtui import heap
from launchtui.trace.arrays import unique_sorted


def matching_names(trace, text: str) -> np.ndarray:
    """String ids whose text contains `text`, case-insensitively (a loop per distinct name)."""
    t = text.lower()
    ids = unique_sorted(np.concatenate([trace.ops.name, trace.ops.full_name]))
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


def search(scr, text: str) -> None:
    """Jump to the next op named like `text` after the cursor, its HW row selected."""
    from textual.widgets import Input
    inp = scr.query_one("#filter", Input)
    inp.remove_class("visible")
    scr.searching = False
    tl = scr.timeline
    tl.focus()
    if not text:
        return
    scr.last_search = text
    tr = scr.loaded.trace
    k = next_op(tr, text, int(tl.view.cursor), scr.device)
    wrapped = k < 0
    if wrapped:
        k = next_op(tr, text, -2**62, scr.device)
    if k < 0:
        on = f" on GPU {scr.device}" if scr.device is not None else ""
        scr.context = f"no GPU op named like '{text}'{on}"
        scr.notify(scr.context)
        scr.update_details()
        return
    ops = tr.ops
    j = tl.row_index("hw", int(ops.device[k]), ("hw", int(ops.device[k]), int(ops.stream[k])))
    if j >= 0:
        tl.select_row(j)
    scr.context = (("past the last one: back to the first. " if wrapped else "")
                   + f"found '{text}': / Enter again for the next")
    a, b = int(ops.start[k]), int(ops.end[k])
    if b - a < 4 * tl.view.ns_per_col:   # zoom in until the op holds a few cells of its own
        pad = max(b - a, 1) * 20
        tl.view.fit(a - pad, b + pad)
    scr.jump(a + (b - a) // 2)


def keep_hw_in_view(scr) -> None:
    """The judged device's first HW row stays on screen: scrolled so both it and the selected
    row show, else the cursor moves to it (the ranges are context; the HW row is the view)."""
    tl = scr.timeline
    dev = scr.device
    if dev is None and scr.verdict.result is not None:
        dev = scr.verdict.result.doc.get("device_id")
    hw = tl.row_index("hw", dev)
    h = tl.content_height
    if hw < 0 or h <= 0 or tl.row_offset <= hw < tl.row_offset + h:
        return
    top = max(0, hw - h + 1)
    if top <= tl.selected < top + h:
        tl.row_offset = top
        tl.fresh_layout = False      # a placed view: a later resize keeps it
        tl.refresh()
    else:
        tl.select_row(hw)


def op_details(scr, k: int) -> str:
    """The kernel's launch details (trace.op_details), "" until read and where the format has none:
    looked up in a worker the first time the kernel is under the cursor (Nsight: that kernel's row;
    Kineto: the whole file, once, after the first fill: its parse would compete with the fill's
    workers for memory and the CPUs), one lookup at a time; the details are redrawn when it is done,
    which asks for the kernel then under the cursor."""
    od = getattr(scr, "launch_details", None)
    if od is None:
        from launchtui.trace.op_details import OpDetails
        od = scr.launch_details = OpDetails(scr.loaded.trace)
    if od.available() and not od.has(k) and not od.loading and (od.per_kernel or scr.fill.complete):
        def work() -> None:
            try:
                od.load(k)
                if not od.per_kernel:   # the whole file's temporaries: back to the system
                    heap.release_free()
            finally:
                scr.app.call_from_thread(done)

        def done() -> None:
            od.loading = False
            scr.update_details()
        od.loading = True
        scr.run_worker(work, thread=True, group="op-details")
    return od.text(k)
