"""The state's second entry point: a run of scheduler lines aggregated column-wise (:class:`Run`).

The bulk path for recorded logs (:mod:`exporter.sources.log.bulk`) does not build one event per
line. Between two start-up lines (capacity, ``server_args``), which stay events and are applied by
:meth:`SchedulerStates.apply`, it gathers the ``Prefill``/``Decode`` lines, retractions, aborted
retractions and request time stats of each replica into columns (:class:`ReplicaRun`), and the
latest values of each scheduler. :func:`apply_run` applies such a run so that the state ends
exactly as if every line had been applied by :meth:`SchedulerStates.apply` in order, byte for byte
in what the collector serves:

* every count, sum and histogram goes through the counting rules of :mod:`.rules`, the functions the
  per-line path calls with one line's values: here with the run's columns, so that the rule is written
  once and the floats are summed in the same order with the same operations (histogram buckets are
  counted where the run was built, with the rules' :func:`~.rules.bucket_counts`);
* what depends on the state before the run (the replica's previous queue sample and chunked-prefill
  flag, the decode-log interval, the chunked-prefill size, a scheduler's tokens per running request
  before its first Decode line of the run) is read from the state when the run is applied;
* gauges take the scheduler's latest line of any replica (:func:`~.rules.stats_gauges`: the values a line sets, for both paths).

A run is applied only where the state would refuse none of its lines (:func:`applicable`: the
caps, impossible rank tags, a derived figure near the end of the value range); otherwise the caller
feeds its lines through the per-line path, which refuses exactly the lines the state refuses.
"""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass, field
from itertools import repeat
from operator import mul
from typing import Any

from ..events import DecodeBatch, Origin
from ..limits import MAX_REPLICAS, MAX_SCHEDULERS, MAX_VALUE, QUEUE_SAMPLE_MAX_GAP_SECONDS
from . import rules
from .state import SchedulerStates

#: Histograms of :class:`ReplicaCounters` a run fills, with the column each one observes.
RUN_HISTOGRAMS = (
    ("batch_size_decode", "running"),
    ("kv_usage_decode", "decode_top"),
    ("batch_size_prefill", "new_seq"),
    ("prefill_tokens", "new_token"),
    ("kv_usage_prefill", "prefill_top"),
    ("queue_wait", "queue_wait"),
)
_INT_COLUMNS = ("running", "new_seq", "new_token", "prefill_running", "queue", "retracted", "gained")
_FLOAT_COLUMNS = ("decode_top", "prefill_top", "queue_wait")


