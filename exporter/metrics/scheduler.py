"""``sglang_scheduler_*``: what each SGLang scheduler did, from the scheduler state.

Read paths are relative to a :class:`~exporter.scheduler.store.SchedulerView`: ``counter.*`` and
``histogram.*`` are the replica-max counters and histograms of
:class:`~exporter.scheduler.state.ReplicaCounters`, ``latest.*`` the latest stats line's values
(withheld once the scheduler has been idle for ``--sglang.idle-after``), ``capacity.*`` the start-up
capacity line.
"""

from __future__ import annotations

from .buckets import PREFILL_BATCH_TOKENS_BUCKETS, REQUESTS_BUCKETS
from .defs import COUNTER, GAUGE, HISTOGRAM, SCHEDULER_LABELS, MetricDef

#: ``sglang_scheduler_batch_size`` buckets: the stream's requests-per-pass bounds (exact to max(1, 5%)
#: up to 1024 requests, :mod:`.buckets`), so both sources' percentiles read alike.
BATCH_SIZE_BUCKETS = REQUESTS_BUCKETS
#: KV-usage ratio buckets, finer near saturation.
KV_USAGE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99, 1.0)
#: Tokens per prefill batch (``#new-token``): exact to max(1, 5%) up to 131,072 tokens (:mod:`.buckets`).
PREFILL_TOKEN_BUCKETS = PREFILL_BATCH_TOKENS_BUCKETS
#: Queue wait in seconds, 1 ms .. 10 min.
QUEUE_WAIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                      30.0, 60.0, 120.0, 300.0, 600.0)

#: Histograms whose served bounds are a subset of the state's (:func:`.buckets.served_bounds`, unless
#: ``--sglang.fine-buckets``): histogram field -> (the capacity fields whose largest value is the
#: ceiling the server can reach, coarse). Batch sizes keep every max(1, 5%) bound up to
#: ``max_running_requests`` (the rules' percentiles); tokens per prefill batch, which no rule or panel
#: takes a percentile of, keep one bound per power of two up to ``--max-prefill-tokens`` or
#: ``--chunked-prefill-size``, whichever is larger.
SERVED = {
    "batch_size_prefill": (("max_running_requests",), False),
    "batch_size_decode": (("max_running_requests",), False),
    "prefill_tokens": (("max_prefill_tokens", "chunked_prefill_size"), True),
}

#: Every value the mapping labels of the rows below can take (the parser's pools and PD queues); the
#: series budget of docs/metrics.md counts them.
LABEL_VALUES = {
    "pool": ("kv", "full", "swa", "mamba", "gpu", "cpu"),
    "queue": ("bootstrap", "inflight", "optimistic", "prealloc", "transfer", "host_receive", "retracted"),
}
#: The prose before the series budget that scripts/build_metrics_doc.py writes into docs/metrics.md.
BUDGET_TEXT = (
    "Series per scheduler (one DP rank), at most: each histogram has its served bounds, `+Inf`, `_sum` and "
    "`_count` per phase. The scheduler state keeps the full bounds below; `/metrics` serves a subset of "
    "them (exact: a cumulative histogram read at fewer `le` is still one; `SERVED` in "
    "`exporter/metrics/scheduler.py`). Batch sizes keep every max(1, 5%) bound up to the scheduler's "
    "`max_running_requests` (Prometheus' `histogram_quantile` of p50, p90 and p99 is then within max(1, 5%) "
    "of the exact percentile), then two bounds at about 2x and 4x it; tokens per prefill batch, of which "
    "no rule or panel takes a percentile, keep one bound per power of two up to the larger of "
    "`max_prefill_tokens` and `chunked_prefill_size`, then 2x and 4x. A server with N DP ranks serves N "
    "times this, plus the `sglang_exporter_*` series. Pools and PD queues appear only where the log prints "
    "them, and every latest-line gauge disappears while the scheduler is idle.")
#: The prose before the table of series by ceiling in docs/metrics.md.
CEILING_TEXT = (
    "With the start-up capacity line read (a sidecar that starts with the server), the batch-size "
    "histograms stop at the scheduler's `max_running_requests`; the most series a scheduler can then "
    "serve, all pools and PD queues counted (a plain server serves fewer: 130 on the test bed's "
    "real 0.5.23 log, `max_running_requests` 16):")

S = SCHEDULER_LABELS
_RETRACTION_LINES = ("retraction lines: 'KV cache pool is full. Retract requests.' (2025-05-31+), 'Decode out "
                     "of memory happened.' (2024-08..2025-05), 'decode out of memory happened,' (2024-01..08)")


def _m(name, type_, labels, unit, read, source, help_, buckets=()) -> MetricDef:
    return MetricDef(name, type_, labels, unit, source, help_, "scheduler", read, buckets)


