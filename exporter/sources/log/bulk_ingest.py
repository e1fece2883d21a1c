"""The ingest step of recorded logs (``--one-shot``): blocks of raw lines through the bulk path,
scanned on worker processes when the input is large, applied to the store in order.

A tailer whose sink has ``feed_block`` hands it each block of complete lines it reads (about one
read chunk, 1 MiB) instead of decoded lines. :class:`BulkIngest` scans the block
(:func:`.bulk.scan_block`) in this process, or submits it to a pool of worker processes and applies
the results in submission order, so the store sees the lines in file order either way, and counts
every line in the source's :class:`~.stats.LogStats` as :class:`~.ingest.Ingest` does. Plain lines
(:meth:`feed`: a file's last line without a newline) wait for the blocks before them.

Where worker processes are forked, a block reaches its worker through a slot of shared memory
(an anonymous ``mmap`` the workers inherit) instead of being pickled through a pipe: a copy in, a
copy out, and a slot is written again only after its block was applied (the block is not kept
anywhere else meanwhile; the per-line path, when a block needs it, reads it back from its slot).
"""

from __future__ import annotations

import logging
import mmap
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from concurrent.futures import BrokenExecutor, CancelledError, Future

from ...scheduler.store import SchedulerStore
from .bulk import BlockResult, scan_block
from .ingest import Ingest
from .lines import LineSplitter
from .stats import FileStats, LogStats

log = logging.getLogger(__name__)

#: Inputs at least this large are scanned on worker processes (one per usable core, at most
#: :data:`MAX_WORKERS`); smaller ones in this process, which starts faster.
PARALLEL_MIN_BYTES = 16 << 20
#: Most worker processes.
MAX_WORKERS = 4
#: Size of a shared-memory slot: two reads (:attr:`BulkIngest.read_chunks`); a larger block (a long
#: partial line before it) is pickled instead.
SLOT_BYTES = 8 << 20
#: In a worker process: the shared memory its pool's blocks come through (:func:`_scan_slot`).
_shared: mmap.mmap | None = None


