"""Bounded reads of small regular files (the settings file, the GPU UUID file)."""

from __future__ import annotations

import os
import stat


def read_small_file(path: str | os.PathLike, max_bytes: int) -> bytes:
    """Read a small regular file whole, without blocking and without unbounded reads.

    The file is opened non-blocking (opening a FIFO would otherwise wait for a writer) and checked
    to be a regular file before anything is read (``/dev/zero`` never ends); at most
    ``max_bytes + 1`` bytes are read.

    Returns:
        The file's bytes (at most ``max_bytes``).

    Raises:
        OSError: the file cannot be opened or read (missing, permission denied...).
        ValueError: it is not a regular file (the message says what it is), or is larger than
            ``max_bytes``.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                    else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                    else "a socket" if stat.S_ISSOCK(mode) else "not a plain file")
            raise ValueError(f"not a regular file ({kind})")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise ValueError(f"larger than {max_bytes // 1024} KiB")
        return b"".join(chunks)
    finally:
        os.close(fd)
