"""The ``sglang_scheduler_*`` collector: a :class:`~exporter.scheduler.store.SchedulerStore` snapshot
turned into the families of the metric table (:mod:`exporter.metrics.scheduler`) at scrape time; and
the ``sglang_omni_*`` pipeline collector over the same store (:mod:`exporter.metrics.omni`).

Only the snapshot is taken under the store's lock; families are built and filled outside it. Every
scheduler series carries the scheduler's identity labels (:data:`exporter.metrics.SCHEDULER_LABELS`:
stage and DP rank).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from ..limits import DEFAULT_IDLE_AFTER
from ..metrics import MetricDef
from ..metrics.buckets import served_bounds
from ..metrics.families import Compiled, describe, fill
from ..metrics.scheduler import SERVED
from .store import HistogramData, SchedulerSnapshot, SchedulerStore, SchedulerView


def _latest(m: MetricDef) -> bool:
    """Rows of the latest stats line's values, withheld while the scheduler is idle."""
    return isinstance(m.read, str) and m.read.startswith("latest.")


_PICKS: dict[tuple, tuple[tuple[int, ...], tuple[int, ...]]] = {}


def served(view: SchedulerView) -> SchedulerView:
    """The view with the histograms of :data:`~exporter.metrics.scheduler.SERVED` cut to their served
    bounds (:func:`~exporter.metrics.buckets.served_bounds`, the ceiling from the view's capacity
    line): the cumulative counts at those bounds, ``+Inf``, the sum and the count unchanged."""
    cap = view.capacity
    hists = dict(view.histogram)
    for field, (ceiling_fields, coarse) in SERVED.items():
        h = hists.get(field)
        if h is None:
            continue
        ceilings = [v for v in (getattr(cap, f, None) for f in ceiling_fields) if v]
        key = (h.bounds, max(ceilings) if ceilings else None, coarse)
        pick = _PICKS.get(key)
        if pick is None:
            if len(_PICKS) >= 256:  # one entry per distinct ceiling: a log of many restarts cannot grow it
                _PICKS.clear()
            keep = served_bounds(h.bounds, key[1], coarse)
            index = {b: i for i, b in enumerate(h.bounds)}
            pick = _PICKS[key] = (keep, (*(index[b] for b in keep), len(h.bounds)))
        hists[field] = HistogramData(pick[0], tuple(h.cumulative[i] for i in pick[1]), h.sum)
    return dataclasses.replace(view, histogram=hists)


class SchedulerCollector(Collector):
    """Yields every ``sglang_scheduler_*`` family from a :meth:`SchedulerStore.snapshot`.

    Args:
        store: The scheduler state; only its snapshot is read (the copy is the only work under
            its lock).
        idle_after: Seconds after the latest Prefill/Decode line of a scheduler past which its
            latest-line gauges are no longer exported (SGLang prints nothing while idle, so the last
            values would be stale). ``None`` keeps them forever (one-shot mode).
        clock: Wall-clock source, seconds since the epoch.
        fine_buckets: Serve every bound of the batch-size and prefill-token histograms instead of
            the series budget's subset (:func:`served`; ``--sglang.fine-buckets``).
    """

    def __init__(self, store: SchedulerStore, idle_after: float | None = DEFAULT_IDLE_AFTER, clock=time.time,
                 fine_buckets: bool = False):
        self.store = store
        self.idle_after = idle_after
        self.clock = clock
        self.fine_buckets = fine_buckets
        self._rows = Compiled("scheduler")
        self._snapshot: SchedulerSnapshot | None = None
        self._families: tuple[tuple, list[Metric]] | None = None
        self._lock = threading.Lock()

    def describe(self) -> Iterator[Metric]:
        return describe("scheduler")

    def collect(self) -> Iterator[Metric]:
        """The families; the same objects as last time while nothing they show changed.

        Nothing changed while the store's generation and each scheduler's freshness are those of the
        previous scrape: then no snapshot is taken and the renderer reuses the families' text
        (:mod:`exporter.exposition`). The families are :class:`~exporter.metrics.text.RawFamily`: their
        series kept as filled, the library's samples built only when read (OpenMetrics, ``name[]``),
        the text format written from cached line prefixes.
        """
        with self._lock:
            snap = self._snapshot
            if snap is None or snap.generation != self.store.generation:
                snap = self._snapshot = self.store.snapshot()
            now = self.clock()
            fresh = tuple(self.idle_after is None or (
                s.last_stats_wall is not None and now - s.last_stats_wall <= self.idle_after)
                for s in snap.schedulers)
            key = (snap.generation, fresh)
            if self._families is not None and self._families[0] == key:
                return iter(self._families[1])
            fams = self._rows.families(raw=True)
            for s, is_fresh in zip(snap.schedulers, fresh):
                fill(fams, self._rows, s if self.fine_buckets else served(s), s.identity,
                     skip=None if is_fresh else _latest)
            families = list(fams.values())
            self._families = (key, families)
            return iter(families)


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