ROWS = (
    _m("sglang_scheduler_batch_size", HISTOGRAM, (*S, "phase"), "requests",
       (("prefill", "histogram.batch_size_prefill"), ("decode", "histogram.batch_size_decode")),
       "Prefill batch line #new-seq (#seq in 2024-01); Decode batch line #running-req (one line per "
       "--decode-log-interval decode steps: a sample)",
       "Actual batch size: #new-seq of each Prefill batch line (phase=prefill) and #running-req of each "
       "Decode batch line (phase=decode, sampled every decode-log interval).", BATCH_SIZE_BUCKETS),
    _m("sglang_scheduler_batches_total", COUNTER, (*S, "phase"), "batches",
       (("prefill", "counter.prefill_batches"), ("decode", "counter.decode_steps")),
       "Prefill batch lines; Decode batch lines x decode_log_interval (server_args, 2024-10-30+, else the "
       "setting): an estimate",
       "Forward batches: one per Prefill batch line (phase=prefill); decode steps estimated as Decode batch "
       "lines x decode-log interval (phase=decode)."),
    _m("sglang_scheduler_retractions_total", COUNTER, S, "events", "counter.retractions", _RETRACTION_LINES,
       "Retraction events (one per 'KV cache pool is full. Retract requests.' / 'Decode out of memory "
       "happened' line of the scheduler, counted once across its TP/PP replicas)."),
    _m("sglang_scheduler_retracted_requests_total", COUNTER, S, "requests", "counter.retracted_requests",
       "#retracted_reqs of retraction lines",
       "Requests retracted (sum of #retracted_reqs of retraction lines)."),
    _m("sglang_scheduler_retract_aborted_requests_total", COUNTER, S, "requests", "counter.retract_aborts",
       "'retract_decode: aborted last request {rid} due to OOM' (2026-03-12+, WARNING)",
       "Requests aborted because even alone they did not fit ('retract_decode: aborted last request ... "
       "due to OOM', 2026-03+)."),
    _m("sglang_scheduler_retraction_freed_tokens_total", COUNTER, S, "tokens", "counter.retraction_freed_tokens",
       "#new_tokens_gained of retraction lines (2025-12-24+)",
       "KV tokens freed by retractions (sum of #new_tokens_gained of retraction lines, 2025-12-24+)."),
    _m("sglang_scheduler_prefill_computed_tokens_total", COUNTER, S, "tokens", "counter.prefill_computed_tokens",
       "Prefill batch line #new-token (#new_token in 2024-01)",
       "Prompt tokens computed by prefill batches, re-prefill of retracted requests included "
       "(sum of #new-token of Prefill batch lines)."),
    _m("sglang_scheduler_prefill_cached_tokens_total", COUNTER, S, "tokens", "counter.prefill_cached_tokens",
       "Prefill batch line #cached-token (#cached_token in 2024-01)",
       "Prompt tokens served from the radix cache (sum of #cached-token of Prefill batch lines)."),
    _m("sglang_scheduler_decode_tokens_total", COUNTER, S, "tokens", "counter.decode_tokens",
       "Decode batch line #running-req and accept len (speculative decoding, 2025-01+), decode_log_interval: "
       "an estimate",
       "Estimated decode tokens: per Decode batch line, #running-req x decode-log interval x accept len "
       "(accept len 1 without speculative decoding)."),
    _m("sglang_scheduler_decode_kv_tokens_total", COUNTER, S, "tokens", "counter.decode_kv_tokens",
       "#token, #full token (2025-06+) or #gpu token (HiSparse, 2026-04+) of Decode batch lines",
       "KV tokens held by the running requests, summed over the Decode batch lines that print a token count "
       "and running requests; KV tokens per running request = rate(this) / "
       "rate(sglang_scheduler_decode_kv_requests_total) (exporter.method.kv_tokens_per_request)."),
    _m("sglang_scheduler_decode_kv_requests_total", COUNTER, S, "requests", "counter.decode_kv_requests",
       "#running-req of Decode batch lines that print a token count",
       "#running-req summed over the Decode batch lines counted by sglang_scheduler_decode_kv_tokens_total."),
    _m("sglang_scheduler_admitted_requests_total", COUNTER, S, "requests", "counter.admitted_requests",
       "Prefill batch line #new-seq and #new-token; chunked_prefill_size of the capacity line or server_args",
       "Requests admitted from the waiting queue: #new-seq of Prefill batch lines, less the continuing "
       "request of a chunked prefill (previous batch's #new-token reached chunked_prefill_size)."),
    _m("sglang_scheduler_queue_request_seconds_total", COUNTER, S, "seconds", "counter.queue_request_seconds",
       "#queue-req (#remaining_req in 2024-01) of Prefill/Decode batch lines, integrated over the lines' "
       "timestamps (gaps capped at 60 s)",
       "Time integral of #queue-req (Prefill/Decode batch lines) in request-seconds; mean queue wait = "
       "rate(this) / rate(sglang_scheduler_admitted_requests_total) (Little's law)."),
    _m("sglang_scheduler_recomputed_tokens_total", COUNTER, (*S, "method"), "tokens",
       (("new_tokens_gained", "counter.recomputed_tokens_gained"),
        ("estimated", "counter.recomputed_tokens_estimated")),
       "#new_tokens_gained of retraction lines (2025-12-24+); else #retracted_reqs x #token / #running-req "
       "of the latest Decode batch line (an estimate)",
       "Tokens that retracted requests must compute again: #new_tokens_gained of retraction lines "
       "(method=new_tokens_gained, 2025-12-24+), else #retracted_reqs x (#token / #running-req) of the "
       "latest Decode batch line (method=estimated)."),
    _m("sglang_scheduler_kv_usage_observed_ratio", HISTOGRAM, (*S, "phase"), "ratio",
       (("prefill", "histogram.kv_usage_prefill"), ("decode", "histogram.kv_usage_decode")),
       "token usage of Prefill/Decode batch lines (hybrid pools 2025-06+, HiSparse gpu 2026-04+)",
       "KV-cache occupancy observed on each Prefill/Decode batch line (token usage; maximum over "
       "device pools for hybrid models).", KV_USAGE_BUCKETS),
    _m("sglang_scheduler_prefill_batch_tokens", HISTOGRAM, S, "tokens", "histogram.prefill_tokens",
       "Prefill batch line #new-token",
       "Tokens computed per prefill batch (#new-token of each Prefill batch line).", PREFILL_TOKEN_BUCKETS),
    _m("sglang_scheduler_queue_wait_seconds", HISTOGRAM, S, "seconds", "histogram.queue_wait",
       "queue_duration of 'Req Time Stats(...)' (2025-05-12..2026-02) and 'ReqTimeStats(...)' (2026-05-06+) "
       "lines (--enable-request-time-stats-logging)",
       "Per-request queue wait: queue_duration of 'Req Time Stats(...)' / 'ReqTimeStats(...)' lines "
       "(--enable-request-time-stats-logging, 2025-05+).", QUEUE_WAIT_BUCKETS),
    _m("sglang_scheduler_running_requests", GAUGE, S, "requests", "latest.running_requests",
       "#running-req of the latest Decode batch (2024-01+) or Prefill batch line",
       "Running requests: #running-req of the latest Decode batch line (actual decode batch) or Prefill "
       "batch line (decode batch at schedule time)."),
    _m("sglang_scheduler_queue_requests", GAUGE, S, "requests", "latest.queue_requests",
       "#queue-req (#remaining_req in 2024-01) of the latest Prefill/Decode batch line",
       "Waiting requests: #queue-req of the latest Prefill/Decode batch line."),
    _m("sglang_scheduler_kv_usage_ratio", GAUGE, S, "ratio", "latest.kv_usage_ratio",
       "token usage of the latest Prefill/Decode batch line (maximum over full/swa/mamba/gpu pools)",
       "KV-cache occupancy (token usage, excludes evictable radix cache) of the latest Prefill/Decode "
       "batch line; for hybrid pools the maximum over the device pools."),
    _m("sglang_scheduler_kv_used_tokens", GAUGE, S, "tokens", "latest.kv_used_tokens",
       "#token, #full token (2025-06+) or #gpu token (HiSparse, 2026-04+) of the latest stats line",
       "KV tokens in use: #token (#full token, #gpu token) of the latest stats line; absent while the latest "
       "stats line prints none (Prefill batch lines)."),
    _m("sglang_scheduler_pending_tokens", GAUGE, S, "tokens", "latest.pending_tokens",
       "#pending-token of the latest Prefill batch line (2026-04+)",
       "Tokens of all waiting requests: #pending-token of the latest Prefill batch line (2026-04+)."),
    _m("sglang_scheduler_gen_throughput_tokens_per_second", GAUGE, S, "tokens/second", "latest.gen_throughput",
       "gen throughput (token/s) of the latest Decode batch line",
       "gen throughput (token/s) of the latest Decode batch line, as computed by SGLang."),
    _m("sglang_scheduler_input_throughput_tokens_per_second", GAUGE, S, "tokens/second", "latest.input_throughput",
       "input throughput (token/s) of the latest Prefill batch line",
       "input throughput (token/s) of the latest Prefill batch line, as computed by SGLang."),
    _m("sglang_scheduler_spec_accept_length", GAUGE, S, "tokens", "latest.spec_accept_length",
       "accept len of the latest Decode batch line (speculative decoding, 2025-01+)",
       "Speculative decoding: accept len (mean committed tokens per request per verify step) of the "
       "latest Decode batch line."),
    _m("sglang_scheduler_spec_accept_ratio", GAUGE, S, "ratio", "latest.spec_accept_rate",
       "accept rate of the latest Decode batch line (2025-10+; semantics changed 2026-04-28)",
       "Speculative decoding: accept rate of the latest Decode batch line (semantics changed 2026-04-28)."),
    _m("sglang_scheduler_pd_preallocated_usage_ratio", GAUGE, S, "ratio", "latest.pd_preallocated_usage_ratio",
       "pre-allocated usage of the latest Decode batch line (PD decode)",
       "PD decode: pre-allocated usage of the latest Decode batch line."),
    _m("sglang_scheduler_new_token_ratio", GAUGE, S, "ratio", "latest.new_token_ratio",
       "#new_token_ratio: a -> b of the latest retraction line (the b)",
       "Admission reservation factor after the latest retraction (#new_token_ratio: a -> b, the b)."),
    _m("sglang_scheduler_kv_pool_usage_ratio", GAUGE, (*S, "pool"), "ratio", "latest.kv_pools",
       "token usage (pool kv), full/swa/mamba token usage (hybrid models, 2025-06+), gpu/cpu (HiSparse, "
       "2026-04+) of the latest Prefill/Decode batch line",
       "KV-cache occupancy per pool of the latest stats line: pool=kv (token usage), full, swa, mamba "
       "(hybrid models), gpu, cpu (HiSparse device and host tiers)."),
    _m("sglang_scheduler_pd_queue_requests", GAUGE, (*S, "queue"), "requests", "latest.pd_queues",
       "PD fields of the latest Prefill/Decode batch line (#bootstrap-req, #prealloc-req, "
       "#unbootstrapped-req, #inflight-req, #transferring-req, #optimistic-req, #transfer-req, #retracted-req)",
       "PD disaggregation queues of the latest stats line: bootstrap (#bootstrap-req, #prealloc-req, "
       "#unbootstrapped-req on prefill), inflight (#inflight-req, #transferring-req), optimistic, and "
       "on decode prealloc (#prealloc-req), transfer (#transfer-req), retracted (#retracted-req)."),
    _m("sglang_scheduler_max_total_tokens", GAUGE, S, "tokens", "capacity.max_total_num_tokens",
       "max_total_num_tokens of the start-up capacity line (2024-06+; the [gpu_id=..] form in 2024); without "
       "one (SGLang Omni's stages), #tokens of the scheduler's (else its stage's latest) 'KV Cache is allocated' line",
       "KV-cache capacity in tokens: max_total_num_tokens of the start-up capacity line, else #tokens of the "
       "'KV Cache is allocated' line (SGLang Omni: the stage's own)."),
    _m("sglang_scheduler_max_running_requests", GAUGE, S, "requests", "capacity.max_running_requests",
       "max_running_requests of the start-up capacity line",
       "Configured ceiling of running requests: max_running_requests of the start-up capacity line."),
    _m("sglang_scheduler_context_length", GAUGE, S, "tokens", "capacity.context_len",
       "context_len of the start-up capacity line",
       "Model context length in tokens: context_len of the start-up capacity line."),
    _m("sglang_scheduler_chunked_prefill_size", GAUGE, S, "tokens", "capacity.chunked_prefill_size",
       "chunked_prefill_size of the start-up capacity line",
       "Chunked-prefill chunk in tokens: chunked_prefill_size of the start-up capacity line."),
    _m("sglang_scheduler_decode_log_interval", GAUGE, (*S, "source"), "steps", "decode_log_interval_by_source",
       "decode_log_interval of the server_args line (2024-10-30+; ServerArgs(...) up to SGLang 0.5.18, a dict "
       "since 0.5.19): source=server_args; else the stage's --sglang.stage-decode-log-intervals entry (SGLang "
       "Omni, which never prints server_args) or --sglang.decode-log-interval: source=setting; else SGLang's "
       "default 40, assumed: source=default",
       "Decode steps per Decode batch line in effect, by source: server_args (the log), setting "
       "(--sglang.stage-decode-log-intervals for the stage, else --sglang.decode-log-interval) or default "
       "(assumed: decode steps are then a guess)."),
    _m("sglang_scheduler_last_stats_line_timestamp_seconds", GAUGE, S, "seconds", "last_stats_wall",
       "the exporter's clock when it read the latest Prefill/Decode batch line",
       "Wall-clock time the exporter read the scheduler's latest Prefill/Decode batch line."),
)
