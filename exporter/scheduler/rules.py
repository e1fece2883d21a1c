"""The counting rules, each written once: what a scheduler's lines add to a replica's counters.

Both ways into the state go through these functions: the per-line path
(:meth:`~.state.SchedulerStates.apply`: the live sidecar, ``report``, and any line the bulk path
cannot take) calls each with one line's values, as one-element columns; the bulk path for recorded
logs (:func:`~.runs.apply_run`) calls it with a run's columns (:class:`~.runs.ReplicaRun`). So a
rule changed here changes both, and the float sums are the same operations in the same order.

Values come from SGLang's scheduler log lines (``scheduler_metrics_mixin.py``; ``docs/log-format.md``):
``Decode batch`` (``#running-req``, ``#token``, ``token usage``, ``accept len``), ``Prefill batch``
(``#new-seq``, ``#new-token``, ``#cached-token``, ``#replay-token`` of 0.5.21+, ``#running-req``),
``KV cache pool is full. Retract requests.`` (``#retracted_reqs``, ``#new_tokens_gained``), request
time stats (``queue_duration``), and ``#queue-req`` of both stats lines.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from functools import reduce
from itertools import repeat
from operator import add, ge, mul, sub
from typing import Iterable, Iterator, Sequence

from ..events import DecodeBatch, PrefillBatch
from ..limits import QUEUE_SAMPLE_MAX_GAP_SECONDS

# -- one line's figures ----------------------------------------------------------------------------


def decode_tokens(running: Iterable[int], interval: int, accept: Iterable[float]) -> Iterator[float]:
    """Tokens decoded between two Decode lines, per line: ``#running-req`` x decode steps per line x
    ``accept len`` (1.0 without speculative decoding; the caller passes 1.0 where a line prints none
    or 0). Column-wise, at C speed, for the bulk path; the per-line path passes one-element columns."""
    return map(mul, map(mul, running, repeat(interval)), accept)


def chunk_ends(new_token: Sequence[int], chunk: int | None, running: Iterable[int | None],
               mixed: bool) -> Iterable[bool]:
    """Per Prefill line, whether its batch ended in a chunk (its last request continues in a later line).

    SGLang's ``PrefillAdder`` gives a pass ``chunked_prefill_size`` tokens, less the running requests'
    decode tokens with ``--enable-mixed-chunk`` (``scheduler.py``: ``running_bs if is_mixed_chunk``);
    a chunk fills that budget, so ``#new-token`` reaches ``chunk - #running-req`` there, ``chunk``
    otherwise (``running``: ``#running-req`` per line, None read as 0). All ``False`` when the size is
    unknown. Column-wise, as :func:`decode_tokens`.
    """
    if chunk is None:
        return repeat(False, len(new_token))
    if mixed:
        return map(ge, new_token, map(sub, repeat(chunk), (r or 0 for r in running)))
    return map(ge, new_token, repeat(chunk))


def admissions(new_seq: Iterable[int], continues: Iterable[bool]) -> Iterator[int]:
    """Requests each Prefill line admitted from the queue: ``#new-seq`` less the request whose chunk
    the previous line left unfinished (``continues``: :func:`chunk_ends` of that line), which left
    the queue with its first chunk. Column-wise, as :func:`decode_tokens`."""
    return map(max, map(sub, new_seq, continues), repeat(0))


def recompute_estimate(retracted_reqs: int, mean_tokens: float | None) -> float | None:
    """Tokens to compute again for a retraction line without ``#new_tokens_gained``: retracted
    requests x the scheduler's ``#token / #running-req`` of its latest Decode line (None: unknown)."""
    return None if mean_tokens is None else retracted_reqs * mean_tokens


def queue_step(last_queue: int, last_time: float, time: float, clock: str) -> float | None:
    """The queue integral's step (request-seconds) from a ``#queue-req`` sample at ``last_time`` to
    the next one at ``time`` on the same ``clock`` (``log``, ``tod``: a time-of-day prefix that wraps
    at midnight, ``wall``): ``last_queue`` x the gap, the gap capped at
    :data:`~exporter.limits.QUEUE_SAMPLE_MAX_GAP_SECONDS` (SGLang prints nothing while idle); None
    when time did not move forward."""
    dt = time - last_time
    if clock == "tod" and dt < -43200:
        dt += 86400  # midnight wrap of a time-only prefix
    if dt > 0:
        return last_queue * min(dt, QUEUE_SAMPLE_MAX_GAP_SECONDS)
    return None


def stats_gauges(ev: DecodeBatch | PrefillBatch, top: float | None) -> list[tuple[tuple[str, str], object]]:
    """What a ``Prefill``/``Decode`` event sets as its scheduler's latest values, in order:
    ``((table, name), value)`` with tables ``gauge``, ``pool`` (``token usage`` per pool), ``pd``
    (PD queue lengths) and ``mean`` (``#token / #running-req``, the basis of
    :func:`recompute_estimate`); ``top`` is ``ev.kv.max_device_ratio``. ``kv_used_tokens`` is set to
    None (not served) by a line without a token count: Prefill lines print none."""
    kv = ev.kv
    out: list[tuple[tuple[str, str], object]] = []
    append = out.append
    if ev.running_req is not None:
        append((("gauge", "running_requests"), ev.running_req))
    if ev.queue_req is not None:
        append((("gauge", "queue_requests"), ev.queue_req))
    if top is not None and kv.pools:
        append((("gauge", "kv_usage_ratio"), top))
    append((("gauge", "kv_used_tokens"), kv.used_tokens))
    if type(ev) is DecodeBatch:
        if ev.gen_throughput is not None:
            append((("gauge", "gen_throughput"), ev.gen_throughput))
        if ev.accept_len is not None:
            append((("gauge", "spec_accept_length"), ev.accept_len))
        if ev.accept_rate is not None:
            append((("gauge", "spec_accept_rate"), ev.accept_rate))
        if ev.preallocated_usage is not None:
            append((("gauge", "pd_preallocated_usage_ratio"), ev.preallocated_usage))
    else:
        if ev.pending_token is not None:
            append((("gauge", "pending_tokens"), ev.pending_token))
        if ev.input_throughput is not None:
            append((("gauge", "input_throughput"), ev.input_throughput))
    for name, value in kv.pools.items():
        append((("pool", name), value))
    for name, value in ev.pd_queues.items():
        append((("pd", name), value))
    if type(ev) is DecodeBatch and kv.used_tokens is not None and ev.running_req > 0:
        append((("mean", ""), kv.used_tokens / ev.running_req))
    return out


def set_latest(sched, values: Iterable[tuple[tuple[str, str], object]]) -> None:
    """Write ``((table, name), value)`` pairs (:func:`stats_gauges`) into a
    :class:`~.state.SchedulerState`, later pairs winning."""
    for (table, name), value in values:
        if table == "gauge":
            sched.gauges[name] = value
        elif table == "pool":
            sched.kv_pools[name] = value
        elif table == "pd":
            sched.pd_queues[name] = value
        else:
            sched.mean_tokens_per_running_req = value


# -- a run of one replica's lines into its counters ------------------------------------------------


#: The bucket of a value: the first bound not below it (``le``: a value equal to a bound falls in it).
bucket = bisect_left


def bucket_counts(bounds: Sequence[float], values: Iterable[float]) -> list[int]:
    """Non-cumulative counts of ``values`` in the buckets of ``bounds`` (:data:`bucket`), ``+Inf`` last."""
    counts = [0] * (len(bounds) + 1)
    for value, n in Counter(values).items():  # few distinct values: one bisect each
        counts[bucket(bounds, value)] += n
    return counts


def observe(h, values: Sequence[float], counts: list[int] | None = None) -> None:
    """Add ``values`` to a :class:`~.histogram.Histogram`; ``counts``: their :func:`bucket_counts`
    where the caller has them already (the bulk path counts them in its worker processes)."""
    if counts is None:
        bounds, held = h.bounds, h.counts
        for value in values:
            held[bucket(bounds, value)] += 1
    else:
        h.counts = list(map(add, h.counts, counts))
    h.total = reduce(add, values, h.total)


def count_decode(r, interval: int, running: Sequence[int], accept: Sequence[float] | None,
                 tops: Sequence[float], kv_tokens: int, kv_requests: int, buckets: dict | None = None) -> None:
    """Decode lines into a replica's counters (``r``: :class:`~.state.ReplicaCounters`).

    Args:
        interval: Decode steps per Decode line in effect (``decode_log_interval``).
        running: ``#running-req`` per line; ``accept``: ``accept len`` per line (1.0 where none), or
            None when no line printed one; ``tops``: the largest device-pool usage of each line that
            printed one.
        kv_tokens / kv_requests: Sums of ``#token`` and ``#running-req`` over the lines that print a
            token count and a non-zero ``#running-req``.
        buckets: Histogram name -> :func:`bucket_counts` of its column, where already counted.
    """
    n = len(running)
    if not n:
        return
    buckets = buckets or {}
    r.decode_lines += n
    r.decode_steps += interval * n
    r.decode_tokens = reduce(add, decode_tokens(running, interval, repeat(1.0) if accept is None else accept),
                             r.decode_tokens)
    r.decode_kv_tokens += kv_tokens
    r.decode_kv_requests += kv_requests
    observe(r.batch_size_decode, running, buckets.get("batch_size_decode"))
    observe(r.kv_usage_decode, tops, buckets.get("kv_usage_decode"))


def count_prefill(r, new_seq: Sequence[int], new_token: Sequence[int], running: Sequence[int | None],
                  replay_tokens: int, cached_tokens: int, tops: Sequence[float], chunk: int | None, mixed: bool,
                  buckets: dict | None = None) -> None:
    """Prefill lines into a replica's counters: batches, tokens computed (``#new-token`` plus
    ``#replay-token``), cached, admissions (:func:`admissions`, the chunk state carried from the
    replica's previous Prefill line) and the histograms.

    Args:
        running: ``#running-req`` per line (a mixed chunk's budget depends on it).
        chunk: ``chunked_prefill_size`` in effect, None if unknown; ``mixed``: ``--enable-mixed-chunk``.
    """
    if not new_seq:
        return
    buckets = buckets or {}
    r.prefill_batches += len(new_seq)
    r.prefill_computed_tokens += sum(new_token) + replay_tokens
    r.prefill_cached_tokens += cached_tokens
    ends = list(chunk_ends(new_token, chunk, running, mixed))
    previous = [r.prev_prefill_chunked, *ends[:-1]]
    r.admitted_requests += sum(admissions(new_seq, previous))
    r.prev_prefill_chunked = ends[-1]
    observe(r.batch_size_prefill, new_seq, buckets.get("batch_size_prefill"))
    observe(r.prefill_tokens, new_token, buckets.get("prefill_tokens"))
    observe(r.kv_usage_prefill, tops, buckets.get("kv_usage_prefill"))


def count_retractions(r, retracted: Sequence[int], gained: Sequence[int], estimates: Iterable[float]) -> None:
    """Retraction lines: ``#retracted_reqs`` per line, ``#new_tokens_gained`` of the lines that print
    it (freed tokens, and the recompute they cause), and :func:`recompute_estimate` of the others."""
    r.retractions += len(retracted)
    r.retracted_requests += sum(retracted)
    r.retraction_freed_tokens += sum(gained)
    r.recomputed_tokens_gained = reduce(add, gained, r.recomputed_tokens_gained)
    r.recomputed_tokens_estimated = reduce(add, estimates, r.recomputed_tokens_estimated)


def integrate_queue(r, first: tuple[float, str], steps: Iterable[float], last: tuple[float, str],
                    last_queue: int) -> None:
    """Advance the time-weighted ``#queue-req`` integral (Little's law numerator) over samples.

    Args:
        first: ``(time, clock)`` of the first sample: its step from the replica's previous sample
            (:func:`queue_step`) is added first.
        steps: The steps between the samples themselves, in order (none for one sample).
        last / last_queue: ``(time, clock)`` and ``#queue-req`` of the last sample, kept for the next.
    """
    t, clock = first
    total = r.queue_request_seconds
    if r.last_queue is not None and r.last_queue_clock == clock and r.last_queue_time is not None:
        step = queue_step(r.last_queue, r.last_queue_time, t, clock)
        if step is not None:
            total += step
    r.queue_request_seconds = reduce(add, steps, total)
    r.last_queue, (r.last_queue_time, r.last_queue_clock) = last_queue, last
