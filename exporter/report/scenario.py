"""Checklist section 1 (scenario) and the method's seven questions answered from the other sections.

No figures of its own: the scenario verdict (throughput-first when the scheduler was saturated,
latency-first when the queue was empty and KV had headroom) and the answers quote the figures of
the other sections, with their n/a reasons.
"""

from __future__ import annotations

from .. import method
from .basis import Basis
from .queue import arrival_window
from .domains import LABEL, VERDICT, ListOf, Record, verdict
from .fmt import count_range, num, pct
from .stats import coefficient_of_variation, distribution, plural


def _arrivals_answer(rec, window: float) -> str | None:
    """Question 5 from the request log's arrival times (``sglang-exporter traffic``'s model), or ``None``
    when the log has fewer than two: the rate of the active periods (idle gaps left out), the peak per
    window and the burstiness against Poisson."""
    from ..traffic.model import arrivals_model  # here: exporter.traffic imports the report's reader

    if len(rec.finish.column("request_received_ts")) < 2:
        return None
    a = arrivals_model(rec.finish.column("request_received_ts"), window)
    act, w = a["active"], a["windows"]
    if act["rate_per_second"] is None:
        return None
    return (f"About {num(act['rate_per_second'], 2, ' requests/s')} while active (request log: "
            f"{act['requests']} requests in {num(act['seconds'], 0, ' s')} of {len(a['periods'])} period(s) cut at "
            f"idle gaps over {num(a['idle_gap_seconds'], 1, ' s')}); peak {num(w['peak_rate_per_second'], 2, '/s')} "
            f"per {window:g}-s window; burstiness: dispersion index {num(w['dispersion_index'], 2)}, CV of gaps "
            f"{num(a['interarrival_cv'], 2)} (Poisson: 1). sglang-exporter traffic gives each period and writes a trace.")

DOMAINS = {"verdict": VERDICT, "saturation_signals": ListOf(LABEL)}
CHECKLIST = ListOf(Record({"question": LABEL, "answerable": LABEL, "answer": LABEL}))


def _fig(section: dict, key: str, digits: int = 0, unit: str = "") -> str:
    """A figure as words, or ``n/a (reason)``."""
    value = section.get(key)
    if value is None:
        why = section.get("not_available", {}).get(key)
        return f"n/a ({why})" if why else "n/a"
    return num(value, digits, unit)


def section(b: Basis, batch: dict, retractions: dict) -> dict:
    """The ``scenario`` section of the report document."""
    kv = batch["kv_usage"]
    empty, at_ceiling = batch["queue_empty_share"], batch["at_ceiling_share"]
    saturated = [why for cond, why in (
        (empty is not None and empty < 0.5, "requests waited in most stats lines"),
        (retractions["events"] > 0, "KV memory ran out (retractions)"),
        (at_ceiling is not None and at_ceiling >= method.AT_CEILING_SHARE, "the batch sat at the ceiling"),
        (kv["p90"] is not None and kv["p90"] >= 0.9, "KV usage p90 at or above 90%"),
    ) if cond]
    lines = len(b.decode) + len(b.prefill)
    if not lines:
        v = verdict("unknown", "No Prefill/Decode lines: the scheduler's behaviour cannot be classified.")
    elif not saturated and lines < method.MIN_STATS_LINES:
        v = verdict("unknown", f"Only {plural(lines, 'Prefill/Decode line')} and no sign of saturation: too few to "
                    f"classify the regime (at least {method.MIN_STATS_LINES} are needed).")
    elif saturated:
        v = verdict("throughput_first", "Throughput-first (saturated): " + "; ".join(saturated) + ". This is the "
                    "offline-batch regime: judge it by useful tokens/s, retractions under 5% of batches and a "
                    "ceiling at 60-70% of KV capacity. For online traffic this load is too high: expect TTFT "
                    "dominated by queueing.")
    elif empty is not None and empty >= 0.9:
        v = verdict("latency_first", "Latency-first (sparse arrivals): the queue was empty and KV had headroom. "
                    "This is the online regime: judge it by P99 TTFT/TPOT and zero retractions; a larger ceiling "
                    "would only add waiting.")
    else:
        v = verdict("mixed", "Between the regimes: some queueing, no saturation.")
    return {"verdict": v, "saturation_signals": saturated}


def _burst(b: Basis, queue: dict, arrivals: float) -> str:
    """Where the requests arrived within a short part of the log (:func:`~.queue.arrival_window`
    shorter than half the active time), the rate while they arrived; else ``""``."""
    w = arrival_window(b)
    if w is None or not b.active_seconds or w[0] >= b.active_seconds / 2:
        return ""
    n = arrivals * b.active_seconds - w[1]
    return (f" But that average includes the time the server worked off its queue: the requests arrived within "
            f"{num(w[0], 0, ' s')} (from the load's first admission to the last rise of #queue-req"
            + (f", after {plural(w[1], 'earlier admission')}" if w[1] else "") + "), at about "
            + (f"{num(n / w[0], 1, ' requests/s')}" if w[0] >= 1 else f"{num(n)} requests at once (within a second)")
            + ".")


