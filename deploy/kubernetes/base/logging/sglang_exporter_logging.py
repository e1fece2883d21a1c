"""Logging helpers for SGLang's ``SGLANG_LOGGING_CONFIG_PATH``, shipped in the sidecar's ConfigMap.

SGLang's ``configure_logger(server_args, prefix)`` formats every line as
``[%(asctime)s{prefix}] %(message)s`` with the scheduler's rank tags as prefix (`` DP0 TP1`` ...).
When ``SGLANG_LOGGING_CONFIG_PATH`` is set, SGLang loads that dictConfig instead and the prefix
argument is dropped, so a plain format string would lose the rank tags the exporter counts by.
Every SGLang scheduler process sets its process title to ``sglang::scheduler`` + the same prefix
with spaces turned into ``_`` *before* it configures logging (``run_scheduler_process``, 2024-08
to 2026), so :class:`RankPrefixFilter` recovers the tags from the title and puts them in the
record as ``rank_prefix``; other processes (tokenizer/HTTP, detokenizer) get an empty prefix,
exactly as SGLang prints them.

:class:`SharedFileHandler` appends to one file from many processes (every scheduler process loads
the same config) and keeps it bounded without the multi-process hazard of
``RotatingFileHandler``: each write holds an exclusive ``flock`` on a lock file beside the log
(``.<name>.lock``), under which the handler reopens the path if another process has rotated it,
renames the file to ``<path>.1`` once it is past ``max_bytes`` (the previous ``.1`` is replaced, or
shifted to ``.2`` ... with ``backup_count`` > 1), and writes its line. So two processes never
rotate the same file twice (the second rename would replace the first segment: lines lost) and no
line is written to a segment that is being replaced. The disk use stays below about
``(1 + backup_count) x max_bytes``. The exporter follows the rename (``--log.rotate-wait``).

With ``gpu_uuids_file`` the handler also tells the sidecar which GPUs this server was given: the
first process that configures logging writes ``nvidia-smi --query-gpu=uuid --format=csv,noheader``
(the GPUs NVML shows inside the server container) to that file, atomically, once per file; without
``nvidia-smi`` nothing is written and nothing fails. This replaces a ``lifecycle.postStart`` hook,
so that the component keeps the server container's own hook.

The config loads this file by path (``runpy.run_path`` as a formatter factory, then ``cfg://``
references to its classes), so no ``PYTHONPATH`` is set and the server's own is kept.

Only the standard library and ``setproctitle`` (a dependency of SGLang) are used.
"""

from __future__ import annotations

import fcntl
import logging
import logging.handlers
import os
import re
import subprocess

__all__ = ["RankPrefixFilter", "SharedFileHandler", "prefix_from_title", "write_gpu_uuids"]

_TITLE = re.compile(r"^sglang::scheduler((?:_[A-Z_]+?\d+)*)\s*$")
_TAG = re.compile(r"_((?:ATTN_CP|MOE_DP|DP|PP|TP|EP)\d+)")


def prefix_from_title(title: str) -> str:
    """SGLang's logger prefix (e.g. ``" DP0 TP1"``) from a process title such as
    ``sglang::scheduler_DP0_TP1``; ``""`` for any other title."""
    match = _TITLE.match(title or "")
    if not match:
        return ""
    return "".join(" " + tag for tag in _TAG.findall(match.group(1)))


def _current_title() -> str:
    try:
        import setproctitle  # SGLang depends on it and sets the title before configuring logging
    except ImportError:  # pragma: no cover - outside SGLang
        return ""
    return setproctitle.getproctitle()


class RankPrefixFilter(logging.Filter):
    """Adds ``record.rank_prefix``: the scheduler's rank tags with a leading space, or ``""``.

    ``prefix``: a fixed prefix instead of the process title (tests, or SGLANG_DP_RANK setups).
    The title is read once per process (it is set before logging is configured and never changes).
    """

    def __init__(self, name: str = "", prefix: str | None = None) -> None:
        super().__init__(name)
        self._fixed = prefix
        self._cache: tuple[int, str] | None = None

    def _prefix(self) -> str:
        if self._fixed is not None:
            return self._fixed
        pid = os.getpid()
        if self._cache is None or self._cache[0] != pid:
            self._cache = (pid, prefix_from_title(_current_title()))
        return self._cache[1]

    def filter(self, record: logging.LogRecord) -> bool:
        record.rank_prefix = self._prefix()
        return True


