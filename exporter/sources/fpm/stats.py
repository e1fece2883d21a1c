"""The stream's own statistics: per endpoint (messages, sequence, schema) and per scheduler (dp_rank).

:class:`FpmStats` is the one interface the subscriber hands decoded messages to
(:meth:`FpmStats.apply`); the collector reads it under :attr:`FpmStats.lock`. No Prometheus and no
ZeroMQ imports here. Every count is the exporter's own, cumulative since it started: a publisher
that restarts (its sequence starts again at 0) never makes a counter go down.

Sequence rule (per endpoint, one publisher each): a number above the previous one plus one means
the messages between were lost (the publisher's or the exporter's ZeroMQ queue was full, or a
slow subscriber), as long as passes could have been made that fast (:data:`MAX_PASS_RATE` over the
time since the previous number); a number at or below the previous one, or a jump too far for that
time, is a restart of the publisher, not a loss.
Messages a publisher sent before the exporter (re)connected are neither: ZeroMQ's PUB socket drops
them while nobody subscribes, and the counts start at the connection.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from dataclasses import dataclass, field

from ...limits import DEFAULT_FPM_TIMEOUT, MAX_SCHEDULERS
from ...metrics.fpm import PREFILL_TOKENS_BUCKETS, REQUESTS_BUCKETS, SECONDS_BUCKETS
from ...scheduler.histogram import Histogram
from .decode import ForwardPassMetrics, QueuedRequestMetrics, Schema

#: Message results counted per endpoint, in exposition order (``sglang_exporter_fpm_messages_total``).
RESULTS = ("ok", "heartbeat", "undecodable", "invalid", "lost")
#: Pass modes (``sglang_scheduler_forward_passes_total{mode}``), SGLang's ForwardMode EXTEND, DECODE,
#: MIXED (a chunked prefill with decode requests) and IDLE (a DP-attention rank with no request).
MODES = ("prefill", "decode", "mixed", "idle")
#: A forward jump of the sequence larger than this is a new publisher, not lost messages (10 million
#: is almost 3 hours at 1,000 passes per second; only a restart or damage jumps that far).
MAX_SEQUENCE_GAP = 10_000_000
#: Messages per second one publisher can send at most (SGLang's passes run at a few hundred to a
#: few thousand per second; 100,000 leaves room for a flood over ipc://): a forward jump is counted
#: ``lost`` only up to this rate over the time since the previous sequence number, plus
#: :data:`LOST_SLACK` (a burst the ZeroMQ queues dropped at once); a larger one is a new publisher,
#: so the numbers a publisher sends cannot make ``lost`` grow faster than messages could be sent.
MAX_PASS_RATE = 100_000
LOST_SLACK = 100_000


_TABLES: dict[tuple[float, ...], list[int]] = {}


def _table(bounds: tuple[float, ...]) -> list[int]:
    """Bucket index of each integer ``0..bounds[-1]``, built once per bounds and shared."""
    if bounds not in _TABLES:
        _TABLES[bounds] = [bisect_left(bounds, v) for v in range(int(bounds[-1]) + 1)]
    return _TABLES[bounds]


class Buckets(Histogram):
    """:class:`exporter.scheduler.histogram.Histogram` (counts per ``le`` bound, ``+Inf``, sum) whose integer
    observations up to the last bound take their bucket from a table instead of a search, which
    matters at thousands of observations per second.

    Args:
        bounds: Upper bounds, strictly increasing.
        table: Build (or share) the lookup table for integers ``0..bounds[-1]`` (small bounds only).
    """

    __slots__ = ("_table",)

    def __init__(self, bounds: tuple[float, ...], table: bool = False):
        super().__init__(bounds)
        self._table = _table(bounds) if table else None

    def observe(self, value: float) -> None:
        """Add one observation; a value equal to a bound falls in that bound's bucket."""
        t = self._table
        if t is not None and type(value) is int and 0 <= value < len(t):
            self.counts[t[value]] += 1
            self.total += value
        else:
            super().observe(value)


