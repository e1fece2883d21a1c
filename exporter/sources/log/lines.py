"""Bytes of one file in, complete lines out (mtail's ``logstream/reader.go``, for SGLang's logs).

Rules, as a terminal would show the log:

* a partial last line is held until its newline arrives (:meth:`LineSplitter.flush` hands it over
  at the end of a one-shot read or when a rotated file is closed);
* ``\\n`` ends a line and ``\\r\\n`` too; a bare ``\\r`` (tqdm progress bars) separates lines, and
  the empty pieces between carriage returns are dropped;
* NUL bytes at the start of a line (the hole a writer without ``O_APPEND`` leaves after
  ``copytruncate``) are dropped; invalid UTF-8 is replaced (U+FFFD);
* a line longer than ``max_line_bytes`` (without its ``\\n``; the ``\\r`` of a ``\\r\\n``
  counts) is dropped up to its newline and counted once in :attr:`LineSplitter.dropped`; the
  splitter then holds at most ``max_line_bytes`` plus one chunk, whatever the line's length.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...limits import DEFAULT_MAX_LINE_BYTES


class LineSplitter:
    """Splits one file's byte stream into lines.

    Args:
        max_line_bytes: Longest line kept, in bytes without the ``\\n``.
        skipping: Start by dropping bytes up to the first newline (reading began mid-line).

    Attributes:
        dropped: Lines dropped for their length since the owner last reset it (the owner moves it
            into its statistics).
    """

    __slots__ = ("max_line_bytes", "partial", "skipping", "dropped")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, skipping: bool = False):
        self.max_line_bytes = max_line_bytes
        self.partial = b""       # the held last line, without a newline yet
        self.skipping = skipping  # dropping bytes up to the next newline (oversized line, mid-line start)
        self.dropped = 0

    def consume(self, chunk: bytes) -> list[str]:
        """Take the next bytes of the file; returns the lines they complete, oldest first."""
        block = self.complete(chunk)
        return [] if block is None else self.decode(block.split(b"\n"))

    def complete(self, chunk: bytes) -> bytes | None:
        """Take the next bytes of the file; returns the lines they complete as one block of raw bytes.

        The block is the complete lines joined by ``\\n``, without the last one's ``\\n``; ``None``
        when the chunk completes no line. :meth:`decode` of ``block.split(b"\\n")`` gives what
        :meth:`consume` gives: the bulk path (:mod:`.bulk`) reads blocks and decodes only the lines
        that are not common templates.
        """
        if self.skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                return None
            chunk = chunk[nl + 1:]
            self.skipping = False
        partial = self.partial
        if not partial and chunk[:1] == b"\0":
            chunk = chunk.lstrip(b"\0")
        cut = chunk.rfind(b"\n")  # the held partial line holds no newline
        if cut < 0:
            data = partial + chunk if partial else chunk
            if len(data) > self.max_line_bytes:
                self._oversized()
            else:
                self.partial = data
            return None
        rest = chunk[cut + 1:]
        self.partial = b""
        if len(rest) > self.max_line_bytes:
            self._oversized()
        else:
            self.partial = rest
        # one copy of the chunk (the bulk path's 4 MiB reads: `partial + chunk`, then a slice, made two)
        return b"".join((partial, memoryview(chunk)[:cut])) if partial else chunk[:cut]

    def flush(self) -> list[str]:
        """The held partial line as a complete line (``[]`` when none, or while it is being dropped)."""
        data, self.partial = self.partial, b""
        if not data or self.skipping:
            return []
        return self.decode([data])

    def restart(self) -> list[str]:
        """The file was truncated and is read again from its start: flush, and stop skipping."""
        lines = self.flush()
        self.skipping = False
        return lines

    def _oversized(self) -> None:
        self.dropped += 1
        self.partial = b""
        self.skipping = True  # the rest of that line, up to its newline, is dropped too

    def decode(self, parts: Iterable[bytes]) -> list[str]:
        """Complete lines (raw bytes, without ``\\n``) as text, by the rules of the module docstring;
        an oversized one is dropped and counted in :attr:`dropped`."""
        limit = self.max_line_bytes
        lines: list[str] = []
        for p in parts:
            if len(p) > limit:
                self.dropped += 1
                continue
            if p[:1] == b"\0":
                p = p.lstrip(b"\0")
            text = p.decode("utf-8", "replace")
            if "\r" in text:
                if text[-1] == "\r":
                    text = text[:-1]
                if "\r" in text:
                    lines.extend(s for s in text.split("\r") if s)
                    continue
            lines.append(text)
        return lines
