"""What the log source did: per file, per glob, per line kind. Written by the source, read by its
collector (:mod:`.collector`) through :meth:`LogStats.snapshot`."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, replace

from ...events import KINDS
from ...scheduler.state import REJECT_REASONS


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
        missed_rotations: Rotated files of this path that were never read: written under its name and
            rotated away between two checks (``docs/tailing.md#rotation``).
        lines: Complete lines handed to the ingest step from this path.
        scheduler_lines: Those of them that parsed as SGLang scheduler lines (what one-shot mode
            checks before it trusts its output).
    """

    path: str
    opens: int = 0
    bytes_read: int = 0
    present: bool = False
    oversized_lines: int = 0
    rotations: int = 0
    truncations: int = 0
    behind_bytes: int = 0
    missed_rotations: int = 0
    lines: int = 0
    scheduler_lines: int = 0


@dataclass(frozen=True, slots=True)
class LogSnapshot:
    """The log source's statistics at one instant (copies; safe to read without a lock).

    Attributes:
        files: Configured path -> :class:`FileStats` copy, sorted by path.
        patterns: Glob pattern -> files it matched at the latest check, sorted by pattern.
        skipped: Glob pattern -> matching files not followed because of ``--log.max-files-per-glob``.
        watch_mode: How the follower notices changes (``inotify``/``poll``), ``None`` without one.
        lines: ``(kind, result)`` -> lines, result in ``parsed``/``ignored``/``malformed``/``unattributed``.
        rejected: reason -> scheduler lines parsed but refused by the scheduler state (also counted
            as malformed in ``lines``); reasons of :data:`~exporter.scheduler.state.REJECT_REASONS`.
        last_line_wall: Wall-clock time (s since epoch) of the latest line read, or ``None``.
    """

    files: dict[str, FileStats]
    patterns: dict[str, int]
    skipped: dict[str, int]
    watch_mode: str | None
    lines: dict[tuple[str, str], int]
    rejected: dict[str, int]
    last_line_wall: float | None
    template_lines: int = 0


class LogStats:
    """The log source's own statistics, behind their own lock (never the scheduler store's).

    Attributes:
        lock: Guards the dictionaries and the line counts; ``FileStats`` fields are plain integers
            written by the follower thread alone.
        lines: Lines per ``(kind, result)``; every kind starts at 0 so that each series exists.
        template_lines: Prefill/Decode lines read by the fast path's pattern (:mod:`.templates`)
            instead of the per-line parser (the same event either way): a share that falls says a
            new SGLang format left the fast path.
        rejected: Refused scheduler lines per reason; every reason starts at 0.
        files: :class:`FileStats` per followed path.
        patterns: Files each followed glob matched at the latest check.
        skipped: Matching files each glob leaves unfollowed because of its file cap.
        watch_mode: ``"inotify"`` or ``"poll"`` while a follower runs, else ``None``.
        last_line_wall: Wall-clock time of the latest line counted, or ``None``.
        progress_at: Monotonic time (s) the reader last made progress: read a chunk, finished a file,
            or went to wait with nothing left to do. Written by the reader thread alone (a float
            assignment); ``/healthz`` reads it (:meth:`~.follower.Follower.health`).
    """

    def __init__(self):
        self.lock = threading.Lock()
        self.lines: Counter[tuple[str, str]] = Counter()
        for kind in KINDS:
            if kind == "other":
                self.lines[(kind, "ignored")] = 0
            else:
                self.lines[(kind, "parsed")] = 0
                self.lines[(kind, "malformed")] = 0
                self.lines[(kind, "unattributed")] = 0
        self.rejected: Counter[str] = Counter(dict.fromkeys(REJECT_REASONS, 0))
        self.template_lines = 0
        self.files: dict[str, FileStats] = {}
        self.patterns: dict[str, int] = {}
        self.skipped: dict[str, int] = {}
        self.watch_mode: str | None = None
        self.last_line_wall: float | None = None
        self.progress_at = time.monotonic()

    def register_file(self, path: str) -> FileStats:
        """Create (or return) the :class:`FileStats` of a followed path."""
        with self.lock:
            stats = self.files.get(path)
            if stats is None:
                stats = self.files[path] = FileStats(path)
            return stats

    def drop_file(self, path: str) -> None:
        """Forget a path (a glob's file that is gone and drained), with its series."""
        with self.lock:
            self.files.pop(path, None)

    def set_matches(self, pattern: str, n: int, skipped: int = 0) -> None:
        """Record how many files a glob matched at its latest check, and how many of them it leaves
        unfollowed because of its cap."""
        with self.lock:
            self.patterns[pattern] = n
            self.skipped[pattern] = skipped

    def set_watch_mode(self, mode: str | None) -> None:
        """Record how the follower notices changes."""
        with self.lock:
            self.watch_mode = mode

    def snapshot(self) -> LogSnapshot:
        """Copies of everything, taken under the lock."""
        with self.lock:
            return LogSnapshot(
                files={path: replace(fs) for path, fs in sorted(self.files.items())},
                patterns=dict(sorted(self.patterns.items())),
                skipped=dict(sorted(self.skipped.items())),
                watch_mode=self.watch_mode,
                lines=dict(sorted(self.lines.items())),
                rejected=dict(self.rejected),
                last_line_wall=self.last_line_wall,
                template_lines=self.template_lines,
            )
