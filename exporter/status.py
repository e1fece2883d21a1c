"""Exit statuses of ``sglang-exporter`` and ``sglang-exporter report`` (documented in ``--help``)."""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    """What the process's exit code means.

    Attributes:
        OK: Done (one-shot or report printed), or stopped by SIGTERM/SIGINT.
        RUNTIME: A failure at run time: the listen address cannot be bound, an output cannot be
            written.
        USAGE: A bad setting or argument; the one-line message on stderr names it.
    """

    OK = 0
    RUNTIME = 1
    USAGE = 2
