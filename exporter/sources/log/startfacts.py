"""Which bytes hold the running server's start-up facts, for a tailer that starts at a log's end.

A sidecar (re)started on an existing log skips what is in it, yet the server's start-up lines
(``server_args=``, ``max_total_num_tokens=``, ``KV Cache is allocated`` ...) describe the server
that is running: its decode-log interval, its ceiling of running requests, its KV capacity. A log
that SGLang restarted into (``tee -a``, a shared ``FileHandler``) holds several starts, and the
facts of the last one are those in effect; a rotated log (the shipped logging config's
``sglang.log.1``, logrotate's ``sglang.log.1`` / ``sglang.log-20260101``) may hold none, its start
being in a rotated sibling.

Each SGLang start prints one ``server_args=`` line before its other start-up lines (2024-10+;
``ServerArgs(...)`` up to 0.5.18, a dict since 0.5.19). :func:`start_chunks` searches backwards
from the start position for the last such line: through the file, then through its rotated
siblings newest first (uncompressed ones: a ``.gz`` cannot be read backwards), at most
:data:`BACK_SCAN_BYTES` in all. It then hands over that start's text in forward order, from the
``server_args`` line on, at most ``limit`` bytes across the files up to the start position.

A rotated copy that a glob follows beside its log (``sglang.log*``) applies nothing: the log's own
search reaches it, and the glob's name order would otherwise apply the oldest start last.

Where no ``server_args`` line exists in the file and its siblings (SGLang Omni never prints one,
nor did SGLang before 2024-10), the file's head (``limit`` bytes) is searched as before, and one line
says so. Past the search bound nothing is known: if the bound is reached inside the file, its head
is used only if it holds no ``server_args`` line either (else a later start may lie in the part not
searched, and no facts are applied); if it is reached in the siblings, the file's head (which holds
none) is used. Either way one warning says so, and the decode-log interval stays the setting's
(``source`` ``setting``/``default``, never ``server_args``) with capacity and ceiling absent unless
a capacity line without ``server_args`` (SGLang Omni) gives them.

Memory stays at about one chunk plus one line (:data:`~.ingest.STARTUP_LINE_MAX`) whatever the
sizes; each chunk read is recorded as progress in ``LogStats.progress_at`` (the search is reading:
``/healthz`` must not fail during it).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator

from ...events import ServerArgs
from ...paths import display_path
from .ingest import STARTUP_LINE_MAX
from .missed import COMPRESSED, SEPARATORS, is_rotated_name, rotated_siblings
from .parser import parse_line
from .stats import LogStats

log = logging.getLogger(__name__)

#: Most bytes of a start's text (from its server_args line on; a log's head when it has none) searched
#: for start-up lines when starting at a log's end.
STARTUP_SCAN_BYTES = 64 << 20
#: Bytes of that text read and searched at a time (start-up memory stays within a few MB of idle).
SCAN_CHUNK = 256 << 10
#: Most bytes searched backwards for the last start (the file, then its rotated siblings): four
#: segments of the shipped logging config (256 MiB each).
BACK_SCAN_BYTES = 1 << 30
#: The text of the line that marks a start of SGLang.
START_MARKER = b"server_args="
#: What a sidecar serves when the running start's facts are out of reach (the end of a warning).
UNKNOWN = ("the running server's start-up facts are unknown: its capacity and ceiling are not served and "
           "the decode-log interval is the setting's (--sglang.decode-log-interval)")


def chunks(fd: int, start: int, end: int, chunk: int, stats: LogStats | None = None) -> Iterator[bytes]:
    """Bytes ``start`` to ``end`` of an open file, ``chunk`` bytes at a time (``pread``: the
    descriptor's offset does not move); stops early at an error or end of file. Each chunk read is
    recorded as progress in ``stats.progress_at`` when given: searching big logs on a slow disk is
    reading, and must not fail ``/healthz`` (a liveness probe would restart the sidecar into it)."""
    pos = start
    while pos < end:
        try:
            data = os.pread(fd, min(chunk, end - pos), pos)
        except OSError:
            return
        if not data:
            return
        pos += len(data)
        if stats is not None:
            stats.progress_at = time.monotonic()
        yield data


def _line_at(fd: int, index: int, end: int) -> tuple[int, bytes] | None:
    """The line (start offset, bytes without terminator) holding byte ``index`` of the file, or None
    when it is longer than :data:`STARTUP_LINE_MAX` or cannot be read."""
    lo = max(0, index - STARTUP_LINE_MAX)
    try:
        before = os.pread(fd, index - lo, lo)
        after = os.pread(fd, min(STARTUP_LINE_MAX, end - index), index)
    except OSError:
        return None
    cut = before.rfind(b"\n")
    if cut < 0 and lo > 0:
        return None
    nl = after.find(b"\n")
    if nl < 0 and index + len(after) < end:
        return None
    line = before[cut + 1:] + (after if nl < 0 else after[:nl])
    return (lo + cut + 1, line) if len(line) <= STARTUP_LINE_MAX else None


def _is_start(line: bytes) -> bool:
    """Whether a raw line is a ``server_args`` line that parses (not a request that quotes it)."""
    return any(type(parse_line(piece)) is ServerArgs
               for piece in line.decode("utf-8", "replace").splitlines() if "server_args=" in piece)


def last_start(fd: int, end: int, budget: int, chunk: int, stats: LogStats | None = None) -> tuple[int | None, int]:
    """Search bytes ``0..end`` of an open file backwards for the last ``server_args`` line.

    Returns:
        ``(offset of that line's first byte or None, bytes searched)``; at most ``budget`` bytes,
        the last ones, are searched.
    """
    keep = len(START_MARKER) - 1
    pos, searched, later = end, 0, b""
    while pos > 0 and searched < budget:
        n = min(chunk, pos, budget - searched)
        try:
            data = os.pread(fd, n, pos - n)
        except OSError:
            break
        if len(data) != n:
            break
        pos -= n
        searched += n
        if stats is not None:
            stats.progress_at = time.monotonic()
        buf = data + later  # a marker cut by the chunk boundary is whole here
        i = buf.rfind(START_MARKER)
        while i >= 0:
            found = _line_at(fd, pos + i, end)
            if found is not None and _is_start(found[1]):
                return found[0], searched
            i = buf.rfind(START_MARKER, 0, i)
        later = data[:keep]
    return None, searched


def _head_holds_start(fd: int, end: int, chunk: int, stats: LogStats | None) -> bool:
    """Whether bytes ``0..end`` hold the start marker (a cheap byte search, no parsing)."""
    keep, tail = len(START_MARKER) - 1, b""
    for data in chunks(fd, 0, end, chunk, stats):
        if START_MARKER in tail + data:
            return True
        tail = data[-keep:]
    return False


def _siblings(path: str, fd: int) -> list[tuple[str, int]]:
    """Rotated siblings of ``path`` last written no later than the open file ``fd``, newest first:
    ``(path, size)``."""
    try:
        own = os.fstat(fd)
    except OSError:
        return []
    found = [(st.st_mtime_ns, entry.path, st.st_size) for entry, st in rotated_siblings(path)
             if (st.st_dev, st.st_ino) != (own.st_dev, own.st_ino) and st.st_mtime_ns <= own.st_mtime_ns]
    found.sort(key=lambda t: (t[0], t[1]), reverse=True)
    return [(p, size) for _, p, size in found]


def compressed_siblings(path: str) -> list[str]:
    """Names of the compressed rotated copies next to ``path`` (``sglang.log.2.gz``), which are not
    searched (a compressed stream cannot be read backwards); ``[]`` when the directory is unreadable."""
    directory, base = os.path.split(os.path.realpath(path))
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return []
    return sorted(name for name in names for ext in COMPRESSED
                  if name.endswith(ext) and is_rotated_name(name[:-len(ext)], base))


def rotated_from(path: str) -> str | None:
    """The log next to ``path`` (its target when a symlink) of which ``path`` is a rotated copy
    (``sglang.log`` for ``sglang.log.1``), when that log exists; else None."""
    directory, name = os.path.split(os.path.realpath(path))
    for i, c in enumerate(name):
        base = os.path.join(directory, name[:i])
        if i and c in SEPARATORS and is_rotated_name(name, name[:i]) and os.path.isfile(base):
            return base
    return None


def start_chunks(path: str, fd: int, size: int, limit: int, chunk: int, stats: LogStats | None = None,
                 back_limit: int = BACK_SCAN_BYTES) -> Iterator[bytes]:
    """The text of the running server's last start, as consecutive chunks for
    :meth:`~.ingest.Ingest.startup_facts`, for a tailer that starts reading ``path`` at ``size``.

    Args:
        path: The followed path (its rotated siblings are found next to its target).
        fd: The file open at that path (read with ``pread``; its offset does not move).
        size: The tailer's start position (bytes before it are searched).
        limit: Most bytes handed over from the start line on (across the files), and of the head
            when the log has no ``server_args`` line.
        chunk: Bytes read at a time.
        stats: Where each chunk read is recorded as progress (``LogStats.progress_at``).
        back_limit: Most bytes searched backwards for the last start, over the file and siblings.

    Yields:
        Nothing for a rotated copy of a log that exists (``sglang.log.1`` beside ``sglang.log``:
        that log's search covers it, and a glob that follows both would otherwise apply the older
        start after the newer one). Else raw bytes: from the last ``server_args`` line on, through
        the newer siblings and the file up to ``size``; or the file's head when no file has such a
        line; or nothing (logged) when the search bound was reached and the head has one. A
        ``\\n`` separates two files. Opened siblings are closed when the generator ends or is closed.
    """
    where = display_path(path)
    base = rotated_from(path)
    if base is not None:  # its log's search reaches it; applied here, an old start would win (glob order)
        log.info("%s is a rotated file of %s: the running server's start-up facts are searched from that one",
                 where, display_path(base))
        return
    offset, searched = last_start(fd, size, back_limit, chunk, stats)
    files: list[tuple[str, int, int]] = []  # (path, fd, size) newest first: siblings opened here
    try:
        if offset is None and searched < size:
            yield from _bounded_head(fd, size, limit, chunk, stats, where, back_limit)
            return
        if offset is None:
            for sib, sib_size in _siblings(path, fd):
                if searched >= back_limit:
                    break
                try:
                    sfd = os.open(sib, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                except OSError:
                    continue
                files.append((sib, sfd, sib_size))
                offset, n = last_start(sfd, sib_size, back_limit - searched, chunk, stats)
                searched += n
                if offset is not None:
                    break
                if n < sib_size:
                    break  # bound reached inside this sibling
            if offset is None:  # the file has none: its head is searched as before
                if not searched:
                    return  # an empty file without rotated files: nothing to say
                if searched >= back_limit:
                    log.warning("%s: no SGLang start (server_args line) in the last %s bytes of it and its "
                                "rotated files: %s", where, f"{back_limit:,}", UNKNOWN)
                elif packed := compressed_siblings(path):  # logrotate's compress: the start may be there
                    log.warning("%s and its uncompressed rotated files hold no SGLang start (server_args "
                                "line); compressed ones (%s) are not searched: %s", where, ", ".join(packed[:3]),
                                UNKNOWN)
                else:  # SGLang Omni, SGLang before 2024-10
                    log.info("%s and its rotated files hold no server_args line: the decode-log interval "
                             "is the setting's (--sglang.decode-log-interval)", where)
                yield from chunks(fd, 0, min(size, limit), chunk, stats)
                return
        if files:
            log.info("%s holds no SGLang start (server_args line); applying the start-up facts of the "
                     "last one, in its rotated file %s", where, display_path(files[-1][0]))
        else:
            log.info("applying the start-up facts of the last SGLang start in %s (its server_args line "
                     "at byte %s)", where, f"{offset:,}")
        left = limit
        for n, (_, sfd, sib_size) in enumerate(reversed(files)):
            start = offset if n == 0 else 0
            for data in chunks(sfd, start, min(sib_size, start + left), chunk, stats):
                left -= len(data)
                yield data
            yield b"\n"
            if left <= 0:
                return
        start = 0 if files else offset
        yield from chunks(fd, start, min(size, start + left), chunk, stats)
    finally:
        for _, sfd, _ in files:
            os.close(sfd)


def _bounded_head(fd: int, size: int, limit: int, chunk: int, stats: LogStats | None, where: str,
                  back_limit: int) -> Iterator[bytes]:
    """The head of a log whose last ``back_limit`` bytes hold no start: handed over when it holds
    none either (a log without ``server_args`` lines), else nothing and one warning."""
    if not _head_holds_start(fd, min(size, limit), chunk, stats):
        yield from chunks(fd, 0, min(size, limit), chunk, stats)
        return
    log.warning("%s: no SGLang start (server_args line) in its last %s bytes, but an earlier one in its "
                "head: %s", where, f"{back_limit:,}", UNKNOWN)
