"""The timeline's idle row: the record's device's GPU idle gaps drawn by cause (definitions.md §T7).

Each cell shows the cause holding most of the bin's idle time (`analysis.idle_lane.idle_cells`).
The symbol carries the cause as well as the colour (NO_COLOR, monochrome terminals); a cell less
than half idle is dim. The words are the verdict panel's (`record_conclusion.SHORT_CAUSE`), so the
legend, the details line and the panel name a cause the same way.
"""
from __future__ import annotations

import numpy as np
from rich.style import Style

from launchtui.analysis import idle_lane
from launchtui.analysis.record_conclusion import SHORT_CAUSE

CAUSES = idle_lane.CAUSES
# one ASCII symbol per cause (every font and terminal draws them one cell wide), in CAUSES order
GLYPHS = {"launch": ">", "host": "-", "host_stall": "=", "sync": "|", "dependency": "~",
          "cold_start": "*", "migration": "%", "unattributed": "?"}
# warm colours for host-bound time (what CUDA graphs / torch.compile remove), cool for the rest;
# each an exact xterm-256 colour, so down-sampling keeps them apart
COLOURS = {"launch": "#ff5f5f", "host": "#ffaf00", "host_stall": "#d78700", "sync": "#af87ff",
           "dependency": "#5f87af", "cold_start": "#00afaf", "migration": "#5fafd7",
           "unattributed": "#8a8a8a"}
LABEL = "idle by cause"

_GLYPH = np.array([" "] + [GLYPHS[c] for c in CAUSES])          # index cause + 1
STYLES = [Style()] + [Style(color=COLOURS[c], bold=True) for c in CAUSES] + \
         [Style(color=COLOURS[c], dim=True) for c in CAUSES]   # code 0 none, 1.. full, 1+n.. dim


def word(cause: int | str) -> str:
    """The cause as the verdict panel says it."""
    return SHORT_CAUSE[cause if isinstance(cause, str) else CAUSES[cause]]


def legend_entry() -> str:
    return "idle " + " ".join(f"{GLYPHS[c]} {SHORT_CAUSE[c]}" for c in CAUSES)


def cells(lane, edges: np.ndarray) -> tuple[str, np.ndarray]:
    """(text, style codes into STYLES) of the row over the bins `edges`."""
    c = idle_lane.idle_cells(lane, edges)
    width = np.maximum(np.diff(edges), 1)
    text = "".join(_GLYPH[c.cause.astype(np.int64) + 1].tolist())
    codes = np.where(c.cause >= 0, c.cause.astype(np.int16) + 1, 0).astype(np.int16)
    dim = (c.cause >= 0) & (2 * c.idle < width)
    codes[dim] += len(CAUSES)
    return text, codes