def worker_count(total_bytes: int) -> int:
    """Worker processes for an input of ``total_bytes``: 0 (scan here) below
    :data:`PARALLEL_MIN_BYTES` or on one usable core, else one per usable core."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    if total_bytes < PARALLEL_MIN_BYTES or cores < 2:
        return 0
    return min(cores, MAX_WORKERS)


class BulkIngest(Ingest):
    """An :class:`Ingest` that also takes blocks of raw lines (:meth:`feed_block`).

    With worker processes, the tailer reads :attr:`read_chunks` times its usual chunk at a time for it:
    fewer, larger blocks cost less per block (a run per replica, its transfer and its application): on
    the 2M-line bench log, 4 MiB reads took 3.41 s instead of 3.60 s with 1 MiB, and the main process
    0.88 instead of 1.05 s of CPU (16 MiB is slower again: the workers wait longer for the first
    block). An input small enough to be scanned here keeps 1 MiB reads, and the memory they take
    (a 15 MB log: 47 MB peak RSS with 1 MiB reads, 63 MB with 4 MiB).

    Args:
        store: Where scheduler events and runs go.
        stats: Where line counts go.
        clock: Wall-clock source in seconds since the epoch.
        workers: Worker processes to scan blocks on; 0 scans them in this process.
    """

    #: Reads of :data:`.file.READ_CHUNK` per read of a file for this sink, with worker processes.
    READ_CHUNKS_WITH_WORKERS = 4

    @property
    def read_chunks(self) -> int:
        """Reads of :data:`.file.READ_CHUNK` per read of a file for this sink (the tailer asks)."""
        return self.READ_CHUNKS_WITH_WORKERS if self.workers > 0 else 1

    def __init__(self, store: SchedulerStore, stats: LogStats | None = None,
                 clock: Callable[[], float] = time.time, workers: int = 0):
        super().__init__(store, stats, clock)
        self.workers = workers
        self._pool = None
        # (future, block or None while it is in its slot, its length, max_line_bytes, file stats, slot)
        self._pending: deque[tuple[Future, bytes | None, int, int, FileStats, int | None]] = deque()
        self._shared: mmap.mmap | None = None
        self._free: list[int] = []  # shared-memory slots not in use

    def feed_block(self, block: bytes, max_line_bytes: int, file_stats: FileStats) -> int:
        """Take a block of complete lines of one file (:meth:`.lines.LineSplitter.complete`).

        Args:
            block: The raw lines joined by ``\\n``, without the last ``\\n``.
            max_line_bytes: Longest line kept; longer ones are counted in ``file_stats``.
            file_stats: The file's statistics (its ``oversized_lines``).

        Returns:
            Lines applied by this call (0 while the block waits for a worker).
        """
        if self.workers > 0:
            if self._pool is None:
                self._start()
            slot = self._free.pop() if self._free and len(block) <= SLOT_BYTES else None
            try:
                if slot is not None:
                    start = slot * SLOT_BYTES
                    self._shared[start:start + len(block)] = block
                    with _sigint_blocked():  # a worker forked here starts with Ctrl-C held off
                        future = self._pool.submit(_scan_slot, slot, len(block), max_line_bytes)
                else:
                    with _sigint_blocked():
                        future = self._pool.submit(scan_block, block, max_line_bytes)
            except BrokenExecutor:  # BrokenProcessPool: a worker died before this block was handed over
                if slot is not None:
                    self._free.append(slot)
                self._lost_workers()
            else:
                # a block in a slot is not kept here too: the slot is held until the block is applied
                self._pending.append((future, None if slot is not None else block, len(block), max_line_bytes,
                                      file_stats, slot))
                applied = 0
                while len(self._pending) > 2 * self.workers:  # bounded memory: a few blocks in flight
                    applied += self._apply_next()
                return applied
        applied = self.drain()  # blocks handed to workers before they were lost (_lost_workers)
        return applied + self._apply(scan_block(block, max_line_bytes), block, max_line_bytes, file_stats)

    def feed(self, lines: Iterable[str]) -> int:
        """As :meth:`Ingest.feed` (returns the scheduler lines among ``lines``), after every block
        handed over before."""
        self.drain()
        return super().feed(lines)

    def drain(self) -> int:
        """Apply every block still with a worker, in order; returns the lines applied."""
        applied = 0
        while self._pending:
            applied += self._apply_next()
        return applied

    def close(self) -> None:
        """Stop the worker processes and free the shared memory. Blocks still pending are dropped, not
        applied: after :meth:`finish` there are none, and on an interrupt (Ctrl-C, an error) the read
        stops at once with it, instead of waiting for the workers (who got the same SIGINT) and
        raising their tracebacks."""
        self._pending.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._shared is not None:
            self._shared.close()
            self._shared = None
            self._free = []

    def _start(self) -> None:
        """Start the worker processes, with shared memory for the blocks where they are forked."""
        if _fork_available():
            # at most 2 * workers + 1 blocks are in flight (feed_block): one slot each
            slots = 2 * self.workers + 1
            self._shared = mmap.mmap(-1, slots * SLOT_BYTES)
            self._free = list(range(slots))
        self._pool = _start_pool(self.workers, self._shared)

    def _apply_next(self) -> int:
        future, block, length, max_line_bytes, file_stats, slot = self._pending.popleft()
        try:
            try:
                res = future.result()
            except (BrokenExecutor, CancelledError):  # BrokenProcessPool: a worker ended abruptly
                self._lost_workers()  # (and the blocks not yet started were cancelled)
                block = self._block(block, slot, length)
                res = scan_block(block, max_line_bytes)
            return self._apply(res, block, max_line_bytes, file_stats, slot, length)
        finally:
            if slot is not None:
                self._free.append(slot)  # applied: the slot may be written again

    def _block(self, block: bytes | None, slot: int | None, length: int) -> bytes:
        """A pending block's bytes (a copy out of its slot when it is in one)."""
        if block is not None:
            return block
        start = slot * SLOT_BYTES
        return self._shared[start:start + length]

    def _lost_workers(self) -> None:
        """A worker process died (the OOM killer, a signal): every block still pending, and every
        later one, is scanned in this process; the blocks are all still here, so nothing is lost."""
        if self.workers > 0:
            log.warning("a worker process of the bulk path ended abruptly; reading on in this process")
            self.workers = 0
            self._pool.shutdown(wait=False, cancel_futures=True)

    def finish(self) -> int:
        """As :meth:`Ingest.finish`, after every block handed over before."""
        self.drain()
        return super().finish()

    def _apply(self, parts: list[BlockResult], block: bytes | None, max_line_bytes: int, file_stats: FileStats,
               slot: int | None = None, length: int = 0) -> int:
        """Apply a scanned block: each part's run, or its lines through the per-line path, and the
        start-up lines between parts through the per-line path (``block`` is ``None`` while it is in
        shared-memory ``slot``, read back only where the per-line path reads a part)."""
        if parts[0].by_line:  # Omni's lines (the stage attribution), or dense start-up lines: line by line
            return self._lines(self._block(block, slot, length).split(b"\n"), max_line_bytes, file_stats)
        applied = 0
        raw = None
        for part in parts:
            wall = self._clock()
            outcome = True if part.run is None else self.store.apply_run(part.run, wall)
            if outcome is not None:
                file_stats.oversized_lines += part.dropped
                file_stats.lines += part.lines
                file_stats.scheduler_lines += sum(part.parsed.values())  # as Ingest.feed returns them
                self._count_block(part, wall, failed=outcome is False)
                applied += part.lines
            else:
                # the state refuses some of the part's lines (caps, ranks, range): the reference decides
                # line by line
                log.debug("a block with lines the state refuses (caps, ranks, range): read line by line")
                if raw is None:
                    raw = self._block(block, slot, length).split(b"\n")
                applied += self._lines(raw[part.start:part.stop], max_line_bytes, file_stats)
            if part.then:  # a start-up line: it changes what the lines after it mean
                file_stats.lines += len(part.then)
                file_stats.scheduler_lines += super().feed(part.then)
                applied += len(part.then)
        return applied

    def _lines(self, raw: list[bytes], max_line_bytes: int, file_stats: FileStats) -> int:
        """Raw lines through the per-line path, counted in ``file_stats``; returns the lines."""
        splitter = LineSplitter(max_line_bytes)
        lines = splitter.decode(raw)
        file_stats.oversized_lines += splitter.dropped
        file_stats.lines += len(lines)
        file_stats.scheduler_lines += super().feed(lines)
        return len(lines)

    def _count_block(self, res: BlockResult, wall: float, failed: bool) -> None:
        """Count a block applied as a run (``failed``: applying the run raised)."""
        stats = self.stats
        with stats.lock:
            counts = stats.lines
            counts[("other", "ignored")] += res.ignored
            stats.template_lines += res.templates
            for kind, n in res.malformed.items():
                counts[(kind, "malformed")] += n
            for kind, n in res.parsed.items():
                counts[(kind, "parsed")] += n
            if failed:
                for kind, n in res.run.line_counts().items():
                    counts[(kind, "parsed")] -= n
                    counts[(kind, "malformed")] += n
                    stats.rejected["error"] += n
            stats.last_line_wall = wall


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT held off in this thread meanwhile (delivered after): a worker the pool forks meanwhile
    inherits the mask, so a Ctrl-C in its first instant waits until it ignores SIGINT
    (:func:`_worker_start`) instead of printing a traceback."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _fork_available() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def _start_pool(workers: int, shared: mmap.mmap | None):
    """Worker processes, forked where the platform allows (they start with the modules loaded, and
    inherit ``shared``: a forked process's arguments are not pickled)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if shared is None:
        ctx = multiprocessing.get_context("fork" if _fork_available() else None)
        return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_start,
                                   initargs=(None, os.getpid()))
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=_worker_start, initargs=(shared, os.getpid()))


def _worker_start(shared: mmap.mmap | None, parent: int) -> None:
    """In a worker, at its start: the pool's shared memory, Ctrl-C left to the parent, and an end with
    its parent.

    Ctrl-C sends SIGINT to the whole foreground process group: the parent stops the read and shuts the
    pool down (one line, exit 130), so a worker ignores it rather than print its own traceback.
    A parent killed without its cleanup (SIGTERM's default action, as ``timeout`` or a Kubernetes
    Job's deadline sends it, SIGKILL, the OOM killer) would leave its idle workers waiting for work
    forever, each holding its memory: on Linux the kernel sends the worker SIGKILL when its parent
    ends (``PR_SET_PDEATHSIG``).
    """
    global _shared
    _shared = shared
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # forked with SIGINT blocked (_sigint_blocked): now ignored
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _die_with_parent(parent)


def _die_with_parent(parent: int) -> None:
    """Ask Linux to SIGKILL this process when its parent ends (nothing elsewhere); exit at once if
    the parent ``parent`` has already ended."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        if libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):  # not Linux, or no prctl
        return
    if os.getppid() != parent:  # the parent ended before the request took effect
        os._exit(1)


def _scan_slot(slot: int, length: int, max_line_bytes: int):
    """In a worker: :func:`.bulk.scan_block` of the block in shared-memory slot ``slot``."""
    start = slot * SLOT_BYTES
    return scan_block(_shared[start:start + length], max_line_bytes)
