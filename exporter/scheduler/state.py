"""Scheduler state: applies parsed events to counters, histograms and last-seen gauges.

No Prometheus imports here, and no lock: :class:`exporter.scheduler.store.SchedulerStore` guards
this state, the sources write it through the store's ``apply`` and the collector reads the store's
snapshot at scrape time.

The counting rule (the scheduler's story must not be inflated by replicas):

* A scheduler is identified by its stage and DP rank: ``(Origin.stage, Origin.dp_rank)``; the stage is
  SGLang Omni's pipeline stage (``thinker``, ``talker_ar``), ``""`` for plain SGLang, and the DP rank
  is ``"0"`` without a DP tag.
* Every other rank tag (PP, ATTN_CP, MOE_DP, TP, EP) marks a *replica* of that scheduler that prints
  the same lines: SGLang prints retraction lines on every TP rank, and stats lines on every pipeline
  stage and context-parallel rank.
* Each counter and histogram bucket of a scheduler is the **maximum over its replicas** of that
  replica's own cumulative value. A retraction printed by 8 TP ranks counts once, and a sidecar that
  sees only ranks 8-15 of a 16-rank group still counts right.
* Gauges take the latest line of any replica.

What is refused (:meth:`SchedulerStates.apply` returns the reason, :data:`REJECT_REASONS`):

* ``rank``: a rank tag the server cannot have. A DP rank must be below the largest ``dp_size`` of
  the log's ``server_args`` lines, or at most the highest DP rank that printed a start-up line
  (capacity, ``KV Cache is allocated``: a router-managed DP server prints ``dp_size=1`` and tags its
  lines ``DP<rank>``); without ``server_args``, below :data:`MAX_SCHEDULERS`. So garbage tags can
  never take the slots of real ranks. PP, ATTN_CP, MOE_DP, TP and EP tags are bounded the same way
  by their sizes where ``server_args`` prints them.
* ``schedulers`` / ``replicas``: a new scheduler or replica beyond :data:`MAX_SCHEDULERS` /
  :data:`MAX_REPLICAS`.
* ``range``: a line whose derived figure would leave the value range of a field
  (:func:`~exporter.limits.in_value_range`): decode tokens (``#running-req`` x interval x
  ``accept len``), the queue integral's worst step (``#queue-req`` x 60 s) or a recompute estimate.
  One such line would otherwise leave a counter so large that later increments vanish in its
  rounding (its rate would read 0 until restart).
"""

from __future__ import annotations

import dataclasses

import time
from dataclasses import dataclass, field

from ..events import (
    OMNI_PIPELINE_EVENTS,
    Capacity,
    CudaGraphCapture,
    DecodeBatch,
    Event,
    KvAllocation,
    Origin,
    PrefillBatch,
    ReqTimeStats,
    RetractAbort,
    Retraction,
    ServerArgs,
)
from .. import metrics
from ..limits import (
    DEFAULT_DECODE_LOG_INTERVAL,
    MAX_REPLICAS,
    MAX_SCHEDULERS,
    MAX_VALUE,
    QUEUE_SAMPLE_MAX_GAP_SECONDS,
)
from .histogram import Histogram
from . import rules
from .pipeline import PipelineState

#: A scheduler's identity: ``(stage, dp_rank)``, in the order of :data:`exporter.metrics.SCHEDULER_LABELS`.
Key = tuple[str, str]

#: Bucket bounds, declared with their metrics in the metric table.
BATCH_SIZE_BUCKETS = metrics.get("sglang_scheduler_batch_size").buckets
KV_USAGE_BUCKETS = metrics.get("sglang_scheduler_kv_usage_observed_ratio").buckets
PREFILL_TOKEN_BUCKETS = metrics.get("sglang_scheduler_prefill_batch_tokens").buckets
QUEUE_WAIT_BUCKETS = metrics.get("sglang_scheduler_queue_wait_seconds").buckets


