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

from exporter import method
from exporter.metrics.defs import SCHEDULER_LABELS

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
        # method.md: more than 5% of batches with a retraction means the ceiling is too high. The method's
        # thresholds are defined once, in exporter.method, which the report uses too.
        "SGLangRetractionRatioHigh": Alerting(threshold=method.RETRACTION_RULE, for_="15m", keep_firing_for="10m"),
        # mean KV-cache occupancy over the batches of the rate window
        "SGLangKVCacheSaturated": Alerting(threshold=0.95, for_="15m"),
        # decode batch p50 below threshold x max_running_requests while mean KV occupancy > guard
        "SGLangBatchBoundByKV": Alerting(threshold=method.BOUND_BY_KV_BATCH_SHARE, guard=method.BOUND_BY_KV_USAGE, for_="30m"),
        # recomputed tokens of retracted requests / all computed tokens
        "SGLangRecomputeShareHigh": Alerting(threshold=method.RECOMPUTE_SHARE_HIGH, for_="15m"),
        # queue slope in requests per minute (least squares over window) while more than guard wait
        "SGLangQueueGrowing": Alerting(threshold=3, window="15m", guard=10, for_="15m"),
        # queue wait, seconds: the p90 of SGLang's measured queue_time_seconds where SGLang's metrics are
        # scraped, else the mean by Little's law (sidecar). Online chat: about 1 s; offline: raise or silence.
        "SGLangQueueWaitHigh": Alerting(threshold=10, for_="10m"),
        # seconds without a Prefill/Decode batch line, when the last line within window had waiting requests
        "SGLangSchedulerLogStale": Alerting(threshold=300, window="30m", for_="5m"),
        # SGLang's own metrics: no forward pass within the rate window while the last report had waiting
        # requests (only where no sidecar reads the scheduler's log: SGLangSchedulerLogStale covers it there)
        "SGLangSchedulerStalled": Alerting(for_="5m"),
        # DP attention: max over mean across the DP ranks of one server (SGLang's per-step token ratio,
        # else running requests per rank) above threshold while the ranks run more than guard requests each
        "SGLangDPRankImbalance": Alerting(threshold=method.DP_IMBALANCE_HIGH, guard=method.DP_IMBALANCE_MIN_RUNNING,
                                          for_="15m"),
        # priority scheduling: a class had waiting requests throughout window and got no first token
        # while another class of the server did; or its p99 TTFT above threshold seconds kept growing over window
        "SGLangPriorityStarved": Alerting(threshold=30, window="10m", for_="10m"),
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
        # SGLang Omni: any scheduler line of several stages without a stage (no logging shim) within window
        "SGLangOmniLinesUnattributed": Alerting(window="10m", for_="5m"),
        # a stage's scheduler thread crashed, or a stage process died, within window
        "SGLangOmniStageCrashed": Alerting(window="10m", keep_firing_for="30m"),
        # Omni's /health (--omni.url) unanswered: the live per-stage snapshot is blind
        "SGLangOmniDown": Alerting(for_="10m"),
        # requests Omni rejected (queue full, in-flight cap, KV too small, prompt too long), per minute
        "SGLangOmniRequestsRejected": Alerting(threshold=1, window="10m", for_="10m"),
    })


#: SGLang's raw ``priority`` label values (``--enable-priority-scheduling``: any integer a client
#: sends) mapped to a few named classes, so that no rule, alert or panel has one series per value:
#: ``(class, regex of the label value)``, the LAST matching entry wins; a value no entry matches is
#: ``other``. By SGLang's default a larger value is scheduled first (``--schedule-low-priority-values-first``
#: inverts that: swap the names). Ranges: high 1 .. 10^18 - 1 (RE2 has no numeric ranges: by digits), default 0,
#: low -1 .. -(10^18 - 1), and ``unset``: a request sent without a priority, which SGLang schedules after every
#: other (managers/scheduler.py ``_set_or_validate_priority`` gives it -sys.maxsize - 1, or sys.maxsize
#: with --schedule-low-priority-values-first; its gauges print that integer, its tokenizer histograms
#: an empty priority="": both seen on real 0.5.18 and 0.5.23 servers, tests/real_series/).
PRIORITY_OTHER = "other"
PRIORITY_UNSET = "unset"
PRIORITY_CLASSES: tuple[tuple[str, str], ...] = (
    ("high", "[1-9][0-9]{0,17}"),
    ("default", "0"),
    ("low", "-[1-9][0-9]{0,17}"),
    (PRIORITY_UNSET, "-9223372036854775808|9223372036854775807"),
)


#: The values of the ``source`` label of the normalised series: where a scheduler figure comes from.
LOG = "log"                 # the sidecar reading the scheduler log (sglang_scheduler_*; every SGLang version)
FPM = "fpm"                 # the sidecar following SGLang's per-forward-pass stream (issue 14; exact per pass)
NATIVE = "sglang_metrics"   # SGLang's own /metrics (--enable-metrics; sglang:* names; 0.5.7+ for the 5% rule)


