"""Command line: `launchtui TRACE` opens the TUI; `info`, `report`, `export`, `cache` run headless."""
from __future__ import annotations

import argparse
import sys

from launchtui import __version__, heap
from launchtui.analysis.config import CONFIG
from launchtui.cli_capture import add_capture, record_capture, refuse_unused_capture, with_capture
from launchtui.errors import TraceError, memory_message, printable

SUBCOMMANDS = ("info", "report", "record", "export", "diff", "cache", "tui")
SUBCOMMAND_LINES = {   # `launchtui --help`: every subcommand, one line each
    "info": "what a trace holds and what its gaps disable",
    "report": "small-and-frequent kernels, queue depth per stream, backpressure",
    "record": "the case record: per-iteration launch overhead, queue classes, top kernels, fixes",
    "export": "one window as JSON (or --format chrome: a Chrome trace for Perfetto / HTA)",
    "diff": "before/after comparison of two traces, with a verdict and --fail-if gates",
    "cache": "the per-user cache of loaded traces: clear | info"}
MAX_TRIM_S = 9.2e9       # int64 ns on any clock, epoch clocks included
MAX_US = 1e12            # µs options: larger values select nothing a real trace holds
MAX_FACTOR = 1e6
MAX_COUNT = 2**62


class _Parser(argparse.ArgumentParser):
    """Argument errors are one line (`launchtui: report: argument --trim: ...`), exit status 2."""

    def error(self, message):
        from launchtui.errors import UsageError
        cmd = self.prog.removeprefix("launchtui").strip()  # bare `launchtui`: no second prefix
        raise UsageError(f"{cmd + ': ' if cmd else ''}{message} (see {self.prog} --help)")


def _number(kind, lo, hi, what):
    """A parse-time type: a finite number of `kind` in [lo, hi] (NaN, inf, 1e400 refused)."""
    def parse(text: str):
        try:
            v = float(text) if kind is float else int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not (lo <= v <= hi):  # NaN fails both comparisons
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} between {lo:g} and {hi:g}")
        return v
    parse.__name__ = what
    return parse


_seconds = _number(float, -MAX_TRIM_S, MAX_TRIM_S, "a finite number of seconds")
_micros = _number(float, 0, MAX_US, "a finite number of µs")
# a "below X µs" bound: 0 selects nothing, and ratios to it (record's distance to qualifying) need X > 0
_bound_us = _number(float, 1e-3, MAX_US, "a finite number of µs (1 ns or more)")
_factor = _number(float, 0, MAX_FACTOR, "a finite factor")
_count = _number(int, 0, MAX_COUNT, "a whole number")
_depth = _number(int, 1, 2**31 - 1, "a queue depth")


def _device(text: str) -> str:
    if text.strip().lower() == "all":
        return "all"
    try:
        d = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a device number or 'all'") from None
    if not 0 <= d < 2**31:
        raise argparse.ArgumentTypeError(f"{text!r} is not a device number (0 or more)")
    return str(d)


def _selection_args(p: argparse.ArgumentParser, trim_required: bool = False) -> None:
    p.add_argument("--trim", nargs=2, type=_seconds, metavar=("A", "B"), required=trim_required,
                   help="window in seconds on the trace's own clock; a GPU op counts when fully inside")
    p.add_argument("--device", default="all", type=_device, help="device number, or 'all' (default)")
    p.add_argument("--nvtx", metavar="NAME", help="only ops launched inside ranges whose name contains NAME "
                                                  "(case-insensitive), e.g. optim")
    p.add_argument("--no-cache", action="store_true", help="read the trace afresh; do not use or fill the cache")


def _table_args(p: argparse.ArgumentParser) -> None:
    c = CONFIG
    p.add_argument("--min-launches", type=_count, default=c.min_launches, metavar="N",
                   help=f"launches a kernel needs ({c.min_launches})")
    p.add_argument("--max-avg-us", type=_bound_us, default=c.max_avg_us, metavar="X",
                   help=f"average kernel time below X µs ({c.max_avg_us:g})")
    p.add_argument("--limit", type=_count, default=c.table_limit, metavar="N",
                   help=f"rows to show; 0 = no limit ({c.table_limit})")
    p.add_argument("--names", choices=("short", "full"), default=c.names,
                   help="group by Nsight's short name (default) or a distinguishing name "
                        "(elementwise_kernel<AddcmulFunctor>)")
    p.add_argument("--thresholds", type=_depth, nargs="+", default=list(c.thresholds), metavar="T",
                   help=f"queue depths to report time at or above ({c.queue_threshold} {c.queue_full}); "
                        "the first marks episodes, the second saturation")
    p.add_argument("--spike-us", type=_micros, default=c.spike_us,
                   help=f"launch spike: API time above this ({c.spike_us:g} µs)")
    p.add_argument("--spike-factor", type=_factor, default=c.spike_factor,
                   help=f"... and above this × the thread median ({c.spike_factor:g})")


