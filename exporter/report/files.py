"""Reading the recorded log files into a :class:`~.read.Recorder`: several files are one run, ``.gz``
is decompressed, lines are split by the sidecar's own splitter, progress on a terminal."""

from __future__ import annotations

import errno
import gzip
import os
import sys
import time
import zlib
from dataclasses import dataclass

from ..limits import DEFAULT_MAX_LINE_BYTES
from ..status import PROG as COMMAND
from .read import Recorder
from .upstream import LineSplitter

PROG = f"{COMMAND} report"
#: Lines longer than this are skipped and counted (the tailer's default ``--log.max-line-bytes``).
MAX_LINE_BYTES = DEFAULT_MAX_LINE_BYTES
#: Bytes read at a time.
READ_CHUNK = 1 << 20
#: Inputs larger than this show progress on a terminal.
PROGRESS_MIN_BYTES = 64 << 20


@dataclass
class InputFile:
    """One input's path, bytes and lines read, and how many of its lines were scheduler lines."""

    path: str
    bytes: int = 0
    lines: int = 0
    oversized_lines: int = 0
    scheduler_lines: int = 0


def read_logs(paths: list[str], recorder: Recorder, progress: bool | None = None) -> list[InputFile]:
    """Feed every line of the files, in order, into the recorder.

    Several files are one run: rotated segments in order, or the logs of the nodes of one
    multi-node group (replica tags keep them apart). ``.gz`` files are decompressed. Bytes become
    lines by the sidecar's own rules (:class:`~exporter.sources.log.lines.LineSplitter`: a bare
    ``\\r`` separates lines, NUL bytes at a line's start are dropped, a line over
    :data:`MAX_LINE_BYTES` is dropped and counted, invalid UTF-8 is replaced).

    Raises:
        OSError: a file cannot be opened or read (a damaged ``.gz`` included), naming the file.
    """
    total = sum(os.path.getsize(p) for p in paths)
    if progress is None:
        progress = total >= PROGRESS_MIN_BYTES and sys.stderr.isatty()
    done = 0
    next_report = [0.0]  # shared with _read_one across files
    started = time.monotonic()
    out = []
    for path in paths:
        info = InputFile(path)
        before = recorder.scheduler_lines
        try:
            _read_one(path, info, recorder, progress, total, done, started, next_report)
        except OSError as exc:  # gzip.BadGzipFile included; name the file when the error does not
            if exc.filename is None:
                raise OSError(exc.errno or errno.EIO, exc.strerror or str(exc) or type(exc).__name__,
                              path) from exc
            raise
        except (EOFError, zlib.error) as exc:  # a truncated or corrupt .gz
            raise OSError(errno.EIO, f"damaged gzip data ({exc})", path) from exc
        recorder.finish_input()
        info.scheduler_lines = recorder.scheduler_lines - before
        done += os.path.getsize(path) if not path.endswith(".gz") else info.bytes
        out.append(info)
    if progress:
        print(file=sys.stderr)
    return out


def _read_one(path: str, info: InputFile, recorder: Recorder, progress: bool, total: int, done: int,
              started: float, next_report: list[float]) -> None:
    """Feed one file's lines, split by the sidecar's own :class:`~exporter.sources.log.lines.LineSplitter`
    (the same lines from the same bytes: ``\\r``, NUL bytes, oversized lines, invalid UTF-8)."""
    opener = gzip.open if path.endswith(".gz") else open
    splitter = LineSplitter(MAX_LINE_BYTES)
    with opener(path, "rb") as f:
        while True:
            chunk = f.read(READ_CHUNK)
            if not chunk:
                break
            info.bytes += len(chunk)
            _feed(splitter.consume(chunk), info, recorder)
            if progress and (done + info.bytes) >= next_report[0]:
                pct = 100.0 * (done + info.bytes) / total if total else 100.0
                print(f"\r{PROG}: {pct:5.1f}% of {total / 1e6:.0f} MB, {time.monotonic() - started:.0f} s",
                      end="", file=sys.stderr, flush=True)
                next_report[0] += max(total / 100, 1)
    _feed(splitter.flush(), info, recorder)
    info.oversized_lines = splitter.dropped


def _feed(lines: list[str], info: InputFile, recorder: Recorder) -> None:
    info.lines += len(lines)
    recorder.feed(lines)
