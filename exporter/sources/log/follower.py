"""The follower: one thread that drives every tailer, woken by file events, by timers and by scrapes.

* **Wake-ups.** Structural file events from watchdog (inotify: create, delete, move) of the names
  the tailers follow (:meth:`Tailer.watch_names`; every name for a glob with magic in a directory
  part) only *wake* the reader, so another program's temporary files in the log's directory cost
  nothing; a poll timer wakes it as well, so a dropped event, an inotify limit or a file system
  without events (NFS, CIFS, overlay) delays noticing a rotation by at most one poll interval. Each
  such wake-up ``stat``s every followed path; a glob is listed again on a file event, on a scrape,
  in ``poll`` mode, and at least every :data:`GLOB_RELIST_INTERVAL` seconds, so an idle exporter's
  cost does not grow with the files in a glob's directory.
* **A scrape reads first.** A scrape first asks the reader for a full pass and waits for it
  (:meth:`Follower.catch_up`, at most :data:`CATCH_UP_TIMEOUT`): each path is checked and each
  glob listed (a file rotated, re-created, deleted or created since the last pass is noticed, as
  no file event may have been delivered yet, and none comes in ``poll`` mode) and what was appended
  is read, so ``/metrics`` shows every line written before the scrape. Between scrapes the open
  files are read every :data:`APPEND_CHECK_INTERVAL` seconds (one ``fstat`` each), which bounds
  how much is read at once. A wake-up costs about as much as the lines it reads (bench/): an
  inotify event per write, even debounced, or a fixed 75 ms timer, meant ten times as many
  wake-ups at 200 lines/s.
* **Health is progress.** The reader is healthy while it waits, or while its current pass keeps
  reading; a pass stuck for :data:`STALL_SECONDS` (a hung network file system) fails ``/healthz``.
"""

from __future__ import annotations

import errno
import fnmatch
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence

from ...limits import DEFAULT_LOG_POLL_INTERVAL
from ...paths import display_path
from .file import Tailer
from .registry import Ident
from .glob import GlobTailer, has_glob
from .stats import LogStats

log = logging.getLogger(__name__)

#: Seconds between reads of the open files' appends (one ``fstat`` each) when no scrape asks sooner.
#: A scrape reads them first (:meth:`Follower.catch_up`), so this does not delay ``/metrics``; it
#: bounds how much is read at once and how stale ``sglang_exporter_log_behind_bytes`` gets.
APPEND_CHECK_INTERVAL = 1.0
#: Longest a scrape waits for the reader to catch up before it is answered with what was read.
CATCH_UP_TIMEOUT = 0.5
#: Seconds between listings of a glob's directory when no file event says it changed (inotify mode).
GLOB_RELIST_INTERVAL = 10.0
#: Seconds a pass of the reader may go without reading a byte before ``/healthz`` says it is stuck.
STALL_SECONDS = 30.0


