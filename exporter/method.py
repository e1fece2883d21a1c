"""The method's formulas and thresholds, defined once (docs/method.md).

``sglang-exporter report`` (``exporter/report/``) computes its figures with these functions, and
``monitoring/`` (recording rules, alerts, dashboards) takes its thresholds from these constants and
writes the same formulas in PromQL over the sidecar's counters; ``tests/test_method.py`` replays
real logs through both and compares the figures. Every function is pure; each returns ``None``
where its inputs cannot give a sound value (a zero denominator, a figure outside the bounds its own
log gives), never a made-up number.

Units: shares in 0..1, tokens and requests as counts, seconds.
"""

from __future__ import annotations

import math

#: method.md section 3: more than 5% of batches with a retraction means the ceiling is too high
#: (retraction events / (prefill batches + decode steps)).
RETRACTION_RULE = 0.05
#: A time window judged against the rule must hold more batches than this, so that one retraction
#: alone (1 / 21 = 4.8%) cannot put it above the rule: fewer batches cannot resolve 5%.
MIN_WINDOW_BATCHES = int(1 / RETRACTION_RULE) + 1
#: method.md sections 3 and 5: configure the running-request ceiling at about 70% of the requests the
#: KV pool holds (fragmentation, length variance): the safe capacity.
SAFETY_FACTOR = 0.7
#: The safety factors the Capacity dashboard offers.
SAFETY_FACTOR_CHOICES = (0.6, 0.7, 0.8)
#: Offline work: the ceiling at 60-70% of the requests the KV pool holds.
OFFLINE_RANGE = (0.6, 0.7)
#: "Bound by KV": the median decode batch below this share of ``max_running_requests`` ...
BOUND_BY_KV_BATCH_SHARE = 0.5
#: ... while the mean KV occupancy is above this share.
BOUND_BY_KV_USAGE = 0.9
#: "Bound by the ceiling": the running batch at ``max_running_requests`` in at least this share of
#: the logged decode steps.
AT_CEILING_SHARE = 0.5
#: Fewer Prefill/Decode lines than this say nothing general about a run: no regime (latency- or
#: throughput-first) is concluded from them without a saturation signal, and no "never ran out".
MIN_STATS_LINES = 10
#: The recompute share (recomputed / computed tokens) above which throughput figures are called
#: "fake throughput" (the report's verdict, the SGLangRecomputeShareHigh alert).
RECOMPUTE_SHARE_HIGH = 0.1


def share(part: float, whole: float) -> float | None:
    """``part / whole``; None when ``whole`` is 0 or ``part`` exceeds it (not a share)."""
    if not whole or part > whole or part < 0:
        return None
    return part / whole


def retraction_share(retractions: float, batches: float) -> float | None:
    """Retraction events per batch (prefill batches + decode steps): the 5% rule's figure."""
    return share(retractions, batches)


def recompute_share(recomputed: float, computed: float) -> float | None:
    """Recomputed tokens / computed tokens (prefill + decode): the part of the work done twice."""
    return share(recomputed, computed)


def overstatement(recompute: float) -> float | None:
    """How much a tokens/s figure over computed work overstates useful work at a recompute share:
    computed / useful - 1 = share / (1 - share) (18% recompute overstates by 22%); None at share 1."""
    return recompute / (1 - recompute) if recompute < 1 else None


def useful_tokens(computed: float, recomputed: float) -> float | None:
    """Computed tokens less recomputed ones; None when the recompute exceeds the computed work
    (retracted requests whose work started before the log)."""
    return computed - recomputed if recomputed <= computed else None


def kv_tokens_per_request(tokens: float, requests: float) -> float | None:
    """KV tokens held per running request: the sum of ``#token`` over the sum of ``#running-req`` of
    the Decode lines that print both (the counters ``sglang_scheduler_decode_kv_tokens_total`` and
    ``sglang_scheduler_decode_kv_requests_total``)."""
    return tokens / requests if requests > 0 else None


def capacity_requests(capacity_tokens: float | None, per_request: float | None) -> float | None:
    """Requests the KV pool holds at the observed footprint: capacity tokens / tokens per request."""
    if not capacity_tokens or not per_request:
        return None
    return capacity_tokens / per_request


def safe_capacity(requests: float | None, factor: float = SAFETY_FACTOR) -> int | None:
    """The safe running-request ceiling: ``floor(requests x factor)``; None without a capacity."""
    return None if requests is None else math.floor(requests * factor)


def decode_step(running: int, accept_len: float | None, gen_throughput: float | None) -> float | None:
    """Seconds per decode step from one Decode line: ``#running-req x accept len / gen throughput``
    (SGLang's gen throughput is the tokens since its previous Decode line over the wall time since
    then); None without gen throughput or running requests."""
    if not gen_throughput or running <= 0:
        return None
    return running * (accept_len or 1.0) / gen_throughput


