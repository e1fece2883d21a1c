"""The report document as labelled rows, shared by the text and HTML renderers.

Every figure is written with its unit; a figure that is ``null`` is written ``n/a (reason)`` with the
reason from its section's ``not_available`` map.
"""

from __future__ import annotations

import os

from .. import method
from .fmt import count_range, num, pct
from .stats import plural


def fig(sec: dict, key: str, digits: int = 0, unit: str = "", scale: float = 1.0) -> str:
    """A section's figure with its unit, or ``n/a (reason)``."""
    value = sec.get(key)
    if value is None:
        why = sec.get("not_available", {}).get(key)
        return f"n/a ({why})" if why else "n/a"
    return num(value * scale, digits, unit)


def share(sec: dict, key: str, digits: int = 1) -> str:
    """A section's share as a percentage, or ``n/a (reason)``."""
    value = sec.get(key)
    if value is None:
        return fig(sec, key)
    return pct(value, digits)


def dist(d: dict, digits: int = 0, scale: float = 1.0, unit: str = "") -> str:
    """``p50 66, p90 68, ..., max 68 (mean 65, n=14)``, or ``no samples``."""
    if not d.get("count"):
        return "no samples"
    keys = [k for k in d if k.startswith("p")] + ["max"]
    parts = [f"{k.replace('_', '.')} {num(d[k] * scale if d[k] is not None else None, digits)}{unit}" for k in keys]
    return ", ".join(parts) + f" (mean {num(d['mean'] * scale, digits)}{unit}, n={d['count']})"


def schedulers(names: list[str]) -> str:
    if not names:
        return "schedulers: none"
    if names == ["0"]:
        return "schedulers: 1"
    return f"schedulers: {len(names)} (DP rank{'s' if len(names) > 1 else ''} {', '.join(names)})"


def header(doc: dict) -> list[str]:
    """The lines above the sections: inputs, span, schedulers, line counts."""
    sp = doc["span"]
    lines = doc["lines"]
    parsed = ", ".join(f"{k} {v}" for k, v in lines["parsed"].items() if v) or "none"
    bad = sum(lines["malformed"].values())
    rejected = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in lines.get("values_rejected", {}).items() if v)
    when = (f"span: {sp['first']} .. {sp['last']} ({num(sp['seconds'], 0, ' s')})" if sp["first"] else
            "span: no time-stamped line")
    if sp.get("idle_gaps"):
        when += (f", {plural(sp['idle_gaps'], 'silence')} over {sp['idle_gap_cap_seconds']:g} s between stats lines "
                 "(counted as that)")
    stages = doc.get("stages") or {}
    who = (f"SGLang Omni stages: {', '.join(stages)}" + (f"; plain {schedulers(doc['schedulers'])}"
                                                       if doc["schedulers"] else "")
           if stages else schedulers(doc["schedulers"]))
    out = [
        "inputs: " + ", ".join(f"{os.path.basename(i['path'])} ({plural(i['lines'], 'line')})" for i in doc["inputs"]),
        f"{when}; {who}",
        f"scheduler lines: {parsed}; malformed {bad}; other {lines['ignored']}"
        + (f"; damaged values ignored: {rejected}" if rejected else ""),
    ]
    unattributed = sum(lines.get("unattributed", {}).values())
    if unattributed:
        why = "; ".join(lines.get("unattributed_reasons") or []) or "their stage is not known"
        out.append(f"unattributed: {plural(unattributed, 'SGLang Omni line')} in no stage's figures: "
                   f"{why}; put deploy/sglang-omni/sitecustomize.py on the server's PYTHONPATH (docs/sglang-omni.md)")
    return out


def stage_line(doc: dict) -> str:
    """The first line of an SGLang Omni stage's block: its schedulers and capacity sources."""
    s = doc["settings"]
    parts = [schedulers(doc["schedulers"])]
    if s.get("max_total_num_tokens") is None and doc["kv_capacity"].get("capacity_source"):
        parts.append(f"KV capacity from the {doc['kv_capacity']['capacity_source']}")
    return "; ".join(parts)


