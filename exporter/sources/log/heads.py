"""The head of a log whose reading starts at its end: searched, in chunks, for the server's start-up
lines (capacity, ``server_args``), which precede the end."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from .stats import LogStats

#: How much of an existing log's head is searched for start-up lines when starting at its end.
STARTUP_SCAN_BYTES = 64 << 20
#: Bytes of that head read and searched at a time (start-up memory stays within a few MB of idle).
SCAN_CHUNK = 256 << 10


def head_chunks(fd: int, size: int, limit: int = STARTUP_SCAN_BYTES, chunk: int = SCAN_CHUNK,
                stats: LogStats | None = None) -> Iterator[bytes]:
    """The first ``min(size, limit)`` bytes of an open file, ``chunk`` bytes at a time (``pread``:
    the descriptor's offset does not move). Stops early at an error or end of file. Each chunk read
    is recorded as progress in ``stats.progress_at`` when given: the search of 64 MiB heads on a
    slow disk is reading, and must not fail ``/healthz`` (a liveness probe would restart the
    exporter into the same search)."""
    end = min(size, limit)
    pos = 0
    while pos < end:
        try:
            data = os.pread(fd, min(chunk, end - pos), pos)
        except OSError:
            return
        if not data:
            return
        pos += len(data)
        if stats is not None:
            stats.progress_at = time.monotonic()
        yield data
