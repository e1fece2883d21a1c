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
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ..events import Capacity, Event, Origin
from .runs import Run, apply_run, fits
from .state import COUNTER_FIELDS, HISTOGRAM_FIELDS, SchedulerState, SchedulerStates

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
        last_stats_wall: Wall-clock time (s since epoch) the latest Prefill/Decode line was read.
    """

    identity: tuple[str, ...]
    counter: dict[str, float]
    histogram: dict[str, HistogramData]
    latest: dict[str, Any]
    capacity: Capacity | None
    decode_log_interval: int
    last_stats_wall: float | None


@dataclass(frozen=True, slots=True)
class SchedulerSnapshot:
    """Every scheduler at one instant, ordered by identity (stage, then rank 2 before rank 10)."""

    schedulers: tuple[SchedulerView, ...]


class SchedulerStore:
    """The scheduler state behind one lock; shared by the sources (writers) and the collectors.

    Args:
        states: The state to guard (a fresh :class:`SchedulerStates` by default).

    Attributes:
        states: The guarded state. Read it directly only while holding :attr:`lock` (tests,
            the offline report, which has no concurrent reader).
        lock: Held while events are applied and while a snapshot is copied.
    """

    def __init__(self, states: SchedulerStates | None = None):
        self.states = states if states is not None else SchedulerStates()
        self.lock = threading.Lock()

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

    def apply_block(self, segments: Sequence[Event | Run], origins: Collection[Origin],
                    wall: float) -> tuple[list[Event], Counter] | None:
        """Apply the bulk path's segments in order (:mod:`exporter.sources.log.bulk`), atomically for
        readers: runs of scheduler lines (:func:`~.runs.apply_run`) and single events.

        Args:
            segments: Runs and events, oldest first.
            origins: Every identity they name.
            wall: Wall-clock time (s since epoch) the source read them.

        Returns:
            The events that were not applied (as :meth:`apply`), and the lines of runs that failed to
            apply, by kind (logged; never expected); ``None`` when nothing was applied because the
            identities might not all fit under the caps (:func:`~.runs.fits`): then the caller applies
            the lines one by one, and the caps reject exactly the lines they reject.
        """
        rejected: list[Event] = []
        failed: Counter = Counter()
        with self.lock:
            states = self.states
            if not fits(states, list(origins)):
                return None
            for seg in segments:
                if type(seg) is Run:
                    try:
                        apply_run(states, seg, wall)
                    except Exception:  # defence in depth, as below: count its lines, keep the rest
                        log.warning("could not apply a run of scheduler lines; counted as malformed",
                                    exc_info=True)
                        failed.update(seg.line_counts())
                    continue
                try:
                    applied = states.apply(seg, wall)
                except Exception:  # defence in depth, as in apply()
                    log.warning("could not apply a %s event; counted as malformed", type(seg).__name__,
                                exc_info=True)
                    applied = False
                if not applied:
                    rejected.append(seg)
        return rejected, failed

    def snapshot(self) -> SchedulerSnapshot:
        """Copy what collectors read, under the lock (no Prometheus object is built here)."""
        with self.lock:
            st = self.states
            scheds = sorted(st.schedulers.items(), key=lambda kv: (kv[0][0], len(kv[0][1]), kv[0][1]))
            interval = st.decode_log_interval
            return SchedulerSnapshot(tuple(
                _view(key, s, st.capacity_in_effect(s, key[0]), interval) for key, s in scheds))

    def pipeline_snapshot(self) -> dict | None:
        """SGLang Omni's pipeline facts, copied under the lock
        (:meth:`~exporter.scheduler.pipeline.PipelineState.view`; ``None`` for plain SGLang)."""
        with self.lock:
            return self.states.pipeline.view()


def _view(identity: tuple[str, ...], s: SchedulerState, capacity: Capacity | None,
          interval: int) -> SchedulerView:
    counter = {name: s.counter(name) for name in COUNTER_FIELDS}
    histogram = {}
    for name in HISTOGRAM_FIELDS:
        bounds, cumulative, total = s.histogram(name)
        histogram[name] = HistogramData(bounds, tuple(cumulative), total)
    latest: dict[str, Any] = dict(s.gauges)
    latest["kv_pools"] = dict(s.kv_pools)
    latest["pd_queues"] = dict(s.pd_queues)
    return SchedulerView(identity, counter, histogram, latest, capacity, interval, s.last_stats_wall)
