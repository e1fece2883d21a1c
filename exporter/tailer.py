"""Tailer: follows log files (plain paths and globs) and hands complete lines to the pipeline.

Semantics (design notes section 2, the ``tail -F`` bar set by mtail, fluent-bit and Vector):

* **Wake-ups.** Structural file events from watchdog (inotify: create, delete, move) only *wake*
  the reader; a poll timer wakes it as well, so a dropped event, an inotify limit or a file system
  without events (NFS, CIFS, overlay) delays noticing a rotation by at most one poll interval. Each
  such wake-up ``stat``s every followed path. Appends are found by a cheap check of the open
  descriptors (one ``fstat`` each) every :data:`APPEND_CHECK_INTERVAL` seconds: asking inotify for
  every write would cost one event through watchdog's threads per logged line.
* **Identity is** ``(st_dev, st_ino)`` of the path's target (symlinks are followed, so a Kubernetes
  ``/var/log/containers/*.log`` link whose target is swapped is a rotation), never inferred from
  event sequences.
* **Rotation** (the path now names another inode, rename + create): the old descriptor keeps being
  read for ``rotate_wait`` seconds, because the writer appends to it until it reopens its log; then
  its held partial line is flushed and it is closed. The new file is read from offset 0.
* **Deletion**: like rotation without a successor; the path is reported absent and a file that
  appears there later is read from offset 0.
* **Truncation** (size below the read offset, ``copytruncate``): the held partial line is flushed,
  reading restarts at 0, the event is counted. Lines written between the last read and the
  truncation are lost, and a truncation followed by more writes than were read before it, within
  one wake-up, cannot be seen at all: ``copytruncate`` is lossy in every tool (see the README).
* **Start position**: an existing file is read from its end at start-up (a restarted exporter must
  not count a file twice; Prometheus handles the counter reset), from 0 with ``from_beginning``.
  Starting mid-line skips that fragment. Files that appear later are read from 0.
* **Lines**: a partial last line is held until its newline arrives. ``\\r\\n`` ends a line; a bare
  ``\\r`` (tqdm progress bars) separates lines as a terminal would show them; NUL bytes at the start
  of a line (the hole a writer without ``O_APPEND`` leaves after ``copytruncate``) are dropped;
  invalid UTF-8 is replaced. A line longer than ``max_line_bytes`` is dropped up to its newline and
  counted once as oversized; memory per file stays below about ``2 * max_line_bytes + READ_CHUNK``.
* **Several files**: each configured path or glob is followed on its own; a file is followed by
  one reader at a time even when several patterns match it, and a rotated file that a glob matches
  under its new name (``sglang.log*`` matching ``sglang.log.1``) is continued from where it was
  left, not read again.
"""

from __future__ import annotations

import errno
import glob
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

from .pipeline import FileStats, Pipeline

log = logging.getLogger(__name__)

#: Bytes read per ``read`` call.
READ_CHUNK = 1 << 20
#: Seconds between append checks of the open files (one ``fstat`` each). File events cover only
#: structural changes (create, delete, move); appends are found by this check, which costs far less
#: than one inotify event handled by watchdog's threads per written line. 75 ms keeps the p99
#: line-to-/metrics delay under 100 ms and the thread's wake-ups under 1% of a core (bench/).
APPEND_CHECK_INTERVAL = 0.075
#: Bytes of a file's head kept with a remembered read position, to tell a reused inode number apart.
FINGERPRINT_BYTES = 256
#: How much of an existing log's head is searched for start-up lines when starting at its end.
STARTUP_SCAN_BYTES = 64 << 20
#: Default seconds a rotated or deleted file is still read (fluent-bit's ``rotate_wait`` is 5).
ROTATE_WAIT = 5.0

Ident = tuple[int, int]


