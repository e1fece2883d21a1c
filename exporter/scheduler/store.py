"""The one interface between the sources and the scheduler state: ``apply`` to write, ``snapshot`` to read.

Every source that knows something about a scheduler (the log today; the per-forward-pass stream and
SGLang Omni's endpoints next) parses its input into typed events (:mod:`exporter.events`) and hands
them to :meth:`SchedulerStore.apply`; nothing else writes the state. Collectors read it through
:meth:`SchedulerStore.snapshot`, which copies plain values under the lock, so that building metric
families and encoding text happen outside it and a scrape holds up a source only for the copy.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..events import Capacity, Event
from .runs import Run, applicable, apply_run
from .state import COUNTER_FIELDS, HISTOGRAM_BOUNDS, HISTOGRAM_FIELDS, SchedulerState, SchedulerStates

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HistogramData:
    """A histogram of one scheduler at snapshot time (per-bucket maximum over its replicas).

    Attributes:
        bounds: Upper bounds (``le``), without ``+Inf``.
        cumulative: Cumulative counts per bound, ``+Inf`` (the observation count) last.
        sum: Sum of the observations (maximum over the replicas' sums).
    """

    bounds: tuple[float, ...]
    cumulative: tuple[int, ...]
    sum: float


@dataclass(frozen=True, slots=True)
class SchedulerView:
    """One scheduler as a collector sees it: plain values copied under the store's lock.

    Attributes:
        identity: The scheduler's label values, in the order of
            :data:`exporter.metrics.SCHEDULER_LABELS`: ``(stage, dp_rank)``, the stage ``""`` for
            plain SGLang.
        counter: :data:`~exporter.scheduler.state.COUNTER_FIELDS` -> value (maximum over replicas).
        histogram: :data:`~exporter.scheduler.state.HISTOGRAM_FIELDS` -> :class:`HistogramData`.
        latest: Latest-line values: the gauges of ``SchedulerState.gauges`` by key, plus
            ``kv_pools`` (pool -> usage ratio) and ``pd_queues`` (queue -> requests). A collector
            withholds them once the scheduler has been idle too long.
        capacity: The start-up capacity in effect (:meth:`SchedulerStates.capacity_in_effect`): the
            capacity line, else ``#tokens`` of a ``KV Cache is allocated`` line (an SGLang Omni stage's
            own, since Omni never prints the capacity line).
        decode_log_interval: Decode steps per Decode line in effect.
        decode_log_interval_source: Where it comes from: ``server_args``, ``setting`` or ``default``
            (:attr:`SchedulerStates.decode_log_interval_source`).
        last_stats_wall: Wall-clock time (s since epoch) the latest Prefill/Decode line was read.
    """

    identity: tuple[str, ...]
    counter: dict[str, float]
    histogram: dict[str, HistogramData]
    latest: dict[str, Any]
    capacity: Capacity | None
    decode_log_interval: int
    last_stats_wall: float | None
    decode_log_interval_source: str = "setting"

    @property
    def decode_log_interval_by_source(self) -> dict[str, int]:
        """``{source: interval}``: the interval in effect under the name of its source (one series)."""
        return {self.decode_log_interval_source: self.decode_log_interval}


@dataclass(frozen=True, slots=True)
class SchedulerSnapshot:
    """Every scheduler at one instant, ordered by identity (stage, then rank 2 before rank 10).

    Attributes:
        schedulers: The schedulers' views.
        generation: :attr:`SchedulerStore.generation` when it was taken: two snapshots with the same
            generation hold the same values.
    """

    schedulers: tuple[SchedulerView, ...]
    generation: int = 0


class SchedulerStore:
    """The scheduler state behind one lock; shared by the sources (writers) and the collectors.

    Args:
        states: The state to guard (a fresh :class:`SchedulerStates` by default).
        assumed_interval_level: Logging level of the once-per-stage notice that decode steps rest on
            an assumed ``decode_log_interval`` (WARNING; the demo, whose log is known, says it at INFO).

    Attributes:
        states: The guarded state. Read it directly only while holding :attr:`lock` (tests,
            the offline report, which has no concurrent reader).
        lock: Held while events are applied and while a snapshot's raw values are copied.
        generation: Bumped by every :meth:`apply` and :meth:`apply_run` (under the lock), so that a
            collector can tell that nothing changed since its last snapshot without taking one.
    """

    def __init__(self, states: SchedulerStates | None = None, assumed_interval_level: int = logging.WARNING):
        self.states = states if states is not None else SchedulerStates()
        self._assumed_interval_level = assumed_interval_level
        self.lock = threading.Lock()
        self.generation = 0
        self._warned_interval: set[str] = set()  # stages warned of an assumed decode_log_interval

    def apply(self, events: Sequence[Event], wall: float) -> list[tuple[Event, str]]:
        """Apply events in order, atomically for readers (a scrape never sees half of them).

        Args:
            events: Parsed events of one source, oldest first.
            wall: Wall-clock time (s since epoch) the source read them.

        Returns:
            ``(event, reason)`` for each event that was not applied, reason one of
            :data:`~exporter.scheduler.state.REJECT_REASONS`: an impossible rank, beyond the
            scheduler or replica caps (:data:`~exporter.limits.MAX_SCHEDULERS`,
            :data:`~exporter.limits.MAX_REPLICAS`), a derived figure out of range, or ``error``
            (it raised while applied: logged; one event must never lose the rest). Usually empty.
        """
        rejected: list[tuple[Event, str]] = []
        with self.lock:
            self.generation += 1
            apply = self.states.apply
            for ev in events:
                try:
                    reason = apply(ev, wall)
                except Exception:  # defence in depth: one event must never lose the rest
                    log.warning("could not apply a %s event; counted as malformed", type(ev).__name__,
                                exc_info=True)
                    reason = "error"
                if reason is not None:
                    rejected.append((ev, reason))
        return rejected

    def apply_run(self, run: Run, wall: float) -> bool | None:
        """Apply a run of the bulk path (:mod:`exporter.sources.log.bulk`), atomically for readers.

        Args:
            run: The lines of one block, as columns.
            wall: Wall-clock time (s since epoch) the source read them.

        Returns:
            True when applied; ``None`` when not applied because the state would refuse some of its
            lines (:func:`~.runs.applicable`): then the caller applies the lines one by one, and the
            state refuses exactly those; False when applying it raised (logged; never expected: the
            caller counts its lines as refused for ``error``, as :meth:`apply` does for one event).
        """
        with self.lock:
            if not applicable(self.states, run):
                return None
            self.generation += 1
            try:
                apply_run(self.states, run, wall)
            except Exception:  # defence in depth, as in apply()
                log.warning("could not apply a run of scheduler lines; counted as malformed", exc_info=True)
                return False
        return True

    def snapshot(self) -> SchedulerSnapshot:
        """The state as collectors read it (no Prometheus object is built here).

        Only the raw values are copied under the lock (each replica's counters and bucket counts,
        each scheduler's latest values); the maxima over replicas and the cumulative buckets are
        computed outside it, so that a scrape holds up a source for the copy alone.
        """
        with self.lock:
            st = self.states
            generation = self.generation
            raw = [(key, _raw(s), st.capacity_in_effect(s, key[0]), st.interval_for(key[0]))
                   for key, s in st.schedulers.items()]
        raw.sort(key=lambda item: (item[0][0], len(item[0][1]), item[0][1]))
        views = tuple(_view(key, r, capacity, interval, source) for key, r, capacity, (interval, source) in raw)
        self._warn_assumed_interval(views)
        return SchedulerSnapshot(views, generation)

    def _warn_assumed_interval(self, views: tuple[SchedulerView, ...]) -> None:
        """Warn once per stage whose decode steps rest on the assumed interval (Decode lines seen,
        no ``server_args`` with ``decode_log_interval``, no setting for it)."""
        for v in views:
            stage = v.identity[0]
            if (v.decode_log_interval_source == "default" and stage not in self._warned_interval
                    and v.counter.get("decode_lines", 0) > 0):
                self._warned_interval.add(stage)
                fix = (f"set --sglang.stage-decode-log-intervals {stage}=STEPS to the stage's "
                       f"--{stage}.engine.decode_log_interval") if stage else \
                    "set --sglang.decode-log-interval to the server's --decode-log-interval"
                log.log(self._assumed_interval_level,
                        "decode_log_interval: the log has no server_args line giving it%s; decode steps "
                        "assume SGLang's default of %d per Decode batch line "
                        "(sglang_scheduler_decode_log_interval{source=\"default\"}); %s",
                        f" (stage {stage})" if stage else "", v.decode_log_interval, fix)

    def pipeline_snapshot(self) -> dict | None:
        """SGLang Omni's pipeline facts, copied under the lock
        (:meth:`~exporter.scheduler.pipeline.PipelineState.view`; ``None`` for plain SGLang)."""
        with self.lock:
            return self.states.pipeline.view()


def _raw(s: SchedulerState) -> tuple:
    """Copies of one scheduler's raw values (called under the store's lock)."""
    replicas = [([getattr(r, name) for name in COUNTER_FIELDS],
                 [(h.counts.copy(), h.total) for h in map(r.__getattribute__, HISTOGRAM_FIELDS)])
                for r in s.replicas.values()]
    return replicas, dict(s.gauges), dict(s.kv_pools), dict(s.pd_queues), s.last_stats_wall


def _view(identity: tuple[str, ...], raw: tuple, capacity: Capacity | None, interval: int,
          source: str = "setting") -> SchedulerView:
    """One scheduler's view from its raw copy: maxima over replicas, cumulative buckets."""
    replicas, gauges, kv_pools, pd_queues, last_stats_wall = raw
    counter = {name: max((r[0][i] for r in replicas), default=0) for i, name in enumerate(COUNTER_FIELDS)}
    histogram = {}
    for i, name in enumerate(HISTOGRAM_FIELDS):
        bounds = HISTOGRAM_BOUNDS[name]  # every bound at 0 before a replica (SchedulerState.histogram)
        best = [0] * (len(bounds) + 1)
        total = 0.0
        for r in replicas:
            counts, h_total = r[1][i]
            running = 0
            for j, c in enumerate(counts):
                running += c
                if running > best[j]:
                    best[j] = running
            total = max(total, h_total)
        histogram[name] = HistogramData(bounds, tuple(best), total)
    latest: dict[str, Any] = gauges
    latest["kv_pools"] = kv_pools
    latest["pd_queues"] = pd_queues
    return SchedulerView(identity, counter, histogram, latest, capacity, interval, last_stats_wall, source)
