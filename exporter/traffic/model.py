"""The traffic model of a production record: arrivals over time and the request length distributions.

From a list of :class:`~exporter.traffic.requestlog.Request` (or lengths alone, from SGLang's
histograms: :mod:`exporter.traffic.histogram`):

* **Periods.** The arrivals, sorted, are cut wherever no request arrives for longer than the idle gap
  (``idle_gap`` seconds, default :data:`IDLE_GAP_FACTOR` times the median time between arrivals, at
  least :data:`MIN_IDLE_GAP` s): each period has its requests, span (first to last arrival) and rate
  ``(n - 1) / span`` (the mean of its ``n - 1`` gaps, a Poisson rate's estimate). The *active* rate is
  over the periods of two requests or more, so a week with quiet nights is not averaged with them.
* **Windows.** Within the active periods, requests per ``window`` seconds: the rate per window, its
  peak, and the burstiness: the index of dispersion of the counts (variance / mean; a Poisson process
  of the same mean gives 1, burstier traffic more) and the coefficient of variation of the gaps
  between arrivals (Poisson: 1).
* **Lengths.** Input (``prompt_tokens``) and output (``completion_tokens``) tokens: count, mean,
  variance (sample), coefficient of variation, nearest-rank p50/p90/p99 and max
  (:func:`exporter.report.stats.distribution`).
"""

from __future__ import annotations

import math
import statistics

from ..report.stats import coefficient_of_variation, distribution
from ..sources.log.requestlog import Request

#: The idle gap is this many times the median time between arrivals ...
IDLE_GAP_FACTOR = 20.0
#: ... and at least this many seconds.
MIN_IDLE_GAP = 5.0
#: Seconds per window of the arrival rate, by default.
DEFAULT_WINDOW = 60.0


def lengths(values: list[int]) -> dict:
    """``{"count", "mean", "variance", "cv", "p50", "p90", "p99", "max"}`` of token counts (``None`` when empty)."""
    out = distribution([float(v) for v in values])
    out["variance"] = statistics.variance(values) if len(values) > 1 else None
    out["cv"] = coefficient_of_variation([float(v) for v in values])
    return out


def idle_gap(arrivals: list[float]) -> float:
    """The default idle gap, seconds, of sorted arrival times (see the module docstring)."""
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    return max(MIN_IDLE_GAP, IDLE_GAP_FACTOR * statistics.median(gaps)) if gaps else MIN_IDLE_GAP


def periods(arrivals: list[float], gap: float) -> list[list[float]]:
    """Sorted arrival times cut into periods wherever two arrivals are more than ``gap`` seconds apart."""
    out: list[list[float]] = []
    for t in arrivals:
        if out and t - out[-1][-1] <= gap:
            out[-1].append(t)
        else:
            out.append([t])
    return out


def _windows(period: list[float], window: float) -> list[int]:
    """Arrivals per ``window`` seconds from the period's first arrival; the last, partial window is
    dropped unless it is the only one."""
    n = max(1, math.floor((period[-1] - period[0]) / window))
    counts = [0] * n
    for t in period:
        i = int((t - period[0]) // window)
        if i < n:
            counts[i] += 1
    return counts


def arrivals_model(arrivals: list[float], window: float = DEFAULT_WINDOW, gap: float | None = None) -> dict:
    """The arrival side of the model (module docstring) of arrival times in epoch seconds.

    Returns ``{"requests", "first", "last", "idle_gap_seconds", "periods": [{"start", "end", "requests",
    "span_seconds", "rate_per_second"}], "active": {"requests", "seconds", "rate_per_second"},
    "windows": {"seconds", "count", "mean_rate_per_second", "peak_rate_per_second", "peak_start",
    "dispersion_index"}, "interarrival_cv"}``; rates ``None`` where a period has a single request.
    """
    ts = sorted(arrivals)
    g = idle_gap(ts) if gap is None else gap
    parts = periods(ts, g)
    rows = [{"start": p[0], "end": p[-1], "requests": len(p), "span_seconds": p[-1] - p[0],
             "rate_per_second": (len(p) - 1) / (p[-1] - p[0]) if len(p) > 1 and p[-1] > p[0] else None}
            for p in parts]
    active = [p for p in parts if len(p) > 1 and p[-1] > p[0]]
    seconds = sum(p[-1] - p[0] for p in active)
    counts, starts = [], []
    for p in active:
        c = _windows(p, window)
        counts += c
        starts += [p[0] + i * window for i in range(len(c))]
    mean = statistics.fmean(counts) if counts else None
    peak = max(range(len(counts)), key=counts.__getitem__) if counts else None
    gaps = [b - a for p in active for a, b in zip(p, p[1:])]
    return {
        "requests": len(ts), "first": ts[0] if ts else None, "last": ts[-1] if ts else None,
        "idle_gap_seconds": g, "periods": rows,
        "active": {"requests": sum(map(len, active)), "seconds": seconds,
                   "rate_per_second": (sum(len(p) - 1 for p in active) / seconds) if seconds else None},
        "windows": {"seconds": window, "count": len(counts),
                    "mean_rate_per_second": mean / window if mean is not None else None,
                    "peak_rate_per_second": counts[peak] / window if peak is not None else None,
                    "peak_start": starts[peak] if peak is not None else None,
                    "dispersion_index": (statistics.variance(counts) / mean) if len(counts) > 1 and mean else None},
        "interarrival_cv": coefficient_of_variation(gaps),
    }


def build(requests: list[Request], window: float = DEFAULT_WINDOW, gap: float | None = None) -> dict:
    """The whole model of finished requests: ``{"arrivals": arrivals_model(...), "input_tokens":
    lengths(...), "output_tokens": lengths(...), "exact_arrivals": share with SGLang's own
    request_received_ts}``."""
    return {"arrivals": arrivals_model([r.arrival for r in requests], window, gap),
            "input_tokens": lengths([r.input_len for r in requests]),
            "output_tokens": lengths([r.output_len for r in requests]),
            "exact_arrivals": (sum(r.exact_arrival for r in requests) / len(requests)) if requests else None}