def _batch(b: dict) -> list[tuple[str, str]]:
    ceiling = (f"{num(b['max_running_requests'])} ({b['max_running_requests_source']})"
               if b["max_running_requests"] is not None else fig(b, "max_running_requests"))
    return [
        ("decode batch (#running-req per Decode line)", dist(b["decode"])),
        ("prefill batch (#new-seq per Prefill line)", dist(b["prefill"])),
        ("configured ceiling (max_running_requests)", ceiling),
        ("share of logged decode steps at the ceiling", share(b, "at_ceiling_share")),
        ("KV usage per Decode line", dist(b["kv_usage"], 0, 100, "%")),
        ("stats lines with an empty queue", share(b, "queue_empty_share")),
    ]


def _interval_source(r: dict) -> str:
    """Where the decode interval came from; an assumed one says so where the figure is read."""
    if r["decode_log_interval_source"] == "default":
        return "assumed: SGLang's default, not in the log; decode figures rest on it"
    return r["decode_log_interval_source"]


def _retractions(r: dict) -> list[tuple[str, str]]:
    shares = [w["share"] for w in r["windows"] if w["share"] is not None and w["batches"] >= method.MIN_WINDOW_BATCHES]
    windows = (f"peak {pct(r['peak_window_share'], 2)}, {r['windows_above_rule']} of "
               f"{plural(len(shares), 'window')} above {method.RETRACTION_RULE:.0%} (windows of "
               f"{method.MIN_WINDOW_BATCHES}+ batches)" if r["peak_window_share"] is not None
               else fig(r, "peak_window_share"))
    return [
        ("events / requests retracted", f"{r['events']} / {r['requests']}"
         + (f" (+{r['aborted_requests']} aborted)" if r["aborted_requests"] else "")
         + (f"; printed by {r['replicas_reporting']} replicas, counted once" if r["replicas_reporting"] > 1 else "")),
        ("KV tokens freed (#new_tokens_gained)", num(r["freed_tokens"])),
        ("batches", f"{num(r['batches'])} = {num(r['prefill_batches'])} prefill + {num(r['decode_steps'])} decode "
                    f"steps (Decode lines x {r['decode_log_interval']}, {_interval_source(r)})"),
        (f"retraction share of batches (rule: {method.RETRACTION_RULE:.0%})", share(r, "share_of_batches", 2)),
        (f"per {r['window_seconds']:g}-s window", windows),
        ("latest new_token_ratio", fig(r, "latest_new_token_ratio", 4)),
    ]


def _method(m: str) -> str:
    """The recompute method as the text report says it: ``#new_tokens_gained`` is the KV freed and never
    cached, a lower bound of what is computed again (docs/metrics.md, "Recomputed tokens")."""
    if m in ("new_tokens_gained", "mixed"):
        return (f"{m}: a lower bound, cached KV evicted before re-admission is computed again too; upper "
                "bound: the per-pass stream's sglang_scheduler_forward_pass_retracted_tokens_total")
    return m


def _throughput(t: dict) -> list[tuple[str, str]]:
    rates = (f"{fig(t, 'computed_tokens_per_second')} vs {fig(t, 'useful_tokens_per_second')} over "
             f"{num(t['seconds'], 0, ' s')} of stats lines" if t["seconds"] else fig(t, "computed_tokens_per_second"))
    return [
        ("computed tokens", f"{num(t['computed_tokens'])} = {num(t['prefill_computed_tokens'])} prefill + "
                            f"{num(t['decode_tokens'])} decode ({t.get('decode_tokens_basis') or 'estimated'})"),
        ("recomputed tokens", num(t["recomputed_tokens"]) + (f" ({_method(t['recomputed_tokens_method'])})"
                                                              if t["recomputed_tokens_method"] else "")
         + (f"; {plural(t['retractions_not_sized'], 'retraction')} not sized" if t["retractions_not_sized"] else "")),
        ("useful tokens", fig(t, "useful_tokens")),
        ("recompute share of computed tokens", share(t, "recompute_share")),
        ("tokens/s computed vs useful", rates + (" (rests on an ASSUMED decode-log interval: see computed tokens)"
                                                 if "ASSUMED" in (t.get("decode_tokens_basis") or "") else "")),
        ("SGLang gen throughput (Decode lines, tok/s)", dist(t["sglang_gen_throughput"])),
        ("cache-hit ratio (#cached-token / prompt tokens)", share(t, "cache_hit_ratio")),
    ]