@dataclass(slots=True)
class ReplicaCounters:
    """One replica's own cumulative counters and histograms (see the module docstring).

    Counter units: batches, steps, events, requests and tokens are counts; ``queue_request_seconds``
    is request-seconds (the integral of ``#queue-req`` over time).
    """

    prefill_batches: int = 0
    decode_lines: int = 0
    decode_steps: int = 0
    retractions: int = 0
    retracted_requests: int = 0
    retract_aborts: int = 0
    retraction_freed_tokens: int = 0
    recomputed_tokens_gained: float = 0.0
    recomputed_tokens_estimated: float = 0.0
    prefill_computed_tokens: int = 0
    prefill_cached_tokens: int = 0
    decode_tokens: float = 0.0
    decode_kv_tokens: int = 0
    decode_kv_requests: int = 0
    admitted_requests: int = 0
    queue_request_seconds: float = 0.0
    batch_size_prefill: Histogram = field(default_factory=lambda: Histogram(BATCH_SIZE_BUCKETS))
    batch_size_decode: Histogram = field(default_factory=lambda: Histogram(BATCH_SIZE_BUCKETS))
    kv_usage_prefill: Histogram = field(default_factory=lambda: Histogram(KV_USAGE_BUCKETS))
    kv_usage_decode: Histogram = field(default_factory=lambda: Histogram(KV_USAGE_BUCKETS))
    prefill_tokens: Histogram = field(default_factory=lambda: Histogram(PREFILL_TOKEN_BUCKETS))
    queue_wait: Histogram = field(default_factory=lambda: Histogram(QUEUE_WAIT_BUCKETS))
    # Integration state of the time-weighted queue counter.
    last_queue: int | None = None
    last_queue_time: float | None = None
    last_queue_clock: str = ""
    # Whether the previous Prefill batch of this replica ended in a chunk (its last request continues).
    prev_prefill_chunked: bool = False


#: Counter attributes of :class:`ReplicaCounters`, in exposition order.
COUNTER_FIELDS = (
    "prefill_batches", "decode_lines", "decode_steps", "retractions", "retracted_requests",
    "retract_aborts", "retraction_freed_tokens", "recomputed_tokens_gained",
    "recomputed_tokens_estimated", "prefill_computed_tokens", "prefill_cached_tokens",
    "decode_tokens", "decode_kv_tokens", "decode_kv_requests", "admitted_requests", "queue_request_seconds",
)
#: Histogram attributes of :class:`ReplicaCounters`, and their bounds.
HISTOGRAM_BOUNDS = {
    "batch_size_prefill": BATCH_SIZE_BUCKETS, "batch_size_decode": BATCH_SIZE_BUCKETS,
    "kv_usage_prefill": KV_USAGE_BUCKETS, "kv_usage_decode": KV_USAGE_BUCKETS,
    "prefill_tokens": PREFILL_TOKEN_BUCKETS, "queue_wait": QUEUE_WAIT_BUCKETS,
}
HISTOGRAM_FIELDS = tuple(HISTOGRAM_BOUNDS)

#: Why :meth:`SchedulerStates.apply` refused an event (the ``reason`` label of
#: ``sglang_exporter_log_rejected_lines_total``; ``error`` is an event that raised while applied).
REJECT_REASONS = ("rank", "schedulers", "replicas", "range", "error")
#: Events printed once at a scheduler's start-up: the ranks they carry are real ranks.
_STARTUP = (Capacity, KvAllocation)


