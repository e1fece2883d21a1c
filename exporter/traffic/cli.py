"""``sglang-exporter traffic``: a traffic model from a production server's record, and a trace to replay.

Inputs: SGLang's request log (``--log-requests``, text or JSON format; the files as for ``report``)
or, where none exists, SGLang's ``/metrics`` scraped to files (``--metrics FILE [LATER_FILE]``) or
kept by Prometheus (``--prometheus URL --start T --end T``, :mod:`exporter.traffic.prometheus`).
Output: the model (:mod:`exporter.traffic.model`) as text or JSON, and with ``--trace FILE`` a trace
for SGLang's benchmark client (:mod:`exporter.traffic.trace`).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from datetime import datetime, timezone

from ..commands import SubcommandParser as _Parser
from ..commands import parse_arguments
from ..paths import display_path, file_problem
from ..report.files import read_logs
from ..report.schema import jsonable
from ..sources.log.glob import has_glob, regular_matches
from ..sources.log.requestlog import RequestLog
from ..status import PROG as COMMAND
from ..status import ExitStatus, interrupted, os_error, usage_error, write_output
from . import histogram, model, prometheus, trace
from .text import text

PROG = f"{COMMAND} traffic"
SCHEMA = "sglang-exporter-traffic/1"
EXIT_CODES = (f"Exit codes: {ExitStatus.OK:d} done; {ExitStatus.RUNTIME:d} a file could not be read or written; "
              f"{ExitStatus.USAGE:d} bad arguments or an input that is missing; {ExitStatus.NO_SCHEDULER_LINES:d} "
              f"the logs hold no finished request (SGLang ran without --log-requests?); "
              f"{ExitStatus.INTERRUPTED:d} stopped by Ctrl-C.")


def build_parser() -> argparse.ArgumentParser:
    """The ``traffic`` subcommand's argument parser."""
    p = _Parser(prog=PROG, description=(
        "A traffic model from what a production SGLang server records (docs/method.md, step 2): the arrival "
        "rate over time (periods, windows, peak, burstiness against Poisson) and the input and output length "
        "distributions, from SGLang's request log (--log-requests at level >= 1, text or JSON) or SGLang's "
        "/metrics histograms (--metrics); with --trace, a trace that SGLang's benchmark client replays "
        f"(--dataset-name mooncake --dataset-path TRACE). {EXIT_CODES}"))
    p.add_argument("logs", nargs="*", metavar="LOG", help="SGLang's log with its request log lines (files, or quoted "
                   "globs; .gz read)")
    p.add_argument("--metrics", nargs="+", metavar="FILE", help="SGLang's /metrics scraped to a file; two files of one "
                   "server: the requests between them")
    p.add_argument("--prometheus", metavar="URL", help="a Prometheus server that scrapes SGLang: the length "
                   "histograms between --start and --end")
    p.add_argument("--start", metavar="TIME", help="with --prometheus: the range's start (epoch seconds or ISO 8601)")
    p.add_argument("--end", metavar="TIME", help="with --prometheus: the range's end (epoch seconds or ISO 8601)")
    p.add_argument("--window", type=float, default=model.DEFAULT_WINDOW, metavar="SECONDS",
                   help=f"window of the arrival rate (default {model.DEFAULT_WINDOW:g})")
    p.add_argument("--idle-gap", type=float, metavar="SECONDS", help="a gap without arrivals longer than this ends a "
                   f"period (default {model.IDLE_GAP_FACTOR:g} x the median gap, at least {model.MIN_IDLE_GAP:g} s)")
    p.add_argument("--trace", metavar="FILE", help="write a trace for SGLang's benchmark client (mooncake format)")
    p.add_argument("--arrivals", choices=("recorded", "poisson"), default="poisson",
                   help="the trace's arrivals: as recorded, or Poisson with lengths drawn from the recorded ones "
                        "(default poisson, the method's way)")
    p.add_argument("--rate", metavar="PER_SECOND", help="Poisson rate (default: the active arrival rate)")
    p.add_argument("--requests", type=int, metavar="N", help="Poisson trace length (default: as many as recorded)")
    p.add_argument("--seed", type=int, default=0, help="Poisson trace seed (default 0)")
    p.add_argument("--block-tokens", type=int, default=trace.BLOCK_TOKENS, metavar="N",
                   help=f"prompt tokens the client makes of one hash id (default {trace.BLOCK_TOKENS})")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    return p


