"""The bulk path for recorded logs: a block of complete lines in, runs and events out.

:func:`scan_block` reads a block of raw lines (what :meth:`.lines.LineSplitter.complete` returns)
with one compiled pattern (:mod:`.templates`). A line that matches is a common ``Prefill batch`` or
``Decode batch`` line: its fields go straight into its replica's columns
(:class:`~exporter.scheduler.runs.ReplicaRun`), without an event object. Every other line is
decoded by the splitter's rules and handed to the per-line parser (:func:`.parser.parse_line`, the
reference) in order: a stats line, a retraction, an aborted retraction or request time stats joins
the same columns; a damaged line or a line of no kind is counted. A start-up line (capacity,
``server_args``, ``KV Cache is allocated``) or an event of any other kind changes what the lines
after it mean: it ends the block's run there, is handed on as text for the per-line path, and the
lines after it make the next part of the block, with a run of their own (a server restarted into
the same log prints a start-up block of a few lines among thousands of stats lines). A block
holding any line in SGLang Omni's format (an event with ``origin.task``) is read line by line
instead, as is a part whose lines the state would refuse
(:func:`~exporter.scheduler.runs.applicable`): the stage attribution (:mod:`.attribution`)
decides an Omni line's stage, holds it or drops it, in :meth:`.ingest.Ingest.feed`. The lines a run
takes are plain SGLang's (``task`` is ``None``), which the attribution passes on unchanged, and
leaves its state as it was, so a run equals those lines through ``Ingest.feed``; so do the start-up
lines between two runs, applied in order between them. The result (:class:`BlockResult`)
holds nothing of the store, so blocks can be scanned in other processes and applied in order
(:mod:`.bulk_ingest`); ``tests/test_log_bulk.py`` runs both paths over the corpus, the SGLang Omni
logs, fuzzed logs and the bench log and requires the same output.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace

from ...events import KIND_OF, DecodeBatch, Event, Origin, PrefillBatch, ReqTimeStats, RetractAbort, Retraction
from ...scheduler import rules
from ...scheduler.runs import RUN_HISTOGRAMS, ReplicaRun, Run
from ...scheduler.state import HISTOGRAM_BOUNDS, SchedulerStates
from .lines import LineSplitter
from .parser import Malformed, parse_line
from .prefix import parse_origin
from .templates import FULL, GROUP, SCAN, SCAN_FIELDS, TEMPLATE_MAX_BYTES, parse_template

#: Histogram bounds by :class:`~exporter.scheduler.state.ReplicaCounters` attribute.
_BOUNDS = {name: HISTOGRAM_BOUNDS[name] for name, _ in RUN_HISTOGRAMS}
#: Texts of which every title the per-line parser looks for (``parser._parse``) holds one: a line with
#: none of them is no scheduler line, and is counted as such without being decoded and parsed.
#: ``tests/test_log_bulk.py`` checks them against the parser's source, so a new title fails there.
TITLE_TOKENS = (b" batch", b"etract", b"out of memory", b"max_total_num_tokens=", b"server_args=", b"Stats(",
                b"#running-req", b"KV Cache is allocated", b"KV cache allocated")
#: SGLang Omni's own lines (:mod:`.omni`) are read by the parser when a line holds ``,mmm [`` (its
#: ``_HINT``, ``\d`` of any script) in its first 512 characters. In the raw bytes, such a line holds
#: ``" ["`` and this pattern (any character of a digit's UTF-8 encoding is neither a blank nor ``[``):
#: a line without it is none of Omni's. ``tests/test_log_bulk.py`` checks it against Omni's lines.
OMNI_HINT = re.compile(rb",[^ \[]{3,12} \[")
#: Bytes that are rare in log text, rarest first (see :func:`_anchored`).
_RARE_BYTES = b"#K(=,ybc"


def _anchored(token: bytes) -> bytes:
    """A pattern for ``token`` that starts at its rarest byte (the first of :data:`_RARE_BYTES` it holds)
    and checks the bytes before it with a look-behind. A search tries an alternation only at a byte
    that can start one of its alternatives, so one that starts at a blank or an ``e`` is tried at
    nearly every position of a line."""
    k = next((token.index(c) for c in _RARE_BYTES if c in token), 0)
    if k == 0:
        return re.escape(token)
    return re.escape(token[k:k + 1]) + b"(?<=" + re.escape(token[:k + 1]) + b")" + re.escape(token[k + 1:])


#: A line that is no template goes to the per-line parser when this finds something in it: a title token,
#: a ``\r`` (which splits it into lines) or SGLang Omni's hint; any other is no scheduler line. One
#: search for all (0.73 us on the bench log's average line that is no template, against 1.72 us for a
#: test per token and 1.18 us for the tokens as written).
_SUSPECT = re.compile(b"|".join(map(_anchored, (*TITLE_TOKENS, b"\r"))) + b"|" + OMNI_HINT.pattern)
#: Event types a run takes as columns; any other event (start-up lines, kinds added later) ends the
#: block's part: it goes to the per-line path, between the run before it and the run after it.
_RUN_EVENTS = (DecodeBatch, PrefillBatch, Retraction, RetractAbort, ReqTimeStats)
_MEMO_MAX = 4096


@dataclass(slots=True)
class BlockResult:
    """One part of a block of lines, ready to be applied to the store: the lines up to the block's end
    or its next start-up line. :func:`scan_block` returns a block's parts as a flat list, in order (a
    linked chain of thousands of parts, a crash-looping server's log, could not be pickled back
    from a worker process: it recursed once per part).

    Attributes:
        run: The part's scheduler lines as one run (``None`` when it has none).
        by_line: The whole block is read line by line instead, and nothing else here is set: it holds
            a line in SGLang Omni's format, which needs the stage attribution, or start-up lines so
            dense (a crash-looping server) that a run per part would cost more than the lines
            (:data:`BY_LINE_PARTS`).
        templates: Lines the part's pattern read (:mod:`.templates`), of :attr:`lines`.
        lines: Lines the part held after the splitter's rules (a ``\\r`` splits one, an oversized
            one is dropped), the start-up line that ends it left out.
        parsed: Lines within the run, by kind.
        ignored: Lines of no scheduler kind.
        malformed: Damaged lines by kind.
        dropped: Lines dropped for exceeding ``max_line_bytes``.
        start / stop: The part's raw lines, ``block.split(b"\\n")[start:stop]`` (``stop`` is
            ``None`` for the block's last part), which the per-line path reads where the state would
            refuse the run.
        then: The lines of the raw lines from ``stop`` to the next part's ``start`` (start-up lines
            in a row, or other events that are no run's), for the per-line path after the run; empty
            for the last part.
    """

    run: Run | None = None
    by_line: bool = False
    lines: int = 0
    parsed: Counter = field(default_factory=Counter)
    ignored: int = 0
    malformed: Counter = field(default_factory=Counter)
    dropped: int = 0
    start: int = 0
    stop: int | None = None
    then: list[str] = field(default_factory=list)
    templates: int = 0


class _ByLine(Exception):
    """Internal: the block is read line by line (:attr:`BlockResult.by_line`)."""


#: A block cut into more parts than this, and into parts of fewer than :data:`BY_LINE_PART_LINES`
#: lines on average, is read line by line: each part's run has a fixed cost of its own.
BY_LINE_PARTS = 64
BY_LINE_PART_LINES = 16


class _Builder:
    """The run being built: replicas by identity object, latest values by scheduler."""

    __slots__ = ("replicas", "latest", "run", "slots", "parts")

    def __init__(self, parts: list[bytes]):
        self.parts = parts  # the block's raw lines: a template line's latest values are read at the end
        self.replicas: dict[int, ReplicaRun] = {}  # by id() of the identity's one Origin object
        self.latest: dict[str, dict] = {}  # scheduler key -> {key: line index, or (line index, value)}
        self.slots: dict[tuple, tuple] = {}  # template prefix key -> its replica, latest, column appends
        self.run = Run()

    def replica(self, origin: Origin) -> ReplicaRun:
        rr = self.replicas.get(id(origin))
        if rr is None:
            rr = self.replicas[id(origin)] = ReplicaRun(origin)
            self.run.replicas.append(rr)
        return rr

    def scheduler(self, key: str) -> dict:
        latest = self.latest.get(key)
        if latest is None:
            latest = self.latest[key] = {}
        return latest


class _Scanner:
    """Scans blocks; memos of identities and times are kept across blocks.

    Every identity is one :class:`Origin` object (without time), so that a run finds its replica's
    columns by the object's ``id`` instead of hashing a dataclass per line.
    """

    def __init__(self):
        self.parts: list[BlockResult] = []  # the parts of the block being scanned, in order
        self.identities: dict[tuple, tuple[Origin, str]] = {}
        self.canonical: dict[Origin, Origin] = {}
        self.seconds: dict[bytes | None, float | None] = {}

    def scan(self, block: bytes, max_line_bytes: int) -> list[BlockResult]:
        if len(self.canonical) >= _MEMO_MAX:  # only between blocks: a run needs one object per identity
            self.identities.clear()
            self.canonical.clear()
        res = BlockResult()
        self.parts = [res]
        try:
            self._scan(block.split(b"\n"), max_line_bytes, LineSplitter(max_line_bytes), res)
        except _ByLine:
            return [BlockResult(by_line=True)]
        finally:
            parts, self.parts = self.parts, []
        return parts

    def _scan(self, parts: list[bytes], max_line_bytes: int, splitter: LineSplitter, res: BlockResult) -> None:
        b = _Builder(parts)
        seconds = self.seconds
        pending: list[int] = []  # raw lines for the parser, by index
        (g_actor, g_date, g_tod, g_frac, g_tags, g_fork, g_run, g_dtok, g_use, g_ftok, g_full, g_swa, g_has_prealloc, g_al,
         g_has_rate, g_dq, g_seq, g_tok, g_cached, g_puse, g_pfull, g_mamba, g_prun, g_pq, g_has_pd, g_has_pending,
         g_has_input) = (GROUP[name] for name in SCAN_FIELDS)
        match = SCAN.match
        if max_line_bytes >= TEMPLATE_MAX_BYTES:  # no template line can be over the limit
            matches = map(match, parts)
        else:
            matches = (match(p) if len(p) <= max_line_bytes else None for p in parts)
        templates = ignored = 0
        suspect = _SUSPECT.search
        for i, m in enumerate(matches):
            if m is None:
                part = parts[i]
                if suspect(part) is None and len(part) <= max_line_bytes:
                    ignored += 1  # one line (no \r to split it, not too long) that no title can start
                    continue
                pending.append(i)
                continue
            if pending:
                res, b, templates, ignored = self._pending(pending, i, splitter, res, b, templates, ignored)
                pending = []
            templates += 1
            g = m.groups()
            key = (g[g_actor], g[g_tags], g[g_fork])
            slot = b.slots.get(key)
            if slot is None:
                slot = self._slot(b, key, parts[i])
            rr, latest, add_running, add_decode_top, add_new_seq, add_new_token, add_prefill_running, add_prefill_top, \
                add_queue, add_time, add_clock = slot
            stamp = g[g_date]
            clock = "log"
            if stamp is None:
                stamp, clock = g[g_tod], "tod"
            t = seconds.get(stamp, seconds)
            if t is seconds:
                t = self._seconds(stamp)
            if t is None:  # no time stamp (or a date that is no date)
                clock = "wall"
            elif g[g_frac] is not None:
                frac = g[g_frac]
                t += int(frac) / 10 ** len(frac)
            running = g[g_run]
            if running is not None:  # Decode batch
                running = int(running)
                add_running(running)
                usage = g[g_use]
                if usage is not None:
                    add_decode_top(float(usage))
                    latest[_DECODE_KV_LINE] = i
                    tokens = g[g_dtok]
                else:
                    add_decode_top(max(float(g[g_full]), float(g[g_swa])))
                    latest[_DECODE_SWA_LINE] = i
                    tokens = g[g_ftok]
                if running:
                    rr.kv_tokens += int(tokens)
                    rr.kv_requests += running
                al = g[g_al]
                if al is not None:
                    rr.accept_len(float(al))
                    latest[_ACCEPT_LEN_LINE] = i
                elif rr.accept is not None:
                    rr.accept.append(1.0)
                if g[g_has_rate] is not None:
                    latest[_ACCEPT_RATE_LINE] = i
                if g[g_has_prealloc] is not None:
                    latest[_PREALLOC_LINE] = i
                if running:
                    latest[_MEAN_LINE] = i
                add_queue(int(g[g_dq]))
            else:  # Prefill batch
                add_new_seq(int(g[g_seq]))
                add_new_token(int(g[g_tok]))
                add_prefill_running(int(g[g_prun]))
                rr.cached_tokens += int(g[g_cached])
                usage = g[g_puse]
                if usage is not None:
                    add_prefill_top(float(usage))
                    latest[_PREFILL_KV_LINE] = i
                else:
                    add_prefill_top(max(float(g[g_pfull]), float(g[g_mamba])))
                    latest[_PREFILL_MAMBA_LINE] = i
                if g[g_has_pd] is not None:
                    latest[_PREFILL_PD_LINE] = i
                if g[g_has_pending] is not None:
                    latest[_PENDING_LINE] = i
                if g[g_has_input] is not None:
                    latest[_INPUT_LINE] = i
                add_queue(int(g[g_pq]))
            add_time(t)
            add_clock(clock)
        if pending:
            res, b, templates, ignored = self._pending(pending, len(parts), splitter, res, b, templates, ignored)
        self._end_part(res, b, splitter, templates, ignored)

    def _pending(self, pending: list[int], end: int, splitter: LineSplitter, res: BlockResult, b: _Builder,
                 templates: int, ignored: int) -> tuple[BlockResult, _Builder, int, int]:
        """The raw lines ``pending`` (indices, in order, all before raw line ``end``; the others since
        the last template line were counted in ``ignored``) through the per-line parser; at a start-up
        line the part ends and the next begins. Returns the part, builder and counts to go on with."""
        k = 0
        prev = None
        while (cut := self._lines(pending, k, splitter, res, b)) is not None:
            k, then = cut  # pending[k] is a start-up line: the part ends before it
            stop = pending[k]
            k += 1
            if prev is not None and stop == res.start:  # right after another: one stretch of the per-line path
                prev.then += then
                res.start = stop + 1
                continue
            prev = res
            after = end - stop - 1 - (len(pending) - k)  # the lines counted in `ignored` that follow it
            self._end_part(res, b, splitter, templates, ignored - after)
            res.stop, res.then = stop, then
            res = BlockResult(start=stop + 1)
            self.parts.append(res)
            if len(self.parts) > BY_LINE_PARTS and len(self.parts) * BY_LINE_PART_LINES > stop:
                raise _ByLine
            b = _Builder(b.parts)
            templates, ignored = 0, after
        return res, b, templates, ignored

    def _end_part(self, res: BlockResult, b: _Builder, splitter: LineSplitter, templates: int, ignored: int) -> None:
        self._end_run(res, b)
        res.lines += templates + ignored
        res.templates += templates
        res.ignored += ignored
        res.dropped, splitter.dropped = splitter.dropped, 0

    def _slot(self, b: _Builder, key: tuple, line: bytes) -> tuple:
        """The replica columns and scheduler values of a template prefix first seen in this run: the
        replica's run, its scheduler's latest values, and the ``append`` of each column a template line
        fills (bound once per run, not per line)."""
        ident = self.identities.get(key)
        if ident is None:  # read by the reference (:func:`.prefix.parse_origin`)
            end = FULL.match(line).end("prefix")
            origin = self._canonical(parse_origin(line[:max(end, 0)].decode("ascii")))
            ident = self.identities[key] = (origin, SchedulerStates.key(origin))
        origin, scheduler = ident
        if origin.task is not None:  # never for SGLang's prefixes; SGLang Omni's go through the attribution
            raise _ByLine
        rr = b.replica(origin)
        slot = b.slots[key] = (rr, b.scheduler(scheduler), rr.running.append, rr.decode_top.append,
                               rr.new_seq.append, rr.new_token.append, rr.prefill_running.append,
                               rr.prefill_top.append, rr.queue.append, rr.queue_time.append, rr.queue_clock.append)
        return slot

    def _canonical(self, origin: Origin) -> Origin:
        """The one object of ``origin``'s identity (its time dropped)."""
        if origin.log_time is not None or origin.time_of_day_only:
            origin = replace(origin, log_time=None, time_of_day_only=False)
        return self.canonical.setdefault(origin, origin)

    def _seconds(self, stamp: bytes | None) -> float | None:
        """Whole seconds of a time stamp as :func:`.prefix.parse_origin` reads them (no fraction);
        None without one.

        The reference reads a date and time as ``calendar.timegm``, which is linear in the time of
        day (it checks the year and month only): the date's midnight is read by the reference once
        per day and the time of day added, which gives the same float.
        """
        if stamp is None:
            value = None
        elif len(stamp) == 19:  # YYYY-MM-DD HH:MM:SS
            day = stamp[:10]
            midnight = self.seconds.get(day, self.seconds)
            if midnight is self.seconds:
                midnight = self.seconds[day] = parse_origin(f"[{day.decode('ascii')} 00:00:00] ").log_time
            value = None if midnight is None else (
                midnight + (int(stamp[11:13]) * 3600 + int(stamp[14:16]) * 60 + int(stamp[17:19])))
        else:
            value = parse_origin(f"[{stamp.decode('ascii')}] ").log_time
        if len(self.seconds) >= _MEMO_MAX:
            self.seconds.clear()
        self.seconds[stamp] = value
        return value

    def _lines(self, pending: list[int], k: int, splitter: LineSplitter, res: BlockResult,
               b: _Builder) -> tuple[int, list[str]] | None:
        """Raw lines that are no template (``pending[k:]``, indices into the block), through the
        per-line parser in order; the first one's index orders their values against the template
        lines'. Returns ``(j, its lines)`` where ``pending[j]`` holds a start-up line (or another
        event that is no run's): the lines before it are in the run, none after it is read."""
        parts = b.parts
        n = pending[k] if k < len(pending) else 0
        for j in range(k, len(pending)):  # one raw line at a time (a \r splits one): a part ends at one
            texts = splitter.decode((parts[pending[j]],))
            events = [parse_line(text) for text in texts]
            cut = False
            for ev in events:
                if ev is None or type(ev) is Malformed:
                    continue
                if ev.origin.task is not None:
                    # SGLang Omni's format: the stage attribution decides the line's stage (or holds it,
                    # or drops it), so the block goes through Ingest.feed, which runs it
                    raise _ByLine
                cut = cut or type(ev) not in _RUN_EVENTS
            if cut:
                return j, texts
            self._events(texts, events, res, b, n)
        return None

    def _events(self, texts: list[str], events: list, res: BlockResult, b: _Builder, n: int) -> None:
        """Lines of the per-line parser and their events (none a start-up line's or SGLang Omni's),
        into the run."""
        res.lines += len(texts)
        for ev in events:
            kind = type(ev)
            if ev is None:
                res.ignored += 1
            elif kind is Malformed:
                res.malformed[ev.kind] += 1
            else:
                if kind is not DecodeBatch and kind is not PrefillBatch:  # those are counted by their run
                    res.parsed[KIND_OF[kind]] += 1
                _add_event(b, self._canonical(ev.origin), ev, n)

    @staticmethod
    def _end_run(res: BlockResult, b: _Builder) -> None:
        run = b.run
        if not run.replicas:
            return
        for rr in run.replicas:
            rr.finish(_BOUNDS)
            res.parsed["decode"] += rr.decode_lines
            res.parsed["prefill"] += rr.prefill_lines
            if rr.decode_lines or rr.prefill_lines:
                run.stats_schedulers.add(SchedulerStates.key(rr.origin))
        for key, latest in b.latest.items():
            run.latest[key] = _resolved(latest, b.parts)
        res.run = run


