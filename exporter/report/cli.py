"""``sglang-exporter report``: options, input checks, output, exit status."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from ..commands import SubcommandParser, parse_arguments
from ..limits import (
    CHUNKED_PREFILL_SIZE_MAX,
    CHUNKED_PREFILL_SIZE_MIN,
    DECODE_LOG_INTERVAL_MAX,
    DECODE_LOG_INTERVAL_MIN,
    DEFAULT_DECODE_LOG_INTERVAL,
)
from ..paths import display_path, file_problem
from ..sources.log.glob import has_glob, regular_matches
from ..status import ExitStatus, interrupted, os_error, usage_error, write_output
from . import html as html_page
from . import plots
from .analyse import analyse
from .baseline import BASELINE_SCHEMA, compare
from .files import PROG, InputFile, read_logs
from .kv import model_kv_bytes_per_token
from .read import Recorder
from .schema import jsonable
from .text import text

#: Bounds of the report's own numeric options (the shared ones come from :mod:`exporter.limits`).
WINDOW_RANGE = (0.001, 1e9)
KV_BYTES_RANGE = (0.0, 64.0)  # exclusive low: fp4 is 0.5, float64 8

EXIT_CODES = (f"Exit codes: {ExitStatus.OK:d} done; {ExitStatus.RUNTIME:d} a file could not be read or written; "
              f"{ExitStatus.USAGE:d} bad arguments, or an input that is missing, a directory or unreadable; "
              f"{ExitStatus.NO_SCHEDULER_LINES:d} no SGLang scheduler line in the input (the report is printed, "
              f"with a warning naming the file); {ExitStatus.INTERRUPTED:d} stopped by Ctrl-C.")


# every subcommand's parser: argparse errors become one line and exit code 2, an unknown flag gets
# the closest known one
_Parser = SubcommandParser


def build_parser() -> argparse.ArgumentParser:
    """The ``report`` subcommand's argument parser."""
    p = _Parser(prog=PROG, description=(
        "Answer the performance-validation checklist from recorded SGLang logs: batch size, retractions "
        "and the 5% rule, throughput truth (recompute), KV capacity in requests, queue and latency "
        "percentiles, scenario. A figure the log cannot give is n/a with its reason. Several LOG files are "
        "one run (rotated segments in order, or the nodes of one group). The settings the sidecar also has "
        "take its names too (--sglang.decode-log-interval = --decode-log-interval). " + EXIT_CODES))
    p.add_argument("logs", nargs="+", metavar="LOG", help="recorded SGLang log file(s) or a quoted glob "
                   "('logs/*.log': its files in name order, as the shell's); .gz allowed")
    p.add_argument("--format", choices=("text", "json", "html"), default="text", help="output format (default text)")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout (required for html)")
    p.add_argument("--plots", metavar="DIR", help="also write the plots as PNG files into DIR (needs matplotlib)")
    p.add_argument("--baseline", metavar="OLD_LOG", action="append",
                   help="compare against this earlier log (repeat for several files of one run)")
    p.add_argument("--threshold", type=float, default=0.10, metavar="RATIO",
                   help="relative change that flags a figure in --baseline mode (default 0.10; finite, >= 0)")
    p.add_argument("--window", type=float, default=10.0, metavar="SECONDS",
                   help="seconds per window of the per-window retraction share (default 10; "
                        f"{WINDOW_RANGE[0]:g} to {WINDOW_RANGE[1]:g})")
    p.add_argument("--decode-log-interval", "--sglang.decode-log-interval", dest="decode_log_interval", type=int,
                   default=DEFAULT_DECODE_LOG_INTERVAL, metavar="STEPS",
                   help=f"decode steps per Decode batch line when the log has no server_args (default "
                        f"{DEFAULT_DECODE_LOG_INTERVAL}; {DECODE_LOG_INTERVAL_MIN} to {DECODE_LOG_INTERVAL_MAX})")
    p.add_argument("--stage-decode-log-intervals", "--sglang.stage-decode-log-intervals",
                   dest="stage_decode_log_intervals", default=None, metavar="STAGE=STEPS,...",
                   help="SGLang Omni: each stage's decode steps per Decode batch line (Omni's "
                        "--<stage>.engine.decode_log_interval), e.g. thinker=1,talker_ar=1; other stages take "
                        "--decode-log-interval")
    p.add_argument("--chunked-prefill-size", "--sglang.chunked-prefill-size", dest="chunked_prefill_size", type=int,
                   default=None, metavar="TOKENS",
                   help="SGLang's --chunked-prefill-size when the log has neither the start-up capacity line nor "
                        "server_args, so the continuing chunks of a request count as one admission (default: unknown, "
                        f"every #new-seq counts; {CHUNKED_PREFILL_SIZE_MIN} to {CHUNKED_PREFILL_SIZE_MAX:,})")
    p.add_argument("--model-config", metavar="CONFIG_JSON",
                   help="Hugging Face config.json: per-token KV size, cross-checked against the log's capacity")
    p.add_argument("--kv-bytes", type=float, metavar="BYTES", help="bytes per KV element (fp8: 1), overriding the "
                   f"config's dtype (> 0, at most {KV_BYTES_RANGE[1]:g})")
    p.add_argument("--expect", action="append", default=[], metavar="NAME=VALUE",
                   help="a start-up parameter you launched with, checked against server_args (repeatable)")
    prog = p.add_mutually_exclusive_group()
    prog.add_argument("--progress", dest="progress", action="store_true", default=None,
                      help="show progress on stderr (default: on a terminal for inputs over 64 MB)")
    prog.add_argument("--no-progress", dest="progress", action="store_false")
    return p


