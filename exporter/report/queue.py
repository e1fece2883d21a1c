"""Checklist sections 2 and 5: queue depth and wait, arrival rate, decode step time, latencies.

Figures: ``depth``: ``#queue-req`` per Decode line (exact samples); ``time_weighted_mean_depth`` =
the integral of ``#queue-req`` over time (each value held until the next line, gaps capped as in the
exporter) / active seconds; ``admitted_requests``: the scheduler state's admissions counter
(``#new-seq`` less continuing chunks, :mod:`exporter.scheduler.rules`; the same figure as
``sglang_scheduler_admitted_requests_total``), where it came from in ``admitted_requests_source``;
Little's-law mean wait = request-seconds queued / admitted; ``arrival_rate_per_second`` = (admitted +
queue growth - retracted requests) / active seconds; ``decode_step_seconds``: the mean time of one decode forward step, from SGLang's own ``gen
throughput`` (tokens since the previous Decode line / wall time since then, so ``#running-req`` x
``accept len`` / gen throughput per step), over the Decode lines whose interval held no idle time
(:func:`decode_step`), each line's steps the state's (the interval in effect at that line), with its
per-line percentiles; from the lines' time stamps when no line prints gen throughput. All estimates except the
per-request percentiles (``ReqTimeStats`` and ``Finish`` records: exact).
"""

from __future__ import annotations

from .. import method
from .basis import Basis
from .basis import _active as active_span  # the same idle-capped span as Basis.active_seconds
from .domains import AMOUNT, COUNT, FLAG, LABEL, REASONS, VERDICT, Dist, Figures, verdict
from .fmt import num
from .stats import distribution, ratio
from .throughput import seconds_reason

LATENCY_POINTS = (50, 95, 99, 99.9)

DOMAINS = {
    "depth": Dist(COUNT),
    "depth_max_all_lines": COUNT,
    "depth_first": COUNT,
    "depth_last": COUNT,
    "time_weighted_mean_depth": AMOUNT,
    "admitted_requests": COUNT,
    "admitted_requests_source": LABEL,
    "queue_request_seconds": AMOUNT,
    "mean_wait_seconds_littles_law": AMOUNT,
    "steady_state": FLAG,
    "arrival_rate_per_second": AMOUNT,
    "admission_rate_per_second": AMOUNT,
    "decode_step_seconds": AMOUNT,
    "decode_step_seconds_per_line": Dist(AMOUNT),
    "decode_step_source": LABEL,
    "decode_step_lines": COUNT,
    "time_per_output_token_seconds": AMOUNT,
    "queue_wait_seconds": Dist(AMOUNT),
    "queue_wait_negative_skipped": COUNT,
    "finish_queue_time_seconds": Dist(AMOUNT),
    "e2e_latency_seconds": Dist(AMOUNT),
    "verdict": VERDICT,
    "not_available": REASONS,
}


def _bounded_steps(b: Basis) -> tuple[list[tuple[float, float, int]], int]:
    """Per Decode line with gen throughput and running requests, outside idle periods: (seconds per
    step, seconds per output token, running requests) (:func:`exporter.method.decode_step`), and how many lines were
    left out because their step is longer than the log allows (:func:`exporter.method.decode_step_bound`:
    the time since the scheduler's previous Decode line over the decode steps the state counted for the
    line: the interval in effect there), as when
    SGLang's gen throughput counts a silence or a pause as decoding."""
    timed, over = [], 0
    for rows in b.decode_by_sched.values():
        prev = None
        for r in rows:
            gap = r.t - prev if r.t is not None and prev is not None else None
            if r.t is not None:
                prev = r.t
            step = method.decode_step(r.running, r.accept_len, r.gen_throughput)
            if step is None or r.after_idle:
                continue
            bound = method.decode_step_bound(gap, r.steps)
            if bound is not None and step > bound:
                over += 1
                continue
            timed.append((step, step / (r.accept_len or 1.0), r.running))
    return timed, over


