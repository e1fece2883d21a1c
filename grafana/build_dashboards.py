"""Build the Grafana dashboards of sglang-exporter as JSON (run: python grafana/build_dashboards.py).

Writes grafana/sglang-{scheduler,gpu,capacity}.json (deploy/generate.py wraps grafana/*.json into ConfigMaps). The JSON files are committed;
tests/test_dashboards.py checks that they equal this script's output, so edit here and rerun.

Conventions (../shared/notes/design.md section 4): stable uids, a ``${datasource}`` variable on every
panel and target, ``namespace``/``pod`` and ``dp_rank`` (scheduler) or ``gpu`` variables,
``$__rate_interval`` in every rate, a unit and a description on every panel.

Per-pod semantics: panels read the raw series of each pod (legend ``pod dpN``). Inside one pod the
exporter counts replicas once; in a multi-node server every pod counts the same retractions, so look
at the pod that also sees the stats lines (the others show no ratio). Panels titled "(as alerted)"
read the recording rules, which merge the pods of one ``sglang_group`` with max, as the alerts do.
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parent
DS = {"type": "prometheus", "uid": "${datasource}"}
S = 'namespace=~"$namespace", pod=~"$pod", dp_rank=~"$dp_rank"'
G = 'namespace=~"$namespace", pod=~"$pod", gpu=~"$gpu"'
BY = "namespace, pod, dp_rank"
LEG = "{{pod}} dp{{dp_rank}}"
GLEG = "{{pod}} gpu{{gpu}}"


def target(expr: str, legend: str, ref: str, **extra) -> dict:
    return {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref, **extra}


class Board:
    def __init__(self):
        self.panels: list[dict] = []
        self.y = 0
        self.x = 0
        self.row_h = 0

    def row(self, title: str):
        if self.x:
            self.y += self.row_h
            self.x = 0
        self.panels.append({"type": "row", "title": title, "collapsed": False, "panels": [],
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "id": len(self.panels) + 1})
        self.y += 1
        self.row_h = 0

    def panel(self, title: str, description: str, unit: str, targets: list[tuple], *, kind: str = "timeseries",
              w: int = 12, h: int = 8, thresholds: list[tuple] | None = None, minmax: tuple | None = None,
              options: dict | None = None, fmt: str | None = None, base: str = "green"):
        if self.x + w > 24:
            self.y += self.row_h
            self.x = 0
            self.row_h = 0
        refs = "ABCDEFGH"
        tg = []
        for i, t in enumerate(targets):
            expr, legend = t[0], t[1]
            extra = {"format": fmt} if fmt else {}
            if kind == "table":
                extra.update({"instant": True, "format": "table"})
            tg.append(target(expr, legend, refs[i], **extra))
        defaults: dict = {"unit": unit}
        custom: dict = {}
        if thresholds:
            defaults["thresholds"] = {"mode": "absolute", "steps": [
                {"color": base, "value": None}, *({"color": c, "value": v} for v, c in thresholds)]}
            if kind == "timeseries":
                custom["thresholdsStyle"] = {"mode": "line+area" if len(thresholds) == 1 else "line"}
        if minmax:
            defaults["min"], defaults["max"] = minmax
        if custom:
            defaults["custom"] = custom
        p = {"id": len(self.panels) + 1, "type": kind, "title": title, "description": description,
             "datasource": DS, "targets": tg, "gridPos": {"h": h, "w": w, "x": self.x, "y": self.y},
             "fieldConfig": {"defaults": defaults, "overrides": []}}
        if options:
            p["options"] = options
        self.panels.append(p)
        self.x += w
        self.row_h = max(self.row_h, h)


def variables(kind: str) -> list[dict]:
    def query(name: str, label: str, q: str, include_all: bool = True) -> dict:
        return {"name": name, "label": label, "type": "query", "datasource": DS,
                "query": {"query": q, "refId": f"{name}-var"}, "definition": q, "refresh": 2,
                "includeAll": include_all, "allValue": ".*", "multi": True, "sort": 1,
                "current": {"selected": True, "text": ["All"], "value": ["$__all"]}}

    out = [{"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
            "current": {}, "hide": 0, "refresh": 1},
           query("namespace", "Namespace", "label_values(sglang_exporter_build_info, namespace)"),
           query("pod", "Pod", 'label_values(sglang_exporter_build_info{namespace=~"$namespace"}, pod)')]
    if kind == "gpu":
        out.append(query("gpu", "GPU", 'label_values(sglang_gpu_info{namespace=~"$namespace", pod=~"$pod"}, gpu)'))
    else:
        out.append(query("dp_rank", "DP rank (scheduler)",
                         'label_values(sglang_scheduler_batches_total{namespace=~"$namespace", pod=~"$pod"}, dp_rank)'))
    if kind == "capacity":
        out.append({"name": "safety_factor", "label": "Safety factor", "type": "custom", "query": "0.6,0.7,0.8",
                    "current": {"selected": True, "text": "0.7", "value": "0.7"},
                    "options": [{"selected": v == "0.7", "text": v, "value": v} for v in ("0.6", "0.7", "0.8")],
                    "description": "Share of the estimated KV capacity to use as the running-request ceiling "
                                   "(method.md: 60-70% for offline work; fragmentation and length variance)."})
    return out


def dashboard(uid: str, title: str, description: str, kind: str, board: Board) -> dict:
    return {"uid": uid, "title": title, "description": description, "tags": ["sglang", "sglang-exporter"],
            "editable": True, "graphTooltip": 1, "schemaVersion": 39, "version": 1, "refresh": "30s",
            "time": {"from": "now-3h", "to": "now"}, "timezone": "",
            "templating": {"list": variables(kind)}, "annotations": {"list": []}, "links": [
                {"title": t, "type": "link", "url": f"/d/{u}", "targetBlank": False}
                for t, u in (("Scheduler", "sglang-scheduler"), ("GPU", "sglang-gpu"), ("Capacity", "sglang-capacity"))
                if u != uid],
            "panels": board.panels}


def rate(metric: str, extra: str = "", by: str = BY) -> str:
    sel = f"{S}, {extra}" if extra else S
    return f"sum by ({by}) (rate({metric}{{{sel}}}[$__rate_interval]))"


def scheduler() -> dict:
    b = Board()
    b.row("Batch size: an outcome, not a setting")
    b.panel("Decode batch size percentiles vs the configured ceiling",
            "Actual running batch per logged decode step (#running-req of Decode batch lines): p50, p90, p99 from "
            "sglang_scheduler_batch_size{phase=\"decode\"}, against max_running_requests from the start-up line. "
            "A p50 far below the ceiling while KV usage is high means the batch is bounded by KV memory.",
            "none", [
                (f'histogram_quantile(0.5, sum by ({BY}, le) (rate(sglang_scheduler_batch_size_bucket{{{S}, phase="decode"}}[$__rate_interval])))', f"p50 {LEG}"),
                (f'histogram_quantile(0.9, sum by ({BY}, le) (rate(sglang_scheduler_batch_size_bucket{{{S}, phase="decode"}}[$__rate_interval])))', f"p90 {LEG}"),
                (f'histogram_quantile(0.99, sum by ({BY}, le) (rate(sglang_scheduler_batch_size_bucket{{{S}, phase="decode"}}[$__rate_interval])))', f"p99 {LEG}"),
                (f"max by ({BY}) (sglang_scheduler_max_running_requests{{{S}}})", f"ceiling {LEG}"),
            ])
    b.panel("Decode batch size distribution",
            "Heatmap of the actual decode batch size (logged decode steps per bucket of #running-req).",
            "none", [(f'sum by (le) (increase(sglang_scheduler_batch_size_bucket{{{S}, phase="decode"}}[$__rate_interval]))', "{{le}}")],
            kind="heatmap", fmt="heatmap",
            options={"calculate": False, "yAxis": {"unit": "none"}, "cellGap": 1, "color": {"scheme": "Oranges", "mode": "scheme"}})
    b.panel("Running and waiting requests",
            "Latest #running-req and #queue-req of the scheduler's stats lines (they disappear while the scheduler is "
            "idle: SGLang prints nothing then).",
            "none", [(f"sglang_scheduler_running_requests{{{S}}}", f"running {LEG}"),
                     (f"sglang_scheduler_queue_requests{{{S}}}", f"waiting {LEG}")])
    b.panel("Prefill batch size percentiles",
            "Requests per prefill batch (#new-seq of Prefill batch lines): p50 and p99, and the mean tokens per "
            "prefill batch is on the throughput row.",
            "none", [
                (f'histogram_quantile(0.5, sum by ({BY}, le) (rate(sglang_scheduler_batch_size_bucket{{{S}, phase="prefill"}}[$__rate_interval])))', f"p50 {LEG}"),
                (f'histogram_quantile(0.99, sum by ({BY}, le) (rate(sglang_scheduler_batch_size_bucket{{{S}, phase="prefill"}}[$__rate_interval])))', f"p99 {LEG}"),
            ])

    b.row("Retractions (preemption)")
    b.panel("Retraction ratio vs the 5% line",
            "Retraction events / (prefill batches + decode steps), per scheduler. The method: more than 5% of batches "
            "preempted means the running-request ceiling is too high (red line). Decode steps are Decode batch lines x "
            "decode_log_interval.",
            "percentunit", [(f"{rate('sglang_scheduler_retractions_total')} / ({rate('sglang_scheduler_batches_total')} > 0)", LEG)],
            thresholds=[(0.05, "red")], minmax=(0, None))
    b.panel("Retraction ratio (as alerted)",
            "The recording rule group_dp_rank:sglang_scheduler_retractions_per_batch:ratio_rate5m that "
            "SGLangRetractionRatioHigh reads: 5m windows, pods of one sglang_group merged with max (no pod filter).",
            "percentunit", [('group_dp_rank:sglang_scheduler_retractions_per_batch:ratio_rate5m{namespace=~"$namespace", dp_rank=~"$dp_rank"}',
                             "{{sglang_group}} dp{{dp_rank}}")],
            thresholds=[(0.05, "red")], minmax=(0, None))
    b.panel("Retractions and retracted requests",
            "Retraction events, requests sent back to the queue, and requests aborted because even alone they did "
            "not fit, per second.",
            "reqps", [(rate("sglang_scheduler_retractions_total"), f"events {LEG}"),
                      (rate("sglang_scheduler_retracted_requests_total"), f"retracted {LEG}"),
                      (rate("sglang_scheduler_retract_aborted_requests_total"), f"aborted {LEG}")])
    b.panel("new_token_ratio after retractions",
            "SGLang's admission reservation factor after the latest retraction (#new_token_ratio: a -> b, b). It "
            "drops after a retraction and recovers; a sawtooth means repeated over-admission.",
            "none", [(f"sglang_scheduler_new_token_ratio{{{S}}}", LEG)])

    b.row("KV cache")
    b.panel("KV cache usage",
            "Latest KV-cache occupancy (token usage; hybrid models: the fullest pool) and each pool. Excludes the "
            "evictable radix cache.",
            "percentunit", [(f"sglang_scheduler_kv_usage_ratio{{{S}}}", LEG),
                            (f"sglang_scheduler_kv_pool_usage_ratio{{{S}}}", "{{pool}} " + LEG)],
            thresholds=[(0.95, "red")], minmax=(0, 1))
    b.panel("KV tokens used vs capacity",
            "KV tokens in use (#token) against the pool's capacity (max_total_num_tokens of the start-up line).",
            "short", [(f"sglang_scheduler_kv_used_tokens{{{S}}}", f"used {LEG}"),
                      (f"max by ({BY}) (sglang_scheduler_max_total_tokens{{{S}}})", f"capacity {LEG}")])
    b.panel("KV usage distribution",
            "Heatmap of KV occupancy over all Prefill/Decode batch lines (sglang_scheduler_kv_usage_observed_ratio).",
            "percentunit", [(f"sum by (le) (increase(sglang_scheduler_kv_usage_observed_ratio_bucket{{{S}}}[$__rate_interval]))", "{{le}}")],
            kind="heatmap", fmt="heatmap",
            options={"calculate": False, "yAxis": {"unit": "percentunit"}, "cellGap": 1, "color": {"scheme": "Blues", "mode": "scheme"}})
    b.panel("Pending tokens",
            "Tokens of all waiting requests (#pending-token of Prefill batch lines, SGLang 2026-04+).",
            "short", [(f"sglang_scheduler_pending_tokens{{{S}}}", LEG)])

    b.row("Throughput: computed vs useful")
    computed = f"({rate('sglang_scheduler_prefill_computed_tokens_total')} + {rate('sglang_scheduler_decode_tokens_total')})"
    b.panel("Recompute share (\"fake throughput\")",
            "Recomputed tokens of retracted requests / all computed tokens (prefill incl. re-prefills + decode). "
            "SGLangRecomputeShareHigh fires above 10% (red line).",
            "percentunit", [(f"{rate('sglang_scheduler_recomputed_tokens_total')} / ({computed} > 0)", LEG)],
            thresholds=[(0.1, "red")], minmax=(0, None))
    b.panel("Effective throughput",
            "Tokens computed per second (prefill + decode), recomputed tokens, and useful = computed - recomputed. "
            "SGLang's own gen throughput figure for comparison.",
            "suffix:tok/s", [(computed, f"computed {LEG}"),
                             (rate("sglang_scheduler_recomputed_tokens_total"), f"recomputed {LEG}"),
                             (f"clamp_min({computed} - {rate('sglang_scheduler_recomputed_tokens_total')}, 0)", f"useful {LEG}"),
                             (f"sglang_scheduler_gen_throughput_tokens_per_second{{{S}}}", f"SGLang gen {LEG}")])
    b.panel("Prefill and decode steps",
            "Prefill batches and decode steps per second (decode steps estimated from Decode batch lines x "
            "decode_log_interval).",
            "ops", [(f"sum by ({BY}, phase) (rate(sglang_scheduler_batches_total{{{S}}}[$__rate_interval]))", "{{phase}} " + LEG)])
    b.panel("Cache-hit ratio",
            "Prompt tokens served by the radix cache / (cached + computed prompt tokens), a ratio of rates.",
            "percentunit", [(f"{rate('sglang_scheduler_prefill_cached_tokens_total')} / (({rate('sglang_scheduler_prefill_cached_tokens_total')} + {rate('sglang_scheduler_prefill_computed_tokens_total')}) > 0)", LEG)],
            minmax=(0, 1))

    b.row("Queue")
    b.panel("Queue depth",
            "Latest #queue-req, and the time-weighted mean number of waiting requests (rate of "
            "sglang_scheduler_queue_request_seconds_total).",
            "short", [(f"sglang_scheduler_queue_requests{{{S}}}", f"latest {LEG}"),
                      (rate("sglang_scheduler_queue_request_seconds_total"), f"mean {LEG}")])
    b.panel("Queue wait",
            "Mean queue wait by Little's law (mean queue length / admission rate; every SGLang version) and p95 of "
            "per-request queue_duration where --enable-request-time-stats-logging is on. SGLangQueueWaitHigh: 10 s.",
            "s", [(f"{rate('sglang_scheduler_queue_request_seconds_total')} / ({rate('sglang_scheduler_admitted_requests_total')} > 0)", f"mean {LEG}"),
                  (f"histogram_quantile(0.95, sum by ({BY}, le) (rate(sglang_scheduler_queue_wait_seconds_bucket{{{S}}}[$__rate_interval])))", f"p95 {LEG}")],
            thresholds=[(10, "red")])
    b.panel("Admissions",
            "Requests admitted from the waiting queue per second (#new-seq, less a continuing chunk).",
            "reqps", [(rate("sglang_scheduler_admitted_requests_total"), LEG)])

    b.row("Speculative decoding and PD disaggregation")
    b.panel("Speculative accept length",
            "Tokens committed per request per decode step (accept len) and SGLang's accept rate (its definition "
            "changed 2026-04-28).",
            "short", [(f"sglang_scheduler_spec_accept_length{{{S}}}", f"accept len {LEG}"),
                      (f"sglang_scheduler_spec_accept_ratio{{{S}}}", f"accept rate {LEG}")])
    b.panel("PD queues",
            "PD disaggregation queues of the latest stats line (bootstrap, inflight/transfer, prealloc, retracted) "
            "and the KV pre-allocated for incoming transfers (right: ratio).",
            "short", [(f"sglang_scheduler_pd_queue_requests{{{S}}}", "{{queue}} " + LEG),
                      (f"sglang_scheduler_pd_preallocated_usage_ratio{{{S}}}", f"pre-allocated usage {LEG}")])

    b.row("Exporter")
    b.panel("Log lines read",
            "Lines of the SGLang log read per second by kind and result; malformed lines are scheduler lines that "
            "could not be applied (SGLangExporterParseErrors).",
            "ops", [('sum by (namespace, pod, kind, result) (rate(sglang_exporter_log_lines_total{namespace=~"$namespace", pod=~"$pod"}[$__rate_interval]))',
                     "{{kind}} {{result}} {{pod}}")])
    b.panel("Age of the latest stats line",
            "Seconds since the scheduler's latest Prefill/Decode batch line and since any log line was read "
            "(SGLangSchedulerLogStale).",
            "s", [(f"time() - sglang_scheduler_last_stats_line_timestamp_seconds{{{S}}}", f"stats {LEG}"),
                  ('time() - sglang_exporter_last_line_timestamp_seconds{namespace=~"$namespace", pod=~"$pod"}', "any line {{pod}}")])
    return dashboard("sglang-scheduler", "SGLang / Scheduler",
                     "What the SGLang scheduler actually did: batch size against the ceiling, retractions against the 5% "
                     "line, KV usage, recompute, queue, cache hits, speculative decoding and PD queues.",
                     "scheduler", b)


def gpu() -> dict:
    b = Board()
    b.row("Health")
    b.panel("NVML up", "1 when the GPU collector reads NVML and its latest snapshot is fresh (sglang_gpu_up).",
            "none", [('sglang_gpu_up{namespace=~"$namespace", pod=~"$pod"}', "{{pod}}")], kind="stat", w=6,
            thresholds=[(1, "green")], base="red", options={"colorMode": "background"})
    b.panel("Snapshot age", "Seconds since the poller's latest complete NVML snapshot.",
            "s", [('sglang_gpu_snapshot_age_seconds{namespace=~"$namespace", pod=~"$pod"}', "{{pod}}")], w=6)
    b.panel("GPUs", "Identity of each GPU: name, UUID, driver and CUDA versions, MIG mode (sglang_gpu_info).",
            "none", [(f"sglang_gpu_info{{{G}}}", "")], kind="table", w=12)
    b.row("Utilisation and memory")
    b.panel("GPU utilisation", "Share of the sample period in which a kernel ran (NVML utilization.gpu).",
            "percentunit", [(f"sglang_gpu_utilization_ratio{{{G}}}", GLEG)], minmax=(0, 1))
    b.panel("Memory bandwidth utilisation", "Share of the sample period in which device memory was read or written.",
            "percentunit", [(f"sglang_gpu_memory_utilization_ratio{{{G}}}", GLEG)], minmax=(0, 1))
    b.panel("Device memory", "Used, reserved and total device memory. SGLang reserves --mem-fraction-static (weights "
            "and KV pool) at start-up, so ~90% used is normal.",
            "bytes", [(f"sglang_gpu_memory_used_bytes{{{G}}}", f"used {GLEG}"),
                      (f"sglang_gpu_memory_reserved_bytes{{{G}}}", f"reserved {GLEG}"),
                      (f"sglang_gpu_memory_total_bytes{{{G}}}", f"total {GLEG}")])
    b.panel("Memory used share", "1 - free / total (SGLangGPUMemoryNearFull above 98%).",
            "percentunit", [(f"1 - sglang_gpu_memory_free_bytes{{{G}}} / sglang_gpu_memory_total_bytes{{{G}}}", GLEG)],
            thresholds=[(0.98, "red")], minmax=(0, 1))
    b.panel("Processes", "Compute processes on the device and the memory they use.",
            "bytes", [(f"sglang_gpu_process_memory_used_bytes{{{G}}}", f"process memory {GLEG}"),
                      (f"sglang_gpu_processes{{{G}}}", f"processes {GLEG}")])
    b.row("Clocks, power, temperature")
    b.panel("Clocks", "SM and memory clocks.", "hertz",
            [(f"sglang_gpu_sm_clock_hertz{{{G}}}", f"SM {GLEG}"), (f"sglang_gpu_memory_clock_hertz{{{G}}}", f"memory {GLEG}")])
    b.panel("Clocks-event (throttle) reasons", "Reasons currently lowering the clocks (1 = active); thermal and hardware "
            "reasons fire SGLangGPUThrottled, sw_power_cap SGLangGPUPowerCapped. gpu_idle is excluded.",
            "none", [(f'sglang_gpu_clocks_event_active{{{G}, reason!="gpu_idle"}} > 0', "{{reason}} " + GLEG)], minmax=(0, 1))
    b.panel("Power", "Power draw and the enforced limit; the mean power from the energy counter.",
            "watt", [(f"sglang_gpu_power_watts{{{G}}}", f"draw {GLEG}"),
                     (f"sglang_gpu_power_limit_watts{{{G}}}", f"limit {GLEG}"),
                     (f"rate(sglang_gpu_energy_joules_total{{{G}}}[$__rate_interval])", f"mean {GLEG}")])
    b.panel("Temperature", "GPU die temperature (NVML); sustained heat ends in thermal slowdown (see the throttle reasons).", "celsius", [(f"sglang_gpu_temperature_celsius{{{G}}}", GLEG)])
    b.row("Errors")
    b.panel("XID errors", "XID events reported by the driver in the interval, by XID code (SGLangGPUXidErrors).",
            "short", [(f"sum by (namespace, pod, gpu, xid) (increase(sglang_gpu_xid_errors_total{{{G}}}[$__rate_interval]))", "XID {{xid}} " + GLEG)])
    b.panel("ECC errors and remapped rows", "Volatile ECC errors by type in the interval, and remapped rows by kind "
            "(pending/failure fire SGLangGPUMemoryErrors).",
            "short", [(f"increase(sglang_gpu_ecc_errors_total{{{G}}}[$__rate_interval])", "ECC {{error_type}} " + GLEG),
                      (f"sglang_gpu_remapped_rows{{{G}}}", "rows {{kind}} " + GLEG)])
    b.panel("NVML call errors", "Failed NVML calls per second by function and error kind; init errors by kind.",
            "ops", [('sum by (pod, call, kind) (rate(sglang_gpu_nvml_errors_total{namespace=~"$namespace", pod=~"$pod"}[$__rate_interval]))', "{{call}} {{kind}} {{pod}}"),
                    ('sglang_gpu_init_error{namespace=~"$namespace", pod=~"$pod"} > 0', "init {{kind}} {{pod}}")])
    return dashboard("sglang-gpu", "SGLang / GPU", "The NVML readings of the GPUs the SGLang server runs on.", "gpu", b)


def capacity() -> dict:
    b = Board()
    per_req = (f"sum by ({BY}) (sum_over_time(sglang_scheduler_kv_used_tokens{{{S}}}[$__rate_interval])) / "
               f"(sum by ({BY}) (sum_over_time(sglang_scheduler_running_requests{{{S}}}[$__rate_interval])) > 0)")
    cap_tokens = f"max by ({BY}) (sglang_scheduler_max_total_tokens{{{S}}})"
    cap_req = f"{cap_tokens} / ({per_req})"
    ceiling = f"max by ({BY}) (sglang_scheduler_max_running_requests{{{S}}})"
    b.row("KV capacity")
    b.panel("KV capacity in tokens", "max_total_num_tokens of the start-up line: the KV pool's size in tokens.",
            "short", [(cap_tokens, LEG)], kind="stat", w=6)
    b.panel("Configured ceiling", "max_running_requests of the start-up line.",
            "short", [(ceiling, LEG)], kind="stat", w=6)
    b.panel("Ceiling / safe capacity", "Configured ceiling divided by the safe capacity in requests (capacity x "
            "$safety_factor). Above 1 the ceiling can only be reached by retracting (method: 60-70% for offline).",
            "percentunit", [(f"{ceiling} / ($safety_factor * {cap_req})", LEG)], kind="stat", w=12,
            thresholds=[(0.9, "orange"), (1, "red")])
    b.panel("KV capacity in requests vs ceiling and actual batch",
            "Requests the KV pool holds at the observed mean KV tokens per running request, that x $safety_factor "
            "(the safe ceiling), the configured ceiling, and the actual running batch.",
            "short", [(cap_req, f"capacity {LEG}"),
                      (f"$safety_factor * {cap_req}", f"safe ceiling {LEG}"),
                      (ceiling, f"configured {LEG}"),
                      (f"avg by ({BY}) (avg_over_time(sglang_scheduler_running_requests{{{S}}}[$__rate_interval]))", f"running {LEG}")],
            w=24, h=10)
    b.panel("KV tokens per running request",
            "Observed mean KV footprint of a running request (#token / #running-req, time-weighted): prompt plus "
            "output so far. Larger than expected means fewer requests fit.",
            "short", [(per_req, LEG)])
    b.panel("Safe capacity (as alerted)", "The recording rule group_dp_rank:sglang_scheduler_kv_capacity_requests:safe5m "
            "(0.7 x capacity over 5m, pods of one sglang_group merged with max; no pod filter).",
            "short", [('group_dp_rank:sglang_scheduler_kv_capacity_requests:safe5m{namespace=~"$namespace", dp_rank=~"$dp_rank"}',
                       "{{sglang_group}} dp{{dp_rank}}")])
    b.row("Limits from the start-up line")
    b.panel("Context length", "context_len of the start-up line, tokens.", "short",
            [(f"max by ({BY}) (sglang_scheduler_context_length{{{S}}})", LEG)], kind="stat", w=8)
    b.panel("Chunked prefill size", "chunked_prefill_size, tokens per prefill chunk.", "short",
            [(f"max by ({BY}) (sglang_scheduler_chunked_prefill_size{{{S}}})", LEG)], kind="stat", w=8)
    b.panel("Decode log interval", "Decode steps per Decode batch line (server_args decode_log_interval).", "short",
            [(f"max by ({BY}) (sglang_scheduler_decode_log_interval{{{S}}})", LEG)], kind="stat", w=8)
    return dashboard("sglang-capacity", "SGLang / Capacity",
                     "KV capacity in tokens and in requests at the observed mean tokens per request, with the safety "
                     "factor (0.7 by default) the method recommends for the running-request ceiling.",
                     "capacity", b)


def build() -> dict[str, str]:
    """``{file name: JSON text}`` of every dashboard."""
    return {f"sglang-{name}.json": json.dumps(fn(), indent=2, sort_keys=True) + "\n"
            for name, fn in (("scheduler", scheduler), ("gpu", gpu), ("capacity", capacity))}


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in build().items():
        (OUT / name).write_text(text)
        print(OUT / name)