_SCANNER = _Scanner()


def scan_block(block: bytes, max_line_bytes: int) -> list[BlockResult]:
    """Read a block of complete lines (raw bytes joined by ``\\n``, no final ``\\n``).

    Args:
        block: From :meth:`.lines.LineSplitter.complete`.
        max_line_bytes: Longest line kept (``--log.max-line-bytes``); longer ones are dropped.

    Returns:
        The block's parts (:class:`BlockResult`), in order. Never raises on line content.
    """
    return _SCANNER.scan(block, max_line_bytes)


# -- events of a run -------------------------------------------------------------------------------

def _add_event(b: _Builder, origin: Origin, ev: Event, n: int) -> None:
    """An event of the per-line parser into its replica's columns and its scheduler's latest values,
    as ``SchedulerStates.apply`` would apply it."""
    kind = type(ev)
    rr = b.replica(origin)
    if kind is ReqTimeStats and ev.queue_duration < 0:
        rr.void_lines += 1  # applied as nothing, not even its scheduler created, once admitted
        return
    latest = b.scheduler(SchedulerStates.key(origin))
    if kind is ReqTimeStats:
        rr.queue_wait.append(ev.queue_duration)
        return
    if kind is RetractAbort:
        rr.retract_aborts += 1
        return
    if kind is Retraction:
        rr.retractions += 1
        rr.retracted.append(ev.retracted_reqs)
        if ev.new_tokens_gained is not None:
            rr.gained.append(ev.new_tokens_gained)
        else:
            rr.estimated.append((ev.retracted_reqs, _mean(latest, b.parts)))
        if ev.new_token_ratio_after is not None:
            latest[("gauge", "new_token_ratio")] = (n, ev.new_token_ratio_after)
        return
    kv = ev.kv
    top = kv.max_device_ratio
    if kind is DecodeBatch:
        rr.running.append(ev.running_req)
        if kv.used_tokens is not None and ev.running_req > 0:
            rr.kv_tokens += kv.used_tokens
            rr.kv_requests += ev.running_req
        if top is not None:
            rr.decode_top.append(top)
        if ev.accept_len is not None:
            rr.accept_len(ev.accept_len)
        elif rr.accept is not None:
            rr.accept.append(1.0)
    else:
        rr.new_seq.append(ev.new_seq)
        rr.new_token.append(ev.new_token)
        rr.prefill_running.append(ev.running_req or 0)  # None and 0 alike to rules.chunk_ends
        rr.replay_tokens += ev.replay_token or 0
        if ev.cached_token:
            rr.cached_tokens += ev.cached_token
        if top is not None:
            rr.prefill_top.append(top)
    if ev.queue_req is not None:
        rr.queue.append(ev.queue_req)
        if ev.origin.log_time is not None:
            rr.queue_time.append(ev.origin.log_time)
            rr.queue_clock.append("tod" if ev.origin.time_of_day_only else "log")
        else:
            rr.queue_time.append(None)
            rr.queue_clock.append("wall")
    for name, value in rules.stats_gauges(ev, top):
        latest[name] = (n, value)