def _precedence() -> Mapping[str, tuple[str, ...]]:
    """Which source a figure is taken from where several describe the same scheduler: the first
    present one (docs/alerts.md, "Which source wins"). Never two: alerts page once per scheduler."""
    return MappingProxyType({
        # the denominator of the 5% rule: fpm counts every forward pass; the log counts prefill batches
        # and estimates decode steps (Decode batch lines x decode_log_interval) in every SGLang version;
        # SGLang's sglang:cuda_graph_passes_total counts decode passes since 0.5.7, prefill ones since 0.5.10
        "batches": (FPM, LOG, NATIVE),
        # the numerator: the log counts retraction EVENTS; SGLang's sglang:num_retracted_requests_total
        # counts retracted REQUESTS (an upper bound of the events). The log wins where it sees the
        # scheduler (batches or retractions in the window).
        "retractions": (LOG, NATIVE),
        # batch-size distribution: fpm observes every pass, the log one decode step in decode_log_interval
        "batch_size": (FPM, LOG),
        # recompute share: SGLang's prefill_compute - effective input tokens (0.5.18+: every token it
        # computed again, equal to num_retracted_input + _output tokens on the test bed), else the log's
        # #new_tokens_gained (2025-12-24+), a lower bound: a retracted request's chunks that stayed
        # cached and were evicted later are computed again beyond it (0.21x with chunked prompts)
        "recompute": (NATIVE, LOG),
        # KV occupancy: the log observes every batch line; SGLang's sglang:token_usage is the same figure,
        # sampled once per scrape
        "kv_usage": (LOG, NATIVE),
        # running and waiting requests: the same report (#running-req, #queue-req) either way
        "running_requests": (LOG, NATIVE),
        "queue_requests": (LOG, NATIVE),
        # queue wait: SGLang measures every request (sglang:queue_time_seconds, 0.5.3+); the sidecar
        # estimates the mean by Little's law from sampled queue lengths
        "queue_wait": (NATIVE, LOG),
        # a stopped scheduler: SGLangSchedulerLogStale (log) wins; SGLangSchedulerStalled (SGLang's
        # metrics) fires only for schedulers no sidecar reads
        "stale": (LOG, NATIVE),
        # DP-rank imbalance of one server: SGLang's own per-step max/mean of tokens (0.5.22+, DP rank 0),
        # else max/mean of the running requests of the ranks (the log's #running-req, else SGLang's gauge)
        "dp_imbalance": (NATIVE, LOG),
    })