def decode_step(b: Basis) -> tuple[float | None, float | None, list[float], str | None, int, str]:
    """(seconds per decode step, seconds per output token, per-line step times, source, lines used,
    reason when n/a).

    Lines whose interval may hold idle time are left out: those marked ``DecodeRow.after_idle``, and
    those whose step is longer than the time since the previous Decode line allows
    (:func:`_bounded_steps`). Every other line counts, the slow ones too, each weighted by its
    running requests (:func:`exporter.method.request_weighted_mean`): the step as a running request
    waits for it, which is what a client's time per output token measures (a busy step makes every
    one of its requests wait).
    """
    kept = [r for rows in b.decode_by_sched.values() for r in rows if not r.after_idle]
    timed, over = _bounded_steps(b)
    if timed:
        steps = [s for s, _, _ in timed]
        weights = [n for _, _, n in timed]
        return (method.request_weighted_mean(steps, weights),
                method.request_weighted_mean([o for _, o, _ in timed], weights), steps, "gen throughput",
                len(timed), "")
    if over:
        return (None, None, [], None, 0, f"every Decode line's gen throughput gives a step longer than the time "
                f"since the previous Decode line allows ({over} lines)")
    if not b.decode:
        return None, None, [], None, 0, "no Decode lines"
    if not kept:
        return None, None, [], None, 0, ("every Decode line starts the log or follows an idle period: none times "
                                         "decode steps alone")
    dt, steps, n, accept, per_line = 0.0, 0, 0, [], []
    for rows in b.decode_by_sched.values():
        prev = None
        for r in rows:
            if r.t is not None and prev is not None and not r.after_idle and r.t >= prev:
                dt += r.t - prev
                per_line.append((r.t - prev) / r.steps)
                steps += r.steps
                n += 1
                accept.append(r.accept_len or 1.0)
            if r.t is not None:
                prev = r.t
    if not n:
        return None, None, [], None, 0, "the Decode lines print neither gen throughput nor time stamps"
    if dt <= 0:
        return (None, None, per_line, None, n,
                "the timed Decode lines lie within one second (1-s time stamps cannot time them)")
    step = dt / steps
    return step, step / (sum(accept) / len(accept)), per_line, "time stamps", n, ""


def section(b: Basis) -> dict:
    """The ``queue_latency`` section of the report document."""
    f = Figures(DOMAINS)
    rec = b.rec
    f.put("depth", distribution([r.queue for r in b.decode if r.queue is not None]))
    all_queues = [r.queue for r in b.decode if r.queue is not None] + [r.queue for r in b.prefill if r.queue is not None]
    f.set("depth_max_all_lines", max(all_queues) if all_queues else None, "no stats line printed #queue-req")
    firsts, lasts = [], []
    for dp in sorted(set(b.decode_by_sched) | set(b.prefill_by_sched)):
        ordered = sorted(((r.t, r.queue) for r in b.decode_by_sched.get(dp, []) + b.prefill_by_sched.get(dp, [])
                          if r.queue is not None and r.t is not None), key=lambda x: x[0])
        if ordered:
            firsts.append(ordered[0][1])
            lasts.append(ordered[-1][1])
    no_q = "no time-stamped stats line printed #queue-req"
    q_start = f.set("depth_first", sum(firsts) if firsts else None, no_q)
    q_end = f.set("depth_last", sum(lasts) if lasts else None, no_q)
    growth = (q_end - q_start) if firsts else None
    why_t = seconds_reason(b)
    qrs = b.total("queue_request_seconds")
    f.set("time_weighted_mean_depth", ratio(qrs, b.active_seconds) if not why_t else None, why_t)
    if not b.prefill:
        no_admit = ("a PD decode server prints no Prefill lines: its admissions are the prefill server's"
                    if b.pd_decode else "no Prefill lines in the log: admissions are not visible")
        admitted = f.set("admitted_requests", None, no_admit)
        f.put("admitted_requests_source", None)
    else:
        no_admit = None
        admitted = f.set("admitted_requests", b.admitted)
        f.put("admitted_requests_source", b.admitted_source)
    f.set("queue_request_seconds", qrs)
    steady = growth is not None and method.queue_steady(q_start, q_end, admitted or 0)
    little = method.littles_law_wait(qrs, admitted) if no_admit is None and b.has_time and admitted else None
    # when the queue drained, every request counted waited within the log: no longer than its span
    beyond = steady and not method.wait_within_log(little, b.stats_seconds)
    if beyond:
        steady = False  # the admissions the wait is divided by are not all in the log (gaps, an excerpt)
    if no_admit is not None:
        why_little = no_admit
    elif not b.has_time:
        why_little = b.no_time
    elif not admitted:
        why_little = "no request was admitted in the log"
    elif growth is None:
        why_little = no_q
    elif not steady and not beyond:
        why_little = (f"the queue grew from {q_start} to {q_end} requests: not a steady state, so Little's law "
                      "gives no wait time")
    else:
        why_little = (f"request-seconds queued / admitted requests gives {num(little, 1, ' s')}, longer than the "
                      f"log's {num(b.stats_seconds, 1, ' s')}: the log does not show every admission")
    f.set("mean_wait_seconds_littles_law", little if steady else None, why_little)
    f.put("steady_state", steady if firsts else None)
    retracted = int(b.total("retracted_requests"))
    if no_admit or why_t or growth is None:
        f.set("arrival_rate_per_second", None, no_admit or why_t or no_q)
    else:
        f.set("arrival_rate_per_second", (admitted + growth - retracted) / b.active_seconds,
              f"more requests were retracted ({retracted}) than admitted ({admitted}) plus the queue's growth "
              f"({growth:+d}): the log starts or ends in the middle of their story")
    f.set("admission_rate_per_second", ratio(admitted, b.active_seconds) if not (no_admit or why_t) else None,
          no_admit or why_t)
    step, tpot, per_line, source, n, why = decode_step(b)
    f.set("decode_step_seconds", step, why)
    f.put("decode_step_seconds_per_line", distribution(per_line))
    f.put("decode_step_source", source)
    f.set("decode_step_lines", n)
    f.set("time_per_output_token_seconds", tpot, why)
    qd = [r.queue_duration for r in rec.req_stats if r.queue_duration >= 0]
    f.put("queue_wait_seconds", distribution(qd, LATENCY_POINTS))
    f.set("queue_wait_negative_skipped", rec.req_stats_negative)
    f.put("finish_queue_time_seconds", distribution(rec.finish.column("queue_time"), LATENCY_POINTS))
    f.put("e2e_latency_seconds", distribution(rec.finish.column("e2e_latency"), LATENCY_POINTS))
    if not b.has_time:
        v = verdict("unknown", f"No queue wait or rates: {b.no_time}.")
    elif no_admit:
        v = verdict("unknown", f"No queue wait to derive: {no_admit}.")
    elif not admitted:
        v = verdict("unknown", "No requests were admitted in the log: no queue wait to derive.")
    elif growth is None:
        v = verdict("unknown", f"No queue wait to derive: {no_q}.")
    elif beyond:
        v = verdict("not_steady", f"No queue wait to derive: {why_little}.")
    elif not steady:
        v = verdict("not_steady", f"The queue grew from {q_start} to {q_end} requests during the log: not a steady "
                    f"state, so Little's law gives no wait time (request-seconds queued / admitted: "
                    f"{num(little, 2, ' s')}): arrivals exceed service and queued requests wait longer the longer "
                    "the run.")
    else:
        tw = f.values["time_weighted_mean_depth"]
        v = verdict("steady", f"Mean queue wait {num(little, 3, ' s')} by Little's law (time-averaged queue "
                    f"{num(tw, 2)} / admission rate)." + ("" if qd or rec.finish.column("e2e_latency") else
                    " Percentiles need --enable-request-time-stats-logging or --log-requests."))
    f.put("verdict", v)
    return f.done()