def _kv(k: dict) -> list[tuple[str, str]]:
    cap = fig(k, "capacity_tokens")
    if k["capacity_tokens"] is not None:
        cap += f" ({k['capacity_source']}" + (f", range {count_range(k['capacity_estimate_range'])}"
                                            if k["capacity_estimate_range"] else "") + ")"
    per = fig(k, "mean_tokens_per_running_request", 1)
    if k["mean_tokens_per_running_request"] is not None:
        per += f" (per line: {dist(k['tokens_per_running_request'])})"
    if k["preallocated_tokens_excluded"] is not None:
        per += (f"; KV pre-allocated for requests in transfer left out: "
                f"{num(k['preallocated_tokens_excluded'])} tokens per line on average")
    reqs = fig(k, "capacity_requests", 1)
    pools = k["capacity_requests_by_pool"]
    if len(pools) > 1:
        reqs += (" (" + ", ".join(f"{name} pool {num(v, 1)}" for name, v in pools.items())
                 + f": the {k['capacity_limiting_pool']} pool limits)")
    rec = k["recommended_max_running_requests_offline"]
    rows = [
        ("KV capacity (tokens)", cap),
        ("mean KV tokens per running request", per),
        ("theoretical capacity (requests)", reqs),
        (f"safe ceiling (x {method.SAFETY_FACTOR:g})", fig(k, "safe_ceiling_requests")),
        (f"recommended --max-running-requests, offline ({method.OFFLINE_RANGE[0]:.0%}-{method.OFFLINE_RANGE[1]:.0%})".replace("%-", "-")
         + (f", per DP rank ({k['dp_ranks']} ranks)" if k.get("capacity_scope") == "per DP rank" else ""),
         count_range(rec) if rec else fig(k, "recommended_max_running_requests_offline")),
        ("configured ceiling / observed decode p99",
         f"{num(k['max_running_requests']) if k['max_running_requests'] else 'not in the log'} / "
         f"{num(k['decode_batch_p99'])}"),
    ]
    m = k.get("model")
    if m:
        rows.append(("KV bytes per token (model config)", f"{num(m['bytes_per_token'])} B = {m['formula']} "
                     f"(TP {m['tp_size']}, {m['tp_size_source']})"))
        rows.append(("KV pool implied by the log's capacity", f"{num(m['pool_gib'], 2, ' GiB')} per rank"
                     + (f"; log says {num(m['log_kv_alloc_gib'], 2)} GiB for {num(m['log_kv_alloc_tokens'])} tokens"
                        f" (ratio {num(m['log_vs_model_ratio'], 3)})" if m["log_kv_alloc_gib"] else "")))
    return rows


