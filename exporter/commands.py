"""The subcommands of ``sglang-exporter`` and what they share: one table, one parser class.

Adding a subcommand is a row of :data:`SUBCOMMANDS` and a module with ``build_parser()`` (a
:class:`SubcommandParser`) and ``main(argv) -> int``: the dispatch, the usage lines of the top-level
``--help`` and the "did you mean" of a misspelt command word all come from that row. Every
subcommand's argument errors are one line with exit code 2, and an unknown flag names the closest
known one.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shlex
from dataclasses import dataclass

from .suggest import closest

PROG = "sglang-exporter"


@dataclass(frozen=True)
class Subcommand:
    """One subcommand.

    Attributes:
        module: The module with ``main(argv) -> int`` (``argv`` without the command word).
        usage: The arguments shown after the command word in the top-level usage (``PATH...``).
        summary: A few words for the top-level usage.
    """

    module: str
    usage: str
    summary: str


#: The subcommands, in the order the top-level usage lists them.
SUBCOMMANDS: dict[str, Subcommand] = {
    "report": Subcommand("exporter.report.cli", "PATH...", f"options: {PROG} report --help"),
    "compare": Subcommand("exporter.compare.cli", "RUN...",
                          f"runs of a sweep side by side: {PROG} compare --help"),
    "traffic": Subcommand("exporter.traffic.cli", "LOG...",
                          f"a traffic model and a trace from production: {PROG} traffic --help"),
    "sweep": Subcommand("exporter.sweep.cli", "--server CMD --values V...",
                        f"the sweep as one command: {PROG} sweep --help"),
}


def usage_lines() -> list[str]:
    """One usage line per subcommand: ``sglang-exporter report PATH...   (options: ...)``."""
    return [f"{PROG} {name} {sub.usage}   ({sub.summary})" for name, sub in SUBCOMMANDS.items()]


def dispatch(argv: list[str]) -> int | None:
    """Run the subcommand named by ``argv[0]`` and return its exit status; ``None`` when ``argv``
    names none (the sidecar's own command line)."""
    if not argv or argv[0] not in SUBCOMMANDS:
        return None
    return importlib.import_module(SUBCOMMANDS[argv[0]].module).main(argv[1:])


def misspelt_command(argv: list[str]) -> str | None:
    """The one-line error for a first argument that is no flag, no existing path and close to a
    subcommand's name (``reprot x.log``), or ``None``."""
    if not argv or argv[0].startswith("-") or os.path.lexists(argv[0]):
        return None
    guess = closest(argv[0], SUBCOMMANDS)
    if guess is None:
        return None
    rest = " ".join(shlex.quote(a) for a in argv[1:])
    return (f"unknown command {argv[0]!r}: did you mean {PROG} {guess}{' ' + rest if rest else ''}? "
            f"(see {PROG} --help)")


def parse_arguments(parser: argparse.ArgumentParser, argv: list[str] | None, check, prog: str):
    """A subcommand's arguments, or its exit status: ``argv`` parsed by ``parser`` (a
    :class:`SubcommandParser`), then ``check(args)`` (one line naming what is wrong, or ``None``).

    Returns:
        The namespace; else the exit status to return: 2 after one line on stderr for bad arguments,
        0 after ``--help``.
    """
    from .status import usage_error

    try:
        args = parser.parse_args(argv)
    except ArgumentError as exc:
        return usage_error(str(exc), prog)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    problem = check(args)
    return usage_error(problem, prog) if problem else args


class ArgumentError(Exception):
    """An argument a subcommand cannot take; ``str()`` is one line."""


_UNRECOGNIZED = re.compile(r"unrecognized arguments: (\S+)")


class SubcommandParser(argparse.ArgumentParser):
    """``argparse`` for a subcommand: an error raises :class:`ArgumentError` (the subcommand prints
    it as one line and exits 2) instead of printing the usage, and an unknown flag gets the closest
    known one (``--formt`` -> ``did you mean --format?``). As on the sidecar's command line, a prefix
    of a flag is not that flag (``allow_abbrev`` off)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but an unknown flag is named before a missing required argument (``sweep
        --cliet X`` says "did you mean --client?", not "--server is required")."""
        required = [a for a in self._actions if a.required]
        for a in required:
            a.required = False
        try:
            _, extras = self.parse_known_args(args, namespace)
        finally:
            for a in required:
                a.required = True
        unknown = [x for x in extras if x.startswith("-")]
        if unknown:
            self.error(f"unrecognized arguments: {unknown[0]}")
        return super().parse_args(args, namespace)

    def error(self, message):
        m = _UNRECOGNIZED.match(message)
        if m and m.group(1).startswith("-"):
            flag = m.group(1).split("=", 1)[0]
            guess = closest(flag, [o for a in self._actions for o in a.option_strings if o.startswith("--")])
            message = (f"unknown flag {flag}" + (f"; did you mean {guess}?" if guess else "")
                       + f" (see {self.prog} --help)")
        raise ArgumentError(message)
