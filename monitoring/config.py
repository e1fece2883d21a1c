"""Every number and name that the recording rules, the alerts and the dashboards share.

Change a threshold, a ``for:`` duration, a window or a label here, then run ``python3 -m monitoring``
(from the repository root): it rewrites ``deploy/prometheus/sglang-{recording-rules,alerts}.yml``,
``grafana/sglang-*.json`` and the Kubernetes wrappers of ``deploy/kubernetes/example/``. The tests
fail while a committed file differs from what this config gives, and the promtool cases of
``deploy/prometheus/tests/`` tell you which case to move when a threshold moves.

This is kubernetes-mixin's ``config.libsonnet`` in Python: one frozen :class:`Config`, whose
defaults are the shipped rules. ``dataclasses.replace(DEFAULT, ...)`` gives a variant (the tests use
that; ``--runbook-base`` of ``python3 -m monitoring`` is the one setting offered on the command line).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from collections.abc import Mapping

#: Where each alert's ``runbook_url`` points: this file plus ``#<alert name in lower case>`` (GitHub's
#: anchor of the alert's section in docs/runbook.md). Override it with ``--runbook-base`` to point at
#: your fork, a tag (``.../blob/v0.1.0/docs/runbook.md``) or an internal wiki page with the same anchors.
RUNBOOK_BASE = "https://github.com/sglang-exporter/sglang-exporter/blob/main/docs/runbook.md"


@dataclass(frozen=True)
class Alerting:
    """The tunable numbers of one alert (docs/runbook.md, "Thresholds", says when to change them).

    Attributes:
        threshold: the value the alert's expression compares with, in the unit of that expression
            (a ratio 0..1, seconds, requests per minute); None for alerts on a state (up == 0).
        for_: Prometheus ``for:`` (pending time before firing), None for events that fire at once.
        keep_firing_for: Prometheus ``keep_firing_for:``, None when the alert stops with its condition.
        window: the alert's own range (``[10m]``) where its expression has one.
        guard: the threshold of the alert's second condition (SGLangBatchBoundByKV: KV occupancy;
            SGLangQueueGrowing: waiting requests), None when there is none.
    """

    threshold: float | None = None
    for_: str | None = None
    keep_firing_for: str | None = None
    window: str | None = None
    guard: float | None = None


def _alerts() -> Mapping[str, Alerting]:
    return MappingProxyType({
        # method.md: more than 5% of batches with a retraction means the ceiling is too high.
        "SGLangRetractionRatioHigh": Alerting(threshold=0.05, for_="15m", keep_firing_for="10m"),
        # mean KV-cache occupancy over the batches of the rate window
        "SGLangKVCacheSaturated": Alerting(threshold=0.95, for_="15m"),
        # decode batch p50 below threshold x max_running_requests while mean KV occupancy > guard
        "SGLangBatchBoundByKV": Alerting(threshold=0.5, guard=0.9, for_="30m"),
        # recomputed tokens of retracted requests / all computed tokens
        "SGLangRecomputeShareHigh": Alerting(threshold=0.1, for_="15m"),
        # queue slope in requests per minute (least squares over window) while more than guard wait
        "SGLangQueueGrowing": Alerting(threshold=3, window="15m", guard=10, for_="15m"),
        # mean queue wait by Little's law, seconds. Online chat: about 1 s; offline: raise or silence.
        "SGLangQueueWaitHigh": Alerting(threshold=10, for_="10m"),
        # seconds without a Prefill/Decode batch line, when the last line within window had waiting requests
        "SGLangSchedulerLogStale": Alerting(threshold=300, window="30m", for_="5m"),
        "SGLangExporterDown": Alerting(for_="5m"),
        # malformed share of the scheduler lines read over window
        "SGLangExporterParseErrors": Alerting(threshold=0.01, window="10m", for_="15m"),
        "SGLangExporterLogFileMissing": Alerting(for_="10m"),
        "SGLangGPUNVMLDown": Alerting(for_="10m"),
        # any XID event within window
        "SGLangGPUXidErrors": Alerting(window="10m", keep_firing_for="30m"),
        # any uncorrectable ECC error within window, or a pending/failed row remapping
        "SGLangGPUMemoryErrors": Alerting(window="1h", keep_firing_for="1h"),
        # share of window with a thermal/hardware clocks-event reason active
        "SGLangGPUThrottled": Alerting(threshold=0.5, window="10m", for_="10m"),
        # share of window held at the software power cap
        "SGLangGPUPowerCapped": Alerting(threshold=0.9, window="30m", for_="30m"),
        # used share of device memory (SGLang reserves --mem-fraction-static up front: ~90% is normal)
        "SGLangGPUMemoryNearFull": Alerting(threshold=0.98, for_="10m"),
    })


@dataclass(frozen=True)
class Config:
    """The monitoring configuration (defaults: what is shipped). Every field is used by the rules,
    the alerts or the dashboards; none is read at run time by the exporter."""

    #: Base of every runbook_url (see RUNBOOK_BASE).
    runbook_base: str = RUNBOOK_BASE

    #: The labels that tell one scheduler from another inside one SGLang server. Issue 13 (SGLang
    #: Omni stages) makes this ("stage", "dp_rank"): rules, alerts and dashboards follow.
    scheduler_labels: tuple[str, ...] = ("dp_rank",)
    #: Labels above the scheduler that the recording rules keep (from the scrape configuration).
    target_labels: tuple[str, ...] = ("namespace", "job")
    #: The label that tells Prometheus which pods report the same server (a multi-node group,
    #: merged with max); a target without it is a group of its own, named after group_default_from.
    group_label: str = "sglang_group"
    group_default_from: str = "instance"
    #: First part of every recording rule's name (level:metric:operations).
    level: str = "group_dp_rank"
    #: The range of every rate of the recording rules (alerts add their for: on top).
    rate_window: str = "5m"
    #: Quantiles of the batch-size histograms recorded per phase.
    batch_quantiles: tuple[float, ...] = (0.5, 0.9, 0.99)

    #: method.md sections 3 and 5: configure the running-request ceiling at 60-70% of the requests
    #: the KV pool holds (fragmentation, length variance). Recorded as the safe capacity; the
    #: Capacity dashboard offers the choices below.
    safety_factor: float = 0.7
    safety_factor_choices: tuple[float, ...] = (0.6, 0.7, 0.8)

    #: Which scrape jobs are sglang-exporter sidecars (SGLangExporterDown); adapt to your scrape config.
    exporter_job_selector: str = 'job=~".*sglang.*"'
    #: clocks-event reasons that count as throttling (SGLangGPUThrottled); sw_power_cap has its own alert.
    throttle_reasons: tuple[str, ...] = ("sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown",
                                         "hw_power_brake_slowdown")

    #: Per alert: its thresholds and durations, by alert name.
    alerts: Mapping[str, Alerting] = field(default_factory=_alerts)

    @property
    def group_by(self) -> tuple[str, ...]:
        """The labels of one recorded scheduler series: target labels, group label, scheduler labels."""
        return (*self.target_labels, self.group_label, *self.scheduler_labels)

    def runbook_url(self, alert: str) -> str:
        """Absolute URL of an alert's section: ``<runbook_base>#<alert name in lower case>``."""
        return f"{self.runbook_base}#{alert.lower()}"

    def record(self, metric: str, operation: str) -> str:
        """Name of a recording rule: ``<level>:sglang_scheduler_<metric>:<operation>``, where
        ``{w}`` in ``operation`` is the rate window (``rate{w}`` -> ``rate5m``)."""
        return f"{self.level}:sglang_scheduler_{metric}:{operation.format(w=self.rate_window)}"


DEFAULT = Config()