@dataclass(slots=True)
class RankStats:
    """One scheduler's figures from the stream (all exact: one message per forward pass).

    Attributes:
        passes: Forward passes by mode, in :data:`MODES` order.
        prefill_requests, decode_requests: Requests per pass, observed when the phase has requests.
        seconds: ``wall_time`` of every pass.
        prefill_tokens: Prompt tokens computed per pass with prefill requests.
        prefill_cached_tokens: Prompt tokens read from the KV cache, not computed, from
            ``sum_prefill_kv_tokens`` taken for what the publisher's release fills in
            (:meth:`add_prefill_kv`); None until the stream has shown which.
        kv_after_pass: Whether ``sum_prefill_kv_tokens`` is the requests' whole KV after the pass
            (SGLang 0.5.18-0.5.21: ``len(req.prefix_indices)`` after result processing) rather than the
            cached prefix at schedule time (0.5.22+: ``batch.prefix_lens``); None while undecided.
        decode_kv_tokens: Sum of ``sum_decode_kv_tokens`` (KV context of the decode requests).
        retracted_tokens: Sum of the rises of ``queued_requests.sum_decode_kv_tokens`` from one pass
            to the next (:meth:`add_queued`): the whole KV (prompt + output) of the requests that
            went back to the waiting queue with output (retracted, priority-preempted).
        queued: ``queued_requests`` of the latest pass; None before the first.
        last_pass_wall: Wall-clock time the latest pass was received.
        last_message: Monotonic time of the latest pass or heartbeat.
    """

    passes: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    prefill_requests: Buckets = field(default_factory=lambda: Buckets(REQUESTS_BUCKETS, table=True))
    decode_requests: Buckets = field(default_factory=lambda: Buckets(REQUESTS_BUCKETS, table=True))
    seconds: Buckets = field(default_factory=lambda: Buckets(SECONDS_BUCKETS))
    prefill_tokens: Buckets = field(default_factory=lambda: Buckets(PREFILL_TOKENS_BUCKETS))
    prefill_cached_tokens: int | None = None
    kv_after_pass: bool | None = None
    pending_kv: int = 0
    pending_tokens: int = 0
    decode_kv_tokens: int = 0
    retracted_tokens: int = 0
    queued: QueuedRequestMetrics | None = None
    last_pass_wall: float | None = None
    last_message: float = 0.0


    def add_prefill_kv(self, kv: int, tokens: int) -> None:
        """Count one prefill pass's cached prompt tokens from ``sum_prefill_kv_tokens`` (``kv``) and
        ``sum_prefill_tokens`` (``tokens``, computed).

        After the pass (0.5.18-0.5.21) ``kv`` is every prefill request's cached prefix plus what the
        pass computed, so ``kv >= tokens`` always and the cached part is ``kv - tokens``; at schedule
        time (0.5.22+) ``kv`` is the cached prefix itself. A pass with ``kv < tokens`` shows the
        latter, one with ``kv == tokens > 0`` (nothing cached, whole KV = what was computed) the
        former; passes before either are held and counted once it shows (a prefill-only stream
        without either stays undecided: the series is absent, never a guess).
        """
        after = self.kv_after_pass
        if after is None:
            if kv < tokens:
                after = False
            elif kv == tokens and tokens:
                after = True
            else:
                self.pending_kv += kv
                self.pending_tokens += tokens
                return
            self.kv_after_pass = after
            kv, tokens = kv + self.pending_kv, tokens + self.pending_tokens
            self.pending_kv = self.pending_tokens = 0
        self.prefill_cached_tokens = (self.prefill_cached_tokens or 0) + (max(kv - tokens, 0) if after else kv)

    def add_queued(self, q: QueuedRequestMetrics) -> None:
        """Take the waiting queue after a pass (``queued_requests``) and count its decode side's rise.

        SGLang (0.5.18, 0.5.23: ``_build_queued_request_metrics``) counts a waiting request with output
        under ``num_decode_requests`` / ``sum_decode_kv_tokens`` with its ``seqlen`` (prompt + output):
        outside PD, a request retracted (``update_running_batch``) or priority-preempted back to the
        queue. Its ``seqlen`` does not change while it waits, and a scheduling step either retracts
        (a decode step) or admits (a prefill step), never both; each pass's queue is read after the
        next step was scheduled (overlap) or after its own (no overlap), so a rise of the sum from
        one pass to the next is the KV of the requests retracted in between, SGLang's
        ``num_retracted_input_tokens`` + ``num_retracted_output_tokens``. The first pass sets the
        base. Where a step is missed (a lost message, a pass the publisher skips) or a priority
        preemption and an admission share a step, the rise nets out what left: short, never over.
        """
        prev = self.queued
        if prev is not None:
            rise = q.sum_decode_kv_tokens - prev.sum_decode_kv_tokens
            if rise > 0:
                self.retracted_tokens += rise
        self.queued = q


@dataclass(slots=True)
class EndpointStats:
    """One endpoint's (one publisher's) message accounting.

    Attributes:
        endpoint: The ZeroMQ endpoint as configured.
        results: Messages by result (:data:`RESULTS`); ``lost`` counts missing sequence numbers.
        restarts: Times the sequence went back (the publisher restarted).
        last_seq: The latest sequence number received; None before the first message.
        last_seq_at: Monotonic time the latest sequence number was received (0.0 before the first).
        last_message: Monotonic time of the latest decodable message; None before the first.
        last_message_wall: Wall-clock time of the same.
        schema: The fields the publisher sends (sampled); None before the first decodable map.
    """

    endpoint: str
    results: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RESULTS, 0))
    restarts: int = 0
    last_seq: int | None = None
    last_seq_at: float = 0.0
    last_message: float | None = None
    last_message_wall: float | None = None
    schema: Schema | None = None


