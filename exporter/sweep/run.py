"""The sweep's loop: for each repeat and each value, start the server, replay the load with SGLang's
benchmark client, keep the log and the client's result file under one folder, stop the server.

Repeats are interleaved (value 1, 2, ... then again), so that a drift of the machine over the sweep
does not fall on one value. Each run's files, in ``out``: ``run-<value>-<k>.log`` (the server's
output), ``run-<value>-<k>.jsonl`` (the client's ``--output-file``, the name ``compare`` looks for
beside the log) and ``run-<value>-<k>.client.txt`` (the client's own output).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .server import ServerProcess, StartError


@dataclass(frozen=True)
class Plan:
    """What to run.

    Attributes:
        server: the server command, ``{value}`` (and ``{port}``) replaced per run, split as a shell would.
        values: the swept setting's values, in the order given.
        repeats: runs per value.
        port / host: where the server listens (the client's ``--host`` / ``--port``).
        client: the benchmark client's command (``python3 -m sglang.benchmark.serving``).
        load: the client's load options (``--dataset-name mooncake --dataset-path TRACE ...``).
        goodput: the client's ``--goodput`` pairs (``ttft:MS``...).
        ready_timeout / run_timeout: seconds for a start to get ready / for one client run.
    """

    server: str
    values: tuple[str, ...]
    repeats: int
    port: int
    host: str
    client: tuple[str, ...]
    load: tuple[str, ...]
    goodput: tuple[str, ...] = ()
    ready_timeout: float = 600.0
    run_timeout: float = 3600.0


@dataclass
class Outcome:
    """One run: its value and repeat, its log and client file, and ``error`` when it did not finish."""

    value: str
    repeat: int
    log: Path
    client_file: Path
    error: str | None = None


@dataclass
class Sweep:
    """The runs done so far (kept when the sweep is stopped)."""

    outcomes: list[Outcome] = field(default_factory=list)


def server_argv(plan: Plan, value: str) -> list[str]:
    """The server command of one value, split as a shell would."""
    return shlex.split(plan.server.replace("{value}", value).replace("{port}", str(plan.port)))


def client_argv(plan: Plan, result: Path) -> list[str]:
    """The benchmark client's command of one run."""
    argv = [*plan.client, "--backend", "sglang", "--host", plan.host, "--port", str(plan.port),
            "--output-file", str(result), *plan.load]
    if plan.goodput:
        argv += ["--goodput", *plan.goodput]
    return argv


def one(plan: Plan, value: str, repeat: int, out: Path, env: dict[str, str], say) -> Outcome:
    """Run one value once (module docstring); a server that does not start or a client that fails
    gives an outcome with ``error`` (the server's or the client's last lines). KeyboardInterrupt stops
    the server and propagates."""
    stem = out / f"run-{value}-{repeat}"
    outcome = Outcome(value, repeat, stem.with_suffix(".log"), stem.with_suffix(".jsonl"))
    for old in (outcome.log, outcome.client_file):
        old.unlink(missing_ok=True)
    server = ServerProcess(server_argv(plan, value), outcome.log, env)
    say(f"run {value} #{repeat}: starting the server")
    try:
        server.start(plan.ready_timeout)
        say(f"run {value} #{repeat}: ready; replaying the load")
        with open(stem.with_suffix(".client.txt"), "w") as f:
            proc = subprocess.run(client_argv(plan, outcome.client_file), stdout=f, stderr=subprocess.STDOUT,
                                  env=env, timeout=plan.run_timeout)
        if proc.returncode != 0 or not outcome.client_file.exists():
            text = stem.with_suffix(".client.txt").read_text(errors="replace").splitlines()
            outcome.error = f"the benchmark client failed ({proc.returncode}); its last lines:\n" + "\n".join(text[-20:])
    except StartError as exc:
        outcome.error = str(exc)
    except subprocess.TimeoutExpired:
        outcome.error = f"the benchmark client ran over {plan.run_timeout:g} s and was stopped"
    except OSError as exc:
        outcome.error = f"cannot start {exc.filename or 'the command'}: {exc.strerror or exc}"
    finally:
        server.stop()
    return outcome


def run(plan: Plan, out: Path, sweep: Sweep, say, env: dict[str, str] | None = None) -> Sweep:
    """Every run of the plan in turn, appended to ``sweep.outcomes`` as each ends."""
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ if env is None else env)
    for k in range(1, plan.repeats + 1):
        for value in plan.values:
            outcome = one(plan, value, k, out, env, say)
            sweep.outcomes.append(outcome)
            say(f"run {value} #{k}: " + ("done" if outcome.error is None else "FAILED: " + outcome.error))
    return sweep
