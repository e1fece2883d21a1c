"""SGLang's per-forward-pass stream (Forward Pass Metrics, ``--enable-forward-pass-metrics``).

Exact batch sizes: every SGLang scheduler that publishes sends one ZeroMQ message per forward pass,
so the figures here are complete where the scheduler log only samples (one ``Decode batch`` line per
``decode_log_interval`` steps). The package has the shape of every source::

    subscriber.FpmSubscriber  (thread, ZeroMQ SUB per endpoint: read)
      -> decode.decode_frames (frames -> (sequence, ForwardPassMetrics): parse)
      -> stats.FpmStats.apply (sequence accounting, per-dp_rank statistics)
      -> collector.FpmCollector (sglang_scheduler_forward_pass*, sglang_exporter_fpm_*)

See docs/fpm.md for SGLang versions, flags and the Kubernetes set-up.
"""

from __future__ import annotations

from .collector import FpmCollector
from .stats import FpmStats
from .subscriber import FpmSubscriber

__all__ = ["FpmCollector", "FpmSource", "FpmStats", "FpmSubscriber", "make_source"]


class FpmSource:
    """The wired source: its statistics, the subscriber thread that feeds them, and their collector."""

    def __init__(self, endpoints: list[str], timeout: float):
        self.stats = FpmStats(endpoints, timeout=timeout)
        self.subscriber = FpmSubscriber(endpoints, self.stats)
        self.collector = FpmCollector(self.stats)

    def start(self) -> None:
        """Start reading (the sockets were connected at construction)."""
        self.subscriber.start()

    def stop(self) -> None:
        """Stop the thread and close the sockets."""
        self.subscriber.stop()


def make_source(settings) -> FpmSource:
    """Build the source from :class:`exporter.settings.FpmSettings`.

    Raises:
        zmq.ZMQError: ZeroMQ refuses an endpoint (the settings check the syntax first).
    """
    return FpmSource(settings.endpoint_list, settings.timeout)
