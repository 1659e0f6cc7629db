"""The idle row's state on a MainScreen: which lane is drawn, its worker, stepping through the
largest gaps of a cause (x / X, > / <) and the details of the gap under the cursor (definitions.md §T7).

The lane is the record's device's (the verdict panel's words and the row agree): when stored beside
the model entry (queries.IdleRow) the verdict's worker maps it right after the record, so it is
drawn with the verdict (a warm reopen: no worker or message of its own); else it is built once the
table worker is done (their temporaries never peak together).
"""
from __future__ import annotations

import threading

import numpy as np

from launchtui.tui.messages import IdleReady


MISSING = object()    # a stored-only look found nothing: build once the table worker is done


def lane_inputs(doc: dict | None) -> tuple | None:
    """(device, iteration starts, ends, base depth) of the record, None when it judges no device."""
    if not doc or doc.get("empty") or doc.get("device_id") is None or not doc.get("iterations"):
        return None
    it = doc["iterations"]
    if not it.get("starts_ns"):
        return None
    return int(doc["device_id"]), tuple(it["starts_ns"]), tuple(it["ends_ns"]), int(it.get("base_depth", 0))


def query(inputs: tuple):
    """The session's IdleRow query of `inputs` (lane_inputs)."""
    from launchtui.analysis.backpressure import Options
    from launchtui.tui.queries import IdleRow
    device, starts, ends, base = inputs
    return IdleRow(device, starts, ends, base, Options())


def stored(session, inputs: tuple):
    """The lane for `inputs` mapped from beside the model entry, None when not stored."""
    from launchtui.session import MISS
    lane = session.peek(query(inputs))
    return None if lane is MISS else lane


def stored_for(session, doc: dict | None):
    """The lane of the record `doc` mapped from beside the model entry; MISSING when not stored,
    None when the record judges no device. Called in the verdict's worker, so a warm reopen
    draws the row with the verdict, without a worker of its own."""
    inputs = lane_inputs(doc)
    if inputs is None:
        return None
    lane = stored(session, inputs)
    return MISSING if lane is None else lane


def compute(session, inputs: tuple, cancelled=None):
    """The idle lane for `inputs` (lane_inputs): mapped from beside the model entry, else built and
    stored there, then mapped back (its built arrays go: only the pages a frame reads stay).
    Raises idle_lane.Cancelled when `cancelled()` turns true while building."""
    from launchtui.analysis.idle_lane import build_idle_lane
    from launchtui.session import MISS
    q = query(inputs)
    lane = session.peek(q)
    if lane is MISS:
        device, starts, ends, base = inputs
        lane = build_idle_lane(session.trace, device, np.array(starts, np.int64), np.array(ends, np.int64), base,
                               cancelled=cancelled)
        lane = session.put(q, lane, remap=True)
    return lane