def _usage(message: str) -> int:
    return usage_error(message, PROG)


def _check(args) -> str | None:
    """The first problem with the arguments as a one-line message, or ``None``."""
    for name, attr in (("LOG", "logs"), ("--baseline", "baseline")):
        files = []
        for path in getattr(args, attr) or []:
            # a glob is the regular files it matches, as --log.path's (a directory, FIFO or socket
            # among them is no log file); a plain path that is none is an error below
            matches = sorted(regular_matches(path)) if has_glob(path) and not os.path.lexists(path) else [path]
            if not matches:
                return f"argument {name}: {display_path(path)!r} matches no file"
            for match in matches:
                problem = file_problem(match)
                if problem:
                    return f"argument {name}: {display_path(match)!r} {problem}"
            files += matches
        setattr(args, attr, files or getattr(args, attr))
    # Comparisons with NaN are all false, so every check below is written to fail on NaN.
    if not WINDOW_RANGE[0] <= args.window <= WINDOW_RANGE[1]:
        return (f"argument --window: {args.window:g} is not a number of seconds from "
                f"{WINDOW_RANGE[0]:g} to {WINDOW_RANGE[1]:g}")
    if not DECODE_LOG_INTERVAL_MIN <= args.decode_log_interval <= DECODE_LOG_INTERVAL_MAX:
        return f"argument --decode-log-interval: must be from {DECODE_LOG_INTERVAL_MIN} to {DECODE_LOG_INTERVAL_MAX}"
    if args.stage_decode_log_intervals is not None:
        from ..settings import parse_stage_intervals

        try:
            args.stage_decode_log_intervals = parse_stage_intervals(args.stage_decode_log_intervals)
        except ValueError as exc:
            return f"argument --stage-decode-log-intervals: {exc}"
    size = args.chunked_prefill_size
    if size is not None and not CHUNKED_PREFILL_SIZE_MIN <= size <= CHUNKED_PREFILL_SIZE_MAX:
        return (f"argument --chunked-prefill-size: must be from {CHUNKED_PREFILL_SIZE_MIN} to "
                f"{CHUNKED_PREFILL_SIZE_MAX} (leave it out when chunked prefill is off)")
    if not (math.isfinite(args.threshold) and args.threshold >= 0):
        return f"argument --threshold: {args.threshold:g} is not a finite number >= 0"
    if args.kv_bytes is not None and not KV_BYTES_RANGE[0] < args.kv_bytes <= KV_BYTES_RANGE[1]:
        return (f"argument --kv-bytes: {args.kv_bytes:g} is not a number of bytes above "
                f"{KV_BYTES_RANGE[0]:g} and at most {KV_BYTES_RANGE[1]:g}")
    if args.format == "html" and not args.output:
        return "argument --output: required with --format html"
    args.expect_map = {}
    for item in args.expect:
        name, eq, value = item.partition("=")
        if not eq or not name.strip().isidentifier():
            return f"argument --expect: {item!r} is not NAME=VALUE"
        if not value.strip():
            return (f"argument --expect: {item!r} has an empty VALUE (write the value as server_args prints it, "
                    "e.g. NAME=None or NAME='')")
        args.expect_map[name.strip()] = display_path(value.strip())  # valid Unicode for JSON/HTML
    args.model_config_data = None
    if args.model_config:
        try:
            with open(args.model_config, encoding="utf-8") as f:
                args.model_config_data = json.load(f)
            model_kv_bytes_per_token(args.model_config_data, 1, args.kv_bytes)
        except (OSError, ValueError, RecursionError) as exc:
            return f"argument --model-config: {display_path(args.model_config)!r}: {exc}"
    if args.plots and not plots.have_matplotlib():
        return ("argument --plots: needs matplotlib (in a clone: .venv/bin/pip install -e '.[report]'; "
                "else pip install 'sglang-exporter[report]')")
    return None


