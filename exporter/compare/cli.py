"""``sglang-exporter compare RUN...``: options, input checks, output, exit status."""

from __future__ import annotations

import argparse
import json
import math
import sys

from ..commands import parse_arguments
from ..report.plots import have_matplotlib
from ..report.schema import jsonable
from ..status import PROG as COMMAND
from ..status import ExitStatus, interrupted, os_error, usage_error, write_output
from . import document, plots, render
from .runs import RunError, load

PROG = f"{COMMAND} compare"
EXIT_CODES = (f"Exit codes: {ExitStatus.OK:d} done; {ExitStatus.RUNTIME:d} a file could not be read or written; "
              f"{ExitStatus.USAGE:d} bad arguments or an input that is missing; {ExitStatus.NO_SCHEDULER_LINES:d} "
              "a run's logs hold no SGLang scheduler line (the comparison is printed, with one warning per such "
              f"run); {ExitStatus.INTERRUPTED:d} stopped by Ctrl-C.")


# every subcommand's parser: argparse errors become one line and exit code 2, as for every subcommand
from ..commands import SubcommandParser as _Parser  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    """The ``compare`` subcommand's argument parser."""
    p = _Parser(prog=PROG, description=(
        "Compare runs of several configurations (the method's experiment, docs/method.md): one row per "
        "setting of the swept parameter (max_running_requests unless --sweep names another), repeats grouped "
        "(median and range), the knee, and the online and offline choices. Each run's log figures are "
        "those of `sglang-exporter report LOG`; the client figures come from SGLang's benchmark client's "
        f"--output-file. {EXIT_CODES}"))
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="one run: LOG (a file or a quoted glob of its segments) or LOG=CLIENT.jsonl; without "
                        "=CLIENT the file beside LOG with the same stem and .jsonl is read if it exists")
    p.add_argument("--ttft-slo", type=float, metavar="SECONDS",
                   help="P99 TTFT target of the online choice (> 0)")
    p.add_argument("--tpot-slo", type=float, metavar="SECONDS",
                   help="P99 TPOT target the online choice must also meet (> 0; with --ttft-slo)")
    p.add_argument("--sweep", metavar="NAME", help="the swept server_args name (default: max_running_requests "
                   "when it differs, else the setting that differs)")
    p.add_argument("--format", choices=("text", "json", "html"), default="text", help="output format (default text)")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout (required for html)")
    p.add_argument("--wide", action="store_true",
                   help="text: every column (default: the main columns, within 120 characters)")
    p.add_argument("--plots", metavar="DIR", help="also write the three plots (throughput, latency, Pareto "
                   "front) as PNG files into DIR")
    return p


def _check(args) -> str | None:
    if args.ttft_slo is not None and not (math.isfinite(args.ttft_slo) and args.ttft_slo > 0):
        return f"argument --ttft-slo: {args.ttft_slo:g} is not a number of seconds > 0"
    if args.tpot_slo is not None and not (math.isfinite(args.tpot_slo) and args.tpot_slo > 0):
        return f"argument --tpot-slo: {args.tpot_slo:g} is not a number of seconds > 0"
    if args.tpot_slo is not None and args.ttft_slo is None:
        return "argument --tpot-slo: needs --ttft-slo"
    if args.format == "html" and not args.output:
        return "argument --output: required with --format html"
    if (args.plots or args.format == "html") and not have_matplotlib():
        return ("argument --plots: needs matplotlib (in a clone: .venv/bin/pip install -e '.[report]'; "
                "else pip install 'sglang-exporter[report]')")
    return None


def main(argv: list[str] | None = None) -> int:
    """Run ``sglang-exporter compare``; ``argv`` excludes the word ``compare``. Returns the exit status."""
    args = parse_arguments(build_parser(), argv, _check, PROG)
    if isinstance(args, int):
        return args
    try:
        runs = []
        for spec in args.runs:
            try:
                runs.append(load(spec))
            except RunError as exc:
                return usage_error(f"argument RUN: {exc}", PROG)
        doc = document.build(runs, args.ttft_slo, args.sweep, args.tpot_slo)
        images = plots.make_plots(doc, args.plots) if (args.plots or args.format == "html") else {}
        if args.format == "json":
            out = json.dumps(jsonable(doc), indent=2) + "\n"
        elif args.format == "html":
            out = render.html(doc, images)
        else:
            out = render.text(doc, args.wide)
        write_output(out, args.output)
    except OSError as exc:
        return os_error(exc, PROG)
    except KeyboardInterrupt:
        return interrupted(PROG)
    empty = [r for r in runs if not any(i.scheduler_lines for i in r.inputs)]
    for r in empty:
        lines = sum(i.lines for i in r.inputs)
        error_line = (f"{PROG}: warning: no SGLang scheduler line in run {r.spec!r} "
                      f"({lines:,} line{'s' if lines != 1 else ''} read): its log figures are n/a")
        print(error_line, file=sys.stderr)
    return ExitStatus.NO_SCHEDULER_LINES if empty else ExitStatus.OK