def _queue(q: dict) -> list[tuple[str, str]]:
    admitted = (f"{q['admitted_requests']} / {fig(q, 'admission_rate_per_second', 2, '/s')}"
                if q["admitted_requests"] is not None else fig(q, "admitted_requests"))
    if q["admitted_requests"] is not None and "no chunked_prefill_size" in (q["admitted_requests_source"] or ""):
        admitted += " (at most: chunk size unknown, a chunked prompt counts per chunk; --chunked-prefill-size)"
    step = fig(q, "decode_step_seconds", 1, " ms", 1000)
    if q["decode_step_seconds"] is not None:
        per = q["decode_step_seconds_per_line"]
        step += (f" per step (from {q['decode_step_source']}, {plural(q['decode_step_lines'], 'Decode line')}; "
                 f"p50 {num(per['p50'] * 1000, 1)} ms, p90 {num(per['p90'] * 1000, 1)} ms)")
        if q["time_per_output_token_seconds"] != q["decode_step_seconds"]:
            step += f"; {fig(q, 'time_per_output_token_seconds', 1, ' ms', 1000)} per output token"
    return [
        ("queue depth (#queue-req per Decode line)", dist(q["depth"])),
        ("queue depth first / last / max", f"{num(q['depth_first'])} / {num(q['depth_last'])} / "
                                           f"{num(q['depth_max_all_lines'])}"),
        ("time-weighted mean queue depth", fig(q, "time_weighted_mean_depth", 2)),
        ("admitted requests / admission rate", admitted),
        ("estimated arrival rate", fig(q, "arrival_rate_per_second", 2, "/s")),
        ("mean queue wait (Little's law)", fig(q, "mean_wait_seconds_littles_law", 3, " s")),
        ("mean decode step (about TPOT)", step),
        ("queue wait per request (ReqTimeStats)", dist(q["queue_wait_seconds"], 3, 1, " s")
         + (f"; {q['queue_wait_negative_skipped']} negative skipped" if q["queue_wait_negative_skipped"] else "")),
        ("queue time per request (Finish)", dist(q["finish_queue_time_seconds"], 3, 1, " s")),
        ("end-to-end latency (Finish)", dist(q["e2e_latency_seconds"], 3, 1, " s")),
    ]


def _factor(sec: dict, key: str) -> str:
    """A distribution of max / mean factors (``p50 1.2, p90 1.8, max 2 (mean 1.3, n=40)``), or n/a."""
    return dist(sec[key], 2) if sec.get(key) else fig(sec, key)


def _dp_ranks(d: dict) -> list[tuple[str, str]]:
    ranks = ", ".join(f"DP{dp} {plural(r['lines'], 'line')}, running {num(r['running_mean'], 1)}, queue "
                      f"{num(r['queue_mean'], 1)}, KV {pct(r['kv_usage_mean'])}" for dp, r in d["per_rank"].items()
                      if r["running_mean"] is not None or r["queue_mean"] is not None)
    rows = [("DP ranks (mean per stats line)", ranks or f"{num(d['ranks'])} with stats lines")]
    if d["samples"] is None:  # one reason for every figure
        return rows + [("imbalance across the ranks", fig(d, "samples"))]
    return rows + [
        ("samples (stats lines, two or more ranks reporting)", num(d["samples"])),
        ("running requests, max / mean across ranks", _factor(d, "running_imbalance")),
        ("queue, max / mean across ranks", _factor(d, "queue_imbalance")),
        ("KV usage, max / mean across ranks", _factor(d, "kv_usage_imbalance")),
        ("share of ranks idle (0 running)", dist(d["idle_rank_share"], 0, 100, "%") if d["idle_rank_share"]
         else fig(d, "idle_rank_share")),
        (f"samples above {method.DP_IMBALANCE_HIGH:g} (> {method.DP_IMBALANCE_MIN_RUNNING} running per rank)",
         share(d, "above_threshold_share")),
    ]


#: Starts listed at each end of a log of many (a crash-looping server).
STARTS_SHOWN = 10


def _starts(d: dict) -> list[tuple[str, str]]:
    """One row per server start: its settings as printed, then its own figures (the first and last
    :data:`STARTS_SHOWN` starts of a log of more; the JSON document has every one)."""
    rows = []
    shown = d["starts"]
    if len(shown) > 2 * STARTS_SHOWN:
        shown = shown[:STARTS_SHOWN] + [None] + shown[-STARTS_SHOWN:]
    for r in shown:
        if r is None:
            rows.append(("...", f"{num(len(d['starts']) - 2 * STARTS_SHOWN)} more starts (every one in --format json)"))
            continue
        interval = f"{num(r['decode_log_interval'])} ({r['decode_log_interval_source']})"
        settings = (f"interval {interval}, ceiling {num(r['max_running_requests'])}, capacity "
                    f"{num(r['max_total_num_tokens'])} tokens, chunk {num(r['chunked_prefill_size'])}")
        dec = r["decode_batch"]
        batch = (f"decode batch p50 {num(dec['p50'])}, p90 {num(dec['p90'])}, max {num(dec['max'])}" if dec
                 else "no Decode line")
        share_ = "n/a" if r["retraction_share_of_batches"] is None else pct(r["retraction_share_of_batches"], 2)
        rows.append((f"start {r['index']} at {r['time'] or 'n/a'}",
                     f"{settings}; {num(r['prefill_batches'])} prefill batches + {num(r['decode_steps'])} decode "
                     f"steps, {batch}, {plural(r['retractions'], 'retraction') if r['retractions'] is not None else 'retractions n/a'} ({share_} of batches)"))
    return rows


