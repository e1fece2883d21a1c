"""Globs: every file matching a pattern followed by its own :class:`~.file.Tailer`, and the set of
tailers for a ``--log.path`` list.

Each configured path or glob is followed on its own; a file is followed by one reader at a time
even when several patterns match it, and a rotated file that a glob matches under its new name
(``sglang.log*`` matching ``sglang.log.1``) is continued from where it was left, not read again.
"""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Callable, Sequence

from ...limits import DEFAULT_MAX_LINE_BYTES, DEFAULT_ROTATE_WAIT
from .file import LineSink, Registry, Tailer
from .stats import LogStats


def has_glob(path: str) -> bool:
    """True when ``path`` contains glob magic (``*``, ``?``, ``[``)."""
    return glob.has_magic(path)


class GlobTailer:
    """Follows every file matching a glob pattern, each with its own :class:`Tailer`.

    Matches are looked up on every wake-up. Files matching at start-up start at their end (or at 0
    with ``from_beginning``); files that appear later are read from 0. A tailer whose file has
    gone and has been drained is dropped with its self-metrics, so a glob over rotating request-log
    files does not grow the label set without bound.

    Args:
        pattern: A glob (``glob.glob`` syntax, ``**`` not recursive).
        claimed: Absolute paths followed by plain-path tailers; they are left to those.
        Other arguments as for :class:`Tailer`.
    """

    def __init__(self, pattern: str, sink: LineSink, stats: LogStats | None = None, from_beginning: bool = False,
                 max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, rotate_wait: float = DEFAULT_ROTATE_WAIT,
                 registry: Registry | None = None, clock: Callable[[], float] = time.monotonic,
                 claimed: set[str] | None = None):
        self.path = pattern
        self.sink = sink
        self.log_stats = stats if stats is not None else LogStats()
        self.kw = dict(from_beginning=from_beginning, max_line_bytes=max_line_bytes, rotate_wait=rotate_wait,
                       registry=registry if registry is not None else Registry(), clock=clock)
        self.claimed = claimed if claimed is not None else set()
        self.tailers: dict[str, Tailer] = {}
        self._started = False
        self.log_stats.set_matches(pattern, 0)

    def poll(self) -> int:
        """Look up matches, then poll each matched file; returns lines fed."""
        matches = {m for m in glob.glob(self.path) if os.path.isfile(m)}
        for m in sorted(matches):
            if m not in self.tailers and os.path.abspath(m) not in self.claimed:
                self.tailers[m] = Tailer(m, self.sink, self.log_stats, started=self._started, **self.kw)
        self._started = True
        fed = 0
        for m, t in list(self.tailers.items()):
            fed += t.poll()
            if m not in matches and t.idle:
                del self.tailers[m]
                self.log_stats.drop_file(m)
        self.log_stats.set_matches(self.path, len(matches))
        return fed

    def read_appends(self) -> int:
        """Read appends to every matched file (see :meth:`Tailer.read_appends`)."""
        return sum(t.read_appends() for t in self.tailers.values())

    def flush(self) -> int:
        """Flush every matched file's held partial line."""
        return sum(t.flush() for t in self.tailers.values())

    def close(self) -> None:
        """Close every matched file."""
        for t in self.tailers.values():
            t.close()

    def watch_dirs(self) -> set[str]:
        """The deepest directory of the pattern without glob magic, and each match's directories."""
        base = os.path.abspath(self.path)
        while has_glob(base):
            base = os.path.dirname(base)
        dirs = {base}
        for t in self.tailers.values():
            dirs |= t.watch_dirs()
        return dirs


def make_sources(paths: Sequence[str], sink: LineSink, stats: LogStats | None = None, from_beginning: bool = False,
                 max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, rotate_wait: float = DEFAULT_ROTATE_WAIT,
                 clock: Callable[[], float] = time.monotonic) -> list[Tailer | GlobTailer]:
    """Build one :class:`Tailer` per plain path and one :class:`GlobTailer` per glob.

    Duplicates are followed once; all share one :class:`Registry`, so no file is read twice.
    """
    registry = Registry()
    plain: list[str] = []
    globs: list[str] = []
    for p in dict.fromkeys(paths):
        (globs if has_glob(p) else plain).append(p)
    claimed = {os.path.abspath(p) for p in plain}
    kw = dict(from_beginning=from_beginning, max_line_bytes=max_line_bytes, rotate_wait=rotate_wait,
              registry=registry, clock=clock)
    stats = stats if stats is not None else LogStats()
    sources: list[Tailer | GlobTailer] = [Tailer(p, sink, stats, **kw) for p in plain]
    sources += [GlobTailer(g, sink, stats, claimed=claimed, **kw) for g in globs]
    return sources