def _load(paths: list[str], args) -> tuple[dict, list[InputFile]]:
    rec = Recorder(args.decode_log_interval, args.chunked_prefill_size, args.stage_decode_log_intervals)
    inputs = read_logs(paths, rec, args.progress)
    return analyse(rec, inputs, args.window, args.model_config_data, args.kv_bytes, args.expect_map), inputs


def _warn_empty(runs: list[tuple[str, list[InputFile], dict]]) -> bool:
    """Warn for each input without a scheduler line, and for a run whose decode steps rest on the
    assumed decode_log_interval; True when a whole run has none."""
    empty_run = False
    for name, inputs, doc in runs:
        unattributed = sum(doc["lines"].get("unattributed", {}).values())
        if unattributed and not any(i.scheduler_lines for i in inputs):
            # scheduler lines there are, but no stage's: say so, not "no scheduler line"
            print(f"{PROG}: warning: {unattributed:,} SGLang Omni line{'s' if unattributed != 1 else ''} "
                  f"and none attributed to a stage: "
                  + "; ".join(doc["lines"].get("unattributed_reasons") or ["their stage is not known"]),
                  file=sys.stderr)
            continue
        for i in inputs:
            if i.scheduler_lines == 0:
                what = "the file is empty" if i.lines == 0 else f"{i.lines:,} line{'s' if i.lines != 1 else ''} read"
                print(f"{PROG}: warning: no SGLang scheduler line in {display_path(i.path)!r} ({what}"
                      + (f", {sum(doc['lines']['malformed'].values())} damaged scheduler lines in the run"
                         if sum(doc["lines"]["malformed"].values()) else "") + ")", file=sys.stderr)
        empty_run = empty_run or not any(i.scheduler_lines for i in inputs)
        stages = doc.get("stages") or {}
        if stages:  # SGLang Omni: each stage's section has its own interval
            for stage, sec in stages.items():
                settings = sec.get("settings") or {}
                if (settings.get("decode_log_interval_source") == "default"
                        and (sec.get("retractions") or {}).get("decode_steps")):
                    print(f"{PROG}: warning: stage {stage}: decode steps assume SGLang's default decode_log_interval "
                          f"of {settings.get('decode_log_interval')}: SGLang Omni prints no server_args (pass "
                          f"--sglang.stage-decode-log-intervals {stage}=STEPS with the stage's "
                          f"--{stage}.engine.decode_log_interval)", file=sys.stderr)
            continue
        settings = doc.get("settings") or {}
        if settings.get("decode_log_interval_source") == "default" and doc["lines"]["parsed"].get("decode"):
            print(f"{PROG}: warning: decode steps assume SGLang's default decode_log_interval of "
                  f"{settings.get('decode_log_interval')}: the {name} log has no server_args line giving it "
                  "(pass --sglang.decode-log-interval with the server's value, as to the sidecar)", file=sys.stderr)
    return empty_run


def _plots(doc: dict, args) -> tuple[dict[str, bytes], dict[str, dict[str, bytes]]]:
    """The plots of the run and of each SGLang Omni stage (``--plots DIR``: also written there, a
    stage's into ``DIR/<stage>/``), for the HTML page or --plots; says on stderr why there are none."""
    if not (args.plots or args.format == "html"):
        return {}, {}
    if not plots.have_matplotlib():
        print(f"{PROG}: warning: {plots.NO_MATPLOTLIB}", file=sys.stderr)
        return {}, {}
    run = doc["current"] if doc.get("schema") == BASELINE_SCHEMA else doc
    images = plots.make_plots(doc, args.plots)
    stage_images = {name: plots.make_plots(sub, os.path.join(args.plots, name) if args.plots else None)
                    for name, sub in (run.get("stages") or {}).items()}
    return images, stage_images


def main(argv: list[str] | None = None) -> int:
    """Run ``sglang-exporter report``; ``argv`` excludes the word ``report``. Returns the exit status
    (:class:`~exporter.status.ExitStatus`)."""
    args = parse_arguments(build_parser(), argv, _check, PROG)
    if isinstance(args, int):
        return args
    try:
        doc, inputs = _load(args.logs, args)
        runs = [("current", inputs, doc)]
        if args.baseline:
            old, old_inputs = _load(args.baseline, args)
            runs.insert(0, ("baseline", old_inputs, old))
            doc = compare(old, doc, args.threshold)
        images, stage_images = _plots(doc, args)
        if args.format == "json":
            out = json.dumps(jsonable(doc), indent=2, sort_keys=False) + "\n"
        elif args.format == "html":
            out = html_page.html(doc, images, stage_images)
        else:
            out = text(doc)
        write_output(out, args.output)
    except OSError as exc:
        return os_error(exc, PROG)
    except KeyboardInterrupt:  # Ctrl-C: one line, not a traceback
        return interrupted(PROG)
    if _warn_empty(runs):
        return ExitStatus.NO_SCHEDULER_LINES
    return ExitStatus.OK
