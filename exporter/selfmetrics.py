"""The exporter's own metrics: build info, and each collector's success and duration per scrape.

:class:`GuardedCollectors` wraps the collectors of every source, as node_exporter does, so that one
failing collector drops only its own families from a scrape and says so in
``sglang_exporter_collector_success``.
"""

from __future__ import annotations

import logging
import platform
import time
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from . import __version__

log = logging.getLogger(__name__)


class GuardedCollectors(Collector):
    """Runs named collectors so that one that raises cannot fail the whole scrape.

    Emits ``sglang_exporter_build_info``, ``sglang_exporter_collector_success{collector}`` (1/0) and
    ``sglang_exporter_collector_duration_seconds{collector}`` as node_exporter does; a failing
    collector's families are dropped from that scrape and its error is logged. A family without
    samples (no GPU, no speculative decoding, no glob) is dropped too: a HELP/TYPE block with
    nothing under it only adds noise to ``/metrics``.

    Args:
        collectors: ``(name, collector)`` pairs.
        clock: Monotonic clock for durations.
    """

    def __init__(self, collectors: list[tuple[str, Collector]], clock: Callable[[], float] = time.perf_counter):
        self.collectors = collectors
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        success = GaugeMetricFamily("sglang_exporter_collector_success",
                                    "1 when the named collector succeeded in this scrape.", labels=("collector",))
        duration = GaugeMetricFamily("sglang_exporter_collector_duration_seconds",
                                     "Time the named collector took in this scrape.", labels=("collector",))
        for name, collector in self.collectors:
            start = self.clock()
            try:
                families = list(collector.collect())
                ok = 1
            except Exception:
                log.exception("collector %s failed", name)
                families, ok = [], 0
            duration.add_metric([name], self.clock() - start)
            success.add_metric([name], ok)
            yield from (family for family in families if family.samples)
        info = GaugeMetricFamily("sglang_exporter_build_info",
                                 "Build information of the exporter; value 1.",
                                 labels=("version", "python_version"))
        info.add_metric([__version__, platform.python_version()], 1)
        yield info
        yield success
        yield duration
