"""Holes in a followed file: the NUL bytes a writer without ``O_APPEND`` leaves after a truncation.

``tee`` without ``-a`` goes on writing at its old offset after ``copytruncate``; the file grows back
as a sparse hole up to there. :func:`skip_hole` moves a reader past it with ``SEEK_DATA`` instead of
reading gigabytes of NULs that the line rules would drop anyway (``docs/tailing.md#copytruncate``).
"""

from __future__ import annotations

import errno
import logging
import os

from ...paths import display_path
from .registry import FINGERPRINT_BYTES, Reader

log = logging.getLogger(__name__)


def skip_hole(r: Reader, path: str) -> None:
    """Move the read offset past a hole (``SEEK_DATA``): a writer without ``O_APPEND`` (``tee``
    without ``-a``) goes on at its old offset after ``copytruncate``, and the file grows back as
    a hole of NUL bytes up to there, gigabytes that lines would drop anyway. A file system that
    cannot tell holes gives the offset back, and the NULs are read and dropped as before."""
    try:
        data = os.lseek(r.f.fileno(), r.offset, os.SEEK_DATA)
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # EINVAL and others: no hole information
            return
        # ENXIO: no data from the offset to the end, or the offset is past the end because the
        # file was truncated since r.size was taken (copytruncate): then nothing is skipped, and
        # the next pass sees the truncation and reads the copy's tail from the offset.
        try:
            data = os.fstat(r.f.fileno()).st_size
        except OSError:
            return
        if data <= r.offset:
            return
    data = min(data, r.size)
    if data > r.offset:
        log.info("%s: skipped a hole of %s NUL bytes (a writer without O_APPEND after a truncation; "
                 "use tee -a, docs/tailing.md#copytruncate)", display_path(path), f"{data - r.offset:,}")
        r.tail = (r.tail + bytes(min(data - r.offset, FINGERPRINT_BYTES)))[-FINGERPRINT_BYTES:]
        r.offset = data
    r.f.seek(r.offset)
