"""copytruncate's copies: telling that a file is a copy of one being read, and finding the copy.

``logrotate``'s ``copytruncate`` copies the log (``sglang.log`` -> ``sglang.log.1``, a new file)
and then truncates the original in place. Two faults follow unless the copy is recognised:

* lines written after the reader's last read and before the truncation are in the copy only; the
  reader of the original, when it sees the truncation, reads them from the copy, past the offset
  it had read to (:func:`find_copy`);
* a glob that matches the copy's name (``sglang.log*``) would read the copy from its first line,
  counting again every line already read from the original; a new file that is a copy of a file
  being read is read by nobody (:func:`is_copy_of`), its tail being the original reader's.

A copy is recognised by content, as Vector and fluent-bit recognise a file: the same first bytes
(``head``, up to :data:`~.registry.FINGERPRINT_BYTES`) and the same bytes just before the original's
read offset (``tail``), wherever the copy reaches that far.
"""

from __future__ import annotations

import os

from .missed import rotated_siblings


def _pread(fd: int, size: int, offset: int) -> bytes | None:
    try:
        return os.pread(fd, size, offset)
    except OSError:
        return None


def same_content(fd: int, size: int, head: bytes, tail: bytes, offset: int) -> bool:
    """Whether the open file ``fd`` of ``size`` bytes starts with ``head`` and, if it reaches
    ``offset``, holds ``tail`` just before it (``head``, ``tail``: bytes read from the original at
    0 and before ``offset``). False for an empty ``head`` (nothing to tell by)."""
    if not head or size < len(head) or _pread(fd, len(head), 0) != head:
        return False
    if tail and size >= offset:
        return _pread(fd, len(tail), offset - len(tail)) == tail
    return True


def is_copy_of(fd: int, size: int, original_fd: int, head: bytes, tail: bytes, offset: int) -> bool:
    """Whether the new file ``fd`` (``size`` bytes) is a copy of the open original ``original_fd``
    (read up to ``offset``, its ``head`` and ``tail`` as in :func:`same_content`). A copy shorter
    than the read offset (a copy still being written) is checked against the original's own bytes
    at the copy's end."""
    if size >= offset:
        return same_content(fd, size, head, tail, offset)
    if not same_content(fd, size, head, b"", offset):
        return False
    n = min(len(head), size)
    return _pread(fd, n, size - n) == _pread(original_fd, n, size - n)


def find_copy(path: str, own: tuple[int, int], head: bytes, tail: bytes,
              offset: int) -> tuple[str, os.stat_result] | None:
    """The rotated sibling of ``path`` that is a copy of the file read up to ``offset`` (identity
    ``own``, ``head`` and ``tail`` as in :func:`same_content`) and reaches at least that far; the
    most recently modified when several are. None when there is none."""
    best = None
    for entry, st in rotated_siblings(path):
        if (st.st_dev, st.st_ino) == own or st.st_size < offset:
            continue
        if best is not None and st.st_mtime_ns <= best[1].st_mtime_ns:
            continue
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if same_content(fd, st.st_size, head, tail, offset):
                best = (entry.path, st)
        finally:
            os.close(fd)
    return best
