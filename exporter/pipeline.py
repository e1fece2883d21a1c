"""Pipeline: lines from the tailer -> parser -> scheduler state, with the exporter's own counts.

One :class:`Pipeline` is shared by the tailer thread (which feeds lines) and the HTTP threads (whose
collectors read it under :attr:`Pipeline.lock`). Parsing happens outside the lock; applying events
and reading a snapshot happen inside it, so a scrape never sees half of a batch of lines.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from .events import KIND_OF, KINDS, Capacity, ServerArgs
from .sources.log.parser import Malformed, parse_line
from .scheduler.store import SchedulerStore

log = logging.getLogger(__name__)

@dataclass(slots=True)
class FileStats:
    """What the tailer has done with one followed path (written by the tailer thread only).

    Attributes:
        path: The path as configured.
        opens: Times the file was opened.
        bytes_read: Bytes read from it.
        present: Whether the path existed at the last check.
        oversized_lines: Lines dropped for exceeding the line-length cap.
        rotations: Times the path was found naming another file (rename + create, symlink swap).
        truncations: Times the file was found shorter than the read offset (copytruncate).
        behind_bytes: Bytes between the read offsets and the ends of the open files at the latest check.
    """

    path: str
    opens: int = 0
    bytes_read: int = 0
    present: bool = False
    oversized_lines: int = 0
    rotations: int = 0
    truncations: int = 0
    behind_bytes: int = 0


class Pipeline:
    """Feeds lines through the parser into :class:`~exporter.scheduler.state.SchedulerStates`.

    Args:
        states: The scheduler state to update.
        clock: Wall-clock source in seconds since the epoch (tests inject one).

    Attributes:
        lock: Held while applying events and while a collector takes its snapshot.
        lines: Count of lines per ``(kind, result)``, result in ``parsed``/``ignored``/``malformed``.
        files: :class:`FileStats` per followed path.
        patterns: Number of files each followed glob matched at the latest check.
        watch_mode: How the follower notices changes (``inotify``/``poll``), ``None`` without one.
        last_line_wall: Wall-clock time of the latest line fed, or ``None``.
    """

    def __init__(self, store: SchedulerStore, clock=time.time):
        self.store = store
        self.states = store.states
        self.lock = store.lock
        self.lines: Counter[tuple[str, str]] = Counter()
        for kind in KINDS:
            if kind == "other":
                self.lines[(kind, "ignored")] = 0
            else:
                self.lines[(kind, "parsed")] = 0
                self.lines[(kind, "malformed")] = 0
        self.files: dict[str, FileStats] = {}
        self.patterns: dict[str, int] = {}  # glob pattern -> files it matched at the latest check
        self.watch_mode: str | None = None  # "inotify" or "poll" while a follower runs
        self.last_line_wall: float | None = None
        self._clock = clock

    def register_file(self, path: str) -> FileStats:
        """Create (or return) the :class:`FileStats` for a followed path."""
        with self.lock:
            stats = self.files.get(path)
            if stats is None:
                stats = self.files[path] = FileStats(path)
            return stats

    def recover_startup_facts(self, data: bytes) -> int:
        """Apply the start-up facts found in log text that the tailer skips.

        When the exporter starts at the end of an existing log (the default, so nothing is counted
        twice), the server's start-up lines lie before that point; yet the capacity line
        (``max_total_num_tokens=...``) and ``server_args=`` describe the running server. This applies
        those two kinds only: no counter moves and the lines are not counted as read.

        Args:
            data: Raw bytes of the skipped part of the file (the tailer passes its head).

        Returns:
            The number of start-up events applied.
        """
        events = []
        for line in data.decode("utf-8", "replace").splitlines():
            if "max_total_num_tokens=" in line or "server_args=" in line:
                ev = parse_line(line)
                if type(ev) in (Capacity, ServerArgs):
                    events.append(ev)
        if events:
            self.store.apply(events, self._clock())
        return len(events)

    def feed(self, lines: Iterable[str]) -> int:
        """Parse and apply complete lines (without their terminators).

        Returns:
            The number of lines fed. Never raises on line content.
        """
        parsed = [parse_line(line) for line in lines]
        if not parsed:
            return 0
        wall = self._clock()
        events = []
        ignored = 0
        malformed: list[str] = []
        for ev in parsed:
            if ev is None:
                ignored += 1
            elif type(ev) is Malformed:
                malformed.append(ev.kind)
                log.debug("malformed %s line: %s", ev.kind, ev.reason)
            else:
                events.append(ev)
        rejected = self.store.apply(events, wall) if events else ()
        counts = self.lines
        with self.lock:
            counts[("other", "ignored")] += ignored
            for kind in malformed:
                counts[(kind, "malformed")] += 1
            for ev in events:
                counts[(KIND_OF[type(ev)], "parsed")] += 1
            for ev in rejected:  # beyond the scheduler/replica caps, or failing to apply
                kind = KIND_OF[type(ev)]
                counts[(kind, "parsed")] -= 1
                counts[(kind, "malformed")] += 1
                log.debug("dropped %s line of scheduler DP%s: too many schedulers or replicas",
                          kind, ev.origin.dp_rank)
            self.last_line_wall = wall
        return len(parsed)