def _positive(name: str, x: float | None) -> str | None:
    if x is not None and not (math.isfinite(x) and x > 0):
        return f"argument {name}: {x:g} is not a number > 0"
    return None


def _time(text: str) -> float | None:
    """Epoch seconds of ``--start``/``--end`` (a number, or ISO 8601; without a zone, UTC)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


def _check(args) -> str | None:
    sources = [bool(args.logs), bool(args.metrics), bool(args.prometheus)]
    if not any(sources):
        return "argument LOG: give SGLang's request log, --metrics FILE or --prometheus URL"
    if sum(sources) > 1:
        return "argument --metrics: give one source: request logs, --metrics files or --prometheus"
    if args.prometheus:
        if args.start is None or args.end is None:
            return "argument --start: --prometheus needs --start and --end"
        args.start_s, args.end_s = _time(args.start), _time(args.end)
        if args.start_s is None or args.end_s is None:
            return f"argument --start/--end: {args.start!r} or {args.end!r} is not a time (epoch seconds or ISO 8601)"
        if args.end_s <= args.start_s:
            return "argument --end: not after --start"
    elif args.start or args.end:
        return "argument --start: only with --prometheus"
    args.histograms = bool(args.metrics or args.prometheus)
    if args.metrics and len(args.metrics) > 2:
        return "argument --metrics: one file, or two scrapes of one server"
    if args.histograms and args.arrivals == "recorded":
        return "argument --arrivals: 'recorded' needs a request log (histograms have no arrival times)"
    if args.histograms and args.trace and args.rate is None:
        return "argument --rate: required for a trace from --metrics (histograms have no arrival times)"
    rate = None
    if args.rate is not None:
        try:
            rate = float(args.rate)
        except ValueError:
            return f"argument --rate: {args.rate!r} is not a number"
    for name, x in (("--window", args.window), ("--idle-gap", args.idle_gap), ("--rate", rate)):
        problem = _positive(name, x)
        if problem:
            return problem
    if args.requests is not None and args.requests < 1:
        return f"argument --requests: {args.requests} is not >= 1"
    if args.block_tokens < 1:
        return f"argument --block-tokens: {args.block_tokens} is not >= 1"
    return None


def _files(patterns: list[str], arg: str) -> list[str] | str:
    """The files the inputs name (a glob's matches in name order), or the usage error naming ``arg``."""
    out = []
    for pattern in patterns:
        files = sorted(regular_matches(pattern)) if has_glob(pattern) else [pattern]
        if not files:
            return f"argument {arg}: {display_path(pattern)!r} matches no file"
        for f in files:
            problem = file_problem(f)
            if problem:
                return f"argument {arg}: {display_path(f)!r} {problem}"
        out += files
    return out


def from_logs(paths: list[str], args) -> tuple[dict, list[tuple[int, int]], list[float]]:
    """``(document, (input, output) pairs, arrivals)`` of request log files.

    Raises:
        OSError: a file cannot be read.
    """
    sink = RequestLog()
    read_logs(paths, sink)  # the report's reader: .gz, several files in order, oversized lines skipped
    reqs = sink.requests
    doc = model.build(reqs, args.window, args.idle_gap) if reqs else {
        "arrivals": None, "input_tokens": model.lengths([]), "output_tokens": model.lengths([]), "exact_arrivals": None}
    doc.update({"source": "request_log", "source_text": "SGLang's request log: " + ", ".join(map(display_path, paths)),
                "records": {"finished": len(reqs), "received": sink.received, "damaged": sink.damaged,
                            "formats": sink.formats},
                "arrivals_reason": None if reqs else "no finished request in the log", "warnings": []})
    if sink.damaged:
        doc["warnings"].append(f"{sink.damaged} finished record(s) gave no arrival or lengths and were skipped")
    if reqs and doc["exact_arrivals"] < 1:
        doc["warnings"].append("some records have no request_received_ts: their arrival is the line's time stamp "
                               "(1 s resolution) less e2e_latency")
    return doc, [(r.input_len, r.output_len) for r in reqs], [r.arrival for r in reqs]


def from_metrics(paths: list[str], seed: int) -> tuple[dict, list[tuple[int, int]]]:
    """``(document, drawn pairs)`` of one or two scraped ``/metrics`` files.

    Raises:
        OSError: a file cannot be read; histogram.HistogramError: the text holds no length histogram.
    """
    texts = []
    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as f:
            texts.append(histogram.read(f.read()))
    h = histogram.difference(texts[1], texts[0]) if len(texts) == 2 else texts[0]
    return from_histograms(h, "SGLang's /metrics histograms: " + ", ".join(map(display_path, paths)), seed)


def from_histograms(h: dict, source: str, seed: int) -> tuple[dict, list[tuple[int, int]]]:
    """``(document, 1000 drawn (input, output) pairs)`` of histograms in :func:`histogram.read`'s shape."""
    doc = {"source": "histograms", "arrivals": None, "source_text": source,
           "arrivals_reason": "histograms have no arrival times: give SGLang's request log (--log-requests)",
           "input_tokens": histogram.lengths(h["prompt"]), "output_tokens": histogram.lengths(h["generation"]),
           "records": {"requests": h["requests"]}, "warnings": []}
    rng = random.Random(seed)
    pairs = []
    if h["prompt"] and h["generation"] and h["prompt"]["count"] and h["generation"]["count"]:
        pairs = [(histogram.draw(h["prompt"], rng), histogram.draw(h["generation"], rng)) for _ in range(1000)]
    return doc, pairs


def main(argv: list[str] | None = None) -> int:
    """Run ``sglang-exporter traffic``; ``argv`` excludes the word ``traffic``. Returns the exit status."""
    args = parse_arguments(build_parser(), argv, _check, PROG)
    if isinstance(args, int):
        return args
    files = [] if args.prometheus else _files(args.metrics, "--metrics") if args.metrics else _files(args.logs, "LOG")
    if isinstance(files, str):
        return usage_error(files, PROG)
    try:
        arrivals: list[float] = []
        if args.histograms:
            try:
                if args.prometheus:
                    doc, pairs = from_histograms(prometheus.between(args.prometheus, args.start_s, args.end_s),
                                                 f"Prometheus at {args.prometheus}, {args.start} to {args.end}",
                                                 args.seed)
                else:
                    doc, pairs = from_metrics(files, args.seed)
            except histogram.HistogramError as exc:
                return usage_error(f"argument {'--prometheus' if args.prometheus else '--metrics'}: {exc}", PROG)
        else:
            doc, pairs, arrivals = from_logs(files, args)
        doc = {"schema": SCHEMA, **doc, "trace": None}
        if args.trace and pairs:
            if args.arrivals == "recorded":
                rows = trace.recorded(arrivals, pairs, args.block_tokens)
            else:
                rate = float(args.rate) if args.rate is not None else doc["arrivals"]["active"]["rate_per_second"]
                if rate is None:
                    return usage_error("argument --rate: the log has no active period to take a rate from", PROG)
                rows = trace.poisson(pairs, rate, args.requests or len(arrivals) or len(pairs), args.seed,
                                     args.block_tokens)
            with open(args.trace, "w", encoding="utf-8") as f:
                f.write(trace.dumps(rows))
            doc["trace"] = {"path": args.trace, "requests": len(rows), "kind": args.arrivals,
                            "rate_per_second": None if args.arrivals == "recorded" else rate, "seed": args.seed}
        out = json.dumps(jsonable(doc), indent=2) + "\n" if args.format == "json" else text(doc)
        write_output(out, args.output)
    except prometheus.PrometheusError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return ExitStatus.RUNTIME
    except OSError as exc:
        return os_error(exc, PROG)
    except KeyboardInterrupt:
        return interrupted(PROG)
    if not pairs:
        print(f"{PROG}: warning: no finished request in the input (SGLang logs them with --log-requests "
              "--log-requests-level 1)", file=sys.stderr)
        return ExitStatus.NO_SCHEDULER_LINES
    return ExitStatus.OK