class IdleView:
    """The screen forwards its keys, the verdict's and table's arrivals and the worker's message here.

    A verdict names the lane it wants (`target`). A lane stored beside the model comes mapped with
    the verdict, while the table worker runs (a warm reopen); building one waits for the table worker
    (`waiting`), and a verdict or table worker starting meanwhile stops the build at its next
    block (`interrupt`): their temporaries never add up at 5M ops."""

    def __init__(self, screen) -> None:
        self.screen = screen
        self.lane = None
        self.target = None        # inputs of the lane drawn or on its way
        self.waiting = False      # the target must be built, after the table worker
        self.running = False      # a worker is looking for or building the target
        self.building = False
        self._stop = threading.Event()   # set: the running build stops at its next block
        self._done = threading.Event()   # set while no build runs
        self._done.set()
        self.gen = 0
        self.cause: int | None = None   # index into CAUSES of the cause being stepped
        self.pos = -1
        self.shares: dict = {}    # the record's idle share per cause: the order x cycles in

    @property
    def busy(self) -> bool:
        return self.waiting or self.running

    # ---- computing -------------------------------------------------------------------------------
    def request(self, doc: dict | None, looked=None) -> bool:
        """A verdict arrived: its device's lane, unless that one is drawn or on its way. `looked`:
        what the verdict's worker found stored for it (stored_for; None: not looked up). True
        when the row was drawn now (a stored lane: no worker, no message)."""
        ib = (doc or {}).get("idle_by_cause") or {}
        self.shares = dict(ib.get("share") or {})
        inputs = lane_inputs(doc)
        if inputs == self.target and (self.busy or self.lane is not None or inputs is None):
            return False
        self.target = inputs
        self.gen += 1
        self.waiting = False
        if inputs is None:
            self.running = True
            self.screen.post_message(IdleReady(self.gen, None))
        elif looked is MISSING:       # not stored: built once the table worker is done
            self.waiting = True
            self.kick()
        elif looked is not None:
            self._draw(looked)
            return True
        else:
            self._start(build=False)
        return False

    def kick(self) -> None:
        """The table worker is done: build the target if it was not stored."""
        if self.waiting and not self.screen.table_busy:
            self.waiting = False
            self._start(build=True)

    def _start(self, build: bool) -> None:
        scr = self.screen
        gen, inputs = self.gen, self.target
        session = scr.loaded.session
        self.running, self.building = True, build
        if build:
            stop = self._stop = threading.Event()
            done = self._done = threading.Event()

        def work() -> None:
            from launchtui.analysis.idle_lane import Cancelled
            if not build:      # mapping a stored lane: cheap, beside any worker
                lane = stored(session, inputs)
                scr.post_message(IdleReady(gen, MISSING if lane is None else lane))
                return
            try:
                scr.post_message(IdleReady(gen, compute(session, inputs, stop.is_set)))
            except Cancelled:
                pass
            finally:
                done.set()
        scr.run_worker(work, thread=True, exclusive=True, group="idle")

    def interrupt(self) -> None:
        """A verdict or table worker is starting: a running build stops at its next block and the
        next verdict asks for the lane again."""
        if self.running and self.building:
            self._stop.set()
            self.running = self.building = False
            self.target = None
            self.gen += 1

    def wait_stopped(self, timeout: float = 60.0) -> None:
        """In a verdict or table worker: until an interrupted build has let go of its temporaries
        (at most one stage or block of it)."""
        self._done.wait(timeout)

    def ready(self, m: IdleReady) -> bool:
        if m.gen != self.gen:
            return False
        self.running = self.building = False
        if m.lane is MISSING:
            self.waiting = True
            self.kick()
            return False
        self._draw(m.lane)
        return True

    def _draw(self, lane) -> None:
        self.running = self.building = False
        self.lane = lane
        self.cause, self.pos = None, -1
        self.screen.timeline.set_idle(lane)

    # ---- stepping --------------------------------------------------------------------------------
    def order(self) -> list[int]:
        """Causes with gaps, as the panel ranks them (share of the iteration), then by time drawn."""
        from launchtui.analysis.idle_lane import CAUSES
        lane = self.lane
        have = [k for k in range(len(CAUSES)) if lane is not None and lane.n_gaps[k] > 0]
        return sorted(have, key=lambda k: (-self.shares.get(CAUSES[k], 0.0), -int(lane.total_ns[k]), k))

    def cycle(self, direction: int) -> str | None:
        """x / X: the next / previous cause; lands on its largest gap. A message when there is none."""
        why = self._unavailable()
        if why:
            return why
        order = self.order()
        if not order:
            return f"GPU {self.lane.device} has no idle gaps inside the verdict's iterations."
        if self.cause in order:
            self.cause = order[(order.index(self.cause) + direction) % len(order)]
        else:
            self.cause = order[0]
        self.pos = 0
        self._show()
        return None

    def step(self, direction: int) -> str | None:
        """> / <: the next smaller / larger gap of the cause being stepped (wraps around)."""
        why = self._unavailable()
        if why:
            return why
        if self.cause is None:
            return self.cycle(1)
        n = len(self.lane.top[self.cause])
        self.pos = (self.pos + direction) % n
        self._show()
        return None

    def _unavailable(self) -> str | None:
        if self.lane is None:
            return ("Computing the idle gaps by cause…" if self.busy else
                    "No idle row: the verdict judges no device here.")
        return None

    def _show(self) -> None:
        from launchtui.tui.format import fmt_duration as fd
        from launchtui.tui.widgets.idle_row import word
        lane, scr, c = self.lane, self.screen, self.cause
        tl = scr.timeline
        k = int(lane.top[c][self.pos])
        g0, g1 = int(lane.g0[k]), int(lane.g1[k])
        n, held = len(lane.top[c]), int(lane.n_gaps[c])
        of = f"the {n:,} largest of {held:,}" if held > n else f"{held:,}"
        scr.context = (f"{word(c)} {fd(int(lane.top_ns[c][self.pos]))} in gap {self.pos + 1} of {of}, largest "
                       f"first; x / X cause, > / < smaller / larger")
        j = tl.row_index("idle")
        if j >= 0:
            tl.select_row(j)
        w = g1 - g0
        v = tl.view
        if w < 3 * v.ns_per_col or w > 0.5 * v.width * v.ns_per_col:
            v.fit(g0 - w, g1 + w, margin=0)     # the gap in the middle third of the view
        a, b = lane.largest_piece(c, k)
        scr.jump(a + (b - a) // 2)              # the cursor on the cause's part of the gap

    # ---- details -----------------------------------------------------------------------------------
    def describe_at(self, t0: int, t1: int, origin) -> list[str]:
        """The details panel's three lines for the idle row at the cursor cell [t0, t1)."""
        from launchtui.tui.details import fmt_time
        from launchtui.tui.format import fmt_duration as fd
        from launchtui.tui.widgets.idle_row import word
        lane = self.lane
        k = lane.gap_at(t0, t1) if lane is not None else -1
        if k < 0:
            return [f"GPU {lane.device} is not idle at the cursor (or outside the gaps the verdict measures: "
                    "from its first op to the last iteration's end)" if lane is not None else "", "", ""]
        g0, g1 = int(lane.g0[k]), int(lane.g1[k])
        split = lane.gap_split(k)
        order = [c for c in np.argsort(-split, kind="stable").tolist() if split[c] > 0]
        l1 = (f"GPU {lane.device} idle {fd(g1 - g0)} at {fmt_time(g0, origin)}: "
              + " · ".join(f"{word(c)} {fd(int(split[c]))}" for c in order))
        return [l1, *self._ending(int(lane.op[k]), order[0] if order else None)]

    def _ending(self, op: int, cause: int | None) -> list[str]:
        """The op that ended the gap and its launch call; the phase and what the main cause means."""
        from launchtui.analysis.graph_busy import busy_trace
        from launchtui.analysis.idle_lane import CAUSES, op_phase
        from launchtui.analysis.record_conclusion import CAUSE_WORDS
        from launchtui.trace.model import OP_KIND_NAMES
        from launchtui.tui.details import thread_label
        from launchtui.tui.format import fmt_duration as fd
        tr = busy_trace(self.screen.loaded.trace)   # the lane's op indices are this view's
        means = f"mostly {CAUSE_WORDS[CAUSES[cause]]}" if cause is not None else ""
        if op < 0:
            return ["no op ends this gap inside the trace", means]
        ops, api = tr.ops, tr.api
        kind, name = OP_KIND_NAMES[int(ops.kind[op])], tr.strings[int(ops.name[op])]
        l2 = f"ended by {kind} {name} on stream {int(ops.stream[op])}"
        a = int(ops.api[op])
        if a < 0:
            l2 += ": its launch call is not in the trace (launched before the capture, or a sampled trace)"
        else:
            wait = int(ops.start[op]) - int(api.end[a])
            l2 += (f": its {tr.strings[int(api.name[a])]} ({fd(int(api.end[a] - api.start[a]))}) "
                   + (f"returned {fd(wait)} before it started" if wait >= 0 else "was still in flight when it started")
                   + f" (thread {thread_label(tr, int(api.thread[a]))})")
        level = self.screen.verdict.settings.phase_level
        phase = op_phase(tr, self.lane, op, level)
        return [l2, f"phase {phase or '(outside every range)'} (level {level}) │ {means}"]
