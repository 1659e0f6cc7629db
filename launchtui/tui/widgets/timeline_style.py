"""The timeline's glyphs, colours and legend, and the run-length encoding of a row's cells into a
strip: what every row renderer (tui/widgets/timeline.py, timeline_render.py) draws with."""
from __future__ import annotations

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from launchtui.analysis.config import CONFIG
from launchtui.tui.widgets import idle_row

PLAIN = Style()   # every segment carries a Style: Textual's NO_COLOR filter fails on None

GUTTER = 16
AXIS_ROWS = 2
CACHE_SIZE = 512

# ---------------------------------------------------------------------------------------------
# glyphs: meaning is carried by the symbol as well as the colour (NO_COLOR, monochrome terminals)

BLOCKS = np.array(list(" ▁▂▃▄▅▆▇█"))
BRAILLE = np.array(list(" ⡀⡄⡆⡇⣇⣧⣷⣿"))     # small kernels: dotted
SHADES = np.array(list(" ░░▒▒▓▓██"))       # NCCL
MEMS = np.array(list(" ╌╌╌╌════"))         # memcpy / memset
HW_GLYPHS = np.stack([BLOCKS, BRAILLE, SHADES, MEMS])   # [category, level]
SPARK = np.array(list(" ▁▂▃▄▅▆▇"))
HIGHLIGHT_GLYPH = "◆"
SPIKE_GLYPH = "!"
FULL_GLYPH = "█"                            # queue at or above the threshold (sparkline tops at ▇)

# style codes -> Rich styles (colours chosen to survive 256-colour down-sampling)
S_NONE, S_API, S_SPIKE, S_KERNEL, S_SMALL, S_NCCL, S_MEM, S_HIGHLIGHT, S_QUEUE, S_QFULL, \
    S_TICK, S_RULER, S_EP_FULL, S_EP_NEAR, S_EP_SPIKE, S_SEL, S_MARK, S_DEV, S_DIM, S_MULTI = range(20)
S_NVTX0 = 20
NVTX_BG = ("#303a6e", "#2e5a3a", "#6a3434", "#2f5866", "#5e5a2c", "#553266")
STYLES = [
    Style(),
    Style(color="#5fafff"),
    Style(color="#ffffff", bgcolor="#af0000", bold=True),
    Style(color="#5fd75f"),
    Style(color="#ffd75f"),
    Style(color="#d787d7"),
    Style(color="#5fd7d7"),
    Style(color="#ffffff", bgcolor="#870087", bold=True),
    Style(color="#87afd7"),
    Style(color="#ff3030", bold=True),
    Style(color="#bcbcbc"),
    Style(color="#6c6c6c"),
    Style(color="#ff3030", bold=True),
    Style(color="#ffaf00", bold=True),
    Style(color="#ff8700", bold=True),
    Style(color="#00d7ff", bold=True),
    Style(color="#00d7ff", bold=True),
    Style(color="#ffffff", bold=True),
    Style(color="#6c6c6c", italic=True),
    Style(color="#8a8a8a"),
] + [Style(color="#ffffff", bgcolor=c) for c in NVTX_BG]
HW_STYLE = np.array([S_KERNEL, S_SMALL, S_NCCL, S_MEM], np.int16)
CURSOR_STYLE = Style(reverse=True)
SELECT_STYLE = Style(bgcolor="#1c3a4a")
LABEL_STYLE = Style(color="#d0d0d0")
LABEL_SEL_STYLE = Style(color="#000000", bgcolor="#d0d0d0", bold=True)
LABEL_DEV_STYLE = Style(color="#ffffff", bold=True)
LABEL_WARN_STYLE = Style(color="#ff3030", bold=True)

def legend(cfg=CONFIG, idle: bool = False, first: str | None = None) -> str:
    """The glyph legend, with the thresholds of the analysis config; `idle`: with the idle row's
    entry; `first`: the row kind whose entry leads (the cursor's row: the line is cut at the width)."""
    parts = {"hw": f"HW █ kernel ⣿ small<{cfg.small_kernel_ns / 1000:g}µs ▓ NCCL ═ mem ◆ chosen",
             "idle": idle_row.legend_entry() if idle else "",
             "api": "API █ busy launching ! spike", "queue": f"queue ▁▇ pending █ ≥{cfg.queue_threshold}",
             "axis": "axis ━ episode ▲ blocked/spike △ not blocked ╎ iteration"}
    order = sorted(parts, key=lambda k: k != first)     # stable: the others keep their order
    return " │ ".join(parts[k] for k in order if parts[k])


LEGEND = legend()


def cells_to_strip(text: str, codes: np.ndarray, styles=STYLES) -> Strip:
    """Run-length encode equal style codes into segments (one Python step per run, not per cell)."""
    n = len(codes)
    if not n:
        return Strip([], 0)
    cut = np.nonzero(codes[1:] != codes[:-1])[0] + 1
    bounds = [0, *cut.tolist(), n]
    segs = [Segment(text[a:b], styles[int(codes[a])]) for a, b in zip(bounds[:-1], bounds[1:])]
    return Strip(segs, n)
