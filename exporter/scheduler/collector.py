"""The ``sglang_scheduler_*`` collector: a :class:`~exporter.scheduler.store.SchedulerStore`
snapshot turned into metric families at scrape time (outside the store's lock).

Every family's HELP names the log line and field it comes from. All scheduler metrics carry the
label ``dp_rank``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from .store import HistogramData, SchedulerSnapshot, SchedulerStore

# (metric name, ReplicaCounters attribute, HELP) for plain per-scheduler counters.
_COUNTERS = (
    ("sglang_scheduler_retractions_total", "retractions",
     "Retraction events (one per 'KV cache pool is full. Retract requests.' / 'Decode out of memory "
     "happened' line of the scheduler, counted once across its TP/PP replicas)."),
    ("sglang_scheduler_retracted_requests_total", "retracted_requests",
     "Requests retracted (sum of #retracted_reqs of retraction lines)."),
    ("sglang_scheduler_retract_aborted_requests_total", "retract_aborts",
     "Requests aborted because even alone they did not fit ('retract_decode: aborted last request ... "
     "due to OOM', 2026-03+)."),
    ("sglang_scheduler_retraction_freed_tokens_total", "retraction_freed_tokens",
     "KV tokens freed by retractions (sum of #new_tokens_gained of retraction lines, 2025-12-24+)."),
    ("sglang_scheduler_prefill_computed_tokens_total", "prefill_computed_tokens",
     "Prompt tokens computed by prefill batches, re-prefill of retracted requests included "
     "(sum of #new-token of Prefill batch lines)."),
    ("sglang_scheduler_prefill_cached_tokens_total", "prefill_cached_tokens",
     "Prompt tokens served from the radix cache (sum of #cached-token of Prefill batch lines)."),
    ("sglang_scheduler_decode_tokens_total", "decode_tokens",
     "Estimated decode tokens: per Decode batch line, #running-req x decode-log interval x accept len "
     "(accept len 1 without speculative decoding)."),
    ("sglang_scheduler_admitted_requests_total", "admitted_requests",
     "Requests admitted from the waiting queue: #new-seq of Prefill batch lines, less the continuing "
     "request of a chunked prefill (previous batch's #new-token reached chunked_prefill_size)."),
    ("sglang_scheduler_queue_request_seconds_total", "queue_request_seconds",
     "Time integral of #queue-req (Prefill/Decode batch lines) in request-seconds; mean queue wait = "
     "rate(this) / rate(sglang_scheduler_admitted_requests_total) (Little's law)."),
)

# (gauge key in SchedulerState.gauges, metric name, HELP) for latest-line gauges.
_LINE_GAUGES = (
    ("running_requests", "sglang_scheduler_running_requests",
     "Running requests: #running-req of the latest Decode batch line (actual decode batch) or Prefill "
     "batch line (decode batch at schedule time)."),
    ("queue_requests", "sglang_scheduler_queue_requests",
     "Waiting requests: #queue-req of the latest Prefill/Decode batch line."),
    ("kv_usage_ratio", "sglang_scheduler_kv_usage_ratio",
     "KV-cache occupancy (token usage, excludes evictable radix cache) of the latest Prefill/Decode "
     "batch line; for hybrid pools the maximum over the device pools."),
    ("kv_used_tokens", "sglang_scheduler_kv_used_tokens",
     "KV tokens in use: #token (#full token, #gpu token) of the latest stats line."),
    ("pending_tokens", "sglang_scheduler_pending_tokens",
     "Tokens of all waiting requests: #pending-token of the latest Prefill batch line (2026-04+)."),
    ("gen_throughput", "sglang_scheduler_gen_throughput_tokens_per_second",
     "gen throughput (token/s) of the latest Decode batch line, as computed by SGLang."),
    ("input_throughput", "sglang_scheduler_input_throughput_tokens_per_second",
     "input throughput (token/s) of the latest Prefill batch line, as computed by SGLang."),
    ("spec_accept_length", "sglang_scheduler_spec_accept_length",
     "Speculative decoding: accept len (mean committed tokens per request per verify step) of the "
     "latest Decode batch line."),
    ("spec_accept_rate", "sglang_scheduler_spec_accept_ratio",
     "Speculative decoding: accept rate of the latest Decode batch line (semantics changed 2026-04-28)."),
    ("pd_preallocated_usage_ratio", "sglang_scheduler_pd_preallocated_usage_ratio",
     "PD decode: pre-allocated usage of the latest Decode batch line."),
    ("new_token_ratio", "sglang_scheduler_new_token_ratio",
     "Admission reservation factor after the latest retraction (#new_token_ratio: a -> b, the b)."),
)

_CAPACITY_GAUGES = (
    ("max_total_num_tokens", "sglang_scheduler_max_total_tokens",
     "KV-cache capacity in tokens: max_total_num_tokens of the start-up capacity line."),
    ("max_running_requests", "sglang_scheduler_max_running_requests",
     "Configured ceiling of running requests: max_running_requests of the start-up capacity line."),
    ("context_len", "sglang_scheduler_context_length",
     "Model context length in tokens: context_len of the start-up capacity line."),
    ("chunked_prefill_size", "sglang_scheduler_chunked_prefill_size",
     "Chunked-prefill chunk in tokens: chunked_prefill_size of the start-up capacity line."),
)

_HISTOGRAMS = (
    ("sglang_scheduler_prefill_batch_tokens", "prefill_tokens",
     "Tokens computed per prefill batch (#new-token of each Prefill batch line)."),
    ("sglang_scheduler_queue_wait_seconds", "queue_wait",
     "Per-request queue wait: queue_duration of 'Req Time Stats(...)' / 'ReqTimeStats(...)' lines "
     "(--enable-request-time-stats-logging, 2025-05+)."),
)

_DP = ("dp_rank",)


class SchedulerCollector(Collector):
    """Yields every ``sglang_scheduler_*`` family from a :meth:`SchedulerStore.snapshot`.

    Args:
        store: The scheduler state; only its snapshot is read (the copy is the only work under
            its lock).
        idle_after: Seconds after the latest Prefill/Decode line of a scheduler past which its
            latest-line gauges are no longer exported (SGLang prints nothing while idle, so the last
            values would be stale). ``None`` keeps them forever (one-shot mode).
        clock: Wall-clock source, seconds since the epoch.
    """

    def __init__(self, store: SchedulerStore, idle_after: float | None = 60.0, clock=time.time):
        self.store = store
        self.idle_after = idle_after
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        return iter(self._families(self.store.snapshot()))

    def _families(self, snap: SchedulerSnapshot) -> list[Metric]:
        now = self.clock()
        out: list[Metric] = []

        batch = HistogramMetricFamily(
            "sglang_scheduler_batch_size",
            "Actual batch size: #new-seq of each Prefill batch line (phase=prefill) and #running-req of "
            "each Decode batch line (phase=decode, sampled every decode-log interval).",
            labels=("dp_rank", "phase"))
        kv_hist = HistogramMetricFamily(
            "sglang_scheduler_kv_usage_observed_ratio",
            "KV-cache occupancy observed on each Prefill/Decode batch line (token usage; maximum over "
            "device pools for hybrid models).",
            labels=("dp_rank", "phase"))
        batches = CounterMetricFamily(
            "sglang_scheduler_batches_total",
            "Forward batches: one per Prefill batch line (phase=prefill); decode steps estimated as Decode "
            "batch lines x decode-log interval (phase=decode).",
            labels=("dp_rank", "phase"))
        recomputed = CounterMetricFamily(
            "sglang_scheduler_recomputed_tokens_total",
            "Tokens that retracted requests must compute again: #new_tokens_gained of retraction lines "
            "(method=new_tokens_gained, 2025-12-24+), else #retracted_reqs x (#token / #running-req) of the "
            "latest Decode batch line (method=estimated).",
            labels=("dp_rank", "method"))
        counters = [CounterMetricFamily(name, help_, labels=_DP) for name, _, help_ in _COUNTERS]
        hists = [HistogramMetricFamily(name, help_, labels=_DP) for name, _, help_ in _HISTOGRAMS]
        gauges = {key: GaugeMetricFamily(name, help_, labels=_DP) for key, name, help_ in _LINE_GAUGES}
        pools = GaugeMetricFamily(
            "sglang_scheduler_kv_pool_usage_ratio",
            "KV-cache occupancy per pool of the latest stats line: pool=kv (token usage), full, swa, mamba "
            "(hybrid models), gpu, cpu (HiSparse device and host tiers).",
            labels=("dp_rank", "pool"))
        pd = GaugeMetricFamily(
            "sglang_scheduler_pd_queue_requests",
            "PD disaggregation queues of the latest stats line: bootstrap (#bootstrap-req, #prealloc-req, "
            "#unbootstrapped-req on prefill), inflight (#inflight-req, #transferring-req), optimistic, and "
            "on decode prealloc (#prealloc-req), transfer (#transfer-req), retracted (#retracted-req).",
            labels=("dp_rank", "queue"))
        caps = {key: GaugeMetricFamily(name, help_, labels=_DP) for key, name, help_ in _CAPACITY_GAUGES}
        interval = GaugeMetricFamily(
            "sglang_scheduler_decode_log_interval",
            "Decode steps per Decode batch line in effect: decode_log_interval of the server_args line, "
            "else --sglang.decode-log-interval.", labels=_DP)
        last_stats = GaugeMetricFamily(
            "sglang_scheduler_last_stats_line_timestamp_seconds",
            "Wall-clock time the exporter read the scheduler's latest Prefill/Decode batch line.",
            labels=_DP)

        for s in snap.schedulers:
            dp = s.identity[0]
            for phase, attr in (("prefill", "batch_size_prefill"), ("decode", "batch_size_decode")):
                _add_hist(batch, [dp, phase], s.histogram[attr])
            for phase, attr in (("prefill", "kv_usage_prefill"), ("decode", "kv_usage_decode")):
                _add_hist(kv_hist, [dp, phase], s.histogram[attr])
            batches.add_metric([dp, "prefill"], s.counter["prefill_batches"])
            batches.add_metric([dp, "decode"], s.counter["decode_steps"])
            recomputed.add_metric([dp, "new_tokens_gained"], s.counter["recomputed_tokens_gained"])
            recomputed.add_metric([dp, "estimated"], s.counter["recomputed_tokens_estimated"])
            for fam, (_, attr, _) in zip(counters, _COUNTERS):
                fam.add_metric([dp], s.counter[attr])
            for fam, (_, attr, _) in zip(hists, _HISTOGRAMS):
                _add_hist(fam, [dp], s.histogram[attr])
            fresh = self.idle_after is None or (
                s.last_stats_wall is not None and now - s.last_stats_wall <= self.idle_after)
            if fresh:
                for key, value in s.latest.items():
                    if key in gauges:
                        gauges[key].add_metric([dp], value)
                for pool, value in sorted(s.latest["kv_pools"].items()):
                    pools.add_metric([dp, pool], value)
                for queue, value in sorted(s.latest["pd_queues"].items()):
                    pd.add_metric([dp, queue], value)
            cap = s.capacity
            if cap is not None:
                for key, fam in caps.items():
                    value = getattr(cap, key)
                    if value is not None:
                        fam.add_metric([dp], value)
            interval.add_metric([dp], s.decode_log_interval)
            if s.last_stats_wall is not None:
                last_stats.add_metric([dp], s.last_stats_wall)

        out += [batch, batches, *counters, recomputed, kv_hist, *hists, *gauges.values(), pools, pd,
                *caps.values(), interval, last_stats]
        return out


def _add_hist(fam: HistogramMetricFamily, labels: list[str], h: HistogramData) -> None:
    buckets = [(_le(b), c) for b, c in zip(h.bounds, h.cumulative)]
    buckets.append(("+Inf", h.cumulative[-1]))
    fam.add_metric(labels, buckets, h.sum)


def _le(bound: float) -> str:
    return repr(float(bound))
