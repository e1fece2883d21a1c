"""The ``sglang_scheduler_*`` collector: a :class:`~exporter.scheduler.store.SchedulerStore` snapshot
turned into the families of the metric table (:mod:`exporter.metrics.scheduler`) at scrape time; and
the ``sglang_omni_*`` pipeline collector over the same store (:mod:`exporter.metrics.omni`).

Only the snapshot is taken under the store's lock; families are built and filled outside it. Every
scheduler series carries the scheduler's identity labels (:data:`exporter.metrics.SCHEDULER_LABELS`:
stage and DP rank).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from ..limits import DEFAULT_IDLE_AFTER
from ..metrics import MetricDef
from ..metrics.families import Compiled, describe, fill
from .store import SchedulerStore


def _latest(m: MetricDef) -> bool:
    """Rows of the latest stats line's values, withheld while the scheduler is idle."""
    return isinstance(m.read, str) and m.read.startswith("latest.")


class SchedulerCollector(Collector):
    """Yields every ``sglang_scheduler_*`` family from a :meth:`SchedulerStore.snapshot`.

    Args:
        store: The scheduler state; only its snapshot is read (the copy is the only work under
            its lock).
        idle_after: Seconds after the latest Prefill/Decode line of a scheduler past which its
            latest-line gauges are no longer exported (SGLang prints nothing while idle, so the last
            values would be stale). ``None`` keeps them forever (one-shot mode).
        clock: Wall-clock source, seconds since the epoch.
    """

    def __init__(self, store: SchedulerStore, idle_after: float | None = DEFAULT_IDLE_AFTER, clock=time.time):
        self.store = store
        self.idle_after = idle_after
        self.clock = clock
        self._rows = Compiled("scheduler")

    def describe(self) -> Iterator[Metric]:
        return describe("scheduler")

    def collect(self) -> Iterator[Metric]:
        snap = self.store.snapshot()
        now = self.clock()
        fams = self._rows.families()
        for s in snap.schedulers:
            fresh = self.idle_after is None or (
                s.last_stats_wall is not None and now - s.last_stats_wall <= self.idle_after)
            fill(fams, self._rows, s, s.identity, skip=None if fresh else _latest)
        return iter(fams.values())


class PipelineCollector(Collector):
    """Yields SGLang Omni's ``sglang_omni_*`` pipeline families (admissions, rejections, lifecycle,
    ceiling proxy) from :meth:`SchedulerStore.pipeline_snapshot`; empty families for plain SGLang.

    Args:
        store: The scheduler state (its pipeline part is copied under the lock).
    """

    def __init__(self, store: SchedulerStore):
        self.store = store
        self._rows = Compiled("pipeline")

    def describe(self) -> Iterator[Metric]:
        return describe("pipeline")

    def collect(self) -> Iterator[Metric]:
        view = self.store.pipeline_snapshot()
        fams = self._rows.families()
        if view is not None:
            fill(fams, self._rows, view)
        return iter(fams.values())
