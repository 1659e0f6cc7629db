"""`--capture CAPTURE_TRACE` on `launchtui TRACE`, `report` and `record`: the capture ↔ replay join
(docs/definitions.md §12.6) added to what the command shows. Without the option nothing changes."""
from __future__ import annotations

CAPTURE_HELP = ("a capture trace of the same program (graph captures with their launch calls): label each "
                "replayed kernel with the op, range and call site it was captured from")


def add_capture(cmd: str, parser):
    """`parser`, with `--capture` when `cmd` is a command that shows replays."""
    if cmd in ("report", "record", "tui"):
        parser.add_argument("--capture", metavar="CAPTURE_TRACE", help=CAPTURE_HELP)
    return parser


def with_capture(doc: dict, trace, args) -> str:
    """Without --capture: "" and `doc` unchanged. With it: `doc["graph_join"]` (§12.6) and the text
    report's section."""
    path = getattr(args, "capture", None)
    if not path:
        return ""
    from launchtui.analysis.graphs_join_report import join_document, render_join
    from launchtui.capture_join import capture_join
    j = capture_join(trace, path, not getattr(args, "no_cache", False))
    doc["graph_join"] = join_document(trace, j)
    return "\n" + "\n".join(render_join(doc["graph_join"], getattr(args, "limit", 0) or 0)) + "\n"


def record_capture(doc: dict, trace, args) -> tuple[dict, str]:
    """Without --capture: (`doc` as it is, ""). With it: a copy of the record with `graph_join`
    (the stored record is left as computed) and a Markdown section after the replay table."""
    path = getattr(args, "capture", None)
    if not path:
        return doc, ""
    from launchtui.analysis.graphs_join_report import join_document, join_markdown
    from launchtui.capture_join import capture_join
    j = capture_join(trace, path, not getattr(args, "no_cache", False))
    doc = dict(doc, graph_join=join_document(trace, j))
    return doc, "\n" + "\n".join(join_markdown(doc["graph_join"])) + "\n"


def refuse_unused_capture(args, where: str) -> None:
    """A `--capture` the command would not use is refused (exit 2), never ignored: `where` names the
    option that leaves it unused (`--by source` ranks call sites of eager launches; `--compare` aligns
    two timelines)."""
    if getattr(args, "capture", None):
        from launchtui.errors import UsageError
        raise UsageError(f"--capture is not used with {where}: it labels replayed kernels in the kernel "
                         "report, the record and the single-trace TUI", args.capture)