def write_gpu_uuids(path: str, timeout: float = 30.0) -> bool:
    """Writes the UUIDs of the GPUs visible here (one per line, ``GPU-...``) to ``path`` unless it
    exists; True when written. Source: ``nvidia-smi --query-gpu=uuid --format=csv,noheader`` (NVML
    inside the server container lists exactly the GPUs it was given). Atomic: a temporary file
    beside ``path`` renamed over it, so the sidecar never reads half a list. Never raises: without
    ``nvidia-smi``, on its failure or timeout, nothing is written."""
    if os.path.exists(path):
        return False
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=timeout, check=True).stdout
        uuids = [u.strip() for u in out.splitlines() if u.strip()]
        if not uuids:
            return False
        tmp = f"{path}.tmp.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("".join(u + "\n" for u in uuids))
        os.replace(tmp, path)
        return True
    except (OSError, subprocess.SubprocessError):
        return False


class SharedFileHandler(logging.handlers.WatchedFileHandler):
    """Append-only file handler safe for several writer processes, bounded by rename rotation.

    ``max_bytes``: size after which the file is renamed to ``<filename>.1`` (0: never).
    ``backup_count``: rotated segments kept (``.1`` newest ... ``.N`` oldest; at least 1).
    ``gpu_uuids_file``: where :func:`write_gpu_uuids` puts this container's GPU UUIDs (None: not).

    Every emit holds an exclusive ``fcntl.flock`` on ``.<basename>.lock`` in the log's directory
    across the rotation check, the rename and the write. The lock file is opened once per process
    (again after a fork: a forked child shares its parent's open file, and flock does not exclude
    holders of one open file).
    """

    def __init__(self, filename: str, max_bytes: int = 0, encoding: str | None = "utf-8",
                 delay: bool = False, backup_count: int = 1, gpu_uuids_file: str | None = None) -> None:
        super().__init__(filename, mode="a", encoding=encoding, delay=delay)
        self.max_bytes = int(max_bytes)
        self.backup_count = max(1, int(backup_count))
        head, tail = os.path.split(self.baseFilename)
        self.lock_path = os.path.join(head, f".{tail}.lock")
        self._lock_fd: int | None = None
        self._lock_pid: int | None = None
        if gpu_uuids_file:
            try:
                fd = self._lock_file()
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    write_gpu_uuids(gpu_uuids_file)
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            except OSError:  # never let logging break the server
                pass

    def _lock_file(self) -> int:
        pid = os.getpid()
        if self._lock_fd is None or self._lock_pid != pid:
            # After a fork the inherited descriptor is left alone: the parent still uses it.
            self._lock_fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            self._lock_pid = pid
        return self._lock_fd

    def _rotate(self) -> None:
        base = self.baseFilename
        free = 1  # the first missing segment, or the oldest kept one (replaced)
        while free < self.backup_count and os.path.exists(f"{base}.{free}"):
            free += 1
        for i in range(free - 1, 0, -1):
            os.replace(f"{base}.{i}", f"{base}.{i + 1}")
        try:
            os.replace(self.baseFilename, self.baseFilename + ".1")
        except FileNotFoundError:
            pass  # removed by someone else; reopenIfNeeded creates it anew

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fd = self._lock_file()
            fcntl.flock(fd, fcntl.LOCK_EX)
        except Exception:  # never let logging break the server
            self.handleError(record)
            return
        try:
            self.reopenIfNeeded()
            if self.max_bytes > 0 and self.stream is not None:
                if os.fstat(self.stream.fileno()).st_size >= self.max_bytes:
                    self._rotate()
                    self.reopenIfNeeded()
            logging.FileHandler.emit(self, record)
        except Exception:
            self.handleError(record)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        super().close()
        if self._lock_fd is not None and self._lock_pid == os.getpid():
            os.close(self._lock_fd)
        self._lock_fd = None
