"""Rows of the scheduler dashboard for servers of several schedulers: the DP ranks of one server side
by side and their imbalance over time (``recording.dp_rank_rules``), and SGLang's priority classes
(``recording.priority_rules``). Both read only recorded series, so they work from the sidecar, SGLang's
own /metrics, or both; each row is empty where its case does not arise (one DP rank; no
``--enable-priority-scheduling``)."""

from __future__ import annotations

from ..config import LOG, NATIVE, Config
from ..promql import num
from .panels import Merged, graph, row


def dp_rank_row(b, cfg: Config):
    """Per rank running, queued requests and KV usage from the most exact source (as alerted), and the
    imbalance across the ranks of each server: max over mean, the idle-rank share, the capacity lost."""
    m = Merged.build(cfg)
    R, RR = cfg.record, cfg.record_ranks
    imbalance = cfg.alerts["SGLangDPRankImbalance"]
    ranks = ", ".join(f'{label}=~"${label}"' for label in ("namespace", *cfg.ranks_by[len(cfg.target_labels):]))
    per_server = " ".join(f"{{{{{label}}}}}" for label in cfg.ranks_by[len(cfg.target_labels):])

    def per_rank(figure: str) -> str:
        return m.prefer(figure, {LOG: R(figure, "max"), NATIVE: R(figure, "max")})

    def across(rule: str, *matchers: str) -> str:
        return f"{rule}{{{', '.join((ranks, *matchers))}}}"

    b = b.with_row(row("DP ranks side by side (DP attention; one line per rank, empty with one DP rank)"))
    b = b.with_panel(graph(
        "Running requests per DP rank",
        "#running-req of each DP rank's latest report: the sidecar's log, else SGLang's sglang:num_running_reqs "
        "(priority=\"\"). With DP attention every rank waits for the busiest at each step: lines far apart mean "
        "the others idle while one works.",
        "short", [(per_rank("running_requests"), m.sourced)], w=8, lo=0))
    b = b.with_panel(graph(
        "Queued requests per DP rank",
        "#queue-req of each DP rank's latest report (the sidecar's log, else SGLang's sglang:num_queue_reqs). "
        "A queue on one rank while another is empty: the router sends unevenly (--load-balance-method).",
        "short", [(per_rank("queue_requests"), m.sourced)], w=8, lo=0))
    b = b.with_panel(graph(
        "KV cache usage per DP rank",
        "Token usage of each DP rank (the sidecar's latest batch line, else SGLang's sglang:token_usage). Each "
        "rank has its own KV pool: one full pool retracts while the others have room.",
        "percentunit", [(m.prefer("kv_usage", {LOG: R("kv_usage", "max"), NATIVE: R("kv_usage", "max")}),
                         m.sourced)], w=8, lo=0, hi=1))
    b = b.with_panel(graph(
        "DP imbalance over time (max / mean across the ranks)",
        "Per server: the busiest rank's load over the ranks' mean (1 = balanced). The alerted figure "
        f"(SGLangDPRankImbalance above {num(imbalance.threshold)}): SGLang's per-step token ratio "
        "sglang:dp_attention_token_imbalance_ratio (0.5.22+) where scraped, else the running requests per rank. "
        "Beside it the running requests, the queue and the KV usage of the ranks, each max over mean.",
        "none", [(across(RR("dp_imbalance", "ratio")), f"alerted {per_server} ({{{{source}}}})"),
                 *((across(RR(figure, "max_over_mean_dp_rank")), f"{what} {per_server} ({{{{source}}}})")
                   for figure, what in (("running_requests", "running"), ("queue_requests", "queued"),
                                        ("kv_usage", "KV usage")))],
        w=12, lo=1, thresholds=[(imbalance.threshold, "red")]))
    b = b.with_panel(graph(
        "Idle ranks and capacity lost to imbalance",
        "Share of the DP ranks of a server with no running request (the latest reports), SGLang's share of "
        "rank-steps run with no token only to keep the collectives in lockstep "
        "(sglang:dp_attention_steps_total{rank_state=\"idle\"}, 0.5.22+), and the capacity lost: the busiest "
        "rank's excess tokens over each rank / the tokens the ranks could have run "
        "(sglang:dp_attention_tokens_total{kind}, 0.5.22+).",
        "percentunit", [(across(RR("dp_rank_idle", "ratio")), f"idle ranks {per_server} ({{{{source}}}})"),
                        (across(RR("dp_rank_idle_steps", "ratio_rate{w}")), f"idle rank-steps {per_server}"),
                        (across(RR("dp_imbalance_tokens", "ratio_rate{w}")), f"capacity lost {per_server}")],
        w=12, lo=0, hi=1))
    return b


def priority_row(b, cfg: Config):
    """Per priority class of each server (``cfg.priority_classes``): queued and running requests, first
    tokens per second, TTFT p99 against the starvation threshold (SGLangPriorityStarved)."""
    RP = cfg.record_priority
    starved = cfg.alerts["SGLangPriorityStarved"]
    server = f'namespace=~"$namespace", {cfg.group_label}=~"${cfg.group_label}"'
    cls = f"{{{{{cfg.group_label}}}}} {{{{{cfg.priority_class_label}}}}}"
    b = b.with_row(row("Priority classes (SGLang's own /metrics with --enable-priority-scheduling; the log has none)"))
    b = b.with_panel(graph(
        "Queued and running requests per priority class",
        "SGLang's sglang:num_queue_reqs and sglang:num_running_reqs split by priority, mapped to the classes of "
        "monitoring/config.py (high >= 1, default 0, low <= -1, unset: sent without a priority, scheduled last) "
        "and summed over the DP ranks. A class that keeps a queue while the others run is starving.",
        "short", [(f"{RP('num_queue_reqs', 'sum')}{{{server}}}", f"queued {cls}"),
                  (f"{RP('num_running_reqs', 'sum')}{{{server}}}", f"running {cls}")], w=8, lo=0))
    b = b.with_panel(graph(
        "First tokens per second per priority class",
        "Requests of each class that got their first token, per second (the count of SGLang's "
        "sglang:time_to_first_token_seconds by the request's priority): a class's progress. Zero with a queue "
        "while another class has some: SGLangPriorityStarved.",
        "reqps", [(f"{RP('time_to_first_token_seconds', 'count_rate{w}')}{{{server}}}", cls)], w=8, lo=0))
    b = b.with_panel(graph(
        "Time to first token per priority class",
        "P50 and P99 of SGLang's time to first token per class. SGLangPriorityStarved also fires where a class's "
        f"P99 stays above {num(starved.threshold)} s and keeps growing over {starved.window} while another class "
        "is served.",
        "s", [(f"{RP('time_to_first_token_seconds', 'histogram_quantile_rate{w}')}{{{server}, "
               f"quantile=\"{num(q)}\"}}", f"P{num(q * 100)} {cls}") for q in cfg.latency_quantiles],
        w=8, lo=0, thresholds=[(starved.threshold, "red")]))
    return b
