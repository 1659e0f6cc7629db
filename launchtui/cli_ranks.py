"""`launchtui report|record DIR`, several files or a glob, and `launchtui DIR`: the ranks view."""
from __future__ import annotations

import argparse
import sys

# options of the ranks view that take a value (so the single-trace parser can skip their values)
RANKS_VALUE_OPTIONS = ("--workers", "--scheduler")


def positionals(parser: argparse.ArgumentParser, tokens: list[str], value_options=()) -> list[str]:
    """The positional arguments among `tokens`, options in any order: each option of `parser` (and
    each of `value_options`, which take one value) skips the values it takes, so `--scheduler
    ADDRESS DIR` names DIR, not ADDRESS. `--opt=value` takes its value with it; after `--` all
    tokens are positional."""
    takes = {o: a.nargs for a in parser._actions for o in a.option_strings}
    takes.update({o: None for o in value_options})
    out, i = [], 0
    while i < len(tokens):
        t = tokens[i]
        i += 1
        if t == "--":
            return out + tokens[i:]
        if not t.startswith("-") or t == "-" or _is_number(t):
            out.append(t)
            continue
        name, eq, _ = t.partition("=")
        n = takes.get(name, 0) if not eq else 0
        if n is None:          # one value
            i += 1
        elif isinstance(n, int):
            i += n
        else:                  # "+", "*", "?": the values up to the next option
            while i < len(tokens) and (not tokens[i].startswith("-") or _is_number(tokens[i])):
                i += 1
    return out


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def build_parser(cmd: str) -> argparse.ArgumentParser:
    prog = "launchtui" if cmd == "tui" else f"launchtui {cmd}"
    p = argparse.ArgumentParser(prog=prog, description="One job from its per-rank traces: a directory, several "
                                "files or a glob. Each rank is analysed where it is loaded; stragglers are flagged.")
    p.add_argument("traces", nargs="+", help="directory, trace files, or a quoted glob")
    p.add_argument("--json", action="store_true", help="the launchtui-ranks/1 JSON document")
    p.add_argument("-o", "--output", help="write to this file (atomically) instead of stdout")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.add_argument("--no-cache", action="store_true", help="read every trace afresh; do not use or fill the cache")
    p.add_argument("--workers", type=int, metavar="N", help="worker processes on this machine (default: its cores)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run on this Dask cluster: scheduler address or scheduler file (also "
                        "$LAUNCHTUI_DASK_SCHEDULER); workers read the files by path")
    return p


def main(cmd: str, argv: list[str]) -> int:
    from launchtui.errors import UsageError
    from launchtui.output import dumps
    from launchtui.ranks.job import run_job
    from launchtui.ranks.render import render_markdown
    args = build_parser(cmd).parse_args(argv)
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers {args.workers}: needs at least 1")
    if cmd == "tui":
        from launchtui.tui.ranks_view import run_ranks_app
        return run_ranks_app(args)
    doc = run_job(args.traces, scheduler=args.scheduler, workers=args.workers, use_cache=not args.no_cache)
    text = dumps(doc) if (args.json or cmd == "record") else render_markdown(doc)
    if args.output:
        from launchtui.output import write_atomic
        path = write_atomic(args.output, text, force=args.force)
        print(f"launchtui: wrote {path}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
