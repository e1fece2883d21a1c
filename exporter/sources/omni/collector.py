"""``sglang_omni_*`` (live) and ``sglang_exporter_omni_*`` families from the poller's latest snapshot
(no HTTP call at scrape time), built from the metric table (:mod:`exporter.metrics.omni`)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from ...metrics.families import Compiled, describe, fill
from .poller import OmniPoller


class OmniCollector(Collector):
    """Yields the ``omni`` collector's families from :meth:`OmniPoller.status` (a copy).

    Args:
        poller: The running poller.
    """

    def __init__(self, poller: OmniPoller):
        self.poller = poller
        self._rows = Compiled("omni")

    def describe(self) -> Iterator[Metric]:
        return describe("omni")

    def collect(self) -> Iterator[Metric]:
        st = self.poller.status()
        h = st.health
        fill_view = {
            "up": st.up,
            "running": None if h is None or h.running is None else h.running,
            "request_states": None if h is None else h.request_states,
            "pending_completions": None if h is None else h.pending_completions,
            "stages": st.stages,
            "polls": st.polls,
            "snapshot_age": st.snapshot_age,
        }
        fams = self._rows.families()
        fill(fams, self._rows, fill_view)
        return iter(fams.values())