def checklist(b: Basis, window: float, scenario: dict, retractions: dict, kv: dict, queue: dict) -> list[dict]:
    """The method's checklist (section 6), each question with ``answerable`` and an ``answer``."""
    rec = b.rec
    sc = scenario["verdict"]
    lens_in = [r.input_len for r in rec.req_stats if r.input_len is not None] or [int(x) for x in rec.finish.column("prompt_tokens")]
    lens_out = [r.output_len for r in rec.req_stats if r.output_len is not None] or [int(x) for x in rec.finish.column("completion_tokens")]
    din, dout = distribution(lens_in), distribution(lens_out)
    per_line = kv["tokens_per_running_request"]
    step = queue["decode_step_seconds"]
    tpot = queue["time_per_output_token_seconds"]
    arrivals = queue["arrival_rate_per_second"]
    growth = (queue["depth_last"] - queue["depth_first"]) if queue["depth_first"] is not None else None
    cap_reqs = kv["capacity_requests"]
    from_log = _arrivals_answer(rec, window)
    return [
        {"question": "Online interactive or offline batch?", "answerable": "no" if sc["code"] == "unknown" else "partly",
         "answer": (f"The log cannot say: {sc['text']}" if sc["code"] == "unknown" else
                    f"The log shows {sc['code'].replace('_', '-')} behaviour ({sc['text'].split(':')[0]}). "
                    "The intent is yours; the log says which regime the load produced.")},
        {"question": "Which latency matters: TTFT (chat) or TPOT (long generation)?", "answerable": "partly",
         "answer": ("The choice is yours. Measured: mean decode step " + num(step * 1000, 1, " ms")
                    + (" (about the TPOT of a running request)" if tpot == step else
                       f", {num(tpot * 1000, 1, ' ms')} per output token with speculative decoding")
                    if step is not None else
                    "The choice is yours. Decode step time: " + _fig(queue, "decode_step_seconds"))
                   + "; TTFT is not in the scheduler log (use the benchmark client or --log-requests)."},
        {"question": "What is the request length distribution, and how large is its variance?",
         "answerable": "yes" if lens_in else "no",
         "answer": (f"Input tokens mean {num(din['mean'])}, p50 {num(din['p50'])}, p90 {num(din['p90'])}, max "
                    f"{num(din['max'])} (CV {num(coefficient_of_variation(lens_in), 2)}); output mean {num(dout['mean'])}, "
                    f"p50 {num(dout['p50'])}, p90 {num(dout['p90'])}, max {num(dout['max'])} "
                    f"(CV {num(coefficient_of_variation(lens_out), 2)}); n={din['count']}."
                    if lens_in else
                    "Not in the scheduler log: enable --enable-request-time-stats-logging or --log-requests, or read "
                    "SGLang's own length histograms with sglang-exporter traffic --metrics."
                    + (f" Proxy: KV tokens per running request p50 {num(per_line['p50'])}, p90 {num(per_line['p90'])}."
                       if per_line["count"] else ""))},
        {"question": "How many requests' KV cache fit in GPU memory?",
         "answerable": "yes" if cap_reqs is not None else "no",
         "answer": (f"About {num(cap_reqs)}"
                    + (f" at the observed {num(kv['mean_tokens_per_running_request'])} tokens per running request"
                       if kv["capacity_limiting_pool"] == "kv" else
                       f" (the {kv['capacity_limiting_pool']} pool is the limit)")
                    + f"; {_fig(kv, 'safe_ceiling_requests')} with the {method.SAFETY_FACTOR:g} safety factor; offline ceiling "
                      f"{count_range(kv['recommended_max_running_requests_offline'])}."
                    if cap_reqs is not None else kv["verdict"]["text"])},
        {"question": "What is the arrival rate?", "answerable": "yes" if arrivals is not None or from_log else "no",
         "answer": from_log or (f"About {num(arrivals, 2, ' new requests/s')} (admitted {queue['admitted_requests']} + queue "
                    f"growth {growth} - retracted {retractions['requests']}, over "
                    f"{num(b.active_seconds, 0, ' s')}); admissions {_fig(queue, 'admission_rate_per_second', 2, '/s')}."
                    + _burst(b, queue, arrivals)
                    if arrivals is not None else "Arrival rate: " + _fig(queue, "arrival_rate_per_second") + ".")},
        {"question": "Are several priorities mixed? Then how is capacity shared?", "answerable": "no",
         "answer": "Scheduler lines carry no priority; "
                   + (f"server_args enable_priority_scheduling={rec.server_args['enable_priority_scheduling']}."
                      if "enable_priority_scheduling" in rec.server_args else
                      "server_args has no enable_priority_scheduling." if rec.server_args else
                      "the log has no server_args line.")},
        {"question": "What preemption rate is acceptable?", "answerable": "partly",
         "answer": "A policy choice (the method's rule: under 5% of batches). Observed: "
                   + (f"{pct(retractions['share_of_batches'], 2)} overall, peak "
                      f"{pct(retractions['peak_window_share'], 2)} per {window:g}-s window."
                      if retractions["share_of_batches"] is not None else
                      _fig(retractions, "share_of_batches") + ".")},
    ]
