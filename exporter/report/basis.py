"""The facts every section of the report shares, derived once from a filled :class:`~.read.Recorder`.

* **Samples.** Per scheduler (DP rank; the report runs once per SGLang Omni stage, over
  :meth:`~.read.Recorder.stage_view`) the report takes the lines of one replica, the one with the
  most lines of that kind (the replica-max rule of the metrics: a line printed by 8 TP ranks is one
  line). Counters come from the scheduler state, which applies the same rule.
* **Time.** ``stats_seconds`` is the span from the first to the last Prefill/Decode line;
  ``active_seconds`` the same with every silence longer than
  :data:`~exporter.limits.QUEUE_SAMPLE_MAX_GAP_SECONDS` counted as that cap (SGLang prints nothing
  while idle; the exporter's queue integral caps the same gaps). Rates divide by ``active_seconds``.
* **Settings in effect.** Decode-log interval, ceiling (``max_running_requests``; for an SGLang Omni
  stage, which never prints it, the largest decode CUDA-graph batch size as a proxy), KV capacity in
  tokens (start-up line, else the ``KV Cache is allocated`` line, else estimated from ``#token`` /
  ``token usage``), chunk size (start-up line, ``server_args``, ``--chunked-prefill-size``, else
  unknown: n/a with :data:`NO_CHUNK`), TP size.
* **Admissions**: the scheduler state's counter (``sglang_scheduler_admitted_requests_total``, the
  one admission rule of :mod:`exporter.scheduler.rules`: ``#new-seq`` less the continuing chunk of a
  chunked prefill), summed over schedulers; per Prefill line, the counter's gain
  (``PrefillRow.admitted``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..limits import DEFAULT_DECODE_LOG_INTERVAL, QUEUE_SAMPLE_MAX_GAP_SECONDS
from .files import InputFile
from .read import Recorder
from .samples import DecodeRow, PrefillRow, ReplicaSamples, RetractionRow
from .stats import percentile

#: Why the chunk size is n/a, and what that does to the admissions (the state does not guess a size).
NO_CHUNK = ("no chunked_prefill_size: neither the start-up capacity line, server_args nor "
            "--chunked-prefill-size gives it, so every #new-seq counts as admitted (a request whose prefill "
            "ran in several chunks counts once per chunk)")
#: Where ``admitted`` comes from.
ADMITTED_SOURCE = "scheduler state (sglang_scheduler_admitted_requests_total)"

#: Lines whose usage is below this are too coarse (two decimals) to estimate a pool's size from.
ESTIMATE_MIN_USAGE = 0.10


def pool_size_estimate(pairs: list[tuple[float, float]]) -> dict | None:
    """A pool's size from ``(used, usage)`` pairs of lines, the usage printed with two decimals.

    Each line with usage >= :data:`ESTIMATE_MIN_USAGE` bounds the size to
    ``[used/(u+0.005), used/(u-0.005)]``; the estimate is the middle of the intersection (the median
    of ``used/u`` when the bounds disagree, then without a range). ``None`` without such a line.
    Returns ``{"size", "low", "high"}`` (floats; low/high ``None`` without a range).
    """
    lo, hi, ratios = 0.0, math.inf, []
    for used, u in pairs:
        if used is None or u is None or u < ESTIMATE_MIN_USAGE:
            continue
        lo = max(lo, used / (u + 0.005))
        hi = min(hi, used / (u - 0.005))
        ratios.append(used / u)
    if not ratios:
        return None
    if lo <= hi:
        return {"size": (lo + hi) / 2, "low": lo, "high": hi}
    ratios.sort()
    return {"size": percentile(ratios, 50), "low": None, "high": None}


def _primary(rec: Recorder, attr: str) -> dict[str, ReplicaSamples]:
    """Per scheduler, the replica with the most samples of ``attr`` (the replica-max rule)."""
    best: dict[str, ReplicaSamples] = {}
    for (dp, _), s in sorted(rec.samples.items()):
        cur = best.get(dp)
        if cur is None or len(getattr(s, attr)) > len(getattr(cur, attr)):
            best[dp] = s
    return best


@dataclass
class Basis:
    """Shared facts of one run (see the module docstring). Built by :func:`basis`."""

    rec: Recorder
    inputs: list[InputFile]
    interval: int
    interval_source: str
    decode_by_sched: dict[str, list[DecodeRow]]
    prefill_by_sched: dict[str, list[PrefillRow]]
    retractions_by_sched: dict[str, list[RetractionRow]]
    decode: list[DecodeRow]
    prefill: list[PrefillRow]
    has_time: bool  # scheduler lines carry time stamps
    origin_time: float | None  # the first scheduler line's time (per-window origin)
    stats_seconds: float | None
    active_seconds: float | None
    idle_gaps: int
    ceiling: int | None
    ceiling_source: str | None
    capacity_line: object | None  # the start-up Capacity event in effect
    capacity_tokens: int | None
    capacity_source: str | None
    capacity_range: list[int] | None
    capacity_exact: bool  # from a start-up or KV Cache is allocated line, not estimated
    chunk: int | None
    chunk_source: str | None
    admitted: int
    admitted_source: str
    tp_size: int | None
    tp_source: str | None
    pd_decode: bool

    @property
    def no_time(self) -> str:
        """Why figures over time are n/a when no scheduler line carries a time stamp: the log has none
        at all, or only its other lines have them (the span section shows those)."""
        if self.rec.first_time is None:
            return "the log has no time stamps"
        if not (self.decode or self.prefill or self.rec.scheduler_lines):
            return "no scheduler line in the figures"
        return "no scheduler line of the log carries a time stamp; its other lines do"

    def total(self, name: str) -> float:
        """A counter of the scheduler state summed over schedulers (each the max over its replicas)."""
        return sum(s.counter(name) for s in self.rec.states.schedulers.values())


def _active(times: list[float]) -> tuple[float | None, float | None, int]:
    """(span, idle-capped span, gaps over the cap) of sorted stats-line times."""
    if not times:
        return None, None, 0
    active, gaps = 0.0, 0
    for a, b in zip(times, times[1:]):
        if b - a > QUEUE_SAMPLE_MAX_GAP_SECONDS:
            gaps += 1
        active += min(b - a, QUEUE_SAMPLE_MAX_GAP_SECONDS)
    return times[-1] - times[0], active, gaps


def basis(rec: Recorder, inputs: list[InputFile]) -> Basis:
    """Derive the shared facts from a recorder filled by :func:`~.files.read_logs`."""
    st = rec.states
    scheds = st.schedulers
    decode_by = {dp: s.decode for dp, s in _primary(rec, "decode").items() if s.decode}
    prefill_by = {dp: s.prefill for dp, s in _primary(rec, "prefill").items() if s.prefill}
    retr_by = {dp: s.retractions for dp, s in _primary(rec, "retractions").items() if s.retractions}
    decode = [r for dp in sorted(decode_by) for r in decode_by[dp]]
    prefill = [r for dp in sorted(prefill_by) for r in prefill_by[dp]]
    stats_times = sorted(r.t for r in decode + prefill if r.t is not None)
    span, active, gaps = _active(stats_times)

    cap = None
    for key in sorted(scheds):
        sched = scheds[key]
        cap = st.effective_capacity(sched, key[0])
        if cap is not None:
            break
    sa = st.server_args
    if cap is not None and cap.max_running_requests and cap.max_running_requests > 0:
        ceiling, ceiling_source = cap.max_running_requests, "capacity line"
    elif sa is not None and sa.max_running_requests and sa.max_running_requests > 0:
        ceiling, ceiling_source = sa.max_running_requests, "server_args"
    elif rec.ceiling_proxy:
        ceiling, ceiling_source = rec.ceiling_proxy, "proxy: the largest decode CUDA-graph batch size"
    else:
        ceiling, ceiling_source = None, None

    cap_range = None
    if cap is not None:
        cap_tokens, cap_source = cap.max_total_num_tokens, "start-up line"
    elif rec.kv_alloc is not None:
        cap_tokens = rec.kv_alloc[0]
        cap_source = "KV Cache is allocated line" + (
            f" (the latest of {len(rec.kv_alloc_tokens)} different values)" if len(rec.kv_alloc_tokens) > 1 else "")
    else:
        est = pool_size_estimate([(r.used_tokens, r.pool_ratio) for r in decode])
        if est:
            cap_tokens, cap_source = int(round(est["size"])), "estimated from #token / token usage"
            if est["low"] is not None:
                cap_range = [int(math.ceil(est["low"])), int(est["high"])]
        else:
            cap_tokens, cap_source = None, None

    chunk, chunk_source = None, None
    if scheds:
        first_key = sorted(scheds)[0]
        first = scheds[first_key]
        chunk = st.chunked_prefill_size(first, first_key[0])
        if chunk is not None:
            chunk_source = ("capacity line" if any(c is not None and c.chunked_prefill_size == chunk
                                                    for c in (first.capacity, st.capacities.get(first_key[0])))
                            else "server_args" if sa is not None and sa.chunked_prefill_size == chunk
                            else "--chunked-prefill-size")
    admitted = int(sum(s.counter("admitted_requests") for s in scheds.values()))
    admitted_source = ADMITTED_SOURCE if chunk is not None or not prefill else f"{ADMITTED_SOURCE}; {NO_CHUNK}"

    tp_size, tp_source = None, None
    sa_tp = rec.server_args.get("tp_size", "")
    if sa_tp.isascii() and sa_tp.isdigit() and 1 <= len(sa_tp) <= 6 and int(sa_tp) >= 1:
        tp_size, tp_source = int(sa_tp), "server_args"
    elif rec.max_tp_tag >= 0:
        tp_size, tp_source = rec.max_tp_tag + 1, "highest TP tag + 1 (lower bound)"

    return Basis(
        rec=rec, inputs=inputs,
        interval=st.decode_log_interval,
        interval_source=("server_args" if sa is not None and sa.decode_log_interval else
                         st.configured_decode_log_interval_source
                         if st.configured_decode_log_interval_source == "--stage-decode-log-intervals" else
                         "default" if st.configured_decode_log_interval == DEFAULT_DECODE_LOG_INTERVAL
                         else "--decode-log-interval"),
        decode_by_sched=decode_by, prefill_by_sched=prefill_by, retractions_by_sched=retr_by,
        decode=decode, prefill=prefill,
        has_time=rec.sched_first is not None, origin_time=rec.sched_first,
        stats_seconds=span, active_seconds=active, idle_gaps=gaps,
        ceiling=ceiling, ceiling_source=ceiling_source, capacity_line=cap,
        capacity_tokens=cap_tokens, capacity_source=cap_source, capacity_range=cap_range,
        capacity_exact=cap_tokens is not None and cap_source is not None and not cap_source.startswith("estimated"),
        chunk=chunk, chunk_source=chunk_source, admitted=admitted, admitted_source=admitted_source,
        tp_size=tp_size, tp_source=tp_source,
        pd_decode=bool(decode) and not prefill and any(r.pd_decode for r in decode),
    )
