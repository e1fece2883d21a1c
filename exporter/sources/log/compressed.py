"""Recorded logs compressed with gzip (``server.log.1.gz``, as logrotate's ``compress`` leaves them).

A ``.gz`` file is read once, from its start, decompressed as it is read: the one-shot read
(:meth:`.file.Tailer.read_once`) hands its chunks to the same line splitter and sink as a plain
file's. A followed (live) path is never decompressed: logrotate compresses only files SGLang no
longer writes.
"""

from __future__ import annotations

import errno
import gzip
import zlib
from collections.abc import Iterator


def is_compressed(path: str) -> bool:
    """Whether ``path`` names a gzip file (by its ``.gz`` suffix, as logrotate and ``gzip`` name them)."""
    return path.endswith(".gz")


def gzip_chunks(path: str, size: int) -> Iterator[bytes]:
    """The decompressed bytes of ``path``, about ``size`` bytes at a time; on damage, the bytes before
    it come first, then the error.

    Raises:
        OSError: the file cannot be opened or read, or its gzip data is damaged or truncated; the
            error names the file (``filename``).
    """
    held: list[bytes] = []  # read1 gives what one compressed block holds: joined up to `size`
    n = 0
    try:
        with gzip.open(path, "rb") as f:
            while piece := f.read1(size - n):
                held.append(piece)
                n += len(piece)
                if n >= size:
                    yield b"".join(held)
                    held, n = [], 0
    except OSError as exc:  # gzip.BadGzipFile included
        error = exc if exc.filename is not None else OSError(
            exc.errno or errno.EIO, exc.strerror or str(exc) or type(exc).__name__, path)
    except (EOFError, zlib.error) as exc:  # a truncated or corrupt stream
        error = OSError(errno.EIO, f"damaged gzip data ({exc})", path)
    else:
        error = None
    if held:
        yield b"".join(held)
    if error is not None:
        raise error
