"""``sglang_scheduler_forward_pass*`` and ``sglang_exporter_fpm_*`` families from :class:`FpmStats`.

Every figure here is exact: SGLang sends one message per forward pass, so counts, histograms and
sums are complete (up to the messages counted as ``lost``). Per-scheduler series carry the labels of
:data:`SCHEDULER_LABELS`; the endpoint's series carry ``endpoint``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from .stats import MODES, RESULTS, Buckets, FpmStats, RankStats

#: Labels that identify a scheduler on every ``sglang_scheduler_forward_pass*`` series: the one place
#: to add ``stage`` (SGLang Omni, issue 13) beside ``dp_rank``.
SCHEDULER_LABELS = ("dp_rank",)


def scheduler_labels(dp_rank: int) -> list[str]:
    """Values of :data:`SCHEDULER_LABELS` for a scheduler."""
    return [str(dp_rank)]


#: (name, type, labels beyond the scheduler's, HELP): the metric reference of this source, also
#: rendered in docs/fpm.md (tests/test_fpm_doc.py keeps them in step).
METRICS = (
    ("sglang_scheduler_forward_passes_total", "counter", ("mode",),
     "Forward passes of the scheduler, one per FPM message (heartbeats excluded), by mode: prefill, decode, "
     "mixed (both), idle (no request: a DP-attention rank keeping step)."),
    ("sglang_scheduler_forward_pass_requests", "histogram", ("phase",),
     "Requests per forward pass, per phase (scheduled_requests.num_prefill_requests / num_decode_requests), "
     "observed when the phase has requests in that pass: the exact batch-size distribution."),
    ("sglang_scheduler_forward_pass_seconds", "histogram", (),
     "Duration of each forward pass (wall_time: GPU time where SGLang's device timer runs, else "
     "scheduling to result)."),
    ("sglang_scheduler_forward_pass_prefill_tokens", "histogram", (),
     "Prompt tokens computed per forward pass with prefill requests (scheduled_requests.sum_prefill_tokens)."),
    ("sglang_scheduler_forward_pass_prefill_cached_tokens_total", "counter", (),
     "Prompt tokens of prefill requests read from the KV cache instead of computed: radix-cache hits and "
     "earlier chunks (scheduled_requests.sum_prefill_kv_tokens)."),
    ("sglang_scheduler_forward_pass_decode_kv_tokens_total", "counter", (),
     "KV context of the decode requests, summed over passes (scheduled_requests.sum_decode_kv_tokens); "
     "divided by the decode requests' sum it is the mean context per decode request."),
    ("sglang_scheduler_forward_pass_queued_requests", "gauge", ("phase",),
     "Waiting requests after the latest forward pass (queued_requests): phase=prefill not started, "
     "phase=decode retracted and waiting to resume (PD decode: pre-allocation and transfer queues)."),
    ("sglang_scheduler_forward_pass_queued_tokens", "gauge", ("phase",),
     "Tokens of the waiting requests after the latest forward pass: prompt tokens (phase=prefill), KV "
     "context (phase=decode)."),
    ("sglang_scheduler_forward_pass_last_timestamp_seconds", "gauge", (),
     "Wall-clock time the exporter received the scheduler's latest forward pass."),
    ("sglang_exporter_fpm_up", "gauge", ("endpoint",),
     "1 when the endpoint sent a forward pass or heartbeat within --fpm.timeout, else 0."),
    ("sglang_exporter_fpm_messages_total", "counter", ("endpoint", "result"),
     "FPM messages by result: ok (a forward pass), heartbeat, undecodable (frames or payload), invalid "
     "(impossible values), lost (sequence numbers missing: passes never received)."),
    ("sglang_exporter_fpm_publisher_restarts_total", "counter", ("endpoint",),
     "Times the endpoint's sequence number went back (the SGLang scheduler restarted)."),
    ("sglang_exporter_fpm_schema_info", "gauge", ("endpoint", "version", "extra_fields", "missing_fields"),
     "Fields the endpoint's publisher sends relative to SGLang's ForwardPassMetrics (sampled); value 1."),
    ("sglang_exporter_fpm_last_message_timestamp_seconds", "gauge", ("endpoint",),
     "Wall-clock time of the endpoint's latest forward pass or heartbeat."),
)
_HELP = {name: help_ for name, _, _, help_ in METRICS}


def _family(kind, name: str, extra: tuple[str, ...] = (), scheduler: bool = True):
    base = name.removesuffix("_total") if kind is CounterMetricFamily else name
    labels = (SCHEDULER_LABELS if scheduler else ()) + extra
    return kind(base, _HELP[name], labels=labels)


def _add_hist(fam: HistogramMetricFamily, labels: list[str], b: Buckets) -> None:
    cumulative = b.cumulative()
    buckets = [(repr(float(bound)), c) for bound, c in zip(b.bounds, cumulative)]
    buckets.append(("+Inf", cumulative[-1]))
    fam.add_metric(labels, buckets, b.total)


class FpmCollector(Collector):
    """Yields this source's families from :class:`FpmStats` (a read under its lock; no I/O).

    Args:
        stats: The statistics the subscriber keeps.
    """

    def __init__(self, stats: FpmStats):
        self.stats = stats

    def describe(self) -> Iterator[Metric]:
        return iter(())  # do not run collect() at registration

    def collect(self) -> Iterator[Metric]:
        st = self.stats
        with st.lock:
            now = st.monotonic()
            return iter(self._scheduler_families(st, now) + self._endpoint_families(st, now))

    def _scheduler_families(self, st: FpmStats, now: float) -> list[Metric]:
        passes = _family(CounterMetricFamily, "sglang_scheduler_forward_passes_total", ("mode",))
        requests = _family(HistogramMetricFamily, "sglang_scheduler_forward_pass_requests", ("phase",))
        seconds = _family(HistogramMetricFamily, "sglang_scheduler_forward_pass_seconds")
        tokens = _family(HistogramMetricFamily, "sglang_scheduler_forward_pass_prefill_tokens")
        cached = _family(CounterMetricFamily, "sglang_scheduler_forward_pass_prefill_cached_tokens_total")
        kv = _family(CounterMetricFamily, "sglang_scheduler_forward_pass_decode_kv_tokens_total")
        q_req = _family(GaugeMetricFamily, "sglang_scheduler_forward_pass_queued_requests", ("phase",))
        q_tok = _family(GaugeMetricFamily, "sglang_scheduler_forward_pass_queued_tokens", ("phase",))
        last = _family(GaugeMetricFamily, "sglang_scheduler_forward_pass_last_timestamp_seconds")
        for dp in sorted(st.ranks):
            r: RankStats = st.ranks[dp]
            labels = scheduler_labels(dp)
            for mode, n in zip(MODES, r.passes):
                passes.add_metric(labels + [mode], n)
            _add_hist(requests, labels + ["prefill"], r.prefill_requests)
            _add_hist(requests, labels + ["decode"], r.decode_requests)
            _add_hist(seconds, labels, r.seconds)
            _add_hist(tokens, labels, r.prefill_tokens)
            cached.add_metric(labels, r.prefill_cached_tokens)
            kv.add_metric(labels, r.decode_kv_tokens)
            if r.queued is not None and st.rank_fresh(r, now):
                q = r.queued
                q_req.add_metric(labels + ["prefill"], q.num_prefill_requests)
                q_req.add_metric(labels + ["decode"], q.num_decode_requests)
                q_tok.add_metric(labels + ["prefill"], q.sum_prefill_tokens)
                q_tok.add_metric(labels + ["decode"], q.sum_decode_kv_tokens)
            if r.last_pass_wall is not None:
                last.add_metric(labels, r.last_pass_wall)
        return [passes, requests, seconds, tokens, cached, kv, q_req, q_tok, last]

    def _endpoint_families(self, st: FpmStats, now: float) -> list[Metric]:
        up = _family(GaugeMetricFamily, "sglang_exporter_fpm_up", ("endpoint",), scheduler=False)
        messages = _family(CounterMetricFamily, "sglang_exporter_fpm_messages_total", ("endpoint", "result"),
                           scheduler=False)
        restarts = _family(CounterMetricFamily, "sglang_exporter_fpm_publisher_restarts_total", ("endpoint",),
                           scheduler=False)
        schema = _family(GaugeMetricFamily, "sglang_exporter_fpm_schema_info",
                         ("endpoint", "version", "extra_fields", "missing_fields"), scheduler=False)
        last = _family(GaugeMetricFamily, "sglang_exporter_fpm_last_message_timestamp_seconds", ("endpoint",),
                       scheduler=False)
        for i, ep in enumerate(st.endpoints):
            up.add_metric([ep.endpoint], 1 if st.endpoint_up(i, now) else 0)
            for result in RESULTS:
                messages.add_metric([ep.endpoint, result], ep.results[result])
            restarts.add_metric([ep.endpoint], ep.restarts)
            if ep.schema is not None:
                schema.add_metric([ep.endpoint, *ep.schema], 1)
            if ep.last_message_wall is not None:
                last.add_metric([ep.endpoint], ep.last_message_wall)
        return [up, messages, restarts, schema, last]
