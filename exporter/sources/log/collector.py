"""The log source's collector: ``sglang_exporter_log_*`` (files, globs, watch mode, lines by kind)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .stats import LogStats


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


class LogCollector(Collector):
    """Yields the log source's ``sglang_exporter_log_*`` families from a :meth:`LogStats.snapshot`.

    Args:
        stats: The log source's statistics.
    """

    def __init__(self, stats: LogStats):
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        p = self.stats.snapshot()
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
        for path, fs in p.files.items():
            label = [path_label(path)]
            rotations.add_metric(label, fs.rotations)
            truncations.add_metric(label, fs.truncations)
            behind.add_metric(label, fs.behind_bytes)
            opens.add_metric(label, fs.opens)
            nbytes.add_metric(label, fs.bytes_read)
            present.add_metric(label, 1 if fs.present else 0)
            oversized.add_metric(label, fs.oversized_lines)
        for pattern, n in p.patterns.items():
            matched.add_metric([path_label(pattern)], n)
        if p.watch_mode is not None:
            watch.add_metric([p.watch_mode], 1)
        for (kind, result), n in p.lines.items():
            lines.add_metric([kind, result], n)
        if p.last_line_wall is not None:
            last.add_metric([], p.last_line_wall)
        return iter([lines, nbytes, opens, oversized, present, rotations, truncations, behind, matched, watch,
                     last])