def arrival_window(b: Basis) -> tuple[float, int] | None:
    """Where the log's requests arrived: ``(active seconds, requests admitted before)`` from the start
    of the load's busy period to the last sign of an arrival, over the schedulers; ``None`` where the
    log cannot place its arrivals.

    A sign of an arrival is a line whose ``#queue-req`` is above the previous line's by more than the
    requests retracted in between (retraction lines put theirs back in the queue). The busy period
    starts at the last Prefill line admitting into an empty server (``#running-req: 0``) before the
    first rise; the requests admitted before it (a warm-up) are returned apart. A request admitted at
    once shows no rise, so the window holds only where, once the queue emptied after the last rise, at
    most one Prefill line admitted (the one whose pass emptied it: SGLang prints it after the pass);
    else ``None``. Silences longer than :data:`~exporter.limits.QUEUE_SAMPLE_MAX_GAP_SECONDS` count as
    that cap, as in ``Basis.active_seconds``. A load sent in a burst and worked off for minutes ends its
    window early: an arrival rate over the whole log averages the drain in.
    """
    last, first_rise, rows_of = None, None, {}
    for sched in set(b.decode_by_sched) | set(b.prefill_by_sched):
        rows = [(r.seq, r.t, r.queue, 0, False) for r in b.decode_by_sched.get(sched, ()) if r.t is not None]
        rows += [(r.seq, r.t, r.queue, r.admitted, r.running == 0)
                 for r in b.prefill_by_sched.get(sched, ()) if r.t is not None]
        rows = rows_of[sched] = [r for r in sorted(rows) if r[2] is not None]
        retracted = [(r.t, r.requests) for r in b.retractions_by_sched.get(sched, ()) if r.t is not None]
        for (_, t0, q0, _, _), (_, t, q, _, _) in zip(rows, rows[1:]):
            if q > q0 + sum(n for rt, n in retracted if t0 <= rt <= t):
                last = t if last is None else max(last, t)
                first_rise = t if first_rise is None else min(first_rise, t)
    if last is None:
        return None
    for rows in rows_of.values():
        emptied = next((t for _, t, q, _, _ in rows if t >= last and q == 0), None)
        if emptied is not None and sum(1 for _, t, _, admitted, _ in rows if t >= emptied and admitted) > 1:
            return None
    every = [r for rows in rows_of.values() for r in rows]
    starts = [t for _, t, _, admitted, into_empty in every if into_empty and admitted and t <= first_rise]
    start = max(starts) if starts else min(r[1] for r in every)
    before = sum(admitted for _, t, _, admitted, _ in every if t < start)
    return active_span(sorted(r[1] for r in every if start <= r[1] <= last))[1], before