class FpmStats:
    """Everything the stream told, per endpoint and per dp_rank; the subscriber's only sink.

    Args:
        endpoints: The configured endpoints, in order; :meth:`apply` takes an index into them.
        timeout: Seconds without a pass or heartbeat after which an endpoint is down and a
            scheduler's queue gauges are withheld.
        max_ranks: Most dp_ranks tracked (each adds about 290 series); messages of further ranks
            are counted ``invalid``.
        clock, monotonic: Wall-clock and monotonic time sources, seconds.
    """

    def __init__(self, endpoints: list[str], timeout: float = DEFAULT_FPM_TIMEOUT, max_ranks: int = MAX_SCHEDULERS,
                 clock=time.time, monotonic=time.monotonic):
        self.lock = threading.Lock()
        self.endpoints = [EndpointStats(e) for e in endpoints]
        self.ranks: dict[int, RankStats] = {}
        self.timeout = timeout
        self.max_ranks = max_ranks
        self.clock = clock
        self.monotonic = monotonic

    def apply(self, index: int, messages: list[tuple[int | None, ForwardPassMetrics | str]],
              schema: Schema | None = None) -> None:
        """Account for messages received, in order, from endpoint ``index``.

        Args:
            index: Position of the endpoint in the configured list.
            messages: ``(sequence, metrics)`` pairs from :func:`~exporter.sources.fpm.decode.decode_frames`
                (``metrics`` "undecodable" or "invalid" for a message that is neither pass nor heartbeat).
            schema: The schema of one of these payloads, when sampled.
        """
        now, wall = self.monotonic(), self.clock()
        with self.lock:
            ep = self.endpoints[index]
            res = ep.results
            if schema is not None:
                ep.schema = schema
            ranks = self.ranks
            last = ep.last_seq
            lost = restarts = passes = beats = 0
            # Missing sequence numbers this batch can plausibly account for (see MAX_PASS_RATE).
            room = min(MAX_SEQUENCE_GAP, LOST_SLACK + MAX_PASS_RATE * max(0.0, now - ep.last_seq_at))
            for seq, m in messages:
                if seq is not None:
                    if last is not None:
                        gap = seq - last - 1
                        if gap < 0 or gap >= room:
                            restarts += 1
                        elif gap:
                            lost += gap
                            room -= gap
                    last = seq
                if m.__class__ is str:
                    res[m] += 1
                    continue
                r = ranks.get(m.dp_rank)
                if r is None:
                    if len(ranks) >= self.max_ranks:
                        res["invalid"] += 1
                        continue
                    r = ranks[m.dp_rank] = RankStats()
                r.last_message = now
                s = m.scheduled_requests
                npf, nd = s.num_prefill_requests, s.num_decode_requests
                wall_time = m.wall_time
                if not npf and not nd and wall_time == 0.0:  # SGLang's idle heartbeat (decode.is_heartbeat)
                    beats += 1
                    continue
                passes += 1
                if npf:
                    r.prefill_requests.observe(npf)
                    r.prefill_tokens.observe(s.sum_prefill_tokens)
                    r.add_prefill_kv(s.sum_prefill_kv_tokens, s.sum_prefill_tokens)
                    r.passes[2 if nd else 0] += 1
                elif nd:
                    r.passes[1] += 1
                else:
                    r.passes[3] += 1
                if nd:
                    r.decode_requests.observe(nd)
                    r.decode_kv_tokens += s.sum_decode_kv_tokens
                r.seconds.observe(wall_time)
                r.add_queued(m.queued_requests)
                r.last_pass_wall = wall
            if last is not None:
                ep.last_seq, ep.last_seq_at = last, now
            ep.restarts += restarts
            res["lost"] += lost
            res["ok"] += passes
            res["heartbeat"] += beats
            if passes or beats:
                ep.last_message = now
                ep.last_message_wall = wall

    def endpoint_up(self, index: int, now: float | None = None) -> bool:
        """True when endpoint ``index`` sent a pass or heartbeat within the timeout. Call under the lock."""
        last = self.endpoints[index].last_message
        now = self.monotonic() if now is None else now
        return last is not None and now - last <= self.timeout

    def rank_fresh(self, rank: RankStats, now: float) -> bool:
        """True when the scheduler sent a pass or heartbeat within the timeout. Call under the lock."""
        return now - rank.last_message <= self.timeout


__all__ = ["Buckets", "EndpointStats", "FpmStats", "MODES", "PREFILL_TOKENS_BUCKETS", "REQUESTS_BUCKETS",
           "RESULTS", "RankStats", "SECONDS_BUCKETS"]
