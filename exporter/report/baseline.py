"""``--baseline``: two reports side by side, changes flagged, and the ``server_args`` difference.

Each compared figure has a kind: shares (in [0, 1]) are compared in percentage points
(``change_points``, the difference of the two shares) and shown as percentages, other figures by their
relative change (``change_ratio``: ``(current - baseline) / baseline``, kept for shares too). A
figure is flagged when it appears or disappears, or when its relative change exceeds the threshold
(any change from 0 does); the flag is ``worse``/``better`` where a direction is defined, else
``changed``.
"""

from __future__ import annotations

import math

from .domains import AMOUNT, COUNT, FREE, LABEL, SIGNED, ListOf, MapOf, Record

BASELINE_SCHEMA = "sglang-exporter-report-baseline/1"

#: Figures compared: (dotted key, label, kind, better direction: +1 up, -1 down, 0 neutral).
#: Kinds: ``share`` (in [0, 1], shown as %), ``count``, ``tokens``, ``rate`` (per second), ``seconds``,
#: ``factor`` (max / mean across the DP ranks, 1 and up).
COMPARED = (
    ("batch_size.decode.p50", "decode batch p50", "count", 0),
    ("batch_size.decode.p99", "decode batch p99", "count", 0),
    ("batch_size.prefill.p50", "prefill batch p50", "count", 0),
    ("batch_size.kv_usage.p90", "KV usage p90", "share", 0),
    ("retractions.events", "retraction events", "count", -1),
    ("retractions.share_of_batches", "retraction share of batches", "share", -1),
    ("retractions.peak_window_share", "peak window retraction share", "share", -1),
    ("throughput.recompute_share", "recompute share", "share", -1),
    ("throughput.cache_hit_ratio", "cache-hit ratio", "share", +1),
    # computed tokens count recomputed work: their rise is no gain (see :func:`judge`)
    ("throughput.computed_tokens_per_second", "computed tokens/s", "rate", 0),
    ("throughput.useful_tokens_per_second", "useful tokens/s", "rate", +1),
    ("kv_capacity.capacity_tokens", "KV capacity (tokens)", "tokens", +1),
    ("kv_capacity.mean_tokens_per_running_request", "KV tokens per running request", "tokens", 0),
    ("kv_capacity.capacity_requests", "capacity (requests)", "count", +1),
    ("queue_latency.time_weighted_mean_depth", "mean queue depth", "count", -1),
    ("queue_latency.mean_wait_seconds_littles_law", "mean queue wait (Little)", "seconds", -1),
    ("queue_latency.decode_step_seconds", "decode step time", "seconds", -1),
    ("queue_latency.queue_wait_seconds.p99", "queue wait p99", "seconds", -1),
    ("queue_latency.e2e_latency_seconds.p99", "e2e latency p99", "seconds", -1),
    ("dp_balance.running_imbalance.p90", "DP running imbalance p90 (max / mean)", "factor", -1),
    ("settings.max_running_requests", "max_running_requests", "count", 0),
    ("settings.max_total_num_tokens", "max_total_num_tokens", "tokens", 0),
    ("settings.decode_log_interval", "decode_log_interval", "count", 0),
)

FIGURE = Record({"key": LABEL, "label": LABEL, "kind": LABEL, "baseline": SIGNED, "current": SIGNED,
                 "change_ratio": SIGNED, "change_points": SIGNED, "flag": LABEL})


def _get(doc: dict, dotted: str):
    cur = doc
    for part in dotted.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


#: What the method values, in order (method.md): useful throughput, then the retraction share, then
#: the tails; a figure of a later tier decides only where the earlier ones did not move.
JUDGED = (
    ("throughput.useful_tokens_per_second",),
    ("retractions.share_of_batches", "throughput.recompute_share"),
    ("queue_latency.queue_wait_seconds.p99", "queue_latency.e2e_latency_seconds.p99", "batch_size.decode.p99"),
)


