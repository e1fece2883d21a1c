"""SGLang / Capacity: KV capacity in tokens and in requests, against the ceiling and the actual batch.

The safety factor (``$safety_factor``, default from the config) is the method's 60-70% rule for the
running-request ceiling of offline work.
"""

from __future__ import annotations

from ..config import Config
from .panels import Scope, dashboard, graph, recorded, row, single


def build(cfg: Config):
    s = Scope.scheduler(cfg)
    leg = s.legend
    # exporter.method.kv_tokens_per_request, as the recording rule kv_tokens_per_request writes it
    per_req = (f"{s.rate('sglang_scheduler_decode_kv_tokens_total')} / "
               f"({s.rate('sglang_scheduler_decode_kv_requests_total')} > 0)")
    cap_tokens = s.latest("sglang_scheduler_max_total_tokens")
    cap_req = f"{cap_tokens} / ({per_req})"
    ceiling = s.latest("sglang_scheduler_max_running_requests")
    b = dashboard(cfg, "capacity", "SGLang / Capacity",
                  "KV capacity in tokens and in requests at the observed mean tokens per request, with the safety "
                  f"factor ({cfg.safety_factor:g} by default) the method recommends for the running-request ceiling. "
                  "From the sidecar: SGLang's own /metrics carry neither the ceiling nor the KV tokens per request "
                  "of every version.")

    b = b.with_row(row("KV capacity"))
    b = b.with_panel(single(
        "KV capacity in tokens", "max_total_num_tokens of the start-up line: the KV pool's size in tokens.",
        "short", [(cap_tokens, leg)]))
    b = b.with_panel(single("Configured ceiling", "max_running_requests of the start-up line.",
                            "short", [(ceiling, leg)]))
    b = b.with_panel(single(
        "Ceiling / safe capacity", "Configured ceiling divided by the safe capacity in requests (capacity x "
        "$safety_factor). Above 1 the ceiling can only be reached by retracting (method: 60-70% for offline).",
        "percentunit", [(f"{ceiling} / ($safety_factor * {cap_req})", leg)], w=12,
        thresholds=[(0.9, "orange"), (1, "red")]))
    b = b.with_panel(graph(
        "KV capacity in requests vs ceiling and actual batch",
        "Requests the KV pool holds at the observed mean KV tokens per running request, that x $safety_factor "
        "(the safe ceiling), the configured ceiling, and the actual running batch.",
        "short", [(cap_req, f"capacity {leg}"), (f"$safety_factor * {cap_req}", f"safe ceiling {leg}"),
                  (ceiling, f"configured {leg}"),
                  (f"avg by ({s.by}) (avg_over_time({s.of('sglang_scheduler_running_requests')}[$__rate_interval]))",
                   f"running {leg}")], w=24, h=10, lo=0))
    b = b.with_panel(graph(
        "KV tokens per running request",
        "Observed mean KV footprint of a running request (sum of #token / sum of #running-req over the Decode "
        "batch lines, as the report computes it): prompt plus "
        "output so far. Larger than expected means fewer requests fit.",
        "short", [(per_req, leg)], lo=0))
    safe_rule = cfg.record("kv_capacity_requests", "safe{w}")
    b = b.with_panel(graph(
        "Safe capacity (as alerted)",
        f"The recording rule {safe_rule} ({cfg.safety_factor:g} x capacity over {cfg.rate_window}, pods of one "
        f"{cfg.group_label} merged with max; no pod filter).",
        "short", [recorded(cfg, safe_rule)], lo=0))

    b = b.with_row(row("Limits from the start-up line"))
    for title, description, metric in (
            ("Context length", "context_len of the start-up line, tokens.", "sglang_scheduler_context_length"),
            ("Chunked prefill size", "chunked_prefill_size, tokens per prefill chunk.",
             "sglang_scheduler_chunked_prefill_size"),
            ("Decode log interval", "Decode steps per Decode batch line (server_args decode_log_interval).",
             "sglang_scheduler_decode_log_interval")):
        b = b.with_panel(single(title, description, "short", [(s.latest(metric), leg)], w=8))
    return b