@dataclass(slots=True)
class SchedulerState:
    """State of one scheduler (one stage and DP rank).

    Attributes:
        replicas: Per-replica counters, keyed by ``Origin.replica``.
        gauges: Latest value per gauge name from the latest stats line of any replica.
        kv_pools: Latest ``token usage`` per pool (``kv``, ``full``, ``swa``, ``mamba``, ``gpu``, ``cpu``).
        pd_queues: Latest PD queue lengths by queue name.
        capacity: The scheduler's own start-up capacity line, if it printed one.
        kv_allocation: The scheduler's latest ``KV Cache is allocated`` line, if it printed one.
        mean_tokens_per_running_req: ``#token / #running-req`` of the latest Decode line: the basis of
            the recompute estimate for retraction lines without ``#new_tokens_gained``.
        last_stats_wall: Wall-clock time (s since epoch) the latest Prefill/Decode line was read.
    """

    replicas: dict[str, ReplicaCounters] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    kv_pools: dict[str, float] = field(default_factory=dict)
    pd_queues: dict[str, float] = field(default_factory=dict)
    capacity: Capacity | None = None
    kv_allocation: KvAllocation | None = None
    mean_tokens_per_running_req: float | None = None
    last_stats_wall: float | None = None

    def replica(self, key: str) -> ReplicaCounters:
        r = self.replicas.get(key)
        if r is None:
            r = self.replicas[key] = ReplicaCounters()
        return r

    def counter(self, name: str) -> float:
        """A counter's value for the scheduler: the maximum over replicas."""
        return max((getattr(r, name) for r in self.replicas.values()), default=0)

    def histogram(self, name: str) -> tuple[tuple[float, ...], list[int], float]:
        """A histogram for the scheduler: per-bucket maximum over replicas of cumulative counts.

        Returns:
            ``(bounds, cumulative_counts_with_inf_last, sum)``; ``sum`` is the maximum of the
            replicas' sums. A scheduler without replicas yet (it printed only a start-up line) has
            every bound at 0, so that ``rate()`` sees its first observation.
        """
        hists = [getattr(r, name) for r in self.replicas.values()]
        bounds = HISTOGRAM_BOUNDS[name]
        best = [0] * (len(bounds) + 1)
        total = 0.0
        for h in hists:
            for i, c in enumerate(h.cumulative()):
                if c > best[i]:
                    best[i] = c
            total = max(total, h.total)
        return bounds, best, total


def _queue_in_range(queue: int | None) -> bool:
    """Whether the queue integral's largest step from this ``#queue-req`` (x the 60 s gap cap) is in range."""
    return queue is None or queue * QUEUE_SAMPLE_MAX_GAP_SECONDS < MAX_VALUE


def _replica_tags(replica: str) -> list[tuple[str, str]]:
    """``"PP1 TP03"`` -> ``[("PP", "1"), ("TP", "03")]``: the tags of ``Origin.replica``."""
    out = []
    for token in replica.split():
        tag = token.rstrip("0123456789")
        out.append((tag, token[len(tag):]))
    return out



