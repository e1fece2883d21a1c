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

from prometheus_client.core import Metric
from prometheus_client.registry import Collector, DuplicateTimeseries

from . import __version__
from .metrics.families import Compiled, describe, fill
from .metrics.text import has_samples

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

    Raises:
        DuplicateTimeseries: two collectors describe the same family (a registry would refuse
            them too, were they registered apart).
    """

    def __init__(self, collectors: list[tuple[str, Collector]], clock: Callable[[], float] = time.perf_counter):
        self.collectors = collectors
        self.clock = clock
        self._rows = Compiled("self")
        seen: set[str] = set()
        for _, collector in collectors:
            names = {m.name for m in getattr(collector, "describe", lambda: ())()}
            if names & seen:
                raise DuplicateTimeseries(names & seen)
            seen |= names

    def describe(self) -> Iterator[Metric]:
        """Every family of the guarded collectors, then the self-metrics' own (no samples)."""
        for _, collector in self.collectors:
            yield from getattr(collector, "describe", lambda: ())()
        yield from describe("self")

    def collect(self) -> Iterator[Metric]:
        success: dict[str, int] = {}
        duration: dict[str, float] = {}
        for name, collector in self.collectors:
            start = self.clock()
            try:
                families = list(collector.collect())
                ok = 1
            except Exception:
                log.exception("collector %s failed", name)
                families, ok = [], 0
            duration[name] = self.clock() - start
            success[name] = ok
            yield from (family for family in families if has_samples(family))
        view = {"build": {(__version__, platform.python_version()): 1}, "success": success, "duration": duration}
        fams = self._rows.families()
        fill(fams, self._rows, view)
        yield from fams.values()