class _DropShutdownRace(logging.Filter):
    """Drops watchdog's "queue_events() called when the thread is inactive" (an event during stop)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "called when the thread is inactive" not in record.getMessage()


_SHUTDOWN_RACE_FILTER = _DropShutdownRace()


def _default_observer():
    from watchdog.observers import Observer

    return Observer()


class Follower:
    """Runs tailers in one thread, woken by watchdog file events and by a poll timer.

    Args:
        tailers: The sources to drive (:class:`Tailer`, :class:`GlobTailer`).
        poll_interval: Seconds between polls when no file event arrives.
        watch_mode: ``"inotify"`` (watchdog's native observer plus the timer; when the observer or a
            watch cannot be set up, e.g. the inotify watch or instance limit is reached, it falls
            back to polling with one warning) or ``"poll"`` (timer only; NFS/CIFS/overlay).
        stats: Where the watch mode in use and the reader's progress are published.
        observer_factory: Builds the watchdog observer (tests inject a failing one).
        stall_after: Seconds without progress after which :meth:`health` fails.

    Attributes:
        mode: The watch mode in use (``"inotify"`` or ``"poll"``).
        cycles: Completed full passes over all tailers (tests wait on it).
        passes: Completed passes of either kind (full, or reading the appends only).
        busy_since: Monotonic time the current pass began, ``None`` while the thread waits.
    """

    def __init__(self, tailers: Sequence[Tailer | GlobTailer], poll_interval: float = DEFAULT_LOG_POLL_INTERVAL,
                 watch_mode: str = "inotify", stats: LogStats | None = None,
                 observer_factory: Callable[[], object] = _default_observer, stall_after: float = STALL_SECONDS):
        self.tailers = list(tailers)
        self.poll_interval = poll_interval
        self.watch_mode = watch_mode
        self.mode = "poll"
        self.stats = stats if stats is not None else LogStats()
        self.observer_factory = observer_factory
        self.stall_after = stall_after
        self.stop_event = threading.Event()
        self.cycles = 0
        self.passes = 0
        self.busy_since: float | None = None
        self._signal = threading.Event()  # wakes the thread: file event, scrape, stop
        self._events = 0                  # file events (and wake() calls) so far; only ever grows
        self._cond = threading.Condition()
        self._asked = 0                   # catch-up requests so far (under _cond)
        self._answered = 0                # requests answered by a finished pass (under _cond)
        self._current = ""                # the path being read, for the health message
        self._observer = None
        self._handler = None
        self._event_filter: list | None = None
        self._watched: dict[str, tuple[Ident, object]] = {}
        self._wake_names: tuple[frozenset[str], tuple[str, ...]] | None = None  # None: every event wakes
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the reader thread (and the watchdog observer in inotify mode)."""
        if self.watch_mode == "inotify":
            self._start_observer()
        self._publish_mode()
        self._thread = threading.Thread(target=self._run, name="log-follower", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread and the observer, close the files."""
        self.stop_event.set()
        self._signal.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._stop_observer(timeout)
        for t in self.tailers:
            t.close()

    def wait_first_pass(self, timeout: float) -> bool:
        """Block until the reader thread has completed its first pass over all paths (or timeout)."""
        end = time.monotonic() + timeout
        while self.cycles < 1 and self.is_alive() and time.monotonic() < end:
            time.sleep(0.005)
        return self.cycles >= 1

    def is_alive(self) -> bool:
        """True while the reader thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def wake(self) -> None:
        """Have the thread make a full pass now (a file event; tests use it too)."""
        self._events += 1
        self._signal.set()

    def catch_up(self, timeout: float = CATCH_UP_TIMEOUT) -> bool:
        """Have the thread make a full pass (check each path, list each glob, read what was
        appended), and wait until it has.

        Called before a scrape is rendered, so that ``/metrics`` shows every line written before
        the scrape, in a file that replaced a rotated or deleted one or a new match of a glob too.
        Requests that arrive together are answered by one pass. Does not wait when the thread is
        not running (one-shot mode) or is in a pass that began more than ``timeout`` seconds ago
        (a large backlog, a stuck read): the scrape is answered with what was read.

        Returns:
            True when a pass that began after the request has finished.
        """
        if not self.is_alive():
            return False
        busy = self.busy_since
        if busy is not None and time.monotonic() - busy > timeout:
            return False
        with self._cond:
            self._asked += 1
            ticket = self._asked
            self._signal.set()
            return self._cond.wait_for(lambda: self._answered >= ticket, timeout)

    def health(self) -> tuple[bool, str]:
        """``(healthy, reason)`` for ``/healthz``: healthy while the thread waits, or while its pass
        reads (progress within ``stall_after`` seconds); not when the thread has died."""
        if not self.is_alive():
            return False, "log reader thread is not running"
        busy = self.busy_since
        if busy is None:
            return True, "ok"
        idle_for = time.monotonic() - max(busy, self.stats.progress_at)
        if idle_for < self.stall_after:
            return True, "ok"
        return False, (f"log reader made no progress for {idle_for:.0f}s (last at "
                       f"{display_path(self._current) or '?'}; a hung file system?)")

    def _run(self) -> None:
        append_interval = min(APPEND_CHECK_INTERVAL, self.poll_interval)
        relist_interval = max(GLOB_RELIST_INTERVAL, self.poll_interval)
        next_full = next_relist = 0.0
        seen_events = -1
        stats = self.stats
        while not self.stop_event.is_set():
            now = time.monotonic()
            self.busy_since = now
            self._signal.clear()
            with self._cond:
                asked = self._asked
                scraped = asked != self._answered  # a scrape waits: check the paths too (a new file)
            events = self._events
            evented = events != seen_events
            seen_events = events
            full = evented or scraped or now >= next_full
            relist = evented or scraped or now >= next_relist or self.mode == "poll"
            for t in self.tailers:
                self._current = t.path
                try:
                    if not full:
                        t.read_appends()
                    elif isinstance(t, GlobTailer):
                        t.poll(relist=relist)
                    else:
                        t.poll()
                except Exception:  # one bad file must not stop the others
                    log.exception("error while reading %s", t.path)
                stats.progress_at = time.monotonic()
            if full:
                if self._observer is not None:
                    self._update_watches()
                next_full = now + self.poll_interval
                if relist:
                    next_relist = now + relist_interval
                self.cycles += 1
            self.passes += 1
            with self._cond:
                self._answered = asked
                self._cond.notify_all()
            self.busy_since = None
            stats.progress_at = time.monotonic()
            self._signal.wait(max(0.0, min(now + append_interval, next_full) - time.monotonic()))

    def _publish_mode(self) -> None:
        self.stats.set_watch_mode(self.mode)

    def _start_observer(self) -> None:
        try:
            from watchdog.events import (
                DirCreatedEvent,
                DirDeletedEvent,
                DirMovedEvent,
                FileCreatedEvent,
                FileDeletedEvent,
                FileMovedEvent,
                FileSystemEventHandler,
            )
        except ImportError as exc:  # pragma: no cover - watchdog is a dependency
            self._fall_back(exc)
            return
        # Structural events only: watchdog then asks inotify for no IN_MODIFY, so an append costs no
        # event; appends are read by the append check (APPEND_CHECK_INTERVAL).
        self._event_filter = [FileCreatedEvent, FileDeletedEvent, FileMovedEvent,
                              DirCreatedEvent, DirDeletedEvent, DirMovedEvent]
        wake, concerns = self.wake, self._concerns

        class _Waker(FileSystemEventHandler):
            def on_any_event(self, event):
                if event.is_directory or concerns(event):
                    wake()

        self._handler = _Waker()
        # watchdog logs an ERROR when an event races its own shutdown; nothing is lost then.
        logging.getLogger("watchdog.observers.inotify").addFilter(_SHUTDOWN_RACE_FILTER)
        wd_log = logging.getLogger("watchdog")
        if wd_log.level == logging.NOTSET:  # its per-event debug lines would wake us when stderr is in a watched dir
            wd_log.setLevel(logging.INFO)
        try:
            self._observer = self.observer_factory()
            self._observer.daemon = True
            self._observer.start()
            self.mode = "inotify"
            self._update_watches()
        except Exception as exc:  # inotify_init/add_watch limits (ENOSPC, EMFILE), no inotify at all
            self._fall_back(exc)

    def _fall_back(self, exc: BaseException) -> None:
        reason = exc
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EMFILE):
            reason = f"{exc}; raise fs.inotify.max_user_watches / max_user_instances"
        log.warning("file events (inotify) unavailable (%s); polling every %.2fs instead",
                    reason, self.poll_interval)
        self._stop_observer(1.0)
        self.mode = "poll"
        self._publish_mode()

    def _stop_observer(self, timeout: float) -> None:
        obs, self._observer = self._observer, None
        if obs is None:
            return
        try:
            obs.stop()
            if getattr(obs, "ident", None) is not None:
                obs.join(timeout)
        except Exception:  # pragma: no cover - observer teardown must not block exit
            log.debug("observer stop failed", exc_info=True)

    def _concerns(self, event) -> bool:
        """True when a file event names a file the tailers follow or would (watchdog's thread)."""
        names = self._wake_names
        if names is None:
            return True
        literal, patterns = names
        for path in (event.src_path, getattr(event, "dest_path", "")):
            if path:
                name = os.path.basename(os.fsdecode(path))
                if name in literal or any(fnmatch.fnmatchcase(name, p) for p in patterns):
                    return True
        return False

    def _update_watches(self) -> None:
        """Watch each wanted directory that exists; re-watch one that was removed and re-created;
        take the names whose events wake the reader (:meth:`_concerns`)."""
        wanted: set[str] = set()
        names: set[str] | None = set()
        for t in self.tailers:
            wanted |= t.watch_dirs()
            more = t.watch_names()
            names = None if names is None or more is None else names | more
        self._wake_names = None if names is None else (
            frozenset(n for n in names if not has_glob(n)), tuple(sorted(n for n in names if has_glob(n))))
        for d in list(self._watched):
            try:
                st = os.stat(d)
                alive = (st.st_dev, st.st_ino) == self._watched[d][0]
            except OSError:
                alive = False
            if not alive or d not in wanted:
                _, watch = self._watched.pop(d)
                try:
                    self._observer.unschedule(watch)
                except Exception:  # the emitter may already be gone with its directory
                    pass
        for d in wanted - set(self._watched):
            try:
                st = os.stat(d)
            except OSError:
                continue  # directory missing: the timer covers it until it appears
            if not os.path.isdir(d):
                continue
            try:
                watch = self._observer.schedule(self._handler, d, recursive=False,
                                                event_filter=self._event_filter)
            except Exception as exc:
                self._fall_back(exc)
                return
            self._watched[d] = ((st.st_dev, st.st_ino), watch)
