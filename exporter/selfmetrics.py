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

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from . import __version__
from .pipeline import Pipeline

log = logging.getLogger(__name__)


def path_label(path: str) -> str:
    """A file path as a label value: valid UTF-8 always.

    A path that is not valid UTF-8 (``os.fsdecode`` keeps its bytes as lone surrogates) would make
    the whole exposition fail to encode; its undecodable bytes are shown as ``\\xNN`` instead.
    """
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class ExporterCollector(Collector):
    """Yields the ``sglang_exporter_*`` self-metrics: lines, bytes, file opens, build info.

    Args:
        pipeline: The pipeline whose counts are read.
    """

    def __init__(self, pipeline: Pipeline):
        self.pipeline = pipeline

    def collect(self) -> Iterator[Metric]:
        p = self.pipeline
        lines = CounterMetricFamily(
            "sglang_exporter_log_lines_total",
            "Log lines read, by line kind and result (parsed; ignored: not a scheduler line; malformed: a "
            "scheduler line too damaged to apply).", labels=("kind", "result"))
        opens = CounterMetricFamily("sglang_exporter_log_file_opens_total",
                                    "Times a followed log file was opened.", labels=("path",))
        nbytes = CounterMetricFamily("sglang_exporter_log_bytes_read_total",
                                     "Bytes read from a followed log file.", labels=("path",))
        oversized = CounterMetricFamily("sglang_exporter_log_oversized_lines_total",
                                        "Lines dropped because they exceeded --log.max-line-bytes.",
                                        labels=("path",))
        present = GaugeMetricFamily("sglang_exporter_log_file_present",
                                    "1 when the followed log path exists, 0 while waiting for it.",
                                    labels=("path",))
        last = GaugeMetricFamily("sglang_exporter_last_line_timestamp_seconds",
                                 "Wall-clock time the exporter read its latest log line.")
        rotations = CounterMetricFamily(
            "sglang_exporter_log_rotations_total",
            "Times the followed path was found naming another file (rename + create, symlink swap); "
            "the old file is still read for --log.rotate-wait.", labels=("path",))
        truncations = CounterMetricFamily(
            "sglang_exporter_log_truncations_total",
            "Times the followed file was found shorter than the read offset (copytruncate); reading "
            "restarts at 0.", labels=("path",))
        behind = GaugeMetricFamily(
            "sglang_exporter_log_behind_bytes",
            "Bytes between the read offset and the end of the followed file (and of a rotated file "
            "still being drained) at the latest check.", labels=("path",))
        matched = GaugeMetricFamily(
            "sglang_exporter_log_glob_matched_files",
            "Files a --log.path glob matched at the latest check.", labels=("pattern",))
        watch = GaugeMetricFamily(
            "sglang_exporter_log_watch_mode_info",
            "How file changes are noticed: inotify (file events plus the poll timer) or poll (timer only: "
            "--log.watch-mode=poll, or inotify could not be set up); value 1.", labels=("mode",))
        with p.lock:
            for path, fs in sorted(p.files.items()):
                label = [path_label(path)]
                rotations.add_metric(label, fs.rotations)
                truncations.add_metric(label, fs.truncations)
                behind.add_metric(label, fs.behind_bytes)
                opens.add_metric(label, fs.opens)
                nbytes.add_metric(label, fs.bytes_read)
                present.add_metric(label, 1 if fs.present else 0)
                oversized.add_metric(label, fs.oversized_lines)
            for pattern, n in sorted(p.patterns.items()):
                matched.add_metric([path_label(pattern)], n)
            if p.watch_mode is not None:
                watch.add_metric([p.watch_mode], 1)
            for (kind, result), n in sorted(p.lines.items()):
                lines.add_metric([kind, result], n)
            if p.last_line_wall is not None:
                last.add_metric([], p.last_line_wall)
        info = GaugeMetricFamily("sglang_exporter_build_info",
                                 "Build information of the exporter; value 1.",
                                 labels=("version", "python_version"))
        info.add_metric([__version__, platform.python_version()], 1)
        return iter([lines, nbytes, opens, oversized, present, rotations, truncations, behind, matched, watch,
                     last, info])


class GuardedCollectors(Collector):
    """Runs named collectors so that one that raises cannot fail the whole scrape.

    Emits ``sglang_exporter_collector_success{collector}`` (1/0) and
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
        yield success
        yield duration
