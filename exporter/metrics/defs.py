"""The shape of a row of the metric table (:mod:`exporter.metrics`), and the labels rows share."""

from __future__ import annotations

from dataclasses import dataclass

COUNTER, GAUGE, HISTOGRAM = "counter", "gauge", "histogram"

#: Labels that identify a scheduler, first on every ``sglang_scheduler_*`` series: SGLang Omni's pipeline
#: stage (``""`` for plain SGLang) and the DP rank, in the order of the store's identity
#: (:attr:`exporter.scheduler.store.SchedulerView.identity`). The monitoring config reads them from here.
SCHEDULER_LABELS = ("stage", "dp_rank")
#: Labels of a per-device NVML series; a MIG device adds :data:`MIG_LABELS` after them.
DEVICE_LABELS = ("gpu", "uuid")
MIG_LABELS = ("gpu_instance_id", "compute_instance_id")

#: A read path: where a collector finds a row's value in its snapshot (see :class:`MetricDef`).
Read = str | tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class MetricDef:
    """One metric, declared once: what ``/metrics`` serves, what ``describe()`` names, what the docs
    list and what the rule and dashboard checks accept.

    Attributes:
        name: The full sample name as exposed and as PromQL reads it (counters end in ``_total``).
        type: ``counter``, ``gauge`` or ``histogram``.
        labels: Label names of every series, in order (``le`` of histograms excluded).
        unit: Unit of the value: a base unit (``seconds``, ``bytes``, ``ratio``, ``hertz``, ``watts``,
            ``celsius``, ``joules``) or what is counted (``requests``, ``tokens``, ``lines``, ...);
            ``1`` for info and 0/1 gauges.
        source: Where the value comes from: the log line and its field with the SGLang versions
            that print it, the NVML call, or the exporter itself.
        help: The HELP text.
        collector: Which collector serves it: ``scheduler``, ``log``, ``self`` or ``gpu``.
        read: Where that collector finds the value in its snapshot, as a dotted path (attributes
            or mapping keys). A ``*`` step iterates a mapping and its keys fill the next labels; a
            path that ends on a mapping gives one series per key, its key (or key tuple) filling
            the last labels. A tuple of ``(label value, path)`` pairs splits the family on its last
            label (``phase``, ``method``). A value of ``None`` gives no series.
        buckets: Upper bounds of a histogram's buckets (``+Inf`` implied).
        optional_labels: Labels that some series add after ``labels``' device part (MIG).
    """

    name: str
    type: str
    labels: tuple[str, ...]
    unit: str
    source: str
    help: str
    collector: str
    read: Read
    buckets: tuple[float, ...] = ()
    optional_labels: tuple[str, ...] = ()

    @property
    def family(self) -> str:
        """The family name (a counter's without ``_total``), as the client library names it."""
        return self.name[:-6] if self.type == COUNTER and self.name.endswith("_total") else self.name
