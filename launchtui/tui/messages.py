"""Every cross-widget signal of the TUI, as named Textual messages."""
from __future__ import annotations

from textual.message import Message


class LoadProgress(Message):
    """The loading worker read `rows` rows in `stage` (batched: ≥ 0.25 s apart or a new stage)."""

    def __init__(self, stage: str, rows: int) -> None:
        super().__init__()
        self.stage = stage
        self.rows = rows


class TraceLoaded(Message):
    def __init__(self, loaded) -> None:
        super().__init__()
        self.loaded = loaded


class LanesMapped(Message):
    """Lanes to draw from: just stored beside the model and mapped from there (the same lanes, whose
    built arrays can now be freed: the cold TUI's memory), or built after the view when the first
    open left them pending (loader.build_pending_lanes)."""

    def __init__(self, lanes) -> None:
        super().__init__()
        self.lanes = lanes


class LoadFailed(Message):
    """Loading failed; `message` is the one-line error the CLI would print."""

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message


class CursorMoved(Message):
    """The time cursor, zoom or selected timeline row changed: refresh the details panel."""


class KernelChosen(Message):
    """Enter on a table row: highlight this kernel's instances on the timeline."""

    def __init__(self, row: dict) -> None:
        super().__init__()
        self.row = row


class TableRowMoved(Message):
    def __init__(self, row: dict | None) -> None:
        super().__init__()
        self.row = row


class TableReady(Message):
    """A table/stats worker finished for selection generation `gen` (`final` False: the rows
    before their phase column, which a second message fills)."""

    def __init__(self, gen: int, rows: list, stats: dict, selection, final: bool = True) -> None:
        super().__init__()
        self.gen = gen
        self.rows = rows
        self.stats = stats
        self.selection = selection
        self.final = final


class SiteChosen(Message):
    """Enter on a call-site row: highlight that site's launches on the timeline."""

    def __init__(self, row: dict) -> None:
        super().__init__()
        self.row = row


class SourcesReady(Message):
    """A call-site worker finished for selection generation `gen` (`doc`: `sources.source_table`)."""

    def __init__(self, gen: int, doc: dict) -> None:
        super().__init__()
        self.gen = gen
        self.doc = doc


class IdleReady(Message):
    """The idle row's worker finished for request `gen` (`lane`: analysis.idle_lane.IdleLane, None
    when the record judges no device)."""

    def __init__(self, gen: int, lane) -> None:
        super().__init__()
        self.gen = gen
        self.lane = lane
