"""Tailer: follows a log file and hands complete lines to the pipeline.

Semantics (design notes section 2):

* File events from watchdog (inotify) only *wake* the reader; a poll timer wakes it as well, so a
  dropped event or a file system without inotify (NFS, overlay) delays reading by at most one poll
  interval. Every wake-up ``stat``s the path: the file's identity is ``(st_dev, st_ino)``.
* First open at start-up: from the end of the file by default (a restarted exporter must not count a
  file twice; Prometheus handles the counter reset), from offset 0 with ``from_beginning``. If the
  exporter starts in the middle of a line, that fragment is skipped. A file that appears later, or
  the new file after a rotation, is read from offset 0.
* A partial last line is held until its newline arrives. It is flushed as a line when the file is
  rotated, deleted or truncated, and at the end of a one-shot read.
* Rotation (path now names another inode): the old file is drained to its end, then the new one is
  read from 0. Truncation (size below the read offset, ``copytruncate``): read again from 0.
* ``\\r\\n`` line ends are accepted; invalid UTF-8 is replaced, never fatal; a line longer than
  ``max_line_bytes`` without a newline is dropped and counted, and memory stays bounded.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence

from .pipeline import FileStats, Pipeline

log = logging.getLogger(__name__)

READ_CHUNK = 1 << 20


class Tailer:
    """Follows one path.

    Args:
        path: The log file to follow (symlinks are followed; it need not exist yet).
        pipeline: Where complete lines go.
        from_beginning: Read an existing file from offset 0 at start-up instead of from its end.
        max_line_bytes: Longest line kept; longer ones are dropped and counted as oversized.
    """

    def __init__(self, path: str, pipeline: Pipeline, from_beginning: bool = False,
                 max_line_bytes: int = 1 << 20):
        self.path = path
        self.pipeline = pipeline
        self.from_beginning = from_beginning
        self.max_line_bytes = max_line_bytes
        self.stats: FileStats = pipeline.register_file(path)
        self._file = None
        self._ident: tuple[int, int] | None = None
        self._offset = 0
        self._partial = b""
        self._skip_fragment = False
        self._started = False

    # -- public -------------------------------------------------------------------------------

    def poll(self) -> int:
        """Check the path and read everything available.

        Returns:
            Number of complete lines fed to the pipeline. Never raises for a missing or unreadable
            file (that is logged and reflected in ``FileStats.present``).
        """
        fed = 0
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.stats.present = False
            self._started = True  # a file that appears later is new: read it from 0
            if self._file is not None:  # deleted: drain what the old descriptor still has
                fed += self._read_all()
                fed += self.flush()
                self._close()
            return fed
        except OSError as exc:
            log.warning("cannot stat %s: %s", self.path, exc)
            self.stats.present = False
            return fed
        self.stats.present = True
        ident = (st.st_dev, st.st_ino)
        if self._file is not None and ident != self._ident:
            fed += self._read_all()  # rotation: finish the old file first
            fed += self.flush()
            self._close()
        if self._file is None:
            if not self._open(st, ident):
                return fed
        elif st.st_size < self._offset:
            log.info("%s was truncated; reading it again from the start", self.path)
            fed += self.flush()
            self._file.seek(0)
            self._offset = 0
        fed += self._read_all()
        return fed

    def flush(self) -> int:
        """Feed a held partial last line as a complete line (end of a one-shot read, rotation)."""
        if not self._partial or self._skip_fragment:
            self._partial = b""
            return 0
        data, self._partial = self._partial, b""
        return self.pipeline.feed([_decode(data)])

    def close(self) -> None:
        """Close the file descriptor, if any."""
        self._close()

    # -- internals ----------------------------------------------------------------------------

    def _open(self, st: os.stat_result, ident: tuple[int, int]) -> bool:
        try:
            f = open(self.path, "rb")
        except OSError as exc:
            log.warning("cannot open %s: %s", self.path, exc)
            return False
        fst = os.fstat(f.fileno())
        self._file, self._ident = f, (fst.st_dev, fst.st_ino)
        self._partial = b""
        self._skip_fragment = False
        self.stats.opens += 1
        if not self._started and not self.from_beginning and fst.st_size > 0:
            f.seek(fst.st_size - 1)
            self._skip_fragment = f.read(1) != b"\n"  # started mid-line: drop that fragment
            self._offset = fst.st_size
        else:
            self._offset = 0
        self._started = True
        log.info("following %s from offset %d", self.path, self._offset)
        return True

    def _close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            finally:
                self._file, self._ident = None, None

    def _read_all(self) -> int:
        f = self._file
        if f is None:
            return 0
        fed = 0
        while True:
            try:
                chunk = f.read(READ_CHUNK)
            except OSError as exc:
                log.warning("cannot read %s: %s", self.path, exc)
                break
            if not chunk:
                break
            self._offset += len(chunk)
            self.stats.bytes_read += len(chunk)
            fed += self._consume(chunk)
        return fed

    def _consume(self, chunk: bytes) -> int:
        data = self._partial + chunk if self._partial else chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            self._partial = data
            if len(data) > self.max_line_bytes:
                self._drop_oversized()
            return 0
        complete, self._partial = data[:cut], data[cut + 1:]
        if len(self._partial) > self.max_line_bytes:
            self._drop_oversized()
        if self._skip_fragment:
            nl = complete.find(b"\n")
            self._skip_fragment = False
            if nl < 0:
                return 0
            complete = complete[nl + 1:]
        lines = _decode(complete).split("\n")
        if len(complete) > self.max_line_bytes:
            kept = [line for line in lines if len(line) <= self.max_line_bytes]
            self.stats.oversized_lines += len(lines) - len(kept)
            lines = kept
        return self.pipeline.feed(lines)

    def _drop_oversized(self) -> None:
        self.stats.oversized_lines += 1
        self._partial = b""
        self._skip_fragment = True  # the rest of that line, up to its newline, is dropped too
        log.debug("dropped a line longer than %d bytes in %s", self.max_line_bytes, self.path)


def _decode(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if text.endswith("\r"):
            text = text[:-1]
    return text


class Follower:
    """Runs tailers in one thread, woken by watchdog file events and by a poll timer.

    Args:
        tailers: The tailers to drive.
        poll_interval: Seconds between polls when no file event arrives.
        watch_mode: ``"inotify"`` (watchdog's native observer, falling back to polling with one
            warning when it cannot be set up) or ``"poll"`` (timer only; for NFS/CIFS/overlay).
    """

    def __init__(self, tailers: Sequence[Tailer], poll_interval: float = 1.0, watch_mode: str = "inotify"):
        self.tailers = list(tailers)
        self.poll_interval = poll_interval
        self.watch_mode = watch_mode
        self.wake = threading.Event()
        self.stop_event = threading.Event()
        self._observer = None
        self._watched: set[str] = set()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the reader thread (and the watchdog observer in inotify mode)."""
        if self.watch_mode == "inotify":
            self._start_observer()
        self._thread = threading.Thread(target=self._run, name="log-follower", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread and the observer, close the files."""
        self.stop_event.set()
        self.wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._observer is not None:
            try:
                self._observer.stop()
                self._observer.join(timeout)
            except Exception:  # pragma: no cover - observer teardown must not block exit
                log.debug("observer stop failed", exc_info=True)
        for t in self.tailers:
            t.close()

    def _run(self) -> None:
        while not self.stop_event.is_set():
            for t in self.tailers:
                try:
                    t.poll()
                except Exception:  # one bad file must not stop the others
                    log.exception("error while reading %s", t.path)
            if self._observer is not None:
                self._watch_missing_dirs()
            self.wake.wait(self.poll_interval)
            self.wake.clear()

    def _start_observer(self) -> None:
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError as exc:  # pragma: no cover - watchdog is a dependency
            log.warning("watchdog unavailable (%s); polling every %.1fs", exc, self.poll_interval)
            return
        wake = self.wake

        class _Waker(FileSystemEventHandler):
            def on_any_event(self, event):
                wake.set()

        self._handler = _Waker()
        self._observer = Observer()
        self._observer.daemon = True
        self._watch_missing_dirs()
        try:
            self._observer.start()
        except OSError as exc:
            log.warning("file events unavailable (%s); polling every %.1fs instead", exc, self.poll_interval)
            self._observer = None

    def _watch_missing_dirs(self) -> None:
        for t in self.tailers:
            d = os.path.dirname(os.path.abspath(t.path))
            if d in self._watched or not os.path.isdir(d):
                continue
            try:
                self._observer.schedule(self._handler, d, recursive=False)
                self._watched.add(d)
            except OSError as exc:
                log.warning("cannot watch %s (%s); polling every %.1fs instead", d, exc, self.poll_interval)
                self._watched.add(d)
