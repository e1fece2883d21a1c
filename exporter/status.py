"""Exit statuses of ``sglang-exporter`` and ``sglang-exporter report`` (documented in ``--help``)."""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    """What the process's exit code means.

    Attributes:
        OK: Done (one-shot or report printed), or stopped by SIGTERM/SIGINT.
        RUNTIME: A failure at run time: the listen address cannot be bound, an output cannot be
            written.
        USAGE: A bad setting or argument, or an input path that is missing, a directory or unreadable;
            the one-line message on stderr names it.
        NO_SCHEDULER_LINES: The input was read, but no line in it is an SGLang scheduler line (an
            empty file, an access log, a binary, the wrong file): the output says nothing about a
            scheduler. A warning on stderr names each such file and the lines read. ``report`` prints
            its (empty) report all the same; CI scripts see the status.
    """

    OK = 0
    RUNTIME = 1
    USAGE = 2
    NO_SCHEDULER_LINES = 3