class SchedulerStates:
    """All schedulers seen in the log (by :data:`Key`), server-wide settings read from start-up lines,
    and SGLang Omni's pipeline facts (:attr:`pipeline`).

    Args:
        decode_log_interval: Decode steps per Decode line when the log has no ``server_args`` line
            (``--sglang.decode-log-interval``); a ``decode_log_interval=`` in ``server_args`` wins.
        clock: Wall-clock source (seconds since epoch), injectable for tests.
        decode_log_interval_source: Where ``decode_log_interval`` came from: ``setting`` (the user
            gave it) or ``default`` (SGLang's default, assumed): what
            :attr:`decode_log_interval_source` says when the log gives none.
        stage_decode_log_intervals: SGLang Omni stage -> its decode steps per Decode line
            (``--sglang.stage-decode-log-intervals``; Omni's ``--<stage>.engine.decode_log_interval``),
            in effect for that stage before ``decode_log_interval`` (:meth:`interval_for`).
    """

    def __init__(self, decode_log_interval: int = DEFAULT_DECODE_LOG_INTERVAL, clock=time.time,
                 chunked_prefill_size: int | None = None, decode_log_interval_source: str = "setting",
                 stage_decode_log_intervals: dict[str, int] | None = None):
        self.configured_decode_log_interval_source = decode_log_interval_source
        self.stage_decode_log_intervals = dict(stage_decode_log_intervals or {})
        self.configured_chunked_prefill_size = chunked_prefill_size
        self.schedulers: dict[Key, SchedulerState] = {}
        self.configured_decode_log_interval = decode_log_interval
        self.server_args: ServerArgs | None = None
        #: The latest start-up capacity line, and ``KV Cache is allocated`` line, per stage (with DP
        #: attention only DP0 prints them; plain SGLang's stage is ``""``).
        self.capacities: dict[str, Capacity] = {}
        self.kv_allocations: dict[str, KvAllocation] = {}
        self.pipeline = PipelineState()
        #: Largest size per rank tag over every ``server_args`` line (several servers may share a glob).
        self.rank_sizes: dict[str, int] = {}
        #: Highest value per rank tag seen on a start-up line (:data:`_STARTUP`).
        self.startup_ranks: dict[str, int] = {}
        self._clock = clock

    @property
    def decode_log_interval(self) -> int:
        """Decode steps per Decode line in effect: ``server_args`` value, else the setting."""
        sa = self.server_args
        if sa is not None and sa.decode_log_interval:
            return sa.decode_log_interval
        return self.configured_decode_log_interval

    @property
    def decode_log_interval_source(self) -> str:
        """Where :attr:`decode_log_interval` comes from: ``server_args`` (the log), ``setting``
        (``--sglang.decode-log-interval``) or ``default`` (nothing says: SGLang's default assumed)."""
        sa = self.server_args
        if sa is not None and sa.decode_log_interval:
            return "server_args"
        return self.configured_decode_log_interval_source

    def interval_for(self, stage: str) -> tuple[int, str]:
        """``(decode steps per Decode line, source)`` in effect for ``stage``: the ``server_args``
        value (``server_args``), else the stage's own setting (``setting``), else
        :attr:`decode_log_interval` with its source (``setting`` or ``default``: assumed)."""
        sa = self.server_args
        if sa is not None and sa.decode_log_interval:
            return sa.decode_log_interval, "server_args"
        own = self.stage_decode_log_intervals.get(stage)
        if own is not None:
            return own, "setting"
        return self.configured_decode_log_interval, self.configured_decode_log_interval_source

    @property
    def capacity(self) -> Capacity | None:
        """The latest start-up capacity line of plain SGLang's schedulers (stage ``""``), or None."""
        return self.capacities.get("")

    @property
    def kv_allocation(self) -> KvAllocation | None:
        """The latest ``KV Cache is allocated`` line of plain SGLang's schedulers (stage ``""``), or None."""
        return self.kv_allocations.get("")

    def mixed_chunk(self) -> bool:
        """Whether the latest ``server_args`` line set ``enable_mixed_chunk=True``."""
        return self.server_args is not None and self.server_args.enable_mixed_chunk

    def chunked_prefill_size(self, sched: SchedulerState, stage: str = "") -> int | None:
        """``chunked_prefill_size`` from the capacity line (the scheduler's, else its stage's latest),
        else ``server_args``, else the setting (``--sglang.chunked-prefill-size``); None if unknown."""
        for cap in (sched.capacity, self.capacities.get(stage)):
            if cap is not None and cap.chunked_prefill_size and cap.chunked_prefill_size > 0:
                return cap.chunked_prefill_size
        sa = self.server_args
        if sa is not None and sa.chunked_prefill_size:
            return sa.chunked_prefill_size
        return self.configured_chunked_prefill_size

    def scheduler(self, key: Key) -> SchedulerState:
        """The state of scheduler ``(stage, dp_rank)``, created on first use."""
        s = self.schedulers.get(key)
        if s is None:
            s = self.schedulers[key] = SchedulerState()
        return s

    @property
    def replica_count(self) -> int:
        """Replicas over all schedulers (bounded by :data:`MAX_REPLICAS`)."""
        return sum(len(s.replicas) for s in self.schedulers.values())

    def effective_capacity(self, sched: SchedulerState, stage: str = "") -> Capacity | None:
        """The scheduler's own capacity line, else the latest one of any scheduler of its stage.

        With DP attention only TP0 (of DP0) prints it, yet every DP rank has the same capacity.
        """
        return sched.capacity or self.capacities.get(stage)

    def capacity_in_effect(self, sched: SchedulerState, stage: str = "") -> Capacity | None:
        """:meth:`effective_capacity`, else a capacity of ``#tokens`` only from the ``KV Cache is
        allocated`` line (the scheduler's own, else the latest of any scheduler of its stage): what
        the capacity gauges show. SGLang Omni's stages never print the capacity line, only the KV line.
        A ``Post-capture KV sizing`` line (SGLang 0.5.21+) gives the pool actually backed, which wins
        over the capacity line's ``max_total_num_tokens``.
        """
        cap = self.effective_capacity(sched, stage)
        alloc = sched.kv_allocation or self.kv_allocations.get(stage)
        if cap is not None:
            if alloc is not None and alloc.post_capture and alloc.tokens != cap.max_total_num_tokens:
                return dataclasses.replace(cap, max_total_num_tokens=alloc.tokens)  # the pool backed
            return cap
        return None if alloc is None else Capacity(alloc.origin, alloc.tokens)

    @staticmethod
    def key(origin: Origin) -> Key:
        """The key of the scheduler that printed a line (:attr:`schedulers`): ``(stage, dp_rank)``."""
        return (origin.stage, origin.dp_rank)

    def refusal(self, origin: Origin, kind: type) -> str | None:
        """Why an event of type ``kind`` printed by ``origin`` would be refused before it is applied:
        ``rank``, ``schedulers`` or ``replicas`` (module docstring); ``None`` when it would not be.

        :meth:`apply` asks this first; the bulk path's runs (:mod:`.runs`) ask it once per replica.
        """
        s = self.schedulers.get(self.key(origin))
        if kind is not ServerArgs:  # every other event belongs to a scheduler, and most to a replica
            if s is None:
                if not self._rank_possible("DP", origin.dp_rank, kind in _STARTUP):
                    return "rank"
                if len(self.schedulers) >= MAX_SCHEDULERS:
                    return "schedulers"
            if kind not in _STARTUP and (s is None or origin.replica not in s.replicas):
                for tag, value in _replica_tags(origin.replica):
                    if not self._rank_possible(tag, value, False):
                        return "rank"
                if self.replica_count >= MAX_REPLICAS:
                    return "replicas"
        return None

    def apply(self, event: Event, wall: float | None = None) -> str | None:
        """Apply one event.

        Args:
            event: A parsed event (never :class:`~exporter.sources.log.parser.Malformed`).
            wall: Wall-clock time the line was read; defaults to the clock.

        Returns:
            ``None`` when applied; else why it was refused, one of :data:`REJECT_REASONS` (see the
            module docstring): an impossible rank tag, a new scheduler or replica beyond the caps
            (garbage must not grow the series or the memory without bound), or a derived figure out
            of range. A refused event changes nothing.
        """
        kind = type(event)
        if kind in OMNI_PIPELINE_EVENTS or kind is CudaGraphCapture:  # the pipeline's, no scheduler state
            return None if self.pipeline.apply(event) else "schedulers"
        origin = event.origin
        key = (origin.stage, origin.dp_rank)
        reason = self.refusal(origin, kind)
        if reason is not None:
            return reason
        s = self.schedulers.get(key)
        if wall is None:
            wall = self._clock()
        if kind is DecodeBatch:
            return self._decode(event, wall)
        if kind is PrefillBatch:
            return self._prefill(event, wall)
        if kind is Retraction:
            return self._retraction(event, s)
        if kind is Capacity:
            self.capacities[origin.stage] = event
            sched = self.scheduler(key)
            sched.capacity = event
            self._note_startup_ranks(origin)
            # A start-up line: the scheduler (re)starts with an empty queue and no chunk in flight, so
            # nothing queued before it is integrated across the restart (a restarted server, the demo's
            # loop seam).
            for r in sched.replicas.values():
                r.last_queue = r.last_queue_time = None
                r.prev_prefill_chunked = False
        elif kind is KvAllocation:  # SGLang Omni's stages: the only statement of their KV capacity
            self.kv_allocations[origin.stage] = event
            self.scheduler(key).kv_allocation = event
            self._note_startup_ranks(origin)
        elif kind is ServerArgs:
            self.server_args = event
            for tag, size in event.rank_sizes.items():
                if size > self.rank_sizes.get(tag, 0):
                    self.rank_sizes[tag] = size
        elif kind is ReqTimeStats:
            if event.queue_duration >= 0:
                rules.observe(self.scheduler(key).replica(origin.replica).queue_wait, (event.queue_duration,))
        elif kind is RetractAbort:
            self.scheduler(key).replica(origin.replica).retract_aborts += 1
        return None

    # -- what is refused -------------------------------------------------------------------------

    def _rank_possible(self, tag: str, value: str, startup: bool) -> bool:
        """Whether a new scheduler or replica may carry rank ``value`` of ``tag`` (module docstring).

        A start-up line may name any DP rank below :data:`MAX_SCHEDULERS`: it is what makes a rank
        real. A value that is not a plain number (no tag of SGLang's) is not bounded here.
        """
        if not (value.isdigit() and value.isascii()):
            return True
        rank = int(value)
        if tag == "DP" and rank >= MAX_SCHEDULERS:
            return False
        size = self.rank_sizes.get(tag)
        if startup or size is None:
            return True
        return rank < size or rank <= self.startup_ranks.get(tag, -1)

    def _note_startup_ranks(self, origin: Origin) -> None:
        """Raise the highest real rank per tag from a start-up line's tags."""
        ranks = self.startup_ranks
        for tag, value in (("DP", origin.dp_rank), *_replica_tags(origin.replica)):
            if value.isdigit() and value.isascii() and int(value) > ranks.get(tag, -1):
                ranks[tag] = int(value)

    # -- per kind: the rules are :mod:`.rules`', called with one line's values ---------------------

    def _decode(self, ev: DecodeBatch, wall: float) -> str | None:
        interval = self.interval_for(ev.origin.stage)[0]
        running = ev.running_req
        accept = ev.accept_len or 1.0
        if not (next(rules.decode_tokens((running,), interval, (accept,))) < MAX_VALUE
                and _queue_in_range(ev.queue_req)):
            return "range"
        s = self.scheduler((ev.origin.stage, ev.origin.dp_rank))
        r = s.replica(ev.origin.replica)
        top = ev.kv.max_device_ratio
        used = ev.kv.used_tokens
        counted = used is not None and running > 0
        rules.count_decode(r, interval, (running,), (accept,), () if top is None else (top,),
                           used if counted else 0, running if counted else 0)
        self._stats_line(s, r, ev, wall, top)
        return None

    def _prefill(self, ev: PrefillBatch, wall: float) -> str | None:
        if not _queue_in_range(ev.queue_req):
            return "range"
        s = self.scheduler((ev.origin.stage, ev.origin.dp_rank))
        r = s.replica(ev.origin.replica)
        top = ev.kv.max_device_ratio
        rules.count_prefill(r, (ev.new_seq,), (ev.new_token,), (ev.running_req,), ev.replay_token or 0,
                            ev.cached_token or 0, () if top is None else (top,),
                            self.chunked_prefill_size(s, ev.origin.stage), self.mixed_chunk())
        self._stats_line(s, r, ev, wall, top)
        return None

    @staticmethod
    def _stats_line(s: SchedulerState, r: ReplicaCounters, ev: PrefillBatch | DecodeBatch, wall: float,
                    top: float | None) -> None:
        """A stats line's queue sample and latest values (``top``: ``ev.kv.max_device_ratio``)."""
        if ev.queue_req is not None:
            at = queue_clock(ev.origin, wall)
            rules.integrate_queue(r, at, (), at, ev.queue_req)
        rules.set_latest(s, rules.stats_gauges(ev, top))
        s.last_stats_wall = wall

    def _retraction(self, ev: Retraction, s: SchedulerState | None) -> str | None:
        estimate = None
        if ev.new_tokens_gained is None:
            estimate = rules.recompute_estimate(ev.retracted_reqs, s.mean_tokens_per_running_req if s else None)
            if estimate is not None and not estimate < MAX_VALUE:
                return "range"
        s = self.scheduler((ev.origin.stage, ev.origin.dp_rank))
        r = s.replica(ev.origin.replica)
        gained = () if ev.new_tokens_gained is None else (ev.new_tokens_gained,)
        rules.count_retractions(r, (ev.retracted_reqs,), gained, () if estimate is None else (estimate,))
        if ev.new_token_ratio_after is not None:
            s.gauges["new_token_ratio"] = ev.new_token_ratio_after
        return None


def queue_clock(origin: Origin, wall: float) -> tuple[float, str]:
    """``(time, clock)`` of a ``#queue-req`` sample: the line's own time stamp (``log``; ``tod`` for a
    time-of-day prefix), so that a recorded log integrates over its own time, else the wall-clock
    read time (``wall``)."""
    if origin.log_time is not None:
        return origin.log_time, ("tod" if origin.time_of_day_only else "log")
    return wall, "wall"
