"""Which file is read by whom: one reader per file (by identity) for every tailer of one exporter,
and where a closed reader stopped (:class:`Registry`); one open file's read state (:class:`Reader`)."""

from __future__ import annotations

import os
from collections import OrderedDict

from .copies import is_copy_of
from .lines import LineSplitter
from .missed import is_rotated_name

#: Bytes of a file's head kept with a remembered read position, to tell a reused inode number apart.
FINGERPRINT_BYTES = 256

Ident = tuple[int, int]


class Registry:
    """Which file (by identity) is read by whom, shared by all tailers of one exporter.

    Guarantees that one file is read by one reader at a time, and remembers where a closed reader
    stopped so that a glob that later matches the same file under a new name continues there.
    Since a deleted file's inode number can be reused by a new file, a remembered position is kept
    with the file's first bytes (a fingerprint, as Vector and fluent-bit do) and only resumed when the
    file opened under that identity still starts with them. Used by the tailer thread only.
    """

    def __init__(self, remember: int = 4096):
        self.open: dict[Ident, object] = {}
        self.readers: dict[Ident, Reader] = {}
        self.finished: OrderedDict[Ident, tuple[int, bytes]] = OrderedDict()
        self.copies: OrderedDict[Ident, None] = OrderedDict()  # copytruncate copies: read by nobody
        self._remember = remember

    def mark_copy(self, ident: Ident) -> None:
        """Record that ``ident`` is a copy of a file read here (its lines are never read from it)."""
        self.copies[ident] = None
        self.copies.move_to_end(ident)
        while len(self.copies) > self._remember:
            self.copies.popitem(last=False)

    def copy_verdict(self, fd: int, size: int, ident: Ident, real: str) -> str:
        """Whether the newly opened file ``fd`` (``size`` bytes, identity ``ident``, real path
        ``real``) is a copy of a file open here: named as its rotated copy, in its directory, and
        with its content (:func:`~.copies.is_copy_of`). ``"copy"``, ``"no"``, or ``"wait"`` while
        it is shorter than the original's first bytes and agrees with them so far (a copy being
        written: ``logrotate`` creates it empty)."""
        if ident in self.copies:
            return "copy"
        directory, name = os.path.split(real)
        verdict = "no"
        for other, r in self.readers.items():
            if other == ident or r.dir != directory or not r.head or not is_rotated_name(name, r.name):
                continue
            if size < len(r.head):
                try:
                    if os.pread(fd, size, 0) == r.head[:size]:
                        verdict = "wait"
                except OSError:
                    pass
            elif is_copy_of(fd, size, r.f.fileno(), r.head, r.tail, r.offset):
                return "copy"
        return verdict

    def finish(self, ident: Ident, offset: int, head: bytes = b"") -> None:
        """Record that the reader of ``ident`` closed it at byte ``offset``; ``head`` is the file's
        first bytes (up to :data:`FINGERPRINT_BYTES`)."""
        self.open.pop(ident, None)
        self.readers.pop(ident, None)
        self.finished[ident] = (offset, head)
        self.finished.move_to_end(ident)
        while len(self.finished) > self._remember:
            self.finished.popitem(last=False)

    def resume_offset(self, ident: Ident, fd: int, size: int) -> int | None:
        """Where to continue a file opened under ``ident``: the remembered offset if the file still
        starts with the remembered bytes and is at least that long, else None (a new file)."""
        entry = self.finished.pop(ident, None)
        if entry is None:
            return None
        offset, head = entry
        if offset > size:
            return None
        try:
            if head and os.pread(fd, len(head), 0) != head:
                return None  # same inode number, other file
        except OSError:
            return None
        return offset


class Reader:
    """One open file descriptor with its read position and its line splitter (held partial line)."""

    __slots__ = ("f", "ident", "offset", "lines", "deadline", "size", "dir", "name", "head", "tail", "pending")

    def __init__(self, f, ident: Ident, offset: int, lines: LineSplitter, dir: str = "", name: str = ""):
        self.f = f
        self.dir = dir  # directory of the file when opened: watched while it is read (drained)
        self.name = name  # its name there (a symlink's target): its file events concern this tailer
        self.ident = ident
        self.offset = offset
        self.lines = lines
        self.deadline: float | None = None  # set while draining after rotation or deletion
        self.size = offset
        self.head = b""  # the file's first bytes (up to FINGERPRINT_BYTES): a rewrite changes them
        self.tail = b""  # the bytes just before offset (up to FINGERPRINT_BYTES): to find a copy
        self.pending = False  # maybe a copy being written: not read until that is decided
