"""``sglang-exporter sweep``: the method's experiment as one command (docs/method.md).

For each value of the swept setting (and each repeat) it starts the server command with the value in
place of ``{value}``, waits until SGLang is ready, replays the load with SGLang's benchmark client,
keeps the log and the client's result file under ``--out``, stops the server (:mod:`.run`), then
runs ``compare`` over the runs that finished and writes its table to stdout, ``OUT/compare.txt``
and ``OUT/compare.json``. Ctrl-C stops the running server and compares what is done.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from pathlib import Path

from ..commands import SubcommandParser as _Parser
from ..commands import parse_arguments
from ..compare import document, render
from ..compare.runs import RunError, load
from ..paths import display_path, file_problem
from ..report.schema import jsonable
from ..status import PROG as COMMAND
from ..status import ExitStatus, error, write_output
from .run import Plan, Sweep, run

PROG = f"{COMMAND} sweep"
DEFAULT_CLIENT = "python3 -m sglang.benchmark.serving"
EXIT_CODES = (f"Exit codes: {ExitStatus.OK:d} every run done and compared; {ExitStatus.RUNTIME:d} a run failed "
              "(a server that did not start, with its last log lines; a client that failed) or a file could not "
              f"be written: the runs done are compared; {ExitStatus.USAGE:d} bad arguments; "
              f"{ExitStatus.INTERRUPTED:d} stopped by Ctrl-C: the running server is stopped and the runs done "
              "are compared.")


def build_parser() -> argparse.ArgumentParser:
    """The ``sweep`` subcommand's argument parser."""
    p = _Parser(prog=PROG, description=(
        "Run the method's sweep: one server start per value (and repeat) of a setting, the same load replayed "
        "against each by SGLang's benchmark client, then `compare` over the runs. " + EXIT_CODES))
    p.add_argument("--server", required=True, metavar="COMMAND",
                   help="the server command with {value} where the swept value goes (and {port}), e.g. "
                        "'python3 -m sglang.launch_server --model-path M --port {port} --max-running-requests {value}'")
    p.add_argument("--values", required=True, nargs="+", metavar="VALUE", help="the swept setting's values")
    p.add_argument("--repeats", type=int, default=1, metavar="N", help="runs per value, interleaved (default 1)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for every run's log and client file")
    p.add_argument("--trace", metavar="FILE", help="the load: a trace the client replays (sglang-exporter traffic "
                   "--trace; mooncake format)")
    p.add_argument("--client-args", metavar="ARGS", help="the load as the client's own dataset options instead, e.g. "
                   "'--dataset-name random-ids --num-prompts 200 --request-rate 8'")
    p.add_argument("--client", default=DEFAULT_CLIENT, metavar="COMMAND",
                   help=f"SGLang's benchmark client (default: {DEFAULT_CLIENT})")
    p.add_argument("--host", default="127.0.0.1", help="where the server listens (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=30000, help="the server's port, also put for {port} (default 30000)")
    p.add_argument("--ttft-slo", type=float, metavar="SECONDS", help="P99 TTFT target: the client's --goodput and "
                   "compare's online choice")
    p.add_argument("--tpot-slo", type=float, metavar="SECONDS", help="P99 TPOT target (with --ttft-slo)")
    p.add_argument("--sweep", metavar="NAME", help="the swept server_args name for compare (default: as compare)")
    p.add_argument("--ready-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="longest wait for a server to get ready (default 600)")
    p.add_argument("--run-timeout", type=float, default=3600.0, metavar="SECONDS",
                   help="longest client run (default 3600)")
    return p


def _check(args) -> str | None:
    if "{value}" not in args.server:
        return "argument --server: the command has no {value} placeholder for the swept value"
    try:
        shlex.split(args.server)
        client = shlex.split(args.client)
        shlex.split(args.client_args or "")
    except ValueError as exc:
        return f"argument --server/--client/--client-args: {exc}"
    if not client:
        return "argument --client: empty"
    if bool(args.trace) == bool(args.client_args):
        return "argument --trace: give the load as --trace FILE or as --client-args, one of them"
    if args.trace and file_problem(args.trace):
        return f"argument --trace: {display_path(args.trace)!r} {file_problem(args.trace)}"
    if len(set(args.values)) != len(args.values) or any("/" in v or not v for v in args.values):
        return "argument --values: each value once, no '/'"
    if args.repeats < 1:
        return f"argument --repeats: {args.repeats} is not >= 1"
    if not 0 < args.port < 65536:
        return f"argument --port: {args.port} is not a TCP port"
    for name, x in (("--ttft-slo", args.ttft_slo), ("--tpot-slo", args.tpot_slo),
                    ("--ready-timeout", args.ready_timeout), ("--run-timeout", args.run_timeout)):
        if x is not None and not (math.isfinite(x) and x > 0):
            return f"argument {name}: {x:g} is not a number of seconds > 0"
    if args.tpot_slo is not None and args.ttft_slo is None:
        return "argument --tpot-slo: needs --ttft-slo"
    return None


def _load(trace: str) -> tuple[str, ...]:
    with open(trace, encoding="utf-8") as f:
        n = sum(1 for line in f if line.strip())
    return ("--dataset-name", "mooncake", "--dataset-path", trace, "--num-prompts", str(n))


def plan_of(args) -> Plan:
    """The :class:`~.run.Plan` of parsed arguments."""
    goodput = []
    if args.ttft_slo is not None:
        goodput.append(f"ttft:{1000 * args.ttft_slo:g}")
    if args.tpot_slo is not None:
        goodput.append(f"tpot:{1000 * args.tpot_slo:g}")
    return Plan(args.server, tuple(args.values), args.repeats, args.port, args.host, tuple(shlex.split(args.client)),
                _load(args.trace) if args.trace else tuple(shlex.split(args.client_args)), tuple(goodput),
                args.ready_timeout, args.run_timeout)


def _compare(sweep: Sweep, args, out: Path) -> bool:
    """Compare the finished runs; write the table to stdout and the folder. False when none finished."""
    done = [o for o in sweep.outcomes if o.error is None]
    if not done:
        error("no run finished: nothing to compare", PROG)
        return False
    runs = []
    for o in done:
        try:
            runs.append(load(str(o.log)))
        except RunError as exc:
            error(f"{o.log}: {exc}", PROG)
    doc = document.build(runs, args.ttft_slo, args.sweep, args.tpot_slo)
    table = render.text(doc)
    (out / "compare.txt").write_text(table, encoding="utf-8")
    (out / "compare.json").write_text(json.dumps(jsonable(doc), indent=2) + "\n", encoding="utf-8")
    write_output(table, None)
    return True


def main(argv: list[str] | None = None) -> int:
    """Run ``sglang-exporter sweep``; ``argv`` excludes the word ``sweep``. Returns the exit status."""
    args = parse_arguments(build_parser(), argv, _check, PROG)
    if isinstance(args, int):
        return args
    out = Path(args.out)
    sweep = Sweep()

    def say(msg: str) -> None:
        print(f"{PROG}: {msg}", file=sys.stderr, flush=True)
    try:
        run(plan_of(args), out, sweep, say)
    except KeyboardInterrupt:
        error(f"interrupted (Ctrl-C) after {len(sweep.outcomes)} run(s): the running server was stopped; "
              "comparing the runs done", PROG)
        try:
            _compare(sweep, args, out)
        except (OSError, KeyboardInterrupt):
            pass
        return ExitStatus.INTERRUPTED
    except OSError as exc:
        error(f"{display_path(str(exc.filename)) if exc.filename else 'the sweep'}: {exc.strerror or exc}", PROG)
        return ExitStatus.RUNTIME
    failed = [o for o in sweep.outcomes if o.error is not None]
    for o in failed:
        error(f"run {o.value} #{o.repeat} failed: {o.error}", PROG)
    try:
        compared = _compare(sweep, args, out)
    except OSError as exc:
        error(f"{display_path(str(exc.filename)) if exc.filename else 'output'}: {exc.strerror or exc}", PROG)
        return ExitStatus.RUNTIME
    return ExitStatus.RUNTIME if failed or not compared else ExitStatus.OK
