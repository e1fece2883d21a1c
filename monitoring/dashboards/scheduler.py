"""SGLang / Scheduler: what the scheduler actually did, per pod and scheduler.

The top row answers the on-call question in five seconds (latest value per scheduler, coloured by
the alert thresholds of the config); the rows below give the history behind each figure. Rules kept
by tests/test_dashboards.py: no two lines of the dashboard plot the same expression, every axis has
the unit of what it draws (counts never on a bytes axis, ratios on their own panels).

Three sources feed it (the ``source`` label of the recorded series: ``log``, ``fpm``,
``sglang_metrics``). The top row, the latency row, the retraction ratio and the source comparisons
read the normalised recording rules, so they work with SGLang's own /metrics alone, with the sidecar
alone, or with both (one value per scheduler from the most exact source, as the alerts take it;
filtered by the Server variable). A row shows which sources each scheduler has and what only the
sidecar adds.

The other panels read the sidecar's raw series of each pod (legend ``pod dpN``, Pod variable).
Inside one pod the exporter counts replicas once; in a multi-node server every pod counts the same
retractions, so look at the pod that also sees the stats lines (the others show no ratio).
"""

from __future__ import annotations

from ..config import FPM, LOG, NATIVE, Config
from ..promql import num, percent
from .panels import Merged, Scope, dashboard, graph, grid, heat, row, single
from .ranks import dp_rank_row, priority_row