@dataclass(frozen=True)
class Config:
    """The monitoring configuration (defaults: what is shipped). Every field is used by the rules,
    the alerts or the dashboards; none is read at run time by the exporter."""

    #: Base of every runbook_url (see RUNBOOK_BASE).
    runbook_base: str = RUNBOOK_BASE

    #: The labels that tell one scheduler from another inside one SGLang server: SGLang Omni's stage
    #: and the DP rank, read from the exporter's metric table (exporter.metrics.defs.SCHEDULER_LABELS),
    #: the one place that decides a scheduler's identity; rules, alerts and dashboards follow. Every
    #: source is joined on these (plus the target and group labels below), never on job, instance or
    #: container.
    scheduler_labels: tuple[str, ...] = SCHEDULER_LABELS
    #: The value a scheduler label takes on a series that lacks it: SGLang's own metrics carry no
    #: dp_rank with one DP rank, where the sidecar writes dp_rank="0". A label not named here
    #: (stage) is simply empty on such a series, as it is for plain SGLang on the sidecar.
    scheduler_label_defaults: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({"dp_rank": "0"}))
    #: Labels above the scheduler that the recording rules keep (from the scrape configuration).
    #: Not job: the sidecar and SGLang's /metrics are two scrape targets of one pod.
    target_labels: tuple[str, ...] = ("namespace",)
    #: The label that tells Prometheus which pods report the same server (a multi-node group,
    #: merged with max); a target without it is a group of its own, named after the first of
    #: group_default_from it has (the pod, so that the sidecar and SGLang's /metrics of one pod
    #: meet; outside Kubernetes the instance, or a pod label set in the scrape configuration).
    group_label: str = "sglang_group"
    group_default_from: tuple[str, ...] = ("pod", "instance")
    #: First part of every per-scheduler recording rule's name (level:metric:operations).
    level: str = "group_dp_rank"
    #: First part of the per-server recording rules (SGLang's request latency histograms come from
    #: its tokenizer process: one per server, no scheduler labels).
    server_level: str = "group"
    #: Level of the rules across the DP ranks of one server (labels: target, group, the scheduler
    #: labels but dp_rank: SGLang Omni's stage).
    ranks_level: str = "group_stage"
    #: Level of the per-priority-class rules (target, group, priority_class).
    priority_level: str = "group_priority_class"
    #: Level of the fleet rules (docs/alerts.md, "Many clusters"): the per-scheduler figures with the
    #: pod and the group aggregated away, by the target labels only (add ``cluster`` to
    #: target_labels where agents of several clusters write into one store).
    fleet_level: str = "namespace"
    #: The label the priority class is written to, and the mapping (see PRIORITY_CLASSES).
    priority_class_label: str = "priority_class"
    priority_classes: tuple[tuple[str, str], ...] = PRIORITY_CLASSES
    priority_other: str = PRIORITY_OTHER
    #: The class of a request histogram's empty priority="" (a request sent without one; on the
    #: scheduler's gauges the empty value is the total instead).
    priority_unset: str = PRIORITY_UNSET
    #: Which source wins per figure where several describe one scheduler (see _precedence).
    precedence: Mapping[str, tuple[str, ...]] = field(default_factory=_precedence)
    #: The range of every rate of the recording rules (alerts add their for: on top).
    rate_window: str = "5m"
    #: Quantiles of the batch-size (and queue-time) histograms recorded per phase.
    batch_quantiles: tuple[float, ...] = (0.5, 0.9, 0.99)
    #: Quantiles of SGLang's request latency histograms (TTFT, ITL, E2E) recorded per server.
    latency_quantiles: tuple[float, ...] = (0.5, 0.99)
    #: The quantile of sglang:queue_time_seconds that SGLangQueueWaitHigh compares (one of batch_quantiles).
    queue_wait_quantile: float = 0.9

    #: method.md sections 3 and 5: configure the running-request ceiling at 60-70% of the requests
    #: the KV pool holds (fragmentation, length variance). Recorded as the safe capacity; the
    #: Capacity dashboard offers the choices below.
    safety_factor: float = method.SAFETY_FACTOR
    safety_factor_choices: tuple[float, ...] = method.SAFETY_FACTOR_CHOICES

    #: Which scrape jobs are sglang-exporter sidecars (SGLangExporterDown); adapt to your scrape config.
    exporter_job_selector: str = 'job=~".*sglang.*"'
    #: clocks-event reasons that count as throttling (SGLangGPUThrottled); sw_power_cap has its own alert.
    throttle_reasons: tuple[str, ...] = ("sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown",
                                         "hw_power_brake_slowdown")

    #: Per alert: its thresholds and durations, by alert name.
    alerts: Mapping[str, Alerting] = field(default_factory=_alerts)

    @property
    def group_by(self) -> tuple[str, ...]:
        """The labels of one recorded scheduler series, and the join of its sources: target labels,
        group label, scheduler labels (the ``source`` label comes on top)."""
        return (*self.target_labels, self.group_label, *self.scheduler_labels)

    @property
    def server_by(self) -> tuple[str, ...]:
        """The labels of one recorded server series (SGLang's request latency): target and group labels."""
        return (*self.target_labels, self.group_label)

    @property
    def ranks_by(self) -> tuple[str, ...]:
        """The labels of one set of DP ranks (one server, or one SGLang Omni stage): ``group_by``
        without ``dp_rank``."""
        return tuple(label for label in self.group_by if label != "dp_rank")

    @property
    def priority_by(self) -> tuple[str, ...]:
        """The labels of one recorded priority-class series: server labels plus the class."""
        return (*self.server_by, self.priority_class_label)

    def record_ranks(self, metric: str, operation: str) -> str:
        """Name of a rule across the DP ranks: ``<ranks_level>:sglang_scheduler_<metric>:<operation>``."""
        return f"{self.ranks_level}:sglang_scheduler_{metric}:{operation.format(w=self.rate_window)}"

    def record_priority(self, metric: str, operation: str) -> str:
        """Name of a per-class rule: ``<priority_level>:sglang_<SGLang's name>:<operation>``."""
        return f"{self.priority_level}:sglang_{metric}:{operation.format(w=self.rate_window)}"

    def sources(self, figure: str) -> tuple[str, ...]:
        """The sources of a figure, most exact first (``precedence``)."""
        return self.precedence[figure]

    def runbook_url(self, alert: str) -> str:
        """Absolute URL of an alert's section: ``<runbook_base>#<alert name in lower case>``."""
        return f"{self.runbook_base}#{alert.lower()}"

    def record(self, metric: str, operation: str) -> str:
        """Name of a recording rule: ``<level>:sglang_scheduler_<metric>:<operation>``, where
        ``{w}`` in ``operation`` is the rate window (``rate{w}`` -> ``rate5m``)."""
        return f"{self.level}:sglang_scheduler_{metric}:{operation.format(w=self.rate_window)}"

    def record_server(self, metric: str, operation: str) -> str:
        """Name of a per-server recording rule: ``<server_level>:sglang_<metric>:<operation>`` (SGLang's
        own histogram name after ``sglang:``; never in the sglang_scheduler_* namespace)."""
        return f"{self.server_level}:sglang_{metric}:{operation.format(w=self.rate_window)}"


DEFAULT = Config()
