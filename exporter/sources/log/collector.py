"""The log source's collector: ``sglang_exporter_log_*`` (files, globs, watch mode, lines by kind,
refused lines by reason), built from the metric table (:mod:`exporter.metrics.exporter`) over a
:meth:`LogStats.snapshot`."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from ...metrics.families import Compiled, describe, fill
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
        self._rows = Compiled("log")

    def describe(self) -> Iterator[Metric]:
        return describe("log")

    def collect(self) -> Iterator[Metric]:
        snap = self.stats.snapshot()
        view = {
            "lines": snap.lines,
            "rejected": snap.rejected,
            "files": {path_label(path): fs for path, fs in snap.files.items()},
            "patterns": {path_label(pattern): n for pattern, n in snap.patterns.items()},
            "skipped": {path_label(pattern): n for pattern, n in snap.skipped.items()},
            "watch_mode": {snap.watch_mode: 1} if snap.watch_mode is not None else {},
            "last_line_wall": snap.last_line_wall,
            "template_lines": snap.template_lines,
        }
        fams = self._rows.families()
        fill(fams, self._rows, view)
        return iter(fams.values())