class Registry:
    """Which file (by identity) is read by whom, shared by all tailers of one exporter.

    Guarantees that one file is read by one reader at a time, and remembers where a closed reader
    stopped so that a glob that later matches the same file under a new name continues there.
    Since a deleted file's inode number can be reused by a new file, a remembered position is kept
    with the file's first bytes (a fingerprint, as Vector and fluent-bit do) and only resumed when the
    file opened under that identity still starts with them. Used by the tailer thread only.
    """

    def __init__(self, remember: int = 4096):
        self.open: dict[Ident, object] = {}
        self.finished: OrderedDict[Ident, tuple[int, bytes]] = OrderedDict()
        self._remember = remember

    def finish(self, ident: Ident, offset: int, head: bytes = b"") -> None:
        """Record that the reader of ``ident`` closed it at byte ``offset``; ``head`` is the file's
        first bytes (up to :data:`FINGERPRINT_BYTES`)."""
        self.open.pop(ident, None)
        self.finished[ident] = (offset, head)
        self.finished.move_to_end(ident)
        while len(self.finished) > self._remember:
            self.finished.popitem(last=False)

    def resume_offset(self, ident: Ident, fd: int, size: int) -> int | None:
        """Where to continue a file opened under ``ident``: the remembered offset if the file still
        starts with the remembered bytes and is at least that long, else None (a new file)."""
        entry = self.finished.pop(ident, None)
        if entry is None:
            return None
        offset, head = entry
        if offset > size:
            return None
        try:
            if head and os.pread(fd, len(head), 0) != head:
                return None  # same inode number, other file
        except OSError:
            return None
        return offset


class _Reader:
    """One open file descriptor with its read position and held partial line."""

    __slots__ = ("f", "ident", "offset", "partial", "skipping", "deadline", "size", "dir")

    def __init__(self, f, ident: Ident, offset: int, dir: str = ""):
        self.f = f
        self.dir = dir  # directory of the file when opened: watched while it is read (drained)
        self.ident = ident
        self.offset = offset
        self.partial = b""
        self.skipping = False  # dropping bytes up to the next newline (oversized line, mid-line start)
        self.deadline: float | None = None  # set while draining after rotation or deletion
        self.size = offset