def _info_parser() -> argparse.ArgumentParser:
    """`launchtui info TRACE`: what a trace holds."""
    p = _Parser(prog="launchtui info", description="What a trace holds and what its gaps disable.")
    p.add_argument("trace")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-cache", action="store_true")
    return p


def _report_parser() -> argparse.ArgumentParser:
    """`launchtui report TRACE`: the launch-overhead report."""
    p = _Parser(prog="launchtui report", description="Launch-overhead report: small-and-frequent "
                                "kernels, queue depth per stream, backpressure.")
    p.add_argument("trace")
    p.add_argument("--json", action="store_true", help="one JSON document (schema in README)")
    p.add_argument("-o", "--output", help="write to this file (atomically) instead of stdout")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    _selection_args(p)
    _table_args(p)
    p.add_argument("--by", choices=("kernel", "source"), default="kernel",
                   help="kernel (default): the launch-overhead report; source: call sites of the launches "
                        "(file:line function) from the trace's call stacks")
    p.add_argument("--source-filter", metavar="SPEC", help="which frames count as user code with --by source: "
                   "'-TEXT' marks files containing TEXT as library, '+TEXT' as user, 'none' drops the default "
                   "rule (site-packages, standard library, torch/triton internals); comma-separated")
    return p


def _record_parser() -> argparse.ArgumentParser:
    """`launchtui record TRACE`: the case record."""
    p = _Parser(prog="launchtui record", description="The case record (launch page): launches "
                                "and exposed launch overhead per iteration, queue class per stream, top small "
                                "kernels with phase and fix, Amdahl bound, cross-checks.")
    p.add_argument("trace")
    p.add_argument("--iter", metavar="NAME", help="iterations are the NVTX ranges whose name contains NAME "
                                                  "(case-insensitive); default: ProfilerStep#N, a step-like "
                                                  "range, a repeating launch sequence, else the whole window")
    p.add_argument("--phase-level", type=_count, default=1, metavar="N",
                   help="phase path depth below the iteration (1 = outermost range inside it)")
    p.add_argument("--json", action="store_true", help="JSON (schema launchtui-record/1) instead of Markdown")
    p.add_argument("-o", "--output", help="write to this file (atomically) instead of stdout")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    _selection_args(p)
    _table_args(p)
    return p


def _export_parser() -> argparse.ArgumentParser:
    """`launchtui export TRACE`: one window as JSON, or a Chrome trace."""
    p = _Parser(prog="launchtui export", description="JSON of one window: its API calls, GPU "
                                "ops and NVTX ranges, plus the analyses restricted to it; or, with --format "
                                "chrome, a Chrome Trace Event file in Kineto's conventions (Perfetto, "
                                "chrome://tracing, HTA and launchtui open it).")
    p.add_argument("trace")
    p.add_argument("-o", "--output", help="output file (default: stdout); with --format chrome, gzip-compressed "
                                          "when the name ends in .gz")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.add_argument("--format", choices=("launchtui", "chrome"), default="launchtui",
                   help="launchtui (default): launchtui's own range document; chrome: Chrome Trace Event JSON "
                        "(Kineto conventions) with the record's idle causes, queue depth and marks")
    p.add_argument("--iter", metavar="NAME", help="iterations for the record (the chrome marks, or with "
                                                  "--phase-level the analysis' record) are the ranges whose "
                                                  "name contains NAME")
    p.add_argument("--phase-level", type=_count, default=None, metavar="N",
                   help="also write the case record of the window (analysis.record) with phases at this "
                        "depth below the iteration, as the TUI's verdict panel shows it")
    _selection_args(p, trim_required=False)
    _table_args(p)
    return p


def _diff_parser() -> argparse.ArgumentParser:
    """`launchtui diff BEFORE AFTER`: two traces compared."""
    p = _Parser(prog="launchtui diff", description="Before/after comparison of two traces (any "
                                "formats): per-iteration launches, overhead and time, streams, kernels, verdict.")
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--iter", metavar="NAME", help="iterations are the NVTX ranges whose name contains NAME "
                                                  "(default: ProfilerStep#N, else the whole window)")
    p.add_argument("--json", action="store_true", help='one JSON document ("schema": "launchtui-diff/1")')
    p.add_argument("-o", "--output", help="write to this file (atomically) instead of stdout")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.add_argument("--fail-if", action="append", metavar="EXPR", default=[],
                   help="exit 1 when a gate trips: launches_per_iter>+5%% (relative change), "
                        "exposed_overhead_ms>+0.5 (signed change), share>0.10 (after value); repeatable")
    p.add_argument("--no-cache", action="store_true", help="read the traces afresh; do not use or fill the cache")
    return p


