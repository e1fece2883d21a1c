"""Exit statuses, the program name and the one-line usage error of ``sglang-exporter`` (and its
``report`` subcommand); documented in ``--help``."""

from __future__ import annotations

import errno
import os
import sys
from enum import IntEnum

from .paths import display_path

#: The command's name, as error messages and ``--help`` show it.
PROG = "sglang-exporter"


class ExitStatus(IntEnum):
    """What the process's exit code means.

    Attributes:
        OK: Done (one-shot or report printed), or the served command stopped by SIGTERM/SIGINT.
        RUNTIME: A failure at run time: the listen address cannot be bound, an output cannot be
            written.
        USAGE: A bad setting or argument, or an input path that is missing, a directory or unreadable;
            the one-line message on stderr names it.
        NO_SCHEDULER_LINES: The input was read, but no line in it is an SGLang scheduler line (an
            empty file, an access log, a binary, the wrong file): the output says nothing about a
            scheduler. A warning on stderr names each such file and the lines read. ``report`` prints
            its (empty) report and ``--one-shot`` its metrics all the same; CI scripts see the status.
        INTERRUPTED: ``--one-shot`` or ``report`` stopped by Ctrl-C (SIGINT): its output is missing or
            incomplete; one line on stderr says so, no traceback (128 + SIGINT, as shells report it).
    """

    OK = 0
    RUNTIME = 1
    USAGE = 2
    NO_SCHEDULER_LINES = 3
    INTERRUPTED = 130


def error(message: str, prog: str = PROG) -> None:
    """Print ``<prog>: error: <message>`` on stderr (one line, as argparse does)."""
    print(f"{prog}: error: {message}", file=sys.stderr)


def interrupted(prog: str = PROG) -> ExitStatus:
    """Print that a one-shot read or a report was stopped by Ctrl-C; returns
    :attr:`ExitStatus.INTERRUPTED`."""
    error("interrupted (Ctrl-C): the output is missing or incomplete", prog)
    return ExitStatus.INTERRUPTED


def usage_error(message: str, prog: str = PROG) -> ExitStatus:
    """Print a usage error naming the setting or argument; returns :attr:`ExitStatus.USAGE`."""
    error(message, prog)
    return ExitStatus.USAGE


def os_error(exc: OSError, prog: str = PROG) -> ExitStatus:
    """Print a failed read or write as one line naming the file (``standard output`` when the error
    has no file name: stdout closed or on a full disk); returns :attr:`ExitStatus.RUNTIME`."""
    name = display_path(os.fsdecode(exc.filename)) if exc.filename is not None else "standard output"
    error(f"{name}: {exc.strerror or exc}", prog)
    return ExitStatus.RUNTIME


def write_stdout(text: str) -> None:
    """Write ``text`` to standard output and flush it.

    Raises:
        OSError: The write failed (a full disk, a closed pipe), or there is no standard output at all
            (started with it closed, ``cmd >&-``: Python's ``sys.stdout`` is then ``None``);
            :func:`os_error` words it.
    """
    if sys.stdout is None:
        raise OSError(errno.EBADF, "closed (started without one)")
    sys.stdout.write(text)
    sys.stdout.flush()


def write_output(text: str, path: str | None) -> None:
    """Write a finished document to ``path`` (``--output``), else to standard output
    (:func:`write_stdout`); ``report`` and ``compare`` share it.

    Raises:
        OSError: The write failed; :func:`os_error` words it.
    """
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        write_stdout(text)