class Tailer:
    """Follows one path (a plain file path; symlinks are followed; it need not exist yet).

    Args:
        path: The file to follow; also the ``path`` label of its self-metrics.
        pipeline: Where complete lines go (:meth:`Pipeline.feed`).
        from_beginning: Read a file that exists at start-up from offset 0 instead of from its end.
        max_line_bytes: Longest line kept, in bytes without the terminator; longer ones are dropped
            and counted in ``FileStats.oversized_lines``.
        rotate_wait: Seconds a rotated or deleted file keeps being read before it is closed.
        registry: Shared :class:`Registry` (one per exporter; a private one by default).
        clock: Monotonic clock in seconds (tests inject one).

    Counters are kept in ``self.stats`` (:class:`~exporter.pipeline.FileStats`): opens, bytes read,
    rotations, truncations, oversized lines, presence and bytes behind the end of the file.
    """

    def __init__(self, path: str, pipeline: Pipeline, from_beginning: bool = False,
                 max_line_bytes: int = 1 << 20, rotate_wait: float = ROTATE_WAIT,
                 registry: Registry | None = None, clock: Callable[[], float] = time.monotonic,
                 started: bool = False):
        self.path = path
        self.pipeline = pipeline
        self.from_beginning = from_beginning
        self.max_line_bytes = max_line_bytes
        self.rotate_wait = rotate_wait
        self.registry = registry if registry is not None else Registry()
        self.clock = clock
        self.stats: FileStats = pipeline.register_file(path)
        self._cur: _Reader | None = None
        self._draining: list[_Reader] = []
        self._started = started  # True once the start-up position rule has been applied
        self._last_error: str | None = None

    # -- public -------------------------------------------------------------------------------

    def poll(self) -> int:
        """Check the path's identity and size, and read everything available.

        Returns:
            Number of lines fed to the pipeline. Never raises for a missing, unreadable or
            vanishing file: that is logged once per change and shown in ``FileStats.present``.
        """
        fed = 0
        now = self.clock()
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            st = None
            self._note_error(None)
        except OSError as exc:
            st = None
            self._note_error(f"cannot stat {self.path}: {exc.strerror or exc}")
        if st is None:
            self.stats.present = False
            self._started = True  # a file that appears later is new: read it from 0
            if self._cur is not None:  # deleted (or unreachable): drain the old descriptor
                log.info("%s was removed; reading its last lines for %.1fs", self.path, self.rotate_wait)
                fed += self._retire(now)
        else:
            self.stats.present = True
            ident = (st.st_dev, st.st_ino)
            if self._cur is not None and ident != self._cur.ident:
                log.info("%s was rotated; reading the old file for %.1fs more", self.path, self.rotate_wait)
                fed += self._retire(now)
            if self._cur is None:
                back = next((r for r in self._draining if r.ident == ident), None)
                if back is not None:  # renamed back while draining: it is current again
                    self._draining.remove(back)
                    back.deadline = None
                    self._cur = back
                else:
                    self._open(st, ident)
            elif st.st_size < self._cur.offset:
                self._truncated(self._cur)
        fed += self._read_draining(now)
        if self._cur is not None:
            fed += self._read(self._cur)
        self._update_behind()
        return fed

    def read_appends(self) -> int:
        """Read what was appended to the open files, without looking at the path.

        The cheap half of :meth:`poll` (one ``fstat`` per open descriptor), which the follower runs
        at a short fixed cadence so that appends are read promptly without a file event per write;
        the path's identity (rotation, deletion, a new file) is checked by :meth:`poll`.

        Returns:
            Number of lines fed to the pipeline.
        """
        fed = 0
        for r in [*self._draining, self._cur]:
            if r is None:
                continue
            try:
                size = os.fstat(r.f.fileno()).st_size
            except OSError:
                continue
            if size < r.offset:
                self._truncated(r)
            if size != r.offset:
                fed += self._read(r)
        return fed

    def flush(self) -> int:
        """Feed every held partial last line as a complete line (end of a one-shot read)."""
        fed = 0
        for r in [*self._draining, self._cur]:
            if r is not None:
                fed += self._flush(r)
        return fed

    def close(self) -> None:
        """Close every file descriptor (held partial lines are discarded)."""
        for r in [*self._draining, self._cur]:
            if r is not None:
                self._close(r)
        self._draining, self._cur = [], None

    def watch_dirs(self) -> set[str]:
        """Directories whose events should wake this tailer: the path's own, its target's, and those
        of the files still open (a rotated file drained in the old target's directory)."""
        dirs = {os.path.dirname(os.path.abspath(self.path))}
        real = os.path.realpath(self.path)
        dirs.add(os.path.dirname(real))
        dirs.update(r.dir for r in [*self._draining, self._cur] if r is not None and r.dir)
        return dirs

    @property
    def idle(self) -> bool:
        """True when nothing is open (the path is absent and every old file has been drained)."""
        return self._cur is None and not self._draining

    # -- internals ----------------------------------------------------------------------------

    def _note_error(self, message: str | None) -> None:
        if message is not None and message != self._last_error:
            log.warning("%s", message)
        self._last_error = message

    def _open(self, st: os.stat_result, ident: Ident) -> None:
        reg = self.registry
        if ident in reg.open:  # another pattern's reader has it (or its rotated predecessor)
            return
        try:
            f = open(self.path, "rb", buffering=0)
        except OSError as exc:
            self._note_error(f"cannot open {self.path}: {exc.strerror or exc}")
            return
        fst = os.fstat(f.fileno())
        ident = (fst.st_dev, fst.st_ino)
        if ident in reg.open:
            f.close()
            return
        self._note_error(None)
        offset = 0
        skipping = False
        resumed = reg.resume_offset(ident, f.fileno(), fst.st_size)
        if resumed is not None:
            offset = resumed  # a file already read under another name (glob after rotation)
        elif not self._started and not self.from_beginning and fst.st_size > 0:
            offset = fst.st_size
            try:
                skipping = os.pread(f.fileno(), 1, fst.st_size - 1) != b"\n"  # started mid-line
                # The server's capacity and server_args lines precede the end: keep what they say.
                self.pipeline.recover_startup_facts(os.pread(f.fileno(), min(fst.st_size, STARTUP_SCAN_BYTES), 0))
            except OSError:
                skipping = False
        if offset:
            f.seek(offset)
        r = _Reader(f, ident, offset, os.path.dirname(os.path.realpath(self.path)))
        r.skipping = skipping
        r.size = fst.st_size
        reg.open[ident] = self
        self._cur = r
        self._started = True
        if self.stats.opens:  # another file than before at this path: renamed, re-created, link swapped
            self.stats.rotations += 1
        self.stats.opens += 1
        log.info("following %s from offset %d", self.path, offset)

    def _retire(self, now: float) -> int:
        """Move the current reader to the draining list (rotation, deletion), reading it first."""
        r, self._cur = self._cur, None
        fed = self._read(r)
        r.deadline = now + self.rotate_wait
        self._draining.append(r)
        return fed

    def _read_draining(self, now: float) -> int:
        fed = 0
        for r in list(self._draining):
            try:
                size = os.fstat(r.f.fileno()).st_size
            except OSError:
                size = r.offset
            if size < r.offset:
                self._truncated(r)
            fed += self._read(r)
            if r.deadline is not None and now >= r.deadline:
                fed += self._flush(r)
                self._draining.remove(r)
                self._close(r)
        return fed

    def _truncated(self, r: _Reader) -> None:
        self.stats.truncations += 1
        log.info("%s was truncated; reading it again from the start", self.path)
        self._flush(r)
        r.skipping = False
        try:
            r.f.seek(0)
        except OSError:
            pass
        r.offset = 0

    def _close(self, r: _Reader) -> None:
        try:
            head = os.pread(r.f.fileno(), min(r.offset, FINGERPRINT_BYTES), 0)
        except OSError:
            head = b""
        self.registry.finish(r.ident, r.offset, head)
        try:
            r.f.close()
        except OSError:  # pragma: no cover - closing a read-only descriptor does not fail
            pass

    def _update_behind(self) -> None:
        behind = 0
        for r in [*self._draining, self._cur]:
            if r is not None:
                behind += max(0, r.size - r.offset)
        self.stats.behind_bytes = behind

    def _read(self, r: _Reader) -> int:
        fed = 0
        try:
            r.size = os.fstat(r.f.fileno()).st_size
        except OSError:
            pass
        while True:
            try:
                chunk = r.f.read(READ_CHUNK)
            except OSError as exc:
                self._note_error(f"cannot read {self.path}: {exc.strerror or exc}")
                break
            if not chunk:
                break
            r.offset += len(chunk)
            if r.offset > r.size:
                r.size = r.offset
            self.stats.bytes_read += len(chunk)
            self.stats.behind_bytes = max(0, r.size - r.offset)
            fed += self._consume(r, chunk)
        return fed

    def _consume(self, r: _Reader, chunk: bytes) -> int:
        if r.skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                return 0
            chunk = chunk[nl + 1:]
            r.skipping = False
        if r.partial:
            data = r.partial + chunk
        else:
            data = chunk.lstrip(b"\0") if chunk[:1] == b"\0" else chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            if len(data) > self.max_line_bytes:
                self._oversized(r)
            else:
                r.partial = data
            return 0
        rest = data[cut + 1:]
        r.partial = b""
        if len(rest) > self.max_line_bytes:
            self._oversized(r)
        else:
            r.partial = rest
        return self._emit(data[:cut].split(b"\n"))

    def _oversized(self, r: _Reader) -> None:
        self.stats.oversized_lines += 1
        r.partial = b""
        r.skipping = True  # the rest of that line, up to its newline, is dropped too
        log.debug("dropped a line longer than %d bytes in %s", self.max_line_bytes, self.path)

    def _flush(self, r: _Reader) -> int:
        data, r.partial = r.partial, b""
        if not data or r.skipping:
            return 0
        return self._emit([data])

    def _emit(self, parts: Iterable[bytes]) -> int:
        limit = self.max_line_bytes
        lines: list[str] = []
        for p in parts:
            if len(p) > limit:
                self.stats.oversized_lines += 1
                continue
            if p[:1] == b"\0":
                p = p.lstrip(b"\0")
            text = p.decode("utf-8", "replace")
            if "\r" in text:
                if text[-1] == "\r":
                    text = text[:-1]
                if "\r" in text:
                    lines.extend(s for s in text.split("\r") if s)
                    continue
            lines.append(text)
        return self.pipeline.feed(lines) if lines else 0


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

    def __init__(self, pattern: str, pipeline: Pipeline, from_beginning: bool = False,
                 max_line_bytes: int = 1 << 20, rotate_wait: float = ROTATE_WAIT,
                 registry: Registry | None = None, clock: Callable[[], float] = time.monotonic,
                 claimed: set[str] | None = None):
        self.path = pattern
        self.pipeline = pipeline
        self.kw = dict(from_beginning=from_beginning, max_line_bytes=max_line_bytes, rotate_wait=rotate_wait,
                       registry=registry if registry is not None else Registry(), clock=clock)
        self.claimed = claimed if claimed is not None else set()
        self.tailers: dict[str, Tailer] = {}
        self._started = False
        with pipeline.lock:
            pipeline.patterns[pattern] = 0

    def poll(self) -> int:
        """Look up matches, then poll each matched file; returns lines fed."""
        matches = {m for m in glob.glob(self.path) if os.path.isfile(m)}
        for m in sorted(matches):
            if m not in self.tailers and os.path.abspath(m) not in self.claimed:
                self.tailers[m] = Tailer(m, self.pipeline, started=self._started, **self.kw)
        self._started = True
        fed = 0
        for m, t in list(self.tailers.items()):
            fed += t.poll()
            if m not in matches and t.idle:
                del self.tailers[m]
                with self.pipeline.lock:
                    self.pipeline.files.pop(m, None)
        with self.pipeline.lock:
            self.pipeline.patterns[self.path] = len(matches)
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