def build(cfg: Config):
    s = Scope.scheduler(cfg)
    leg = s.legend
    a = cfg.alerts
    retraction, kv, bound, recompute, wait = (a["SGLangRetractionRatioHigh"], a["SGLangKVCacheSaturated"],
                                              a["SGLangBatchBoundByKV"], a["SGLangRecomputeShareHigh"],
                                              a["SGLangQueueWaitHigh"])
    decode = 'phase="decode"'
    m = Merged.build(cfg)
    R = cfg.record
    quantile = R("decode_batch_size", "histogram_quantile_rate{w}")
    ceiling_rule = m.source(R("max_running_requests", "max"), LOG)
    retraction_share = m.of(R("retractions_per_batch", "ratio_rate{w}"))
    kv_latest = m.prefer("kv_usage", {LOG: R("kv_usage", "max"), NATIVE: R("kv_usage", "max")})
    wait_q = num(cfg.queue_wait_quantile)
    queue_wait_best = m.prefer("queue_wait", {NATIVE: R("queue_wait_seconds", "histogram_quantile_rate{w}"),
                                              LOG: R("queue_wait_seconds", "mean_rate{w}")})
    queue_wait_best = queue_wait_best.replace(f'source="{NATIVE}"', f'source="{NATIVE}", quantile="{wait_q}"')

    def batch_q(q: float) -> str:
        return f"({m.prefer('batch_size', {FPM: quantile, LOG: quantile}, f'quantile={chr(34)}{num(q)}{chr(34)}')})"

    def of_ceiling_best(q: float) -> str:
        return f"{batch_q(q)} / {m.on} ({ceiling_rule} > 0)"

    queue_wait = (f"{s.rate('sglang_scheduler_queue_request_seconds_total')} / "
                  f"({s.rate('sglang_scheduler_admitted_requests_total')} > 0)")
    ceiling = f"({s.latest('sglang_scheduler_max_running_requests')} > 0)"

    def of_ceiling(q: float) -> str:
        return f"{s.quantile(q, 'sglang_scheduler_batch_size', decode)} / on ({s.by}) {ceiling}"

    b = dashboard(cfg, "scheduler", "SGLang / Scheduler",
                  "What the SGLang scheduler actually did: batch size against the ceiling and tail latency, "
                  f"retractions against the {percent(retraction.threshold)} line, KV usage, recompute, queue, cache "
                  "hits, speculative decoding and PD queues. From the sidecar (log, forward-pass stream), SGLang's "
                  "own /metrics, or both.")

    b = b.with_row(row("At a glance: latest value per scheduler, from the most exact source (as alerted)"))
    b = b.with_panel(single(
        f"Retraction share ({percent(retraction.threshold)} rule)",
        "Retractions / batches per scheduler, as SGLangRetractionRatioHigh reads it. With the sidecar: retraction "
        "events per batch. From SGLang's own metrics alone (source sglang_metrics): retracted REQUESTS per forward "
        "pass, an upper bound of the share of batches with a retraction. Red from "
        f"{percent(retraction.threshold)}: the method's rule that more preempted batches mean the running-request "
        "ceiling is too high for the KV cache.",
        "percentunit", [(retraction_share, m.sourced)], lo=0, thresholds=[(retraction.threshold, "red")],
        background=True))
    b = b.with_panel(single(
        "KV cache occupancy",
        "Latest KV-cache occupancy (token usage; hybrid models: the fullest pool), excluding the evictable "
        "radix cache: the sidecar's latest batch line, else SGLang's sglang:token_usage. Orange from "
        f"{percent(bound.guard)} (with a small batch: bounded by KV), red from {percent(kv.threshold)} "
        "(SGLangKVCacheSaturated when sustained).",
        "percentunit", [(kv_latest, m.sourced)], lo=0, hi=1,
        thresholds=[(bound.guard, "orange"), (kv.threshold, "red")], background=True))
    b = b.with_panel(single(
        "Decode batch p50 / ceiling",
        "Median actual decode batch as a share of max_running_requests (a ceiling of 2048 does not hide a batch "
        "of 68). Exact from the forward-pass stream, else the log's Decode lines. Low with KV occupancy high: "
        f"bounded by KV memory (SGLangBatchBoundByKV below {percent(bound.threshold)}); low with KV low: little "
        "load. Needs the sidecar.",
        "percentunit", [(of_ceiling_best(0.5), m.sourced)], lo=0, hi=1, base="blue"))
    b = b.with_panel(single(
        "Queue wait (as alerted)",
        f"Queue wait as SGLangQueueWaitHigh reads it: the p{num(cfg.queue_wait_quantile * 100)} of SGLang's own "
        "sglang:queue_time_seconds (measured for every request) where it is scraped, else the mean by Little's law "
        f"from the sidecar (time-weighted queue length / admission rate). Red from {wait.threshold:g} s; it adds "
        "directly to TTFT.",
        "s", [(queue_wait_best, m.sourced)], lo=0, thresholds=[(wait.threshold, "red")], background=True))

    b = b.with_row(row("Latency beside the batch size (same time axis)"))
    server = f'namespace=~"$namespace", {cfg.group_label}=~"${cfg.group_label}"'

    def latency(metric: str) -> list:
        rule = cfg.record_server(metric, "histogram_quantile_rate{w}")
        return [(f'{rule}{{{server}, quantile="{num(q)}"}}', f"P{num(q * 100)} {{{{{cfg.group_label}}}}}")
                for q in cfg.latency_quantiles]

    b = b.with_panel(graph(
        "Actual batch size and its ceiling",
        "Per scheduler: decode batch p50 and p99 (exact from the forward-pass stream, else the log's sample), the "
        "mean decode batch from SGLang's own counters (decode tokens / decode passes), and the configured ceiling "
        "(max_running_requests). Read it against the latency beside it: the batch and tail latency trade-off.",
        "none", [(batch_q(0.5), f"p50 {m.sourced}"), (batch_q(0.99), f"p99 {m.sourced}"),
                 (m.source(R("decode_batch_size", "mean_rate{w}"), NATIVE), f"mean (SGLang) {m.legend}"),
                 (ceiling_rule, f"ceiling {m.legend}")], w=6, lo=0))
    b = b.with_panel(graph(
        "Time to first token",
        "P50 and P99 of SGLang's sglang:time_to_first_token_seconds, per server (SGLang's tokenizer serves every "
        "scheduler; streaming and non-streaming requests together). Needs SGLang's own /metrics; on PD the decode "
        "server observes it.",
        "s", latency("time_to_first_token_seconds"), w=6, lo=0))
    b = b.with_panel(graph(
        "Inter-token latency and time per output token",
        "P50 and P99 of SGLang's sglang:inter_token_latency_seconds and of its per-request TPOT "
        "sglang:request_time_per_output_token_seconds (0.5.22+), per server: what a larger batch costs every "
        "request. With the sidecar alone the decode step time ESTIMATE stands in, per scheduler: #running-req / "
        "gen throughput of the Decode lines.",
        "s", [*latency("inter_token_latency_seconds"),
              *((e, legend.replace("P", "TPOT P", 1)) for e, legend in latency("request_time_per_output_token_seconds")),
              (m.source(R("decode_step_seconds", "estimate{w}"), LOG), f"decode step (estimate) {m.legend}")],
        w=6, lo=0))
    b = b.with_panel(graph(
        "End-to-end request latency",
        "P50 and P99 of SGLang's sglang:e2e_request_latency_seconds, per server. Needs SGLang's own /metrics.",
        "s", latency("e2e_request_latency_seconds"), w=6, lo=0))

    b = b.with_row(row("Sources: what each one gives"))
    b = b.with_panel(grid(
        "Sources per scheduler",
        "Which sources describe each scheduler now: log (the sidecar reading the scheduler log), fpm (the sidecar "
        "following SGLang's per-forward-pass stream), sglang_metrics (SGLang's own /metrics). Where several do, "
        "the alerts take one, most exact first (docs/alerts.md, \"Which source wins\").",
        (f"group by (namespace, {cfg.group_label}, {', '.join(cfg.scheduler_labels)}, source) "
         f"({{__name__=~\"{cfg.level}:.+\", {m.sel}}})", ""), w=8))
    b = b.with_panel(graph(
        "Retracted requests per batch, by source",
        "Retracted requests / batches from each source, side by side (the log: #retracted_reqs; SGLang: "
        "sglang:num_retracted_requests_total / sglang:cuda_graph_passes_total). They should agree within a few "
        "percent; a lasting gap means a parser problem or a wrong decode_log_interval. The alert counts events "
        "where the sidecar sees them.",
        "percentunit", [(m.of(R("retracted_requests_per_batch", "ratio_rate{w}"), 'source=~"$source"'), m.sourced)],
        w=8, lo=0, thresholds=[(retraction.threshold, "red")]))
    events_share = (f"{m.source(R('retractions', 'rate{w}'), LOG)} / {m.on} "
                    f"({m.source(R('batches', 'rate{w}'), LOG)} > 0)")
    b = b.with_panel(single(
        "Only the sidecar adds",
        "Figures SGLang's own metrics cannot give (empty without the sidecar): retraction EVENTS per batch (SGLang "
        "counts requests) and the decode batch p50 against the ceiling (the KV-bound diagnosis); beside them the "
        "recompute share (\"fake throughput\") from each source (the log's #new_tokens_gained; SGLang 0.5.18+).",
        "percentunit", [(events_share, f"retraction events / batch {m.legend}"),
                        (m.of(R("recomputed_tokens_per_computed_token", "ratio_rate{w}")),
                         f"recompute share {m.sourced}"),
                        (of_ceiling_best(0.5), f"decode p50 / ceiling {m.legend}")], w=8, h=8, lo=0))

    b = b.with_row(row("Batch size: an outcome, not a setting (sidecar)"))
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
        f"Retractions / batches per scheduler over {cfg.rate_window}, as SGLangRetractionRatioHigh reads it. Events "
        "from the sidecar's log, else SGLang's retracted requests (an upper bound); batches from the forward-pass "
        "stream, else the log (Decode lines x decode_log_interval), else SGLang's pass counter. Above the red "
        f"{percent(retraction.threshold)} line the running-request ceiling is too high for the KV cache.",
        "percentunit", [(retraction_share, m.sourced)], lo=0, thresholds=[(retraction.threshold, "red")]))
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
        "percentunit", [(s.of("sglang_scheduler_new_token_ratio"), leg)], w=24, lo=0, hi=1))

    b = b.with_row(row("KV cache"))
    b = b.with_panel(graph(
        "KV cache usage",
        "Latest KV-cache occupancy (token usage; hybrid models: the fullest pool) and, for hybrid models, each "
        "pool (full, swa, mamba, gpu/cpu with HiCache), from the sidecar; SGLang's own sglang:token_usage where it "
        "is scraped (the same figure). Excludes the evictable radix cache.",
        "percentunit", [(s.of("sglang_scheduler_kv_usage_ratio"), leg),
                        (s.of("sglang_scheduler_kv_pool_usage_ratio", 'pool!="kv"'), "{{pool}} " + leg),
                        (m.source(R("kv_usage", "max"), NATIVE), f"SGLang token_usage {m.legend}")],
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

    b = b.with_row(row("Throughput: computed vs useful (sidecar)"))
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
        "sglang_scheduler_queue_request_seconds_total); SGLang's own sglang:num_queue_reqs (priority=\"\": all "
        "priorities) where it is scraped.",
        "short", [(s.of("sglang_scheduler_queue_requests"), f"latest {leg}"),
                  (s.rate("sglang_scheduler_queue_request_seconds_total"), f"mean {leg}"),
                  (m.source(R("queue_requests", "max"), NATIVE), f"SGLang num_queue_reqs {m.legend}")], w=8, lo=0))
    b = b.with_panel(graph(
        "Queue wait",
        "Mean queue wait by Little's law (mean queue length / admission rate; every SGLang version), p95 of "
        "per-request queue_duration where --enable-request-time-stats-logging is on, and the p50 and p"
        f"{num(cfg.queue_wait_quantile * 100)} of SGLang's own sglang:queue_time_seconds where it is scraped (what "
        f"SGLangQueueWaitHigh reads then). SGLangQueueWaitHigh: {wait.threshold:g} s.",
        "s", [(queue_wait, f"mean {leg}"), (s.quantile(0.95, "sglang_scheduler_queue_wait_seconds"), f"p95 {leg}"),
              *((m.source(R("queue_wait_seconds", "histogram_quantile_rate{w}"), NATIVE, f'quantile="{num(q)}"'),
                 f"p{num(q * 100)} SGLang {m.legend}") for q in (0.5, cfg.queue_wait_quantile))],
        w=8, lo=0, thresholds=[(wait.threshold, "red")]))
    b = b.with_panel(graph(
        "Admissions",
        "Requests admitted from the waiting queue per second (#new-seq, less a continuing chunk).",
        "reqps", [(s.rate("sglang_scheduler_admitted_requests_total"), leg)], w=8, lo=0))

    b = dp_rank_row(b, cfg)
    b = priority_row(b, cfg)

    b = b.with_row(row("Speculative decoding and PD disaggregation (sidecar)"))
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

    b = omni_row(b, cfg, s)

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


