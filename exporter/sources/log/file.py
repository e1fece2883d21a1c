"""One followed path: its file's identity, rotation, truncation and start position.

The ``tail -F`` semantics set by mtail, fluent-bit and Vector; each case, and why, is in
``docs/tailing.md``:

* **Identity** is ``(st_dev, st_ino)`` of the path's target (symlinks followed: a swapped Kubernetes
  ``/var/log/containers`` link is a rotation), never inferred from event sequences.
* **Rotation**: the old descriptor is read ``rotate_wait`` seconds more, then flushed and closed; the
  new file is read from 0. Rotated files written and rotated away between two checks are found among
  the siblings (:mod:`.missed`) and read first, oldest first; one already gone is counted as missed.
* **Deletion**: the deleted file is read through its descriptor until a file appears at the path.
* **Truncation** (size below the offset, or the first bytes changed: ``copytruncate``): the lines
  between the last read and the truncation are read from the copy (:mod:`.copies`), the partial line
  flushed, reading restarts at 0 and the event is counted.
* **Start position**: an existing file from its end (a restarted exporter must not count a file
  twice), from 0 with ``from_beginning``; files that appear later from 0. The skipped part and the
  rotated files are searched for the last start's start-up facts (:mod:`.startfacts`).
* **Regular files only** (checked on the path and again on the descriptor, opened non-blocking);
  **holes** (``SEEK_DATA``) skipped (:mod:`.holes`); **lines** by :mod:`.lines` (memory per file below about
  ``2 * max_line_bytes + READ_CHUNK``); **one reader per file** (:class:`~.registry.Registry`).
* **One-shot** reads (:meth:`Tailer.read_once`) read to the end once; a ``.gz`` file is decompressed
  (:mod:`.compressed`).
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Protocol

from ...limits import DEFAULT_MAX_LINE_BYTES, DEFAULT_ROTATE_WAIT
from ...paths import display_path, not_regular
from .compressed import gzip_chunks, is_compressed
from .copies import find_copy
from .holes import skip_hole
from .lines import LineSplitter
from .missed import unseen_rotated_files
from .registry import FINGERPRINT_BYTES, Ident, Reader, Registry
from .startfacts import SCAN_CHUNK, STARTUP_SCAN_BYTES, start_chunks
from .stats import FileStats, LogStats

log = logging.getLogger(__name__)

#: Bytes read per ``read`` call.
READ_CHUNK = 1 << 20
#: Most rotated files remembered as counted in ``missed_rotations`` (so none is counted twice).
MISSED_REMEMBERED = 1024


class LineSink(Protocol):
    """Where a tailer hands what it read (:class:`~.ingest.Ingest`): it knows nothing downstream."""

    def feed(self, lines: list[str]) -> int:
        """Take complete lines, oldest first; returns how many of them are SGLang scheduler lines."""

    def startup_facts(self, chunks: Iterable[bytes]) -> int:
        """Take start-up lines before a start position, as consecutive chunks (not counted)."""


class Tailer:
    """Follows one path (a plain file path; symlinks are followed; it need not exist yet).

    Args:
        path: The file to follow; also the ``path`` label of its self-metrics.
        sink: Where complete lines go (:class:`LineSink`).
        stats: The log source's statistics, where this path's :class:`FileStats` is registered (a
            private :class:`LogStats` by default).
        from_beginning: Read a file that exists at start-up from offset 0 instead of from its end.
        max_line_bytes: Longest line kept, in bytes without the terminator; longer ones are dropped
            and counted in ``FileStats.oversized_lines``.
        rotate_wait: Seconds a rotated or deleted file keeps being read before it is closed.
        registry: Shared :class:`Registry` (one per exporter; a private one by default).
        clock: Monotonic clock in seconds (tests inject one).
        started: The start-up position rule no longer applies (a file matched by a glob after its
            first check is new: read from 0).
        covered: True for a path that a glob of this exporter follows (a rotated file it would read
            is not counted as missed).
        follow_deleted: Read a deleted file until a file appears at the path (a plain ``--log.path``);
            False drains it for ``rotate_wait`` only (a glob's match: a request log deleted by a
            clean-up job gets no successor and would hold its descriptor and place for ever).

    Counters are kept in ``self.stats`` (:class:`~.stats.FileStats`): opens, bytes read, lines,
    rotations (and rotated files never read), truncations, oversized lines, presence and bytes
    behind the end of the file. Each chunk read is recorded as progress in ``LogStats.progress_at``.
    """

    def __init__(self, path: str, sink: LineSink, stats: LogStats | None = None, from_beginning: bool = False,
                 max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, rotate_wait: float = DEFAULT_ROTATE_WAIT,
                 registry: Registry | None = None, clock: Callable[[], float] = time.monotonic,
                 started: bool = False, covered: Callable[[str], bool] | None = None, follow_deleted: bool = True):
        self.path = path
        self.follow_deleted = follow_deleted
        self.sink = sink
        self.from_beginning = from_beginning
        self.max_line_bytes = max_line_bytes
        self.rotate_wait = rotate_wait
        self.registry = registry if registry is not None else Registry()
        self.clock = clock
        self.covered = covered if covered is not None else (lambda p: False)
        self.log_stats = stats if stats is not None else LogStats()
        self.stats: FileStats = self.log_stats.register_file(path)
        self._cur: Reader | None = None
        self._draining: list[Reader] = []
        self._started = started  # True once the start-up position rule has been applied
        self._checked = started  # True once the path was looked at (its absence is warned about once)
        self._last_error: str | None = None
        self._seen_ns = 0  # wall clock (ns) of the latest check that found the open file at the path
        self._counted: OrderedDict[Ident, None] = OrderedDict()  # rotated files counted as missed
        self._dir = os.path.dirname(os.path.abspath(path))

    # -- public -------------------------------------------------------------------------------

    def poll(self) -> int:
        """Check the path's identity and size, and read everything available.

        Returns:
            Number of lines handed to the sink. Never raises for a missing, unreadable or
            vanishing file: that is logged once per change and shown in ``FileStats.present``.
        """
        fed = 0
        now = self.clock()
        checked_ns = time.time_ns()
        first, self._checked = not self._checked, True
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            st = None
            if first:
                log.warning("%s does not exist (yet); waiting for it", display_path(self.path))
            self._note_error(None)
        except OSError as exc:
            st = None
            self._note_error(f"cannot stat {self.path}: {exc.strerror or exc}")
        if st is not None and not stat.S_ISREG(st.st_mode):
            self._note_error(f"{display_path(self.path)} {not_regular(st.st_mode, self.path)}: skipped "
                             "(only regular files are read)")
            st = None
        if st is None:
            self.stats.present = False
            self._started = True  # a file that appears later is new: read it from 0
            if self._cur is not None:  # deleted (or unreachable): follow the old descriptor
                log.info("%s was removed; still reading the open file %s", self.path,
                         "until a new one appears at the path" if self.follow_deleted else f"for {self.rotate_wait:.1f}s")
                fed += self._retire(None if self.follow_deleted else now)
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
            elif self._rewritten(self._cur, st.st_size):
                fed += self._truncated(self._cur)
            if self._cur is not None and self._cur.ident == ident:
                self._seen_ns = checked_ns
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
            Number of lines handed to the sink.
        """
        fed = 0
        for r in [*self._draining, self._cur]:
            if r is None:
                continue
            try:
                size = os.fstat(r.f.fileno()).st_size
            except OSError:
                continue
            if self._rewritten(r, size):
                fed += self._truncated(r)
            if size != r.offset:
                fed += self._read(r)
        return fed

    def read_once(self) -> int:
        """One-shot: read the file to its end, its partial last line included; a ``.gz`` file is
        decompressed as it is read (:mod:`.compressed`): damage is logged, the lines before it kept.

        Returns:
            Lines handed to the sink.
        """
        if not is_compressed(self.path):
            return self.poll() + self.flush()
        r, fed = SimpleNamespace(lines=LineSplitter(self.max_line_bytes)), 0  # what _consume, _feed read
        try:
            for chunk in gzip_chunks(self.path, READ_CHUNK * getattr(self.sink, "read_chunks", 1)):
                self.stats.opens, self.stats.present = 1, True
                self.stats.bytes_read += len(chunk)
                fed += self._consume(r, chunk)
        except OSError as exc:
            self._note_error(f"cannot read {display_path(self.path)}: {exc.strerror or exc}")
        return fed + self._flush(r)

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
        """Directories whose events should wake this tailer: the path's own, those of the files
        open (a symlink's target, a rotated file drained in the old target's directory) and, while
        no file is open, the directory of where the path points (a dangling symlink's target)."""
        dirs = {self._dir}
        if self._cur is None:
            dirs.add(os.path.dirname(os.path.realpath(self.path)))
        dirs.update(r.dir for r in [*self._draining, self._cur] if r is not None and r.dir)
        return dirs

    def watch_names(self) -> set[str]:
        """Names (in the :meth:`watch_dirs`) whose create, delete or move concerns this tailer: the
        path's own and that of the file it names (a symlink's target), which is all a rotation,
        deletion or re-creation touches. Other names' events (temporary files of other programs in
        the same directory) need not wake the reader."""
        names = {os.path.basename(self.path)}
        if self._cur is None:
            names.add(os.path.basename(os.path.realpath(self.path)))
        else:
            names.add(self._cur.name)
        return names

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
        try:  # non-blocking: a FIFO swapped in since the stat must not wait for a writer
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            self._note_error(f"cannot open {self.path}: {exc.strerror or exc}")
            return
        try:
            fst = os.fstat(fd)
            regular = stat.S_ISREG(fst.st_mode)
            if regular:
                os.set_blocking(fd, True)
        except OSError as exc:
            os.close(fd)
            self._note_error(f"cannot open {self.path}: {exc.strerror or exc}")
            return
        if not regular:
            os.close(fd)
            self._note_error(f"{display_path(self.path)} {not_regular(fst.st_mode, self.path)}: skipped "
                             "(only regular files are read)")
            return
        f = open(fd, "rb", buffering=0)
        ident = (fst.st_dev, fst.st_ino)
        if ident in reg.open:
            f.close()
            return
        self._note_error(None)
        offset = 0
        skipping = pending = False
        resumed = reg.resume_offset(ident, f.fileno(), fst.st_size)
        if resumed is not None:
            offset = resumed  # a file already read under another name (glob after rotation)
        elif (verdict := reg.copy_verdict(f.fileno(), fst.st_size, ident, os.path.realpath(self.path))) != "no":
            pending = verdict == "wait"  # decided when it has grown (_read)
            if not pending:
                offset = fst.st_size  # copytruncate's copy of a file read here: its lines are that file's
                reg.mark_copy(ident)
                log.info("%s is a copy of a file being read (copytruncate): not read again", display_path(self.path))
        elif not self._started and not self.from_beginning and fst.st_size > 0:
            offset = fst.st_size
            try:
                skipping = os.pread(f.fileno(), 1, fst.st_size - 1) != b"\n"  # started mid-line
            except OSError:
                skipping = False
            # The running server's start-up lines precede the end: keep what they say.
            self.sink.startup_facts(start_chunks(self.path, f.fileno(), fst.st_size, STARTUP_SCAN_BYTES,
                                                 SCAN_CHUNK, self.log_stats))
            log.info("starting at the end of %s: the %s bytes already in it are skipped "
                     "(--log.from-beginning reads them)", display_path(self.path), f"{fst.st_size:,}")
        else:
            if not self._started and not self.from_beginning:  # empty (logrotate's create): its start is rotated
                self.sink.startup_facts(start_chunks(self.path, f.fileno(), 0, STARTUP_SCAN_BYTES, SCAN_CHUNK,
                                                     self.log_stats))
            log.info("following %s from offset %d", display_path(self.path), offset)
        if offset:
            f.seek(offset)
        real = os.path.realpath(self.path)
        r = Reader(f, ident, offset, LineSplitter(self.max_line_bytes, skipping), *os.path.split(real))
        r.size = fst.st_size
        r.pending = pending
        self._fingerprint(r)
        reg.open[ident] = self
        reg.readers[ident] = r
        self._cur = r
        for old in self._draining:  # a deleted file, followed until now: its successor is here
            if old.deadline is None:
                old.deadline = self.clock() + self.rotate_wait
        self._started = True
        if self.stats.opens:  # another file than before at this path: renamed, re-created, link swapped
            self.stats.rotations += 1
            self._count_missed()
        self.stats.opens += 1

    def _count_missed(self) -> None:
        """Read the rotated files written since the previous check that nobody read (:mod:`.missed`),
        oldest first, before the new file: each is opened and drained for ``rotate_wait`` like a
        rotated file. One that cannot be opened any more (renamed away again, deleted) is counted
        as missed."""
        if not self._seen_ns:
            return
        counted = self._counted
        known = {*self.registry.open, *self.registry.finished, *counted}  # read, being read, or counted
        unseen = unseen_rotated_files(self.path, self._seen_ns, known, self.covered)
        for name, ident in unseen:  # oldest first
            counted[ident] = None
            while len(counted) > MISSED_REMEMBERED:
                counted.popitem(last=False)
            if self._open_missed(name, ident):
                continue
            if not self.stats.missed_rotations:
                log.warning("%s was rotated more than once between two checks: %s was never read and its "
                            "lines are lost; check more often (--log.poll-interval, or --log.watch-mode "
                            "inotify) or follow the rotated names with a glob (docs/tailing.md#rotation)",
                            display_path(self.path), display_path(name))
            else:
                log.debug("rotated file %s of %s was never read", name, self.path)
            self.stats.missed_rotations += 1

    def _open_missed(self, name: str, ident: Ident) -> bool:
        """Open a rotated file that was written and rotated away between two checks, to be read
        from offset 0 and drained like a rotated file; False when it is no longer that file."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            fst = os.fstat(fd)
        except OSError:
            fst = None
        if fst is None or (fst.st_dev, fst.st_ino) != ident or not stat.S_ISREG(fst.st_mode) \
                or ident in self.registry.open:
            os.close(fd)
            return False
        r = Reader(open(fd, "rb", buffering=0), ident, 0, LineSplitter(self.max_line_bytes),
                   *os.path.split(name))
        r.size = fst.st_size
        r.deadline = self.clock() + self.rotate_wait
        self._fingerprint(r)
        self.registry.open[ident] = self
        self.registry.readers[ident] = r
        self._draining.append(r)
        log.info("%s was rotated more than once between two checks: reading %s, which was never read",
                 display_path(self.path), display_path(name))
        return True

    def _retire(self, now: float | None) -> int:
        """Move the current reader to the draining list, reading it first: closed ``rotate_wait``
        seconds after ``now`` (a rotation: the path names the writer's next file), or with ``now``
        None (a deletion) followed until a file appears at the path (:meth:`_open` sets its deadline
        then). A writer keeps appending to a deleted file it holds open, as SGLang does after
        ``rm sglang.log``; ``tail -F`` and fluent-bit follow it the same way."""
        r, self._cur = self._cur, None
        fed = self._read(r)
        r.deadline = None if now is None else now + self.rotate_wait
        self._draining.append(r)
        return fed

    def _read_draining(self, now: float) -> int:
        fed = 0
        for r in list(self._draining):
            try:
                size = os.fstat(r.f.fileno()).st_size
            except OSError:
                size = r.offset
            if self._rewritten(r, size):
                fed += self._truncated(r)
            fed += self._read(r)
            if r.deadline is not None and now >= r.deadline:
                fed += self._flush(r)
                self._draining.remove(r)
                self._close(r)
        return fed

    def _fingerprint(self, r: Reader) -> None:
        """Take the file's first bytes and those before the read offset, as far as it has them."""
        n = min(r.offset, FINGERPRINT_BYTES)
        try:
            r.head = os.pread(r.f.fileno(), max(n, min(r.size, FINGERPRINT_BYTES)), 0)
            r.tail = os.pread(r.f.fileno(), n, r.offset - n) if n else b""
        except OSError:
            r.head = r.tail = b""

    def _rewritten(self, r: Reader, size: int) -> bool:
        """Whether the file was truncated since the last read: smaller than the read offset, or its
        first bytes are no longer those read (truncated and grown back past the offset)."""
        if size < r.offset:
            return True
        if not r.head:
            return False
        try:
            return os.pread(r.f.fileno(), len(r.head), 0) != r.head
        except OSError:
            return False

    def _truncated(self, r: Reader) -> int:
        """Read the lines the truncation took from its copy, then restart at 0; returns lines fed."""
        self.stats.truncations += 1
        fed = self._copy_tail(r)
        log.info("%s was truncated; reading it again from the start", self.path)
        fed += self._feed(r, r.lines.restart())
        try:
            r.f.seek(0)
        except OSError:
            pass
        r.offset = 0
        r.head = r.tail = b""
        return fed

    def _copy_tail(self, r: Reader) -> int:
        """Feed what copytruncate's copy holds past the read offset (written after the last read,
        before the truncation), unless another reader reads the copy as a file of its own."""
        found = find_copy(self.path, r.ident, r.head, r.tail, r.offset)
        if found is None:
            return 0
        path, st = found
        ident, reg = (st.st_dev, st.st_ino), self.registry
        reader = reg.readers.get(ident)
        if ident in reg.open and ident not in reg.copies and not (reader is not None and reader.pending):
            return 0  # another reader reads it as a file of its own
        fed = 0
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return 0
        try:
            pos = r.offset
            while pos < st.st_size:
                chunk = os.pread(fd, min(READ_CHUNK, st.st_size - pos), pos)
                if not chunk:
                    break
                pos += len(chunk)
                self.stats.bytes_read += len(chunk)
                fed += self._consume(r, chunk)
            head = os.pread(fd, FINGERPRINT_BYTES, 0)
        except OSError:
            head = b""
        finally:
            os.close(fd)
        reg.mark_copy(ident)
        if ident not in reg.open:
            reg.finished[ident] = (st.st_size, head)
        log.info("%s: read %d bytes written before the truncation from its copy %s", display_path(self.path),
                 st.st_size - r.offset, display_path(path))
        return fed

    def _close(self, r: Reader) -> None:
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

    def _read(self, r: Reader) -> int:
        """Read from the offset up to the size ``fstat`` gives now (each read sized to what is there,
        at most :data:`READ_CHUNK` times the sink's ``read_chunks``, 1 unless it says); what is
        appended meanwhile is read at the next pass."""
        fed = 0
        most = READ_CHUNK * getattr(self.sink, "read_chunks", 1)
        try:
            r.size = os.fstat(r.f.fileno()).st_size
        except OSError:
            pass
        log_stats = self.log_stats
        reg = self.registry
        if r.pending and r.ident not in reg.copies:
            verdict = reg.copy_verdict(r.f.fileno(), r.size, r.ident, os.path.join(r.dir, r.name))
            if verdict == "wait":
                return 0
            r.pending = False
            if verdict == "copy":
                reg.mark_copy(r.ident)
        if r.ident in reg.copies:  # copytruncate's copy: its lines are the original's
            r.pending = False
            if r.offset < r.size:
                r.offset = r.size
                r.f.seek(r.offset)
            return 0
        while r.offset < r.size:
            skip_hole(r, self.path)
            try:
                chunk = r.f.read(min(most, r.size - r.offset))
            except OSError as exc:
                self._note_error(f"cannot read {self.path}: {exc.strerror or exc}")
                break
            if not chunk:
                break
            r.offset += len(chunk)
            r.tail = chunk[-FINGERPRINT_BYTES:] if len(chunk) >= FINGERPRINT_BYTES else \
                (r.tail + chunk)[-FINGERPRINT_BYTES:]
            if len(r.head) < FINGERPRINT_BYTES:
                r.head = r.head + chunk[:FINGERPRINT_BYTES - len(r.head)] if r.offset - len(chunk) == len(r.head) \
                    else r.head
            self.stats.bytes_read += len(chunk)
            self.stats.behind_bytes = max(0, r.size - r.offset)
            log_stats.progress_at = time.monotonic()
            fed += self._consume(r, chunk)
        return fed

    def _consume(self, r: Reader, chunk: bytes) -> int:
        feed_block = getattr(self.sink, "feed_block", None)
        if feed_block is None:
            return self._feed(r, r.lines.consume(chunk))
        # A sink that reads raw blocks (the bulk path of recorded logs) decodes lines itself.
        block = r.lines.complete(chunk)
        fed = self._feed(r, [])  # moves the splitter's count of dropped lines into the stats
        return fed if block is None else fed + feed_block(block, self.max_line_bytes, self.stats)

    def _flush(self, r: Reader) -> int:
        return self._feed(r, r.lines.flush())

    def _feed(self, r: Reader, lines: list[str]) -> int:
        """Hand complete lines over (returns how many); move the splitter's count of dropped lines
        into the stats."""
        if r.lines.dropped:
            self.stats.oversized_lines += r.lines.dropped
            r.lines.dropped = 0
            log.debug("dropped a line longer than %d bytes in %s", self.max_line_bytes, self.path)
        if not lines:
            return 0
        self.stats.lines += len(lines)
        scheduler_lines = self.sink.feed(lines)  # first: a bulk sink's feed counts the blocks before these
        self.stats.scheduler_lines += scheduler_lines
        return len(lines)
