"""Checklist section 1, batch size: the batch that actually ran, against the configured ceiling.

Figures (all from the scheduler's stats lines, exact per logged step; percentiles nearest-rank):
``decode``: ``#running-req`` per ``Decode batch`` line; ``prefill``: ``#new-seq`` per ``Prefill
batch`` line; ``at_ceiling_share``: Decode lines whose batch reached ``max_running_requests``;
``kv_usage``: the largest device-pool usage per Decode line; ``queue_empty_share``: stats lines with
``#queue-req: 0``. The verdict ``bound`` says what limited the batch: the ceiling (the batch at it in
:data:`~exporter.method.AT_CEILING_SHARE` of the steps), KV memory (retractions, or
:func:`exporter.method.bound_by_kv` as SGLangBatchBoundByKV reads it), arrivals or a mix.
"""

from __future__ import annotations

from .. import method
from .basis import Basis
from .domains import COUNT, LABEL, POSITIVE, REASONS, SHARE, VERDICT, Dist, Figures, verdict
from .fmt import pct
from .stats import distribution, percentile, plural

DOMAINS = {
    "decode": Dist(COUNT),
    "prefill": Dist(COUNT),
    "max_running_requests": POSITIVE,
    "max_running_requests_source": LABEL,
    "at_ceiling_share": SHARE,
    "kv_usage": Dist(SHARE),
    "queue_empty_share": SHARE,
    "bound": VERDICT,
    "not_available": REASONS,
}


def section(b: Basis) -> dict:
    """The ``batch_size`` section of the report document."""
    f = Figures(DOMAINS)
    dsizes = [r.running for r in b.decode]
    psizes = [r.new_seq for r in b.prefill]
    ceiling = b.ceiling
    f.put("decode", distribution(dsizes))
    f.put("prefill", distribution(psizes))
    f.set("max_running_requests", ceiling, "the log has neither the start-up capacity line nor server_args")
    f.put("max_running_requests_source", b.ceiling_source)
    at_ceiling = f.set("at_ceiling_share", (sum(1 for v in dsizes if v >= ceiling) / len(dsizes))
                       if ceiling and dsizes else None,
                       "no Decode lines" if not dsizes else "the configured ceiling is not in the log")
    kv = distribution([r.kv_ratio for r in b.decode if r.kv_ratio is not None])
    f.put("kv_usage", kv)
    queues = [r.queue for r in b.decode if r.queue is not None] + [r.queue for r in b.prefill if r.queue is not None]
    empty = f.set("queue_empty_share", (sum(1 for q in queues if q == 0) / len(queues)) if queues else None,
                  "no stats line printed #queue-req")
    retractions = b.total("retractions")
    # the mean KV occupancy over every Prefill/Decode line, as SGLangBatchBoundByKV reads it
    occupancy = [r.kv_ratio for r in b.decode + b.prefill if r.kv_ratio is not None]
    kv_mean = sum(occupancy) / len(occupancy) if occupancy else None
    p50 = percentile(sorted(dsizes), 50) if dsizes else None
    if not dsizes:
        bound = verdict("unknown", "No Decode batch lines: the log cannot say what bounded the batch.")
    elif at_ceiling is not None and at_ceiling >= method.AT_CEILING_SHARE:
        bound = verdict("ceiling", f"The running batch sat at the configured ceiling of {ceiling} in "
                 f"{pct(at_ceiling, 1)} of logged decode steps: bounded by --max-running-requests.")
    elif retractions > 0 or method.bound_by_kv(p50, ceiling, kv_mean):
        bound = verdict("kv_memory", "Bounded by KV memory: "
                 + (f"{plural(retractions, 'retraction')}, " if retractions else "")
                 + f"mean KV usage {pct(kv_mean, 0)}, p90 {pct(kv['p90'], 0)}, max {pct(kv['max'], 0)}, "
                 + f"decode batch p50 {percentile(sorted(dsizes), 50):,}"
                 + (f" below the ceiling of {ceiling}" if ceiling else " (ceiling unknown)")
                 + (f", with requests waiting in {pct(1 - empty, 0)} of stats lines"
                    if empty is not None and empty < 1 else "") + ".")
    elif empty is not None and empty >= 0.8:
        bound = verdict("arrivals", f"Bounded by arrivals: the queue was empty in {pct(empty, 0)} of stats lines and KV "
                 "memory had room; a higher ceiling would change nothing.")
    else:
        bound = verdict("mixed", "No single bound: the queue was often non-empty but neither the ceiling nor KV memory "
                 "was reached consistently (check prefill limits: chunked_prefill_size, max_prefill_tokens).")
    f.put("bound", bound)
    return f.done()