def judge(rows: list[dict]) -> dict:
    """The comparison's verdict by what the method values (:data:`JUDGED`): ``regression``,
    ``improvement``, ``unchanged`` or ``unknown`` (no judged figure in both runs), with a sentence.

    A computed tokens/s that rose while useful tokens/s fell is flagged ``worse`` on its row: the rise
    is recomputed work ("fake throughput"), and the run is a regression."""
    by = {r["key"]: r for r in rows}
    computed, useful = by["throughput.computed_tokens_per_second"], by["throughput.useful_tokens_per_second"]
    if (computed["change_ratio"] or 0) > 0 and (useful["change_ratio"] or 0) < 0:
        computed["flag"] = "worse"
    present = [k for tier in JUDGED for k in tier if by.get(k) and by[k]["baseline"] is not None
               and by[k]["current"] is not None]
    if not present:
        return {"code": "unknown", "text": "Neither useful tokens/s, the retraction share nor a tail figure is "
                "given by both runs: no verdict."}
    for tier in JUDGED:
        flags = {k: by[k]["flag"] for k in tier if k in by and by[k]["flag"] in ("better", "worse")}
        worse = [by[k]["label"] for k, v in flags.items() if v == "worse"]
        better = [by[k]["label"] for k, v in flags.items() if v == "better"]
        if worse:
            extra = (" although computed tokens/s rose: the rise is recomputed work"
                     if computed["flag"] == "worse" and tier == JUDGED[0] else "")
            return {"code": "regression", "text": f"Regression: {', '.join(worse)} worse{extra}."}
        if better:
            return {"code": "improvement", "text": f"Improvement: {', '.join(better)} better."}
    return {"code": "unchanged", "text": "No change beyond the threshold in useful tokens/s, the retraction share "
            "or the tails."}


def compare(old: dict, new: dict, threshold: float = 0.10) -> dict:
    """Side-by-side figures of two report documents with changes flagged, plus the ``server_args``
    difference (see the module docstring). ``threshold``: finite, >= 0."""
    rows = []
    for key, label, kind, better in COMPARED:
        a, b = _get(old, key), _get(new, key)
        change = points = None
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            change = (b - a) / abs(a) if a else (0.0 if b == 0 else math.inf)
            if kind == "share":
                points = b - a
        flag = None
        if (a is None) != (b is None):
            flag = "changed"
        elif change is not None and abs(change) > threshold:
            flag = "changed" if better == 0 else ("better" if change * better > 0 else "worse")
        rows.append({"key": key, "label": label, "kind": kind, "baseline": a, "current": b,
                     "change_ratio": change if change is None or math.isfinite(change) else None,
                     "change_points": points, "flag": flag})
    judgement = judge(rows)
    sa_old, sa_new = old["startup"]["server_args"], new["startup"]["server_args"]
    diff = {
        "baseline_has_server_args": bool(sa_old),
        "current_has_server_args": bool(sa_new),
        "only_in_baseline": {k: sa_old[k] for k in sorted(sa_old.keys() - sa_new.keys())},
        "only_in_current": {k: sa_new[k] for k in sorted(sa_new.keys() - sa_old.keys())},
        "changed": {k: [sa_old[k], sa_new[k]] for k in sorted(sa_old.keys() & sa_new.keys()) if sa_old[k] != sa_new[k]},
    }
    verdicts = {sec: [_get(old, sec + ".code"), _get(new, sec + ".code")] for sec in (
        "batch_size.bound", "retractions.verdict", "throughput.verdict", "kv_capacity.verdict",
        "queue_latency.verdict", "scenario.verdict")}
    return {"schema": BASELINE_SCHEMA, "threshold": threshold, "judgement": judgement, "figures": rows,
            "flagged": sum(1 for r in rows if r["flag"]), "verdicts": verdicts,
            "server_args_diff": diff, "baseline": old, "current": new}


def domains(document) -> Record:
    """The domains of a baseline document, given those of a single report ``document``."""
    return Record({"schema": LABEL, "threshold": AMOUNT, "judgement": FREE, "figures": ListOf(FIGURE),
                   "flagged": COUNT,
                   "verdicts": MapOf(FREE), "server_args_diff": FREE, "baseline": document, "current": document})

