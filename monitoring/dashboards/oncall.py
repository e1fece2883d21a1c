"""SGLang / On call: one screen for the engineer paged at 3 a.m.

Four questions, each answered by a latest value on top and its last hours below, from the recorded
series of every source (the sidecar's log, its forward-pass stream, SGLang's own /metrics), as the
alerts read them:

1. are retractions above the method's 5% line;
2. is the decode batch bounded by KV memory or by the configured ceiling;
3. is the queue growing (and how long requests wait);
4. which DP rank, or which KV pool, is the one.

At most 16 panels (tests/test_dashboards.py), short descriptions, and every panel links to the
runbook section of the alert it stands for (``Config.runbook_url``) and to the full scheduler
dashboard, where everything else is.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.models import dashboard as dash_m

from ..config import FPM, LOG, NATIVE, Config
from ..promql import num, percent
from .panels import UIDS, Merged, Scope, dashboard, graph, single

#: Most panels the screen may hold.
MAX_PANELS = 16
#: Longest panel description, in characters.
MAX_DESCRIPTION = 240


def _links(cfg: Config, alert: str) -> list:
    """The panel's links: the alert's runbook section, then the scheduler dashboard."""
    return [dash.DashboardLink(f"Runbook: {alert}").type(dash_m.DashboardLinkType.LINK)
            .url(cfg.runbook_url(alert)).target_blank(True),
            dash.DashboardLink("All panels: SGLang / Scheduler").type(dash_m.DashboardLinkType.LINK)
            .url(f"/d/{UIDS['scheduler']}").target_blank(False)]


def build(cfg: Config):
    """The on-call dashboard (``sglang-oncall.json``)."""
    m = Merged.build(cfg)
    s = Scope.scheduler(cfg)
    R = cfg.record
    a = cfg.alerts
    retraction, kv, bound, growing, wait, imbalance = (
        a["SGLangRetractionRatioHigh"], a["SGLangKVCacheSaturated"], a["SGLangBatchBoundByKV"],
        a["SGLangQueueGrowing"], a["SGLangQueueWaitHigh"], a["SGLangDPRankImbalance"])
    share = m.of(R("retractions_per_batch", "ratio_rate{w}"))
    kv_latest = m.prefer("kv_usage", {LOG: R("kv_usage", "max"), NATIVE: R("kv_usage", "max")})
    quantile = R("decode_batch_size", "histogram_quantile_rate{w}")
    p50 = m.prefer("batch_size", {FPM: quantile, LOG: quantile}, 'quantile="0.5"')
    of_ceiling = f"({p50}) / {m.on} ({m.source(R('max_running_requests', 'max'), LOG)} > 0)"
    queue = m.prefer("queue_requests", {LOG: R("queue_requests", "max"), NATIVE: R("queue_requests", "max")})
    wait_q = num(cfg.queue_wait_quantile)
    queue_wait = m.prefer("queue_wait", {NATIVE: R("queue_wait_seconds", "histogram_quantile_rate{w}"),
                                         LOG: R("queue_wait_seconds", "mean_rate{w}")})
    queue_wait = queue_wait.replace(f'source="{NATIVE}"', f'source="{NATIVE}", quantile="{wait_q}"')
    ranks = ", ".join(f'{label}=~"${label}"' for label in ("namespace", *cfg.ranks_by[len(cfg.target_labels):]))
    per_server = " ".join(f"{{{{{label}}}}}" for label in cfg.ranks_by[len(cfg.target_labels):])

    def linked(panel, alert: str):
        return panel.links(_links(cfg, alert))

    b = dashboard(cfg, "oncall", "SGLang / On call",
                  f"One screen: retractions against the {percent(retraction.threshold)} line, batch bounded by KV or "
                  "by the ceiling, the queue, the DP rank or KV pool. Each panel links to its runbook section; "
                  "everything else is on SGLang / Scheduler.")
    # Line 1: the latest value of each question, coloured by the alert thresholds.
    b = b.with_panel(linked(single(
        f"Retractions / batches ({percent(retraction.threshold)} rule)",
        f"Latest retraction share per scheduler, as SGLangRetractionRatioHigh reads it. Red from "
        f"{percent(retraction.threshold)}: the running-request ceiling is too high for the KV cache.",
        "percentunit", [(share, m.sourced)], lo=0, thresholds=[(retraction.threshold, "red")], background=True),
        "SGLangRetractionRatioHigh"))
    b = b.with_panel(linked(single(
        "Decode batch p50 / ceiling",
        "Median actual decode batch over max_running_requests (sidecar). Low with KV occupancy high: bounded by "
        "KV memory; near 100%: bounded by the ceiling.",
        "percentunit", [(of_ceiling, m.sourced)], lo=0, hi=1, base="blue"), "SGLangBatchBoundByKV"))
    b = b.with_panel(linked(single(
        "KV cache occupancy",
        f"Latest KV token usage per scheduler (fullest pool). Orange from {percent(bound.guard)}, red from "
        f"{percent(kv.threshold)} (SGLangKVCacheSaturated when sustained).",
        "percentunit", [(kv_latest, m.sourced)], lo=0, hi=1,
        thresholds=[(bound.guard, "orange"), (kv.threshold, "red")], background=True), "SGLangKVCacheSaturated"))
    b = b.with_panel(linked(single(
        "Queue wait (as alerted)",
        f"SGLang's measured p{num(cfg.queue_wait_quantile * 100)} queue time where scraped, else the sidecar's "
        f"mean by Little's law. Red from {wait.threshold:g} s; it adds to time to first token.",
        "s", [(queue_wait, m.sourced)], lo=0, thresholds=[(wait.threshold, "red")], background=True),
        "SGLangQueueWaitHigh"))
    # Line 2: retractions and what bounds the batch, over time.
    b = b.with_panel(linked(graph(
        f"Retraction share vs the {percent(retraction.threshold)} line",
        f"Retractions / batches per scheduler over {cfg.rate_window} windows (the alert's recording rule). "
        "Above the red line for long: lower the ceiling or give KV more memory.",
        "percentunit", [(share, m.sourced)], lo=0, thresholds=[(retraction.threshold, "red")]),
        "SGLangRetractionRatioHigh"))
    b = b.with_panel(linked(graph(
        "Bounded by KV or by the ceiling",
        f"Decode batch p50 / ceiling beside KV occupancy. SGLangBatchBoundByKV: p50 below "
        f"{percent(bound.threshold)} of the ceiling while KV is above {percent(bound.guard)}.",
        "percentunit", [(of_ceiling, f"batch p50 / ceiling {m.sourced}"), (kv_latest, f"KV {m.sourced}")],
        lo=0, hi=1, thresholds=[(bound.threshold, "orange"), (bound.guard, "red")]), "SGLangBatchBoundByKV"))
    # Line 3: the queue.
    b = b.with_panel(linked(graph(
        "Waiting requests and their slope",
        f"#queue-req (the log, else SGLang's num_queue_reqs) and its slope per minute over {growing.window}. "
        f"SGLangQueueGrowing: above {num(growing.threshold)}/min with more than {num(growing.guard)} waiting.",
        "short", [(queue, f"waiting {m.sourced}"),
                  (f"deriv(({queue})[{growing.window}:]) * 60", f"per minute {m.sourced}")], lo=None),
        "SGLangQueueGrowing"))
    b = b.with_panel(linked(graph(
        "Queue wait",
        f"The queue wait of the stat above, over time. SGLangQueueWaitHigh: {wait.threshold:g} s.",
        "s", [(queue_wait, m.sourced)], lo=0, thresholds=[(wait.threshold, "red")]), "SGLangQueueWaitHigh"))
    # Line 4: which DP rank, which pool.
    b = b.with_panel(linked(graph(
        "Which DP rank: imbalance (max / mean)",
        f"Per server, the busiest DP rank over the ranks' mean (1 = balanced). SGLangDPRankImbalance above "
        f"{num(imbalance.threshold)}. Empty with one DP rank.",
        "none", [(f"{cfg.record_ranks('dp_imbalance', 'ratio')}{{{ranks}}}", f"{per_server} ({{{{source}}}})")],
        w=8, lo=1, thresholds=[(imbalance.threshold, "red")]), "SGLangDPRankImbalance"))
    running = m.prefer("running_requests", {LOG: R("running_requests", "max"), NATIVE: R("running_requests", "max")})
    b = b.with_panel(linked(graph(
        "Which DP rank: running requests per rank",
        "#running-req of each DP rank (the log, else SGLang's num_running_reqs). With DP attention every rank "
        "waits for the busiest: one line far above the others is the one.",
        "short", [(running, m.sourced)], w=8, lo=0), "SGLangDPRankImbalance"))
    b = b.with_panel(linked(graph(
        "Which pool: KV usage per pool",
        "Hybrid models (sidecar): each KV pool's usage (full, swa, mamba; gpu/cpu with HiCache). The fullest one "
        "is the scheduler's KV occupancy.",
        "percentunit", [(s.of("sglang_scheduler_kv_pool_usage_ratio"), "{{pool}} " + s.legend)], w=8, lo=0, hi=1,
        thresholds=[(kv.threshold, "red")]), "SGLangKVCacheSaturated"))
    return b
