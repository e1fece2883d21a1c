"""The follower: one thread that drives every tailer, woken by file events and by timers.

* **Wake-ups.** Structural file events from watchdog (inotify: create, delete, move) only *wake*
  the reader; a poll timer wakes it as well, so a dropped event, an inotify limit or a file system
  without events (NFS, CIFS, overlay) delays noticing a rotation by at most one poll interval. Each
  such wake-up ``stat``s every followed path. Appends are found by a cheap check of the open
  descriptors (one ``fstat`` each) every :data:`APPEND_CHECK_INTERVAL` seconds: asking inotify for
  every write would cost one event through watchdog's threads per logged line.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence

from ...limits import DEFAULT_LOG_POLL_INTERVAL
from .file import Ident, Tailer
from .glob import GlobTailer
from .stats import LogStats

log = logging.getLogger(__name__)

#: Seconds between append checks of the open files (one ``fstat`` each). File events cover only
#: structural changes (create, delete, move); appends are found by this check, which costs far less
#: than one inotify event handled by watchdog's threads per written line. 75 ms keeps the p99
#: line-to-/metrics delay under 100 ms and the thread's wake-ups under 1% of a core (bench/).
APPEND_CHECK_INTERVAL = 0.075


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
        stats: Where the watch mode in use is published (``LogStats.watch_mode``), if given.
        observer_factory: Builds the watchdog observer (tests inject a failing one).

    Attributes:
        mode: The watch mode in use (``"inotify"`` or ``"poll"``).
        cycles: Completed passes over all tailers (tests wait on it).
    """

    def __init__(self, tailers: Sequence[Tailer | GlobTailer], poll_interval: float = DEFAULT_LOG_POLL_INTERVAL,
                 watch_mode: str = "inotify", stats: LogStats | None = None,
                 observer_factory: Callable[[], object] = _default_observer):
        self.tailers = list(tailers)
        self.poll_interval = poll_interval
        self.watch_mode = watch_mode
        self.mode = "poll"
        self.stats = stats
        self.observer_factory = observer_factory
        self.wake = threading.Event()
        self.stop_event = threading.Event()
        self.cycles = 0
        self._observer = None
        self._handler = None
        self._event_filter: list | None = None
        self._watched: dict[str, tuple[Ident, object]] = {}
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
        self.wake.set()
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

    def _run(self) -> None:
        append_interval = min(APPEND_CHECK_INTERVAL, self.poll_interval)
        next_full = 0.0
        while not self.stop_event.is_set():
            now = time.monotonic()
            full = self.wake.is_set() or now >= next_full
            self.wake.clear()
            for t in self.tailers:
                try:
                    if full:
                        t.poll()
                    else:
                        t.read_appends()
                except Exception:  # one bad file must not stop the others
                    log.exception("error while reading %s", t.path)
            if full:
                if self._observer is not None:
                    self._update_watches()
                next_full = now + self.poll_interval
                self.cycles += 1
            self.wake.wait(max(0.0, min(append_interval, next_full - time.monotonic())))

    def _publish_mode(self) -> None:
        if self.stats is not None:
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
        wake = self.wake

        class _Waker(FileSystemEventHandler):
            def on_any_event(self, event):
                wake.set()

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

    def _update_watches(self) -> None:
        """Watch each wanted directory that exists; re-watch one that was removed and re-created."""
        wanted: set[str] = set()
        for t in self.tailers:
            wanted |= t.watch_dirs()
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
