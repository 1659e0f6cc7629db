"""pyprof's and DLProf's NVTX markers: the repr of a Python dict whose `traceMarker` lists the call
stack as 'file:line' strings, outermost first (definitions.md §V5, §S1). Plain `re`, no numpy: the
TUI's prose imports it at start."""
from __future__ import annotations

import re

# the marker's stack list: group 1 is the text between its brackets
TRACE_MARKER = re.compile(r"'traceMarker': \[([^\]]*)\]")