def omni_row(b, cfg: Config, s: Scope):
    """SGLang Omni, per stage: what each stage holds now (the --omni.url snapshot), its batch against the
    ceiling proxy, the requests turned away, and the lines no stage could claim (docs/sglang-omni.md)."""
    stage = 'namespace=~"$namespace", pod=~"$pod", stage=~"$stage"'
    pod = 'namespace=~"$namespace", pod=~"$pod"'
    per_stage = "{{stage}} {{pod}}"
    b = b.with_row(row("SGLang Omni: per stage (sidecar; empty for plain SGLang)"))
    b = b.with_panel(graph(
        "Waiting and running requests per stage (live)",
        "Polled from SGLang Omni's /model_info (--omni.url): the stage scheduler's waiting queue and running batch "
        "now, and requests still being built. The log's #running-req and #queue-req of the same stage are in the "
        "rows above (stage variable).",
        "short", [(f"sglang_omni_stage_waiting_requests{{{stage}}}", f"waiting {per_stage}"),
                  (f"sglang_omni_stage_running_requests{{{stage}}}", f"running {per_stage}"),
                  (f"sglang_omni_stage_request_build_pending{{{stage}}} + "
                   f"sglang_omni_stage_request_build_backlog{{{stage}}}", f"building {per_stage}")], w=8, lo=0))
    proxy = f"max by (namespace, pod, stage) (sglang_omni_stage_max_running_requests_proxy{{{stage}}})"
    b = b.with_panel(graph(
        "Running batch against the ceiling proxy",
        "Each stage's running batch (#running-req of its latest stats line, the largest over its DP ranks) as a "
        "share of the largest decode CUDA-graph batch size it captured: a PROXY of its max_running_requests, "
        "which SGLang Omni never prints (sglang_omni_stage_max_running_requests_proxy). Near 100%: the stage "
        "runs at its ceiling; far below with KV usage high: bounded by KV memory.",
        "percentunit", [(f"max by (namespace, pod, stage) (sglang_scheduler_running_requests{{{stage}}}) / on "
                         f"(namespace, pod, stage) ({proxy} > 0)", f"share {per_stage}")], w=8, lo=0))
    b = b.with_panel(graph(
        "Requests rejected by reason",
        "Requests SGLang Omni turned away per second, by stage and reason (in_flight_cap, queue_full, "
        "waiting_queue_full, kv_capacity, prompt_too_long); SGLangOmniRequestsRejected.",
        "reqps", [(f"sum by (namespace, pod, stage, reason) (rate(sglang_omni_requests_rejected_total{{{pod}}}"
                   f"[$__rate_interval]))", "{{reason}} {{stage}} {{pod}}")], w=8, lo=0))
    b = b.with_panel(graph(
        "Stages started, and lines no stage could claim",
        "1 while a stage is started (0 after it stopped or crashed: SGLangOmniStageCrashed); and scheduler lines "
        "per second that belong to one of several stages without saying which (no logging shim: "
        "SGLangOmniLinesUnattributed).",
        "short", [(f"sglang_omni_stage_started{{{stage}}}", f"started {per_stage}"),
                  (f'sum by (namespace, pod) (rate(sglang_exporter_log_lines_total{{{pod}, result="unattributed"}}'
                   f"[$__rate_interval]))", "unattributed lines/s {{pod}}")], w=12, lo=0))
    return b