# -- latest values ---------------------------------------------------------------------------------
# A scheduler's latest values are kept as (line index, value); a template line's are read once per
# run, since most lines are superseded by the next one of their scheduler: the scan notes the index of
# the latest
# line of each kind and pool layout, which sets the same keys as every other line of that kind and
# layout, and the latest line printing each optional field; the end of the run reads them with every
# field captured (FULL), and each value is kept where no later line set it.

# The keys of noted template lines are small ints (cheaper to store per line than a tuple); every other
# key is a ``(table, name)`` tuple.
(_DECODE_KV_LINE, _DECODE_SWA_LINE, _ACCEPT_LEN_LINE, _ACCEPT_RATE_LINE, _PREALLOC_LINE, _MEAN_LINE,
 _PREFILL_KV_LINE, _PREFILL_MAMBA_LINE, _PREFILL_PD_LINE, _PENDING_LINE, _INPUT_LINE) = range(11)


def _values(line: bytes) -> list[tuple[tuple[str, str], object]]:
    """``((table, name), value)`` that a template line sets (:func:`~exporter.scheduler.rules.stats_gauges`
    of its event)."""
    ev = parse_template(line.decode("ascii"))
    return rules.stats_gauges(ev, ev.kv.max_device_ratio)


def _mean(latest: dict, parts: list[bytes]) -> float | None:
    """The scheduler's tokens per running request so far in the run (None: none in the run yet)."""
    line, value = latest.get(_MEAN_LINE), latest.get(("mean", ""))
    if line is not None and (value is None or value[0] < line):
        return dict(_values(parts[line]))[("mean", "")]
    return value[1] if value is not None else None


def _resolved(latest: dict, parts: list[bytes]) -> dict[tuple[str, str], object]:
    """``latest`` as ``{(table, name): value}``, the noted template lines read."""
    out = {key: item for key, item in latest.items() if type(key) is not int}
    for key, i in latest.items():
        if type(key) is int:
            for name, value in _values(parts[i]):
                held = out.get(name)
                if held is None or held[0] < i:
                    out[name] = (i, value)
    return {key: value for key, (_, value) in sorted(out.items(), key=lambda kv: kv[1][0])}
