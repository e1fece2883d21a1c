"""The metric table: every metric the exporter serves, declared once (like dcgm-exporter's counters CSV).

Each row (:class:`MetricDef`) gives the name, type, labels, unit, source, HELP text, histogram
buckets, the collector that serves it and where that collector reads its value. Everything else
reads this table: the collectors build their families from it and describe them from it
(:mod:`exporter.metrics.families`), ``docs/metrics.md`` is generated from it
(``scripts/build_metrics_doc.py``), and the tests check the rules and dashboards against it.
A row added here appears in ``/metrics``, ``describe()``, the docs and the checks without another
edit, as long as its collector's snapshot has the value at its read path.

The rows live in one module per source: :mod:`.scheduler` (``sglang_scheduler_*`` from the log),
:mod:`.exporter` (``sglang_exporter_*``: the log source and the self-metrics), :mod:`.gpu`
(``sglang_gpu_*``), :mod:`.fpm` (the per-forward-pass stream), :mod:`.omni` (SGLang Omni's own facts:
``sglang_omni_*`` from its log and from its endpoints); :mod:`.buckets` holds the bucket rule their
batch-size and token histograms share. No Prometheus import here: the scheduler state and the
stream's statistics take their buckets from this table.
"""

from __future__ import annotations

from . import exporter as _exporter
from . import fpm as _fpm
from . import gpu as _gpu
from . import omni as _omni
from . import scheduler as _scheduler
from .defs import COUNTER, DEVICE_LABELS, GAUGE, HISTOGRAM, MIG_LABELS, SCHEDULER_LABELS, MetricDef

__all__ = ["COUNTER", "DEVICE_LABELS", "GAUGE", "HISTOGRAM", "MIG_LABELS", "SCHEDULER_LABELS", "TABLE",
           "MetricDef", "check", "get", "rows"]

#: Every metric, in exposition order within each collector.
TABLE: tuple[MetricDef, ...] = (*_scheduler.ROWS, *_exporter.LOG_ROWS, *_exporter.SELF_ROWS, *_gpu.ROWS,
                                *_fpm.ROWS, *_omni.PIPELINE_ROWS, *_omni.OMNI_ROWS)

#: The collectors a row may name.
COLLECTORS = ("scheduler", "log", "self", "gpu", "fpm", "pipeline", "omni")


def rows(collector: str) -> tuple[MetricDef, ...]:
    """The rows a collector serves, in table order (read at call time, so a test may extend TABLE)."""
    return tuple(m for m in TABLE if m.collector == collector)


def get(name: str) -> MetricDef:
    """The row of a metric by its full name.

    Raises:
        KeyError: no such metric.
    """
    for m in TABLE:
        if m.name == name:
            return m
    raise KeyError(name)


def check(table: tuple[MetricDef, ...]) -> list[str]:
    """Problems with a table (empty when sound): names, types, collectors, buckets, namespaces."""
    problems: list[str] = []
    seen: set[str] = set()
    for m in table:
        if m.name in seen:
            problems.append(f"{m.name}: declared twice")
        seen.add(m.name)
        if m.type not in (COUNTER, GAUGE, HISTOGRAM):
            problems.append(f"{m.name}: unknown type {m.type!r}")
        if (m.type == COUNTER) != m.name.endswith("_total"):
            problems.append(f"{m.name}: counters, and only counters, end in _total")
        if (m.type == HISTOGRAM) != bool(m.buckets):
            problems.append(f"{m.name}: histograms, and only histograms, have buckets")
        if list(m.buckets) != sorted(set(m.buckets)):
            problems.append(f"{m.name}: buckets must increase strictly")
        if m.collector not in COLLECTORS:
            problems.append(f"{m.name}: unknown collector {m.collector!r}")
        prefixes = {"scheduler": ("sglang_scheduler_",), "log": ("sglang_exporter_",),
                    "self": ("sglang_exporter_",), "gpu": ("sglang_gpu_",),
                    "fpm": ("sglang_scheduler_forward_pass", "sglang_exporter_fpm_"),
                    "pipeline": ("sglang_omni_",),
                    "omni": ("sglang_omni_", "sglang_exporter_omni_")}.get(m.collector, ("?",))
        if not m.name.startswith(prefixes):
            problems.append(f"{m.name}: the {m.collector} collector's metrics start with {' or '.join(prefixes)}")
        if m.name.startswith("sglang_scheduler_") and m.labels[:len(SCHEDULER_LABELS)] != SCHEDULER_LABELS:
            problems.append(f"{m.name}: scheduler metrics start with the labels {SCHEDULER_LABELS}")
        if not (m.help and m.source and m.unit and m.read):
            problems.append(f"{m.name}: help, source, unit and read are required")
    return problems


_problems = check(TABLE)
if _problems:  # a broken table must not start: fail at import, naming every problem
    raise ValueError("exporter.metrics table: " + "; ".join(_problems))