@dataclass(slots=True)
class ReplicaRun:
    """The lines of one replica within one run, as columns, in line order.

    Attributes:
        origin: The replica's identity (its lines' :class:`Origin` without their time).
        decode_lines / prefill_lines: ``Decode batch`` / ``Prefill batch`` lines.
        running: ``#running-req`` of each Decode line.
        decode_top: Largest device-pool usage of each Decode line that printed a usage.
        accept: ``accept len`` of each Decode line, 1.0 where it printed none or 0 (the factor of
            the decode-token estimate); ``None`` while no line printed one (every factor is 1.0).
        new_seq / new_token / prefill_running: ``#new-seq``, ``#new-token`` and ``#running-req`` of
            each Prefill line.
        cached_tokens / replay_tokens: Sums of ``#cached-token`` and ``#replay-token``.
        prefill_top: Largest device-pool usage of each Prefill line that printed a usage.
        queue_time / queue / queue_clock: Per stats line with ``#queue-req`` (both kinds): the line's
            own time (``None`` exactly for the wall clock), the value, and the clock (``log``,
            ``tod``, ``wall``: see ``SchedulerStates._integrate_queue``). :meth:`finish` keeps
            ``queue`` and replaces the other two with ``queue_steps`` and ``queue_ends``.
        queue_steps: The queue integral's steps between the run's own lines, in line order
            (filled by :meth:`finish`): ``#queue-req x min(gap, cap)`` of each line after the first
            whose clock is the previous line's and whose time is later, as
            ``SchedulerStates._integrate_queue`` computes them. They depend on nothing before the
            run (lines on the wall clock all read the run's one wall time, so two in a row add
            nothing); only their sum, which starts from the replica's integral, is left to
            :func:`apply_run`.
        queue_ends: ``((time, clock), (time, clock))`` of the run's first and last line with
            ``#queue-req`` (filled by :meth:`finish`; ``None`` without one): the first line's step
            from the replica's previous sample, and the sample the run leaves.
        retractions: Retraction lines; ``retracted``: their ``#retracted_reqs``; ``gained``:
            ``#new_tokens_gained`` of those that print it.
        estimated: Per retraction without ``#new_tokens_gained``, in order: ``(#retracted_reqs,
            tokens per running request)`` where the run knew the latter, or ``(#retracted_reqs,
            None)`` where the scheduler's value before the run applies.
        retract_aborts: ``retract_decode: aborted last request`` lines.
        queue_wait: ``queue_duration`` (s) of each request time-stats line with a non-negative one.
        void_lines: Request time-stats lines with a negative ``queue_duration``: admitted or refused
            like the others, they apply nothing.
        buckets: Per histogram of :data:`RUN_HISTOGRAMS`, non-cumulative bucket counts of its
            column (filled by :meth:`finish`).
        kv_tokens / kv_requests: Sums of the token count and ``#running-req`` of the Decode lines that
            print a token count and running requests (``SchedulerStates._decode``).
        peak_queue / peak_tokens: The largest ``#queue-req``, and the largest ``#running-req`` x
            ``accept len`` of a Decode line (filled by :meth:`finish`): the figures the state refuses
            a line for when they leave the value range (see :func:`in_range`).
    """

    origin: Origin
    decode_lines: int = 0
    running: Any = field(default_factory=list)
    decode_top: Any = field(default_factory=list)
    accept: Any = None
    prefill_lines: int = 0
    new_seq: Any = field(default_factory=list)
    new_token: Any = field(default_factory=list)
    prefill_running: Any = field(default_factory=list)
    cached_tokens: int = 0
    replay_tokens: int = 0
    prefill_top: Any = field(default_factory=list)
    queue_time: Any = field(default_factory=list)
    queue: Any = field(default_factory=list)
    queue_clock: Any = field(default_factory=list)
    queue_steps: Any = None
    queue_ends: Any = None
    retractions: int = 0
    retracted: Any = field(default_factory=list)
    gained: Any = field(default_factory=list)
    estimated: list[tuple[int, float | None]] = field(default_factory=list)
    retract_aborts: int = 0
    queue_wait: Any = field(default_factory=list)
    void_lines: int = 0
    buckets: dict[str, list[int]] = field(default_factory=dict)
    peak_queue: int = 0
    peak_tokens: float = 0.0
    kv_tokens: int = 0
    kv_requests: int = 0

    def accept_len(self, value: float) -> None:
        """Note the ``accept len`` of the Decode line just added to :attr:`running`."""
        if self.accept is None:
            self.accept = [1.0] * (len(self.running) - 1)
        self.accept.append(value or 1.0)

    def finish(self, bounds: dict[str, tuple[float, ...]]) -> None:
        """Count the lines, count each histogram's column into its buckets (``bounds``: histogram ->
        upper bounds), and pack the columns into arrays (cheap to send to another process)."""
        self.decode_lines = len(self.running)
        self.prefill_lines = len(self.new_seq)
        self.peak_queue = max(self.queue, default=0)
        accept = self.accept if self.accept is not None else repeat(1.0)
        self.peak_tokens = max(map(mul, self.running, accept), default=0.0)
        for name, column in RUN_HISTOGRAMS:
            values = getattr(self, column)
            if values:
                self.buckets[name] = rules.bucket_counts(bounds[name], values)
        for name in _INT_COLUMNS:
            setattr(self, name, array("q", getattr(self, name)))
        for name in _FLOAT_COLUMNS:
            setattr(self, name, array("d", getattr(self, name)))
        if self.accept is not None:
            self.accept = array("d", self.accept)
        self._queue_steps()

    def _queue_steps(self) -> None:
        """Fill :attr:`queue_steps` and :attr:`queue_ends` from the queue columns (then dropped).

        The loop is ``SchedulerStates._integrate_queue`` line by line, in local variables: on
        CPython 3.11 it is about three times cheaper than the same steps as a chain of C-level
        ``map``/``compress`` passes (one pass per operation, ``min`` the dearest), and where runs are
        built on worker processes it runs there rather than in the process that applies them.
        """
        times, clocks = self.queue_time, self.queue_clock
        steps = array("d")
        if self.queue:
            queue_step = rules.queue_step
            append = steps.append
            lines = zip(self.queue, times, clocks)
            last_q, last_t, last_c = next(lines)
            for q, t, clock in lines:
                if clock == last_c and t is not None:  # wall clock (t None) twice: the same time
                    step = queue_step(last_q, last_t, t, clock)
                    if step is not None:
                        append(step)
                last_q, last_t, last_c = q, t, clock
            self.queue_ends = ((times[0], clocks[0]), (last_t, last_c))
        self.queue_steps = steps
        self.queue_time = self.queue_clock = None


@dataclass(slots=True)
class Run:
    """One run: its replicas in the order their first line appeared, and each scheduler's latest values.

    Attributes:
        replicas: The replicas' columns.
        latest: Scheduler key (:meth:`SchedulerStates.key`) -> ``{(table, name): value}`` of the
            scheduler's latest line that set each: tables ``gauge`` (``SchedulerState.gauges``),
            ``pool`` (``kv_pools``), ``pd`` (``pd_queues``) and ``mean``
            (``mean_tokens_per_running_req``).
        stats_schedulers: Schedulers with ``Prefill``/``Decode`` lines in the run (their
            ``last_stats_wall`` moves).
    """

    replicas: list[ReplicaRun] = field(default_factory=list)
    latest: dict[str, dict[tuple[str, str], Any]] = field(default_factory=dict)
    stats_schedulers: set[str] = field(default_factory=set)

    def line_counts(self) -> Counter:
        """The run's lines by kind (``decode``, ``prefill``, ``retraction``, ``retract_abort``,
        ``req_time_stats``; request time stats with a negative duration, which apply nothing, aside)."""
        counts: Counter = Counter()
        for rr in self.replicas:
            counts["decode"] += rr.decode_lines
            counts["prefill"] += rr.prefill_lines
            counts["retraction"] += rr.retractions
            counts["retract_abort"] += rr.retract_aborts
            counts["req_time_stats"] += len(rr.queue_wait) + rr.void_lines
        return counts