def _classes(c: dict) -> list[tuple[str, str]]:
    table = fig(c, "classes") if c["classes"] is None else "; ".join(
        f"{name}: {num(r['requests'])} requests, TTFT p99 {num(r['ttft_p99_seconds'], 3, ' s')}"
        for name, r in c["classes"].items())
    return [("priority scheduling (server_args)", c["priority_scheduling"]), ("per-class figures", table)]


def _expect_row(c: dict) -> str:
    if c["status"] == "unchecked":
        return f"unchecked: expected {c['expected']}; the log's start-up lines cannot show it"
    if c["found"] is None:
        return f"{c['status']}: expected {c['expected']}, not in server_args (renamed, dropped or misspelt?)"
    return f"{c['status']}: expected {c['expected']}, {c['source']} says {c['found']}"


def sections(doc: dict) -> list[tuple[str, list[tuple[str, str]], dict | None]]:
    """``(title, [(label, value)], verdict)`` per section of a single report."""
    st = doc["startup"]
    startup = [("server_args line", f"{len(st['server_args'])} parameters" if st["server_args_found"] else "not in the log")]
    startup += [(f"--expect {c['name']}", _expect_row(c)) for c in st["expected"]]
    startup += [(f"{c['name']} adjusted", f"server_args {c['server_args']} -> in effect {c['effective']}")
                for c in st["adjusted_by_server"]]
    out = [("Server starts", _starts(doc["starts"]), doc["starts"]["verdict"])] if doc["starts"]["count"] > 1 else []
    return out + [
        ("1. Batch size", _batch(doc["batch_size"]), doc["batch_size"]["bound"]),
        ("2. Retractions", _retractions(doc["retractions"]), doc["retractions"]["verdict"]),
        ("3. Throughput truth", _throughput(doc["throughput"]), doc["throughput"]["verdict"]),
        ("4. KV capacity", _kv(doc["kv_capacity"]), doc["kv_capacity"]["verdict"]),
        ("5. Queue and latency", _queue(doc["queue_latency"]), doc["queue_latency"]["verdict"]),
        ("DP ranks", _dp_ranks(doc["dp_balance"]), doc["dp_balance"]["verdict"]),
        ("Priority classes", _classes(doc["priority_classes"]), None),
        ("6. Scenario", [("saturation signals", "; ".join(doc["scenario"]["saturation_signals"]) or "none")],
         doc["scenario"]["verdict"]),
        ("Start-up parameters", startup, st["verdict"]),
    ]


def baseline_value(row: dict, which: str) -> str:
    """A compared figure in its kind's unit: shares as percentages, others as numbers."""
    v = row[which]
    if v is None:
        return "n/a"
    if row.get("kind") == "share":
        return pct(v, 2)
    if row.get("kind") == "seconds":
        return num(v, 3, " s")
    if isinstance(v, float) and not v.is_integer():
        return num(v, 1 if abs(v) >= 10 else 3)
    return num(v)


def baseline_change(row: dict) -> str:
    """A compared figure's change: percentage points for shares, a relative percentage otherwise."""
    if row.get("kind") == "share" and row.get("change_points") is not None:
        return f"{100 * row['change_points']:+.2f} pp"
    return "" if row["change_ratio"] is None else f"{row['change_ratio']:+.1%}"
