"""Checklist section 7 and the method's headline rule: retractions and their share of batches.

Figures: ``events``, ``requests``, ``aborted_requests``, ``freed_tokens`` (``#new_tokens_gained``):
exact counts of retraction lines, once per scheduler however many replicas printed them;
``batches`` = prefill batches + decode steps (the scheduler state's counters; decode steps are Decode
lines x the ``decode_log_interval`` in effect at each line: an estimate when the interval is the
default rather than the log's ``server_args``), per window the same per line
(``DecodeRow.steps``); ``share_of_batches`` =
events / batches, overall and per ``--window`` seconds, against :data:`RETRACTION_RULE`; the peak and
the windows above the rule count only windows of at least :data:`~exporter.method.MIN_WINDOW_BATCHES`
batches (fewer cannot resolve the rule: one retraction in 13 batches is 7.7%).
"""

from __future__ import annotations

from ..method import MIN_STATS_LINES, MIN_WINDOW_BATCHES, RETRACTION_RULE, retraction_share

RULE = f"{RETRACTION_RULE:.0%}"  # "5%"
from .basis import Basis
from .classes import unseen_preemptions
from .domains import AMOUNT, COUNT, LABEL, POSITIVE, REASONS, SHARE, VERDICT, Figures, ListOf, Record, verdict
from .stats import plural, ratio
from .fmt import iso_time, pct


WINDOW = Record({"start": LABEL, "batches": COUNT, "retractions": COUNT, "share": SHARE})
DOMAINS = {
    "events": COUNT,
    "requests": COUNT,
    "aborted_requests": COUNT,
    "freed_tokens": COUNT,
    "replicas_reporting": COUNT,
    "batches": COUNT,
    "prefill_batches": COUNT,
    "decode_steps": COUNT,
    "decode_log_interval": POSITIVE,
    "decode_log_interval_source": LABEL,
    "share_of_batches": SHARE,
    "rule": SHARE,
    "window_seconds": AMOUNT,
    "windows": ListOf(WINDOW),
    "peak_window_share": SHARE,
    "windows_above_rule": COUNT,
    "windows_with_retractions_but_no_batches": COUNT,
    "latest_new_token_ratio": AMOUNT,
    "verdict": VERDICT,
    "not_available": REASONS,
}


def _windows(b: Basis, window: float) -> list[dict]:
    """Batches and retraction events per ``window`` seconds from the first scheduler line."""
    if not b.has_time or window <= 0:
        return []
    start = b.origin_time
    buckets: dict[int, list[int]] = {}
    for r in b.decode:
        if r.t is not None:
            buckets.setdefault(int((r.t - start) // window), [0, 0])[0] += r.steps
    for r in b.prefill:
        if r.t is not None:
            buckets.setdefault(int((r.t - start) // window), [0, 0])[0] += 1
    for rows in b.retractions_by_sched.values():
        for r in rows:
            if r.t is not None:
                buckets.setdefault(int((r.t - start) // window), [0, 0])[1] += 1
    out = []
    for k in sorted(buckets):
        n_batches, n = buckets[k]
        share = ratio(n, n_batches)
        out.append({"start": iso_time(start + k * window, b.rec.time_of_day_only), "batches": n_batches,
                    "retractions": n, "share": share if share is None or share <= 1 else None})
    return out


def section(b: Basis, window: float) -> dict:
    """The ``retractions`` section of the report document."""
    f = Figures(DOMAINS)
    events = int(b.total("retractions"))
    prefill_batches = int(b.total("prefill_batches"))
    decode_steps = int(b.total("decode_steps"))
    batches = prefill_batches + decode_steps
    f.set("events", events)
    f.set("requests", int(b.total("retracted_requests")))
    f.set("aborted_requests", int(b.total("retract_aborts")))
    f.set("freed_tokens", int(b.total("retraction_freed_tokens")))
    f.set("replicas_reporting", sum(1 for s in b.rec.samples.values() if s.retractions))
    f.set("batches", batches)
    f.set("prefill_batches", prefill_batches)
    f.set("decode_steps", decode_steps)
    f.set("decode_log_interval", b.interval)
    f.put("decode_log_interval_source", b.interval_source)
    share = f.set("share_of_batches", retraction_share(events, batches),
                  "no batch lines in the log" if not batches else
                  f"more retraction events ({events}) than batches ({batches}): the batches around them are "
                  "outside this log")
    f.set("rule", RETRACTION_RULE)
    f.set("window_seconds", window)
    windows = f.put("windows", _windows(b, window))
    # a window of few batches cannot resolve the rule (one retraction in 13 batches is 7.7%)
    shares = [w["share"] for w in windows if w["share"] is not None and w["batches"] >= MIN_WINDOW_BATCHES]
    peak = f.set("peak_window_share", max(shares) if shares else None,
                 b.no_time if not b.has_time else
                 f"no window holds {MIN_WINDOW_BATCHES} batches or more (fewer cannot resolve the {RULE} rule)")
    over = f.set("windows_above_rule", sum(1 for x in shares if x > RETRACTION_RULE))
    f.set("windows_with_retractions_but_no_batches",
          sum(1 for w in windows if w["batches"] == 0 and w["retractions"] > 0))
    ratios = [g.gauges["new_token_ratio"] for g in b.rec.states.schedulers.values() if "new_token_ratio" in g.gauges]
    f.set("latest_new_token_ratio", max(ratios) if ratios else None, "no retraction line printed #new_token_ratio")
    lines = len(b.decode) + len(b.prefill)
    unseen = unseen_preemptions(b)
    if events == 0 and unseen and lines:
        v = verdict("preemptions_unseen", f"No retraction line in {plural(lines, 'Prefill/Decode line')}, but "
                    f"that does not mean KV memory never ran out or nothing was preempted: {unseen}.")
    elif events == 0:
        v = verdict("none", "No retractions, and no batch lines either." if not lines else
                    f"No retractions in {plural(lines, 'Prefill/Decode line')}: too few to say that KV memory "
                    "never runs out." if lines < MIN_STATS_LINES else "No retractions: KV memory never ran out.")
    elif share is None:
        v = verdict("unknown_share", f"{plural(events, 'retraction event')}; their share of batches (the {RULE} rule) "
                    f"cannot be given: {f.na['share_of_batches']}.")
    elif share > RETRACTION_RULE:
        v = verdict("above_rule", f"{pct(share, 2)} of batches were retractions overall"
                    + (f", peak {pct(peak, 2)} in a {window:g}-s window ({over} of {plural(len(shares), 'window')} "
                       f"above {RULE})" if peak is not None else "")
                    + f": the ceiling is too high for this load (method: more than {RULE} of batches preempted).")
    elif over:
        # the rule is over the run (the alert: a rate held for minutes); a burst in a few seconds is not
        v = verdict("peak_above_rule", f"{pct(share, 2)} of batches were retractions overall: below the {RULE} "
                    f"rule, but {over} of {plural(len(shares), 'window')} of {window:g} s went above it (peak "
                    f"{pct(peak, 2)}): retractions came in bursts; every one is recomputed work, see throughput "
                    "truth.")
    else:
        v = verdict("below_rule", f"{pct(share, 2)} of batches were retractions overall, peak {pct(peak, 2)} in a "
                    f"{window:g}-s window: below the {RULE} rule, but every retraction is recomputed work; "
                    "see throughput truth.")
    if unseen and events:
        v = verdict(v["code"], v["text"] + f" Priority preemptions are not among them: {unseen}.")
    f.put("verdict", v)
    return f.done()
