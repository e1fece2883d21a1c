"""SGLang / Scheduler: what the scheduler actually did, per pod and scheduler.

The top row answers the on-call question in five seconds (latest value per scheduler, coloured by
the alert thresholds of the config); the rows below give the history behind each figure. Rules kept
by tests/test_dashboards.py: no two lines of the dashboard plot the same expression, every axis has
the unit of what it draws (counts never on a bytes axis, ratios on their own panels).

Per-pod semantics: panels read the raw series of each pod (legend ``pod dpN``). Inside one pod the
exporter counts replicas once; in a multi-node server every pod counts the same retractions, so look
at the pod that also sees the stats lines (the others show no ratio). Panels titled "(as alerted)"
read the recording rules, which merge the pods of one ``sglang_group`` with max, as the alerts do.
"""

from __future__ import annotations

from ..config import Config
from ..promql import percent
from .panels import Scope, dashboard, graph, heat, recorded, row, single


def build(cfg: Config):
    s = Scope.scheduler(cfg)
    leg = s.legend
    a = cfg.alerts
    retraction, kv, bound, recompute, wait = (a["SGLangRetractionRatioHigh"], a["SGLangKVCacheSaturated"],
                                              a["SGLangBatchBoundByKV"], a["SGLangRecomputeShareHigh"],
                                              a["SGLangQueueWaitHigh"])
    decode = 'phase="decode"'
    retraction_share = f"{s.rate('sglang_scheduler_retractions_total')} / ({s.rate('sglang_scheduler_batches_total')} > 0)"
    queue_wait = (f"{s.rate('sglang_scheduler_queue_request_seconds_total')} / "
                  f"({s.rate('sglang_scheduler_admitted_requests_total')} > 0)")
    ceiling = f"({s.latest('sglang_scheduler_max_running_requests')} > 0)"

    def of_ceiling(q: float) -> str:
        return f"{s.quantile(q, 'sglang_scheduler_batch_size', decode)} / on ({s.by}) {ceiling}"

    b = dashboard(cfg, "scheduler", "SGLang / Scheduler",
                  "What the SGLang scheduler actually did: batch size against the ceiling, retractions against the "
                  f"{percent(retraction.threshold)} line, KV usage, recompute, queue, cache hits, speculative "
                  "decoding and PD queues.")

    b = b.with_row(row("At a glance: latest value per scheduler"))
    b = b.with_panel(single(
        f"Retraction share ({percent(retraction.threshold)} rule)",
        "Retraction events / (prefill batches + decode steps) per scheduler. Red from "
        f"{percent(retraction.threshold)}: the method's rule (SGLangRetractionRatioHigh) that more preempted "
        "batches mean the running-request ceiling is too high for the KV cache.",
        "percentunit", [(retraction_share, leg)], lo=0, thresholds=[(retraction.threshold, "red")], background=True))
    b = b.with_panel(single(
        "KV cache occupancy",
        "Latest KV-cache occupancy (token usage; hybrid models: the fullest pool), excluding the evictable "
        f"radix cache. Orange from {percent(bound.guard)} (with a small batch: bounded by KV), red from "
        f"{percent(kv.threshold)} (SGLangKVCacheSaturated when sustained).",
        "percentunit", [(s.of("sglang_scheduler_kv_usage_ratio"), leg)], lo=0, hi=1,
        thresholds=[(bound.guard, "orange"), (kv.threshold, "red")], background=True))
    b = b.with_panel(single(
        "Decode batch p50 / ceiling",
        "Median actual decode batch (#running-req of Decode batch lines) as a share of the configured "
        "max_running_requests: a ratio, so that a ceiling of 2048 does not hide a batch of 68. Low with high "
        f"KV occupancy: the batch is bounded by KV memory (SGLangBatchBoundByKV below {percent(bound.threshold)}); "
        "low with low KV occupancy: little load.",
        "percentunit", [(of_ceiling(0.5), leg)], lo=0, hi=1, base="blue"))
    b = b.with_panel(single(
        "Mean queue wait",
        "Mean time a request waits in the queue before admission, by Little's law (time-weighted queue length "
        f"/ admission rate; every SGLang version). Red from {wait.threshold:g} s (SGLangQueueWaitHigh); it adds "
        "directly to TTFT.",
        "s", [(queue_wait, leg)], lo=0, thresholds=[(wait.threshold, "red")], background=True))

    b = b.with_row(row("Batch size: an outcome, not a setting"))
    b = b.with_panel(graph(
        "Decode batch size percentiles",
        "Actual running batch per logged decode step (#running-req of Decode batch lines): p50, p90, p99 from "
        "sglang_scheduler_batch_size{phase=\"decode\"}, in requests.",
        "none", [(s.quantile(q, "sglang_scheduler_batch_size", decode), f"p{q * 100:g} {leg}") for q in (0.5, 0.9, 0.99)],
        lo=0))
    b = b.with_panel(graph(
        "Decode batch size percentiles vs the configured ceiling",
        "The same percentiles divided by max_running_requests of the start-up line (1 = the ceiling). A p50 far "
        "below 1 while KV usage is high means the batch is bounded by KV memory, not by the ceiling.",
        "percentunit", [(of_ceiling(q), f"p{q * 100:g} {leg}") for q in (0.5, 0.9, 0.99)], lo=0, hi=1))
    b = b.with_panel(heat(
        "Decode batch size distribution",
        "Heatmap of the actual decode batch size (logged decode steps per bucket of #running-req).",
        "none", (f"sum by (le) (increase({s.of('sglang_scheduler_batch_size_bucket', decode)}[$__rate_interval]))", "{{le}}"),
        "Oranges"))
    b = b.with_panel(graph(
        "Prefill batch size percentiles",
        "Requests per prefill batch (#new-seq of Prefill batch lines): p50 and p99; the tokens per prefill "
        "batch are on the throughput row.",
        "none", [(s.quantile(q, "sglang_scheduler_batch_size", 'phase="prefill"'), f"p{q * 100:g} {leg}")
                 for q in (0.5, 0.99)], lo=0))

    b = b.with_row(row("Retractions (preemption)"))
    b = b.with_panel(graph(
        f"Retraction ratio vs the {percent(retraction.threshold)} line",
        "Retraction events / (prefill batches + decode steps), per scheduler. The method: more than "
        f"{percent(retraction.threshold)} of batches preempted means the running-request ceiling is too high "
        "(red line). Decode steps are Decode batch lines x decode_log_interval.",
        "percentunit", [(retraction_share, leg)], lo=0, thresholds=[(retraction.threshold, "red")]))
    ratio_rule = cfg.record("retractions_per_batch", "ratio_rate{w}")
    b = b.with_panel(graph(
        "Retraction ratio (as alerted)",
        f"The recording rule {ratio_rule} that SGLangRetractionRatioHigh reads: {cfg.rate_window} windows, pods "
        f"of one {cfg.group_label} merged with max (no pod filter).",
        "percentunit", [recorded(cfg, ratio_rule)],
        lo=0, thresholds=[(retraction.threshold, "red")]))
    b = b.with_panel(graph(
        "Retractions and retracted requests",
        "Retraction events, requests sent back to the queue, and requests aborted because even alone they did "
        "not fit, per second.",
        "reqps", [(s.rate("sglang_scheduler_retractions_total"), f"events {leg}"),
                  (s.rate("sglang_scheduler_retracted_requests_total"), f"retracted {leg}"),
                  (s.rate("sglang_scheduler_retract_aborted_requests_total"), f"aborted {leg}")]))
    b = b.with_panel(graph(
        "new_token_ratio after retractions",
        "SGLang's admission reservation factor after the latest retraction (#new_token_ratio: a -> b, b). It "
        "drops after a retraction and recovers; a sawtooth means repeated over-admission (SGLang's 0.70 is 70%).",
        "percentunit", [(s.of("sglang_scheduler_new_token_ratio"), leg)], lo=0, hi=1))

    b = b.with_row(row("KV cache"))
    b = b.with_panel(graph(
        "KV cache usage",
        "Latest KV-cache occupancy (token usage; hybrid models: the fullest pool) and, for hybrid models, each "
        "pool (full, swa, mamba, gpu/cpu with HiCache). Excludes the evictable radix cache.",
        "percentunit", [(s.of("sglang_scheduler_kv_usage_ratio"), leg),
                        (s.of("sglang_scheduler_kv_pool_usage_ratio", 'pool!="kv"'), "{{pool}} " + leg)],
        lo=0, hi=1, thresholds=[(kv.threshold, "red")]))
    b = b.with_panel(graph(
        "KV tokens used vs capacity",
        "KV tokens in use (#token) against the pool's capacity (max_total_num_tokens of the start-up line).",
        "short", [(s.of("sglang_scheduler_kv_used_tokens"), f"used {leg}"),
                  (s.latest("sglang_scheduler_max_total_tokens"), f"capacity {leg}")], lo=0))
    b = b.with_panel(heat(
        "KV usage distribution",
        "Heatmap of KV occupancy over all Prefill/Decode batch lines (sglang_scheduler_kv_usage_observed_ratio).",
        "percentunit",
        (f"sum by (le) (increase({s.of('sglang_scheduler_kv_usage_observed_ratio_bucket')}[$__rate_interval]))", "{{le}}"),
        "Blues"))
    b = b.with_panel(graph(
        "Pending tokens",
        "Tokens of all waiting requests (#pending-token of Prefill batch lines, SGLang 2026-04+).",
        "short", [(s.of("sglang_scheduler_pending_tokens"), leg)], lo=0))

    b = b.with_row(row("Throughput: computed vs useful"))
    computed = f"({s.rate('sglang_scheduler_prefill_computed_tokens_total')} + {s.rate('sglang_scheduler_decode_tokens_total')})"
    recomputed = s.rate("sglang_scheduler_recomputed_tokens_total")
    cached = s.rate("sglang_scheduler_prefill_cached_tokens_total")
    b = b.with_panel(graph(
        "Recompute share (\"fake throughput\")",
        "Recomputed tokens of retracted requests / all computed tokens (prefill incl. re-prefills + decode). "
        f"SGLangRecomputeShareHigh fires above {percent(recompute.threshold)} (red line).",
        "percentunit", [(f"{recomputed} / ({computed} > 0)", leg)], lo=0, thresholds=[(recompute.threshold, "red")]))
    b = b.with_panel(graph(
        "Effective throughput",
        "Tokens computed per second (prefill + decode), recomputed tokens, and useful = computed - recomputed. "
        "SGLang's own gen throughput figure for comparison.",
        "suffix:tok/s", [(computed, f"computed {leg}"), (recomputed, f"recomputed {leg}"),
                         (f"clamp_min({computed} - {recomputed}, 0)", f"useful {leg}"),
                         (s.of("sglang_scheduler_gen_throughput_tokens_per_second"), f"SGLang gen {leg}")], lo=0))
    b = b.with_panel(graph(
        "Prefill and decode steps",
        "Prefill batches and decode steps per second (decode steps estimated from Decode batch lines x "
        "decode_log_interval).",
        "ops", [(s.rate("sglang_scheduler_batches_total", by=f"{s.by}, phase"), "{{phase}} " + leg)], lo=0))
    b = b.with_panel(graph(
        "Cache-hit ratio",
        "Prompt tokens served by the radix cache / (cached + computed prompt tokens), a ratio of rates.",
        "percentunit",
        [(f"{cached} / (({cached} + {s.rate('sglang_scheduler_prefill_computed_tokens_total')}) > 0)", leg)],
        lo=0, hi=1))

    b = b.with_row(row("Queue"))
    b = b.with_panel(graph(
        "Queue depth",
        "Latest #queue-req of the scheduler's stats lines (absent while the scheduler is idle: SGLang prints "
        "nothing then), and the time-weighted mean number of waiting requests (rate of "
        "sglang_scheduler_queue_request_seconds_total).",
        "short", [(s.of("sglang_scheduler_queue_requests"), f"latest {leg}"),
                  (s.rate("sglang_scheduler_queue_request_seconds_total"), f"mean {leg}")], w=8, lo=0))
    b = b.with_panel(graph(
        "Queue wait",
        "Mean queue wait by Little's law (mean queue length / admission rate; every SGLang version) and p95 of "
        "per-request queue_duration where --enable-request-time-stats-logging is on. SGLangQueueWaitHigh: "
        f"{wait.threshold:g} s.",
        "s", [(queue_wait, f"mean {leg}"), (s.quantile(0.95, "sglang_scheduler_queue_wait_seconds"), f"p95 {leg}")],
        w=8, lo=0, thresholds=[(wait.threshold, "red")]))
    b = b.with_panel(graph(
        "Admissions",
        "Requests admitted from the waiting queue per second (#new-seq, less a continuing chunk).",
        "reqps", [(s.rate("sglang_scheduler_admitted_requests_total"), leg)], w=8, lo=0))

    b = b.with_row(row("Speculative decoding and PD disaggregation"))
    b = b.with_panel(graph(
        "Speculative accept length",
        "Tokens committed per request per decode step (accept len of Decode batch lines).",
        "none", [(s.of("sglang_scheduler_spec_accept_length"), leg)], w=6, lo=0))
    b = b.with_panel(graph(
        "Speculative accept rate",
        "SGLang's accept rate of Decode batch lines (its definition changed 2026-04-28).",
        "percentunit", [(s.of("sglang_scheduler_spec_accept_ratio"), leg)], w=6, lo=0, hi=1))
    b = b.with_panel(graph(
        "PD queues",
        "PD disaggregation queues of the latest stats line, in requests: bootstrap, inflight/transfer, prealloc, "
        "retracted.",
        "short", [(s.of("sglang_scheduler_pd_queue_requests"), "{{queue}} " + leg)], w=6, lo=0))
    b = b.with_panel(graph(
        "PD pre-allocated KV usage",
        "PD decode: share of the KV cache pre-allocated for incoming transfers (pre-allocated usage of Decode "
        "batch lines).",
        "percentunit", [(s.of("sglang_scheduler_pd_preallocated_usage_ratio"), leg)], w=6, lo=0, hi=1))

    b = b.with_row(row("Exporter"))
    pod = 'namespace=~"$namespace", pod=~"$pod"'
    b = b.with_panel(graph(
        "Log lines read",
        "Lines of the SGLang log read per second by kind and result; malformed lines are scheduler lines that "
        "could not be applied (SGLangExporterParseErrors).",
        "ops", [(f"sum by (namespace, pod, kind, result) (rate(sglang_exporter_log_lines_total{{{pod}}}[$__rate_interval]))",
                 "{{kind}} {{result}} {{pod}}")], lo=0))
    b = b.with_panel(graph(
        "Age of the latest stats line",
        "Seconds since the scheduler's latest Prefill/Decode batch line and since any log line was read "
        "(SGLangSchedulerLogStale).",
        "s", [(f"time() - {s.of('sglang_scheduler_last_stats_line_timestamp_seconds')}", f"stats {leg}"),
              (f"time() - sglang_exporter_last_line_timestamp_seconds{{{pod}}}", "any line {{pod}}")], lo=0))
    return b