def _cache_parser() -> argparse.ArgumentParser:
    """`launchtui cache clear|info`."""
    p = _Parser(prog="launchtui cache", description="The per-user cache of loaded traces.")
    p.add_argument("action", choices=("clear", "info"))
    return p


def _tui_parser() -> argparse.ArgumentParser:
    """`launchtui TRACE`: the TUI."""
    p = _Parser(prog="launchtui", description="Terminal triage of CUDA kernel-launch overhead. "
                                "`launchtui TRACE` opens the TUI (the bundled demo: fixtures/demo/demo.sqlite).",
                epilog="subcommands (launchtui COMMAND --help for each):\n"
                       + "\n".join(f"  {c:<8}{line}" for c, line in SUBCOMMAND_LINES.items()),
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("--version", action="version", version=f"launchtui {__version__}")
    p.add_argument("--compare", metavar="AFTER", help="compare with a second trace: both timelines aligned on an "
                                                       "iteration, kernels with before/after/Δ, the diff's verdict")
    p.add_argument("--iter", metavar="NAME", help="with --compare: iterations are the ranges whose name contains NAME")
    _selection_args(p)
    return p


def build_parser(cmd: str) -> argparse.ArgumentParser:
    """The parser of subcommand `cmd` (SUBCOMMANDS; "tui" is bare `launchtui TRACE`). Only the one a
    run uses is built: building all seven took ~4 ms of every command's start."""
    makers = {"info": _info_parser, "report": _report_parser, "record": _record_parser, "export": _export_parser,
              "diff": _diff_parser, "cache": _cache_parser, "tui": _tui_parser}
    return add_capture(cmd, makers[cmd]())


def _report_options(args):
    from launchtui.analysis.backpressure import Options
    from launchtui.analysis.report import ReportOptions
    th = tuple(args.thresholds)
    return ReportOptions(min_launches=args.min_launches, max_avg_us=args.max_avg_us, limit=args.limit, names=args.names,
                         thresholds=th, backpressure=Options(threshold=th[0], full=th[1] if len(th) > 1 else th[0],
                                                             spike_us=args.spike_us, spike_factor=args.spike_factor))


def _emit(text: str, args) -> None:
    args._emitted = text  # what session.cached_output stores
    if getattr(args, "output", None) is not None:
        from launchtui.output import write_atomic
        path = write_atomic(args.output, text, force=args.force)
        print(f"launchtui: wrote {printable(path)}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def _open(args, need_cuda: bool = False, shared: bool = False):
    """The session.Session of args.trace; with `need_cuda`, its index asked for once, before any
    analysis. `shared`: its queries reuse one analysis.shared.Shared (kernel groups and spikes
    computed once for the report and the record)."""
    from launchtui.errors import TraceError
    from launchtui.session import Index, Session
    session = Session.open(args.trace, use_cache=not getattr(args, "no_cache", False))
    trace = session.trace
    if need_cuda and not trace.has_cuda_tables:
        if foreign := trace.source.extra.get("foreign"):
            raise TraceError(args.trace, f"no CUDA or HIP activity launchtui can read: {foreign}")
        raise TraceError(args.trace, "no CUDA activity in this trace (no CUDA API calls or GPU ops); "
                                  "`launchtui info` describes what it holds")
    if shared:
        from launchtui.analysis.shared import Shared
        session.use_shared(Shared(trace))
    if need_cuda:
        session.get(Index())
    heap.recycle_large_blocks()   # the model and index are built: the analyses' temporaries are reused
    return session


def cmd_info(args) -> int:
    from launchtui.analysis.info import render_info, trace_info
    from launchtui.output import dumps
    session = _open(args)
    info = trace_info(session.trace)
    _emit(dumps(info) if args.json else render_info(info), args)
    session.commit()
    return 0


def _record_options(args):
    from launchtui.analysis.record import RecordOptions
    from launchtui.errors import UsageError
    level = getattr(args, "phase_level", None)
    level = 1 if level is None else level     # export: --phase-level is optional
    if level < 1:
        raise UsageError(f"--phase-level {level}: expected 1 or more", args.trace)
    return RecordOptions(iter_name=getattr(args, "iter", None), min_launches=args.min_launches,
                         max_avg_us=args.max_avg_us, phase_level=level, names=args.names,
                         backpressure=_report_options(args).backpressure)


def cmd_record(args) -> int:
    from launchtui.analysis.record_markdown import render_markdown
    from launchtui.analysis.select import selection_from_args
    from launchtui.output import dumps
    from launchtui.analysis.shared import lane_fits
    from launchtui.session import Record
    session = _open(args, need_cuda=True, shared=True)
    if lane_fits(session.trace):   # the record's independent parts beside each other
        session.shared.lend_lane()
    query = Record(selection_from_args(session.trace, args), _record_options(args))
    doc, joined = record_capture(session.get(query)[0], session.trace, args)   # as stored, without --capture
    _emit(dumps(doc) if args.json else render_markdown(doc) + joined, args)
    session.commit(query)
    return 0


def cmd_report(args) -> int:
    from launchtui.analysis.launches import group_totals
    from launchtui.analysis.report import build_report, render_text, selection_stats_of
    from launchtui.analysis.select import selection_from_args
    from launchtui.analysis.shared import lane_fits, side_by_side
    from launchtui.output import dumps
    from launchtui.session import Backpressure, KernelGroups, Record, SelectionStats
    if args.by == "source":
        refuse_unused_capture(args, "--by source")
        return _report_sources(args)
    session = _open(args, need_cuda=True, shared=True)
    trace = session.trace
    sel = selection_from_args(trace, args)
    opt = _report_options(args)
    record = Record(sel, _record_options(args)) if args.json else None
    record_value = lambda: session.get(record)   # noqa: E731 - after the report, in this thread
    beside = record is not None and side_by_side()
    if beside:   # the record beside the report (definitions §9)
        import launchtui.analysis.record  # noqa: F401 - its imports run here, not in two threads at once
        session.shared.hold_groups(2)   # the report's and the record's: the last to finish drops them
        if lane_fits(trace):   # and the record's independent parts beside each other
            session.shared.lend_lane()
        pending = session.start(record)
        record_value = lambda: session.shared.wait_helping(pending)   # noqa: E731
    bp = session.get(Backpressure(sel, opt.backpressure))
    doc = build_report(trace, sel, opt, session.shared, bp=bp)
    joined = with_capture(doc, trace, args)   # "" and no change without --capture
    # what the TUI's first open asks for too, under the same queries
    keep = [Backpressure(sel, opt.backpressure), KernelGroups(sel, opt.names),
            SelectionStats(sel, opt.backpressure)]    # its queues' thresholds start with this one
    session.put(keep[1], group_totals(session.shared.kernel_groups(sel, opt.names)))
    if beside:
        session.shared.release_groups()   # the report's last read: the record's gaps run without them
    session.put(keep[2], selection_stats_of(doc["launches"], doc["queues"], opt.backpressure.threshold))
    if record is not None:
        keep.append(record)
        doc["record"] = record_value()[0]
    _emit(dumps(doc) if args.json else render_text(doc) + joined, args)
    session.commit(*keep)
    return 0


def _report_sources(args) -> int:
    from launchtui.analysis.select import selection_from_args
    from launchtui.analysis.sources import SourceFilter, build_source_report, render_source_report
    from launchtui.errors import UsageError
    from launchtui.output import dumps
    try:
        flt = SourceFilter.parse(args.source_filter)
    except ValueError as e:
        raise UsageError(str(e), args.trace) from None
    session = _open(args, need_cuda=True)
    trace = session.trace
    doc = build_source_report(trace, selection_from_args(trace, args), flt, args.limit, args.names)
    _emit(dumps(doc) if args.json else render_source_report(doc), args)
    session.commit()
    return 0


def cmd_export(args) -> int:
    from launchtui.analysis.select import selection_from_args
    session = _open(args, need_cuda=True)
    trace = session.trace
    sel = selection_from_args(trace, args)
    if args.format == "chrome":
        from launchtui.analysis.chrome_export import chrome_chunks
        _emit_chunks(chrome_chunks(trace, sel, _record_options(args)), args, compress=str(args.output).endswith(".gz"))
    else:
        from launchtui.analysis.export import export_text
        ropt = _record_options(args) if args.phase_level is not None else None
        _emit_chunks(export_text(trace, sel, _report_options(args), ropt), args)
    session.commit()
    return 0


def _emit_chunks(chunks, args, compress: bool = False) -> None:
    """An export, streamed: to -o (atomically; gzip with `compress`) or stdout. Text pieces go to
    stdout as text (a caller in process may have swapped it for a StringIO), bytes to its buffer."""
    if args.output is None:
        for c in chunks:
            if isinstance(c, str):
                sys.stdout.write(c)
            else:
                sys.stdout.buffer.write(c)
        sys.stdout.flush()
        return
    chunks = (c.encode("utf-8") if isinstance(c, str) else c for c in chunks)
    from launchtui.output import write_atomic_chunks
    path = write_atomic_chunks(args.output, chunks, force=args.force, compress=compress)
    print(f"launchtui: wrote {printable(path)}", file=sys.stderr)


def cmd_diff(args) -> int:
    from concurrent.futures import ThreadPoolExecutor

    from launchtui.analysis.diff_inputs import diff_document
    from launchtui.analysis.diff_markdown import render_markdown
    from launchtui.analysis.gates import evaluate, parse_gates, tripped_line
    from launchtui.output import dumps
    from launchtui.session import default_record, default_records
    gates = parse_gates(args.fail_if)  # bad gate syntax fails before any trace is read
    with ThreadPoolExecutor(2) as pool:
        sessions = list(pool.map(lambda p: _open(argparse.Namespace(trace=p, no_cache=args.no_cache), need_cuda=True),
                                 (args.before, args.after)))
    heap.recycle_large_blocks()   # in the workers it does nothing: set once both are read
    # each side's record as `report --json` stores it: found, not recomputed
    records = default_records(sessions, args.iter)
    doc = diff_document(*(s.trace for s in sessions), iter_name=args.iter, records=records)
    tripped = evaluate(gates, doc)
    _emit(dumps(doc) if args.json else render_markdown(doc), args)
    for session in sessions:
        session.commit(default_record(args.iter))
    for g, x in tripped:
        print(f"launchtui: {tripped_line(g, x, doc)}", file=sys.stderr)
    return 1 if tripped else 0


def cmd_cache(args) -> int:
    from launchtui import session
    if args.action == "clear":
        print(f"launchtui: {session.clear_store()}")
    else:
        print(session.store_info())
    return 0


def cmd_tui(args) -> int:
    from launchtui.trace.load import preflight
    for path in (args.trace, getattr(args, "compare", None), getattr(args, "capture", None)):
        if path:
            preflight(path)
    if getattr(args, "compare", None):
        refuse_unused_capture(args, "--compare")
        from launchtui.tui.compare import run_compare
        return run_compare(args)
    from launchtui.tui.app import run_app
    return run_app(args)


def main(argv: list[str] | None = None, *, restore_heap: bool = True) -> int:
    """The CLI (`argv`: the arguments after `launchtui`, else sys.argv's). `restore_heap`: leave glibc's
    policy as found once done (`_guard`), for a run in a process that goes on; the command's own
    process, which ends next, skips it (launchtui/entry.py)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        cmd, rest = argv[0], argv[1:]
    else:
        cmd, rest = "tui", argv
    handler = {"info": cmd_info, "report": cmd_report, "record": cmd_record, "export": cmd_export, "diff": cmd_diff,
               "cache": cmd_cache, "tui": cmd_tui}[cmd]

    def run() -> int:  # argument errors too are one line (inside the guard)
        parser = build_parser(cmd)
        if _is_ranks_command(cmd, rest, parser):
            return _ranks_main(cmd, rest)
        heap.one_arena()   # before the command's threads allocate (the TUI's load worker takes it over)
        from launchtui.session import cached_output
        return cached_output(cmd, parser.parse_args(rest), handler, _emit)
    return _guard(run, restore_heap)


def _is_ranks_command(cmd: str, rest: list[str], parser: argparse.ArgumentParser) -> bool:
    """Whether report/record/the TUI got a directory, several traces or a glob (`rest`: the
    arguments after the subcommand)."""
    if cmd not in ("report", "record", "tui") or not rest or {"-h", "--help", "--version"} & set(rest):
        return False
    from launchtui.cli_ranks import RANKS_VALUE_OPTIONS, positionals
    from launchtui.ranks.discover import is_multi
    traces = positionals(parser, rest, RANKS_VALUE_OPTIONS)
    return bool(traces) and is_multi(traces)


def _ranks_main(cmd: str, rest: list[str]) -> int:
    from launchtui.cli_ranks import main as ranks_main
    return ranks_main(cmd, rest)


def _guard(run, restore_heap: bool = True) -> int:
    try:
        return run()
    except TraceError as e:
        print(f"launchtui: {e}", file=sys.stderr)
        return 2
    except MemoryError:  # outside a reader (which names the file and what it needs)
        print(f"launchtui: {memory_message()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    finally:   # an in-process run (tests, scripts) leaves glibc's policy as it found it
        if restore_heap:
            heap.default_large_blocks()
