"""``sglang_scheduler_forward_pass*`` and ``sglang_exporter_fpm_*``: SGLang's per-forward-pass stream.

Every figure is exact (one message per forward pass; docs/fpm.md). Scheduler rows read one
scheduler's view of :class:`~exporter.sources.fpm.stats.RankStats`, endpoint rows one endpoint's view
of :class:`~exporter.sources.fpm.stats.EndpointStats` (:mod:`exporter.sources.fpm.collector`).
"""

from __future__ import annotations

from .buckets import PREFILL_BATCH_TOKENS_BUCKETS, REQUESTS_BUCKETS
from .defs import COUNTER, GAUGE, HISTOGRAM, SCHEDULER_LABELS, MetricDef


#: Seconds per pass: 1 ms .. 10 s (decode steps are 5-50 ms, long prefills up to seconds).
SECONDS_BUCKETS = (0.001, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
                   0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)
#: Prompt tokens computed per pass with prefill: the log's prefill-token bounds (exact to max(1, 5%)
#: up to 131,072 tokens), so the stream's percentiles read like the log's.
PREFILL_TOKENS_BUCKETS = PREFILL_BATCH_TOKENS_BUCKETS

S = SCHEDULER_LABELS
_MSG = "ForwardPassMetrics message (--enable-forward-pass-metrics, SGLang main since 2026-05)"


def _m(name, type_, labels, unit, read, source, help_, buckets=()) -> MetricDef:
    return MetricDef(name, type_, labels, unit, source, help_, "fpm", read, buckets)


ROWS = (
    _m("sglang_scheduler_forward_passes_total", COUNTER, (*S, "mode"), "passes", "passes",
       f"{_MSG}, one per pass (all-zero heartbeats excluded); mode from scheduled_requests",
       "Forward passes of the scheduler, one per FPM message (heartbeats excluded), by mode: prefill, decode, "
       "mixed (both), idle (no request: a DP-attention rank keeping step)."),
    _m("sglang_scheduler_forward_pass_requests", HISTOGRAM, (*S, "phase"), "requests",
       (("prefill", "prefill_requests"), ("decode", "decode_requests")),
       "scheduled_requests.num_prefill_requests / num_decode_requests",
       "Requests per forward pass, per phase (scheduled_requests.num_prefill_requests / num_decode_requests), "
       "observed when the phase has requests in that pass: the exact batch-size distribution.",
       REQUESTS_BUCKETS),
    _m("sglang_scheduler_forward_pass_seconds", HISTOGRAM, S, "seconds", "seconds", "wall_time",
       "Duration of each forward pass (wall_time: GPU time where SGLang's device timer runs, else "
       "scheduling to result).", SECONDS_BUCKETS),
    _m("sglang_scheduler_forward_pass_prefill_tokens", HISTOGRAM, S, "tokens", "prefill_tokens",
       "scheduled_requests.sum_prefill_tokens",
       "Prompt tokens computed per forward pass with prefill requests (scheduled_requests.sum_prefill_tokens).",
       PREFILL_TOKENS_BUCKETS),
    _m("sglang_scheduler_forward_pass_prefill_cached_tokens_total", COUNTER, S, "tokens",
       "prefill_cached_tokens", "scheduled_requests.sum_prefill_kv_tokens (0.5.22+: the cached prefix at "
       "schedule time; 0.5.18-0.5.21: the whole KV after the pass, less sum_prefill_tokens)",
       "Prompt tokens of prefill requests read from the KV cache instead of computed: radix-cache hits and "
       "earlier chunks (scheduled_requests.sum_prefill_kv_tokens, taken for what the release fills in; absent "
       "until a pass shows which)."),
    _m("sglang_scheduler_forward_pass_decode_kv_tokens_total", COUNTER, S, "tokens", "decode_kv_tokens",
       "scheduled_requests.sum_decode_kv_tokens",
       "KV context of the decode requests, summed over passes (scheduled_requests.sum_decode_kv_tokens); "
       "divided by the decode requests' sum it is the mean context per decode request."),
    _m("sglang_scheduler_forward_pass_retracted_tokens_total", COUNTER, S, "tokens", "retracted_tokens",
       "rises of queued_requests.sum_decode_kv_tokens from one pass to the next (waiting requests with output: "
       "seqlen = prompt + output; 0.5.18, 0.5.23)",
       "Prompt + output tokens of requests sent back to the waiting queue with output (retracted, or "
       "priority-preempted), counted as they enter it (rises of queued_requests.sum_decode_kv_tokens): "
       "SGLang's num_retracted_input_tokens + num_retracted_output_tokens. The upper bound of the tokens "
       "computed again (what is still cached at re-admission is not); sglang_scheduler_recomputed_tokens_total "
       "(the log's #new_tokens_gained) is the lower bound. Not retractions on a PD decode server."),
    _m("sglang_scheduler_forward_pass_queued_requests", GAUGE, (*S, "phase"), "requests", "queued_requests",
       "queued_requests.num_prefill_requests / num_decode_requests of the latest pass",
       "Waiting requests after the latest forward pass (queued_requests): phase=prefill not started, "
       "phase=decode retracted and waiting to resume (PD decode: pre-allocation and transfer queues)."),
    _m("sglang_scheduler_forward_pass_queued_tokens", GAUGE, (*S, "phase"), "tokens", "queued_tokens",
       "queued_requests.sum_prefill_tokens / sum_decode_kv_tokens of the latest pass",
       "Tokens of the waiting requests after the latest forward pass: prompt tokens (phase=prefill), KV "
       "context (phase=decode)."),
    _m("sglang_scheduler_forward_pass_last_timestamp_seconds", GAUGE, S, "seconds", "last_pass_wall",
       "the exporter's clock when the subscriber received the scheduler's latest pass",
       "Wall-clock time the exporter received the scheduler's latest forward pass."),
    _m("sglang_exporter_fpm_up", GAUGE, ("endpoint",), "1", "up",
       "the subscriber: a pass or heartbeat within --fpm.timeout",
       "1 when the endpoint sent a forward pass or heartbeat within --fpm.timeout, else 0."),
    _m("sglang_exporter_fpm_messages_total", COUNTER, ("endpoint", "result"), "messages", "results",
       "the subscriber's decoding and the messages' sequence numbers (gaps are lost)",
       "FPM messages by result: ok (a forward pass), heartbeat, undecodable (frames or payload), invalid "
       "(impossible values), lost (sequence numbers missing: passes never received)."),
    _m("sglang_exporter_fpm_publisher_restarts_total", COUNTER, ("endpoint",), "restarts", "restarts",
       "the messages' sequence numbers (a number at or below the previous one)",
       "Times the endpoint's sequence number went back (the SGLang scheduler restarted)."),
    _m("sglang_exporter_fpm_schema_info", GAUGE, ("endpoint", "version", "extra_fields", "missing_fields"), "1",
       "schema", "the message's map keys against SGLang's ForwardPassMetrics fields (sampled)",
       "Fields the endpoint's publisher sends relative to SGLang's ForwardPassMetrics (sampled); value 1."),
    _m("sglang_exporter_fpm_last_message_timestamp_seconds", GAUGE, ("endpoint",), "seconds", "last_message_wall",
       "the exporter's clock when the subscriber received the endpoint's latest message",
       "Wall-clock time of the endpoint's latest forward pass or heartbeat."),
)
