"""The ingest step: complete lines -> parser -> stage attribution -> :meth:`SchedulerStore.apply`,
each line counted.

:class:`Ingest` is the sink the tailers hand their lines to. Parsing happens outside every lock; the
attribution step (:mod:`.attribution`) gives SGLang Omni's lines their stage and holds back those no
stage can claim; the events of one batch of lines are applied in one call (a scrape never sees half of
them), and only then counted in the source's own :class:`~.stats.LogStats`, so that a line counted as
parsed is a line already applied.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from ...events import KIND_OF, Capacity, CudaGraphCapture, KvAllocation, OmniStartup, ServerArgs
from ...scheduler.store import SchedulerStore
from .attribution import StageAttribution
from .parser import Malformed, parse_line
from .templates import parse_template
from .stats import LogStats

#: Event types of the start-up facts applied from the skipped head of a log (:meth:`Ingest.startup_facts`):
#: they describe the running server even when their lines lie before the start position.
STARTUP_EVENTS = (Capacity, KvAllocation, ServerArgs, CudaGraphCapture, OmniStartup)

log = logging.getLogger(__name__)

#: ``Ingest``'s observer: ``(lines, parsed, applied)`` of each batch (:class:`Ingest`).
Observer = Callable[[list[str], list, list], None]


def _applied(events: list, rejected) -> list:
    """``events`` without the ones the store refused (``rejected``: ``(event, reason)`` pairs)."""
    if not rejected:
        return events
    refused = {id(ev) for ev, _ in rejected}
    return [ev for ev in events if id(ev) not in refused]


class Ingest:
    """Parses lines, gives SGLang Omni's their stage, applies the events to the scheduler store, counts
    lines by kind and result.

    Args:
        store: Where scheduler events go (the one interface into the scheduler state).
        stats: Where line counts go (a private :class:`LogStats` by default).
        clock: Wall-clock source in seconds since the epoch (tests inject one).
        observer: Called after each batch is applied and counted, with ``(lines, parsed, applied)``:
            the batch's lines, what the parser made of each (an event, a ``Malformed`` marker or
            ``None``) and the events the store applied, in the order applied (SGLang Omni start-up
            events released by this batch first; refused, held and unattributed ones left out). The
            offline report keeps its per-line samples this way, so it reads what the sidecar counts.

    Attributes:
        attribution: The stage attribution of this log (one per followed log set: the stages of one
            server).
    """

    def __init__(self, store: SchedulerStore, stats: LogStats | None = None,
                 clock: Callable[[], float] = time.time, observer: Observer | None = None):
        self.store = store
        self.stats = stats if stats is not None else LogStats()
        self.attribution = StageAttribution()
        self._clock = clock
        self.observer = observer

    def feed(self, lines: Iterable[str]) -> int:
        """Parse and apply complete lines (without their terminators).

        Each line is counted once in ``LogStats.lines``: ``(kind, "parsed")`` when its event was
        applied, ``(kind, "malformed")`` when its kind was recognised but the line is damaged or its
        event was refused by the store (then also in ``LogStats.rejected`` by reason: an impossible
        rank, beyond the scheduler/replica caps, a derived figure out of range), ``(kind,
        "unattributed")`` when it is an SGLang Omni line of several stages that no stage can claim
        (:mod:`.attribution`), ``("other", "ignored")`` when it is no scheduler line.

        Returns:
            How many of the lines are SGLang scheduler lines (their event parsed, whether or not the
            store took it); the rest are not scheduler lines or damaged ones. Never raises on line
            content.
        """
        if self.observer is not None and not isinstance(lines, list):
            lines = list(lines)
        parsed = [parse_template(line) for line in lines]  # a template line skips the parser
        if not parsed:
            return 0
        templates = len(parsed) - parsed.count(None)
        if templates < len(parsed):
            parsed = [ev or parse_line(line) for ev, line in zip(parsed, lines)]
        wall = self._clock()
        events = []
        append = events.append
        ignored = 0
        malformed: list[str] = []
        by_type: dict[type, int] = {}
        for ev in parsed:
            if ev is None:
                ignored += 1
                continue
            t = type(ev)
            if t is Malformed:
                malformed.append(ev.kind)
                log.debug("malformed %s line: %s", ev.kind, ev.reason)
            else:
                append(ev)
                by_type[t] = by_type.get(t, 0) + 1
        scheduler_lines = len(events)
        dropped: list = []
        if events:
            events, dropped = self.attribution.attribute(events)
        rejected = self.store.apply(events, wall) if events else ()
        self._count(ignored, malformed, by_type, dropped, rejected, wall, templates)
        if self.observer is not None:
            self.observer(lines, parsed, _applied(events, rejected))
        return scheduler_lines

    def finish(self) -> int:
        """Decide SGLang Omni's held start-up lines at the end of a recorded log (:mod:`.attribution`).

        Returns:
            The number of held events decided.
        """
        events, dropped = self.attribution.finish()
        wall = self._clock()
        rejected = self.store.apply(events, wall) if events else ()
        self._count(0, [], {}, dropped, rejected, wall)
        if self.observer is not None and events:
            self.observer([], [], _applied(events, rejected))
        return len(events) + len(dropped)

    def _count(self, ignored: int, malformed: list[str], by_type: dict[type, int], dropped: list,
               rejected, wall: float, templates: int = 0) -> None:
        """Count one batch's lines in the source's statistics (a held Omni start-up line counted
        parsed when read moves to ``unattributed`` when it is decided so)."""
        stats = self.stats
        with stats.lock:
            counts = stats.lines
            counts[("other", "ignored")] += ignored
            stats.template_lines += templates
            for kind in malformed:
                counts[(kind, "malformed")] += 1
            for t, n in by_type.items():
                counts[(KIND_OF[t], "parsed")] += n
            for ev, _ in dropped:
                kind = KIND_OF[type(ev)]
                counts[(kind, "parsed")] -= 1
                counts[(kind, "unattributed")] += 1
            for ev, reason in rejected:
                kind = KIND_OF[type(ev)]
                counts[(kind, "parsed")] -= 1
                counts[(kind, "malformed")] += 1
                stats.rejected[reason] += 1
                log.debug("refused %s line of scheduler %s DP%s %s: %s", kind, ev.origin.stage, ev.origin.dp_rank,
                          ev.origin.replica, reason)
            if ignored or malformed or by_type:
                stats.last_line_wall = wall

    def startup_facts(self, chunks: Iterable[bytes]) -> int:
        """Apply the start-up facts found in log text that the tailer skips.

        When the exporter starts at the end of an existing log (the default, so nothing is counted
        twice), the server's start-up lines lie before that point; yet the capacity line
        (``max_total_num_tokens=...``), ``KV Cache is allocated``, ``server_args=`` and SGLang Omni's
        CUDA-graph lines describe the running server, and Omni's start-up lines name its stages
        (:mod:`.attribution`).
        This applies those kinds only: no counter moves and the lines are not counted as read.

        The bytes are searched chunk by chunk for the markers (:data:`_STARTUP_TEXT`), and only the lines holding one
        are decoded, so memory stays at about one chunk plus one line whatever the head's size and
        content (a multi-byte character would make a decoded 64 MiB head take up to 256 MiB). A
        line longer than :data:`STARTUP_LINE_MAX` bytes is no start-up line and is passed over.

        Args:
            chunks: Consecutive raw bytes of the skipped part of the file (the tailer passes the
                text of the server's last start in chunks: :func:`~.startfacts.start_chunks`).

        Returns:
            The number of start-up events applied.
        """
        events = []
        carry = b""
        skipping = False  # inside a line longer than STARTUP_LINE_MAX: up to its newline
        for chunk in chunks:
            data = carry + chunk if carry else chunk
            cut = data.rfind(b"\n")
            if cut < 0:
                carry = b"" if skipping or len(data) > STARTUP_LINE_MAX else data
                skipping = skipping or len(data) > STARTUP_LINE_MAX
                continue
            body = data[:cut]
            if skipping:
                body = body[body.find(b"\n") + 1:] if b"\n" in body else b""
                skipping = False
            _startup_lines(body, events)
            carry = data[cut + 1:]
            if len(carry) > STARTUP_LINE_MAX:
                carry, skipping = b"", True
        if carry and not skipping:
            _startup_lines(carry, events)
        if events:
            events, _ = self.attribution.attribute(events)
            self.store.apply(events, self._clock())
        return len(events)


#: Longest line searched for start-up facts (a ``server_args`` line is a few KiB).
STARTUP_LINE_MAX = 1 << 20
#: Text that every line of those kinds holds (a cheap filter before parsing the skipped head).
_STARTUP_TEXT = ("max_total_num_tokens=", "server_args=", "KV Cache is allocated", "Capture ", "sglang_ar_startup",
                 "Building scheduler for ", "Acquired GPU startup lock", "SGLang runtime configuration",
                 " ready with stages=", "MultiProcessPipelineRunner started")
#: The same text as bytes, searched in the raw head (ASCII: the same in any decoding).
_STARTUP_MARKERS = tuple(t.encode() for t in _STARTUP_TEXT)


def _startup_lines(body: bytes, events: list) -> None:
    """Append the start-up events (:data:`STARTUP_EVENTS`) of the complete lines in ``body`` (lines
    joined by ``\\n``, without the last terminator), decoding only the lines that hold a marker."""
    starts: set[int] = set()
    for marker in _STARTUP_MARKERS:
        i = body.find(marker)
        while i >= 0:
            start = body.rfind(b"\n", 0, i) + 1
            end = body.find(b"\n", i)
            end = len(body) if end < 0 else end
            starts.add(start)
            i = body.find(marker, end)
    for start in sorted(starts):
        end = body.find(b"\n", start)
        end = len(body) if end < 0 else end
        if end - start > STARTUP_LINE_MAX:
            continue
        line = body[start:end].decode("utf-8", "replace")
        for piece in line.splitlines():  # \r and the other breaks str.splitlines knows, as before
            if any(marker in piece for marker in _STARTUP_TEXT):
                ev = parse_line(piece)
                if type(ev) in STARTUP_EVENTS:
                    events.append(ev)