def make_sources(paths: Sequence[str], pipeline: Pipeline, from_beginning: bool = False,
                 max_line_bytes: int = 1 << 20, rotate_wait: float = ROTATE_WAIT,
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
    sources: list[Tailer | GlobTailer] = [Tailer(p, pipeline, **kw) for p in plain]
    sources += [GlobTailer(g, pipeline, claimed=claimed, **kw) for g in globs]
    return sources


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
        pipeline: Where the watch mode in use is published (``Pipeline.watch_mode``); by default the
            first tailer's pipeline.
        observer_factory: Builds the watchdog observer (tests inject a failing one).

    Attributes:
        mode: The watch mode in use (``"inotify"`` or ``"poll"``).
        cycles: Completed passes over all tailers (tests wait on it).
    """

    def __init__(self, tailers: Sequence[Tailer | GlobTailer], poll_interval: float = 1.0,
                 watch_mode: str = "inotify", pipeline: Pipeline | None = None,
                 observer_factory: Callable[[], object] = _default_observer):
        self.tailers = list(tailers)
        self.poll_interval = poll_interval
        self.watch_mode = watch_mode
        self.mode = "poll"
        self.pipeline = pipeline if pipeline is not None else (self.tailers[0].pipeline if self.tailers else None)
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
        if self.pipeline is not None:
            with self.pipeline.lock:
                self.pipeline.watch_mode = self.mode

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
