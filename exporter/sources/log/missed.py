"""Rotated files that were never read: the loss a tailer cannot prevent but can see.

A tailer notices a rotation when it finds the path naming another file. If the writer rotated
twice between two checks (rotations faster than ``--log.poll-interval`` in ``poll`` mode, or two
within a millisecond), the file in between was written under the path's name and renamed away
before the tailer ever opened it: its lines are lost, as in ``tail -F``. What is left of it is a
sibling in the same directory, named after the log (``sglang.log.1``, ``sglang.log-20260101``,
``sglang.log.2026-01-01_00-00``), written after the tailer's previous check, that no reader of
this exporter ever opened. :func:`unseen_rotated_files` finds those, when a rotation is noticed.

A rotation suffix has a digit (a number, a date, a time) or is one of :data:`ROTATION_WORDS`
(``.old``); a sibling with another suffix (``sglang.log.err``, ``sglang.log-access``) is another
program's log, not a rotated file.
Not counted: empty files (nothing was lost), compressed archives (``logrotate``'s ``compress``
writes them at rotation time from files that were read), files a glob of this exporter follows
(``covered``), and files already counted.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Container

#: Name endings of compressed archives, which rotation tools write from files already rotated.
COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".z", ".Z", ".zip", ".br")
#: Characters that separate a log's name from its rotation suffix.
SEPARATORS = ".-_"
#: Rotation suffixes without a digit (hand-written rotation: ``mv sglang.log sglang.log.old``).
ROTATION_WORDS = ("old", "bak", "prev", "previous")


def is_rotated_name(name: str, base: str) -> bool:
    """Whether ``name`` is a rotated copy's name of the log named ``base`` (``sglang.log.1``,
    ``sglang.log-20260101``, ``sglang.log.old``; not ``sglang.log.err``, not ``sglang.log.1.gz``)."""
    if len(name) <= len(base) or not name.startswith(base) or name[len(base)] not in SEPARATORS:
        return False
    suffix = name[len(base) + 1:]
    if not any(c.isdigit() for c in suffix) and suffix.lower() not in ROTATION_WORDS:
        return False  # sglang.log.err: another log, not a rotated one
    return not name.endswith(COMPRESSED)


def rotated_siblings(path: str) -> list[tuple[os.DirEntry, os.stat_result]]:
    """The regular, non-empty files next to ``path`` (its target when a symlink) named as its
    rotated copies (``sglang.log.1``, ``sglang.log-20260101``; not compressed archives, not another
    program's ``sglang.log.err``), with their ``stat``. An unreadable directory gives ``[]``."""
    real = os.path.realpath(path)
    directory, base = os.path.split(real)
    try:
        entries = list(os.scandir(directory or "."))
    except OSError:
        return []
    found = []
    for entry in entries:
        if not is_rotated_name(entry.name, base):
            continue
        try:
            st = entry.stat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_size:
            found.append((entry, st))
    return found


def unseen_rotated_files(path: str, since_ns: int, known: Container[tuple[int, int]],
                         covered: Callable[[str], bool] = lambda p: False) -> list[tuple[str, tuple[int, int]]]:
    """Rotated siblings of ``path`` modified after ``since_ns`` that no reader has seen.

    Args:
        path: The followed path (its target when it is a symlink decides the directory and name).
        since_ns: Wall-clock time (ns since the epoch) of the tailer's previous check that found
            the old file at the path; a sibling last written before it was not written under the
            path's name since then.
        known: Identities ``(st_dev, st_ino)`` read, being read or already counted.
        covered: True for a path that another part of the exporter follows (a glob).

    Returns:
        ``(path, identity)`` of each such file, oldest first (:func:`age_order`). An unreadable
        directory gives ``[]``.
    """
    found = []
    for entry, st in rotated_siblings(path):
        ident = (st.st_dev, st.st_ino)
        if st.st_mtime_ns <= since_ns or ident in known or covered(entry.path):
            continue
        found.append((entry.path, ident))
    return sorted(found, key=age_order)


def age_order(entry: tuple[str, tuple[int, int]]) -> tuple[int, int]:
    """Sort key of a rotated file, oldest first: its modification time, then its rotation number
    (``sglang.log.3`` is older than ``sglang.log.2``: RotatingFileHandler and logrotate count up)."""
    name = entry[0]
    try:
        mtime = os.stat(name).st_mtime_ns
    except OSError:
        mtime = 0
    suffix = name.rsplit(".", 1)[-1]
    return mtime, -int(suffix) if suffix.isdigit() and len(suffix) < 9 else 0
