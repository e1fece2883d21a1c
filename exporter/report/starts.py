"""Server starts: a log is a sequence of starts, each with its own settings and its own figures.

A server restarted into the same log (``tee -a``, the shipped FileHandler, a CI log of many runs) runs
each start with the settings its start-up lines print: the decode-log interval, the ceiling
(``max_running_requests``), the KV capacity, the chunk size. The rest of the report gives the whole
log's figures beside the settings in effect at its end; this section gives each start's own: its
settings as printed, and its batches, retractions and decode batch size. Counts are the scheduler
state's (the one count of the sidecar), differenced at the starts' bounds
(:class:`~exporter.report.read.StartMark`); the batch-size percentiles are those of the Decode lines
the start printed (the same samples as section 1, split at the bounds).
"""

from __future__ import annotations

from bisect import bisect_left

from .basis import Basis
from .domains import (
    COUNT, LABEL, POSITIVE, REASONS, SHARE, TIME, VERDICT, Dist, Figures, ListOf, Record, verdict, violations,
)
from .fmt import iso_time
from .samples import START_COUNTERS, StartMark
from .stats import distribution

START = Record({
    "index": POSITIVE, "time": LABEL, "t": TIME, "opened_by": LABEL,
    "decode_log_interval": POSITIVE, "decode_log_interval_source": LABEL, "max_running_requests": POSITIVE,
    "max_total_num_tokens": COUNT, "chunked_prefill_size": POSITIVE, "tp_size": POSITIVE, "dp_size": POSITIVE,
    "prefill_batches": COUNT, "decode_lines": COUNT, "decode_steps": COUNT, "retractions": COUNT,
    "retracted_requests": COUNT, "retraction_share_of_batches": SHARE, "decode_batch": Dist(COUNT),
})

DOMAINS = {
    "count": COUNT,
    "starts": ListOf(START),
    "verdict": VERDICT,
    "not_available": REASONS,
}


def _totals(counters: dict, keys) -> dict[str, float]:
    """The start counters summed over the schedulers ``keys`` (a scheduler not yet seen: 0)."""
    return {name: sum(counters.get(k, {}).get(name, 0) for k in keys) for name in START_COUNTERS}


def _settings(mark: StartMark, b: Basis) -> dict:
    """A start's settings as its own start-up lines print them (``None`` where it printed none)."""
    sa, cap = mark.server_args, mark.capacity
    interval = sa.decode_log_interval if sa is not None and sa.decode_log_interval else None
    ceiling = (cap.max_running_requests if cap is not None and (cap.max_running_requests or 0) > 0 else
               sa.max_running_requests if sa is not None else None)
    chunk = (cap.chunked_prefill_size if cap is not None and cap.chunked_prefill_size and cap.chunked_prefill_size > 0
             else sa.chunked_prefill_size if sa is not None else None)
    sizes = sa.rank_sizes if sa is not None else {}
    return {
        "decode_log_interval": interval or b.rec.states.configured_decode_log_interval,
        "decode_log_interval_source": "server_args" if interval else b.rec.states.configured_decode_log_interval_source,
        "max_running_requests": ceiling,
        "max_total_num_tokens": cap.max_total_num_tokens if cap is not None else None,
        "chunked_prefill_size": chunk,
        "tp_size": sizes.get("TP"),
        "dp_size": sizes.get("DP"),
    }


def section(b: Basis) -> dict:
    """The ``starts`` section of the report document."""
    f = Figures(DOMAINS)
    rec = b.rec
    marks = rec.starts
    keys = list(rec.states.schedulers)  # this document's schedulers (an SGLang Omni stage view: its own)
    now = {key: {name: s.counter(name) for name in START_COUNTERS} for key, s in rec.states.schedulers.items()}
    opened = [m.seq for m in marks]
    running: list[list[int]] = [[] for _ in marks]  # each start's Decode lines: after its mark, up to the next
    for r in b.decode:
        i = bisect_left(opened, r.seq) - 1
        if i >= 0:
            running[i].append(r.running)
    rows = []
    for i, mark in enumerate(marks, 1):
        before = _totals(mark.counters, keys)
        after = _totals(marks[i].counters if i < len(marks) else now, keys)
        own = {name: after[name] - before[name] for name in START_COUNTERS}
        batches = own["prefill_batches"] + own["decode_steps"]
        decode = distribution(running[i - 1], (50, 90))
        row = {
            "index": i, "time": iso_time(mark.t, rec.time_of_day_only) if mark.t is not None else None, "t": mark.t,
            "opened_by": mark.opened_by or "none (the log begins after the start)",
            **_settings(mark, b), **{k: int(v) for k, v in own.items()},
            "retraction_share_of_batches": own["retractions"] / batches if batches else None,
            "decode_batch": decode if decode["count"] else None,
        }
        for key, spec in START.fields.items():  # a damaged start-up line's value is n/a, the start stays
            if violations(row[key], spec, (key,)):
                row[key] = None
        rows.append(row)
    f.set("count", len(rows))
    f.set("starts", rows)
    if len(rows) > 1:
        changed = [k for k in ("decode_log_interval", "max_running_requests", "max_total_num_tokens",
                               "chunked_prefill_size") if len({r[k] for r in rows}) > 1]
        f.put("verdict", verdict("restarted", f"The server started {len(rows)} times in this log"
                                 + (f", with other {', '.join(changed)} between starts" if changed else "")
                                 + ": the other sections are the whole log's, their settings the last start's; "
                                   "compare the starts here."))
    else:
        f.put("verdict", verdict("one", "One server start in the log." if rows else "No server start in the log."))
    return f.done()