def request_weighted_mean(values: list[float], running: list[int]) -> float:
    """The mean of per-line values (seconds per decode step, or per output token) weighted by each
    line's running requests: every running request waits one step, so a step of a batch of 30 counts
    30 times. This is the per-token wait a client measures (its mean inter-token latency and, per
    request, TPOT), where an unweighted mean of the lines under-weights the busy, slow steps: on a real
    0.5.23 run 141 ms unweighted, 193 ms weighted, the client's mean ITL 189 ms."""
    total = sum(running)
    return sum(v * n for v, n in zip(values, running)) / total if total else sum(values) / len(values)


def decode_step_bound(gap_seconds: float | None, interval: int) -> float | None:
    """The longest decode step the log allows between two Decode lines of one scheduler ``gap_seconds``
    apart: ``interval`` steps fit in the gap (1-s time stamps: one second more). None without a gap."""
    if gap_seconds is None or gap_seconds < 0 or interval <= 0:
        return None
    return (gap_seconds + 1.0) / interval


def littles_law_wait(request_seconds: float, admitted: float) -> float | None:
    """Mean queue wait by Little's law: request-seconds queued / requests admitted."""
    return request_seconds / admitted if admitted > 0 else None


def queue_steady(first: int, last: int, admitted: float) -> bool:
    """The queue did not grow during the log: ``last - first <= max(2, 10% of the admissions)``.
    Little's law gives a wait time only then."""
    return last - first <= max(2, 0.1 * admitted)


def wait_within_log(wait: float | None, span_seconds: float | None) -> bool:
    """A mean wait the log can hold: no longer than its own span (+1 s for 1-s time stamps)."""
    return wait is None or span_seconds is None or wait <= span_seconds + 1.0


def bound_by_kv(decode_p50: float | None, ceiling: float | None, kv_usage: float | None) -> bool:
    """The running batch is bounded by KV memory: mean KV occupancy above :data:`BOUND_BY_KV_USAGE`
    while the median decode batch is below :data:`BOUND_BY_KV_BATCH_SHARE` of the ceiling (with no
    known ceiling, the occupancy alone)."""
    if kv_usage is None or kv_usage <= BOUND_BY_KV_USAGE:
        return False
    return not ceiling or decode_p50 is None or decode_p50 < BOUND_BY_KV_BATCH_SHARE * ceiling


# --------------------------------------------------------------------------- DP attention ranks

#: DP attention (docs/method.md, "DP-rank imbalance"): every rank of one server runs each forward step
#: in lockstep and waits for the busiest, so a load of ``max / mean`` across the ranks leaves
#: ``1 - mean / max`` of their capacity idle. Above this ratio the imbalance is worth acting on
#: (1.5: a third of the ranks' step capacity padded).
DP_IMBALANCE_HIGH = 1.5
#: ... while the ranks run at least this many requests each on average: a handful of requests over
#: many ranks is imbalanced by arithmetic, and cheap.
DP_IMBALANCE_MIN_RUNNING = 2


def dp_imbalance(per_rank: list[float]) -> float | None:
    """``max / mean`` of one figure (running requests, tokens) across the DP ranks of one server:
    1.0 balanced, ``len(per_rank)`` one busy rank. None with fewer than two ranks or none busy."""
    if len(per_rank) < 2:
        return None
    mean = sum(per_rank) / len(per_rank)
    return max(per_rank) / mean if mean > 0 else None


def dp_imbalance_high(running_per_rank: list[float]) -> bool:
    """SGLangDPRankImbalance's condition on the running requests of the ranks (without its ``for:``):
    max / mean above :data:`DP_IMBALANCE_HIGH` while the ranks average more than
    :data:`DP_IMBALANCE_MIN_RUNNING` requests."""
    ratio = dp_imbalance(running_per_rank)
    return (ratio is not None and ratio > DP_IMBALANCE_HIGH
            and sum(running_per_rank) / len(running_per_rank) > DP_IMBALANCE_MIN_RUNNING)


def dp_idle_share(per_rank: list[float]) -> float | None:
    """Share of the DP ranks with nothing to run (a 0 in ``per_rank``); None with fewer than two ranks."""
    if len(per_rank) < 2:
        return None
    return sum(1 for v in per_rank if v == 0) / len(per_rank)


def dp_lost_share(ratio: float | None) -> float | None:
    """The ranks' step capacity padded while they wait for the busiest: ``1 - 1 / ratio``."""
    return None if ratio is None or ratio < 1 else 1 - 1 / ratio