def applicable(states: SchedulerStates, run: Run) -> bool:
    """True when :func:`apply_run` gives what applying the run's lines one by one gives: the state
    would refuse none of them.

    * Every replica fits under the caps even if all are new, and none carries a rank the state
      refuses (:meth:`SchedulerStates.refusal`; a run holds no start-up line, which ends its block's
      part, so what the state knows of the ranks stands while the run is applied).
    * No derived figure comes near the end of the value range (decode tokens, the queue integral's
      step, a recompute estimate: the state refuses a line whose figure would leave it).
    """
    new_schedulers: set[str] = set()
    new_replicas = 0
    for rr in run.replicas:
        origin = rr.origin
        key = SchedulerStates.key(origin)
        s = states.schedulers.get(key)
        if s is None:
            new_schedulers.add(key)
            new_replicas += 1
        elif origin.replica not in s.replicas:
            new_replicas += 1
        if states.refusal(origin, DecodeBatch) is not None:
            return False
    if (len(states.schedulers) + len(new_schedulers) > MAX_SCHEDULERS
            or states.replica_count + new_replicas > MAX_REPLICAS):
        return False
    for rr in run.replicas:
        interval = states.interval_for(rr.origin.stage)[0]
        if rr.peak_queue * QUEUE_SAMPLE_MAX_GAP_SECONDS >= _NEAR_MAX or rr.peak_tokens * interval >= _NEAR_MAX:
            return False
        s = states.schedulers.get(SchedulerStates.key(rr.origin))
        before = s.mean_tokens_per_running_req if s is not None else None
        for reqs, mean in rr.estimated:
            mean = before if mean is None else mean
            if mean is not None and reqs * mean >= _NEAR_MAX:
                return False
    return True


#: A figure this close to :data:`~exporter.limits.MAX_VALUE` may be refused by the state, depending
#: on the rounding of the product it comes from: such a run is read line by line instead.
_NEAR_MAX = MAX_VALUE * (1 - 1e-9)


def apply_run(states: SchedulerStates, run: Run, wall: float) -> None:
    """Apply one run (the caller holds the store's lock and has checked :func:`applicable`) through
    the counting rules of :mod:`.rules`, which the per-line path calls with one line each.

    Args:
        states: The state.
        run: The run.
        wall: Wall-clock time (s since epoch) the lines were read: the time of lines without one of
            their own, and the schedulers' ``last_stats_wall``.
    """
    mixed = states.mixed_chunk()
    for rr in run.replicas:
        if not (rr.decode_lines or rr.prefill_lines or rr.retractions or rr.retract_aborts or rr.queue_wait):
            continue  # only lines that apply nothing (request time stats with a negative duration)
        sched = states.scheduler(SchedulerStates.key(rr.origin))
        r = sched.replica(rr.origin.replica)
        stage, b = rr.origin.stage, rr.buckets
        rules.count_decode(r, states.interval_for(stage)[0], rr.running, rr.accept, rr.decode_top,
                           rr.kv_tokens, rr.kv_requests, b)
        rules.count_prefill(r, rr.new_seq, rr.new_token, rr.prefill_running, rr.replay_tokens, rr.cached_tokens,
                            rr.prefill_top, states.chunked_prefill_size(sched, stage), mixed, b)
        if rr.retractions:
            before = sched.mean_tokens_per_running_req
            estimates = [e for e in (rules.recompute_estimate(reqs, before if mean is None else mean)
                                     for reqs, mean in rr.estimated) if e is not None]
            rules.count_retractions(r, rr.retracted, rr.gained, estimates)
        r.retract_aborts += rr.retract_aborts
        rules.observe(r.queue_wait, rr.queue_wait, b.get("queue_wait"))
        integrate_run_queue(r, rr, wall)
    for key, values in run.latest.items():
        s = states.schedulers.get(key)
        if s is not None:
            rules.set_latest(s, values.items())
    for key in run.stats_schedulers:
        states.schedulers[key].last_stats_wall = wall


def integrate_run_queue(r, rr: ReplicaRun, wall: float) -> None:
    """A finished run's ``#queue-req`` samples into replica counters ``r`` (:func:`.rules.integrate_queue`):
    the first sample's step from the replica's previous one, then the run's own steps; lines without a
    time of their own read ``wall``."""
    if not rr.queue:
        return
    (t, clock), (last_t, last_c) = rr.queue_ends
    rules.integrate_queue(r, (wall if t is None else t, clock), rr.queue_steps,
                          (wall if last_t is None else last_t, last_c), rr.queue[-1])
