"""The log source assembled: tailers for ``--log.path``, the ingest step, the follower thread, stats."""

from __future__ import annotations

import glob
import os
import stat
import time
from collections.abc import Callable, Sequence

from ...limits import DEFAULT_LOG_POLL_INTERVAL, DEFAULT_MAX_FILES_PER_GLOB, DEFAULT_MAX_LINE_BYTES, DEFAULT_ROTATE_WAIT
from ...paths import display_path
from ...scheduler.store import SchedulerStore
from .collector import LogCollector
from .follower import CATCH_UP_TIMEOUT, STALL_SECONDS, Follower
from .glob import GlobTailer, has_glob, make_sources
from .ingest import Ingest
from .stats import LogStats


def worker_count(total_bytes: int) -> int:
    """Worker processes for the bulk path (:func:`.bulk_ingest.worker_count`)."""
    from .bulk_ingest import worker_count as count

    return count(total_bytes)


def _input_bytes(paths: Sequence[str]) -> int:
    """Bytes of the regular files that ``paths`` (paths and globs) name now."""
    total = 0
    for path in dict.fromkeys(paths):
        for name in (glob.glob(path) if has_glob(path) else [path]):
            try:
                st = os.stat(name)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


class LogSource:
    """SGLang's scheduler log: files -> lines -> parser -> :meth:`SchedulerStore.apply`.

    Args:
        paths: Paths and globs, as ``--log.path`` lists them.
        store: The scheduler state the events go to.
        from_beginning: Read files that exist at start-up from their first line.
        max_line_bytes: Longest line kept (``--log.max-line-bytes``).
        rotate_wait: Seconds a rotated or deleted file is still read (``--log.rotate-wait``).
        poll_interval: Seconds between checks of the paths without a file event (``--log.poll-interval``).
        watch_mode: ``inotify`` or ``poll`` (``--log.watch-mode``).
        max_files_per_glob: Most files one glob follows (``--log.max-files-per-glob``).
        clock: Wall-clock source for the ingest step (tests inject one).
        observer_factory: Builds watchdog's observer (tests inject a failing one).
        stall_after: Seconds the reader may go without progress before :meth:`health` fails.
        bulk: Read recorded logs through the bulk path (:mod:`.bulk`, :mod:`.bulk_ingest`): for
            :meth:`read_all` only, never for following.

    Attributes:
        stats: The source's own statistics (:class:`LogStats`), read by :meth:`collector`.
        ingest: The sink the tailers hand lines to.
        tailers: One tailer per plain path, one per glob.
        follower: The thread that drives the tailers (live mode).
    """

    def __init__(self, paths: Sequence[str], store: SchedulerStore, *, from_beginning: bool = False,
                 max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, rotate_wait: float = DEFAULT_ROTATE_WAIT,
                 poll_interval: float = DEFAULT_LOG_POLL_INTERVAL, watch_mode: str = "inotify",
                 max_files_per_glob: int = DEFAULT_MAX_FILES_PER_GLOB, clock: Callable[[], float] = time.time,
                 observer_factory: Callable[[], object] | None = None, stall_after: float = STALL_SECONDS,
                 bulk: bool = False):
        self.stats = LogStats()
        self.paths = list(paths)
        if bulk:  # recorded logs only: the live sidecar never loads the bulk path or multiprocessing
            from .bulk_ingest import BulkIngest

            self.ingest: Ingest = BulkIngest(store, self.stats, clock)
        else:
            self.ingest = Ingest(store, self.stats, clock)
        self.tailers = make_sources(paths, self.ingest, self.stats, from_beginning=from_beginning,
                                    max_line_bytes=max_line_bytes, rotate_wait=rotate_wait,
                                    max_files_per_glob=max_files_per_glob)
        kw = {} if observer_factory is None else {"observer_factory": observer_factory}
        self.follower = Follower(self.tailers, poll_interval, watch_mode, stats=self.stats,
                                 stall_after=stall_after, **kw)

    def read_all(self) -> int:
        """Read every file to its end once, partial last lines included, and close them (one-shot):
        every file a glob matches, one at a time (:meth:`GlobTailer.read_each`).

        With ``bulk``, large inputs are scanned on worker processes
        (:func:`.bulk_ingest.worker_count`), and applied in file order.

        Returns:
            Lines counted in the statistics (any kind and result).
        """
        before = sum(self.stats.snapshot().lines.values())
        bulk = getattr(self.ingest, "feed_block", None) is not None
        if bulk:
            self.ingest.workers = worker_count(_input_bytes(self.paths))
        try:
            for tailer in self.tailers:
                if isinstance(tailer, GlobTailer):  # every match, one at a time: the cap is for following
                    tailer.read_each()
                else:
                    tailer.read_once()
            # the end of the recording (after the bulk path's last blocks): SGLang Omni's held
            # start-up lines are decided
            self.ingest.finish()
        finally:
            if bulk:
                self.ingest.close()
            for tailer in self.tailers:
                tailer.close()
        return sum(self.stats.snapshot().lines.values()) - before

    def start(self) -> None:
        """Start following (the follower thread)."""
        self.follower.start()

    def wait_first_pass(self, timeout: float) -> bool:
        """Block until the first pass over all paths is done, which fixes the start positions."""
        return self.follower.wait_first_pass(timeout)

    def stop(self) -> None:
        """Stop following and close the files."""
        self.follower.stop()

    def is_alive(self) -> bool:
        """True while the follower thread runs."""
        return self.follower.is_alive()

    def health(self) -> tuple[bool, str]:
        """``(healthy, reason)``: the reader waits or makes progress (:meth:`Follower.health`)."""
        return self.follower.health()

    def catch_up(self, timeout: float = CATCH_UP_TIMEOUT) -> bool:
        """Check the paths and read what was appended before a scrape (:meth:`Follower.catch_up`)."""
        return self.follower.catch_up(timeout)

    def files_without_scheduler_lines(self) -> list[tuple[str, int, int]]:
        """``(path, lines read, bytes read)`` of each file read that held no SGLang scheduler line, by
        path (after :meth:`read_all`: one-shot mode warns about them)."""
        snap = self.stats.snapshot()
        return [(display_path(path), fs.lines, fs.bytes_read) for path, fs in snap.files.items()
                if not fs.scheduler_lines]

    def collector(self) -> LogCollector:
        """The collector of this source's ``sglang_exporter_log_*`` families."""
        return LogCollector(self.stats)
