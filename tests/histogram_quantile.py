"""Prometheus' ``histogram_quantile`` over classic buckets, as ``promql/quantile.go`` computes it
(``bucketQuantile``: coalesce equal bounds, force monotonic counts, linear interpolation inside the
bucket, 0 as the lower bound of the first bucket when its bound is positive, the highest finite
bound when the rank falls in ``+Inf``). ``tests/test_fpm_buckets.py`` checks it against promtool."""

from __future__ import annotations

import bisect
import math


def histogram_quantile(q: float, buckets: dict[float, float]) -> float:
    """The ``q`` quantile of cumulative ``{upper_bound: count}`` buckets (``math.inf`` included)."""
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    bounds = sorted(buckets)
    if not bounds or bounds[-1] != math.inf or len(bounds) < 2:
        return math.nan
    counts = [buckets[b] for b in bounds]
    for i in range(1, len(counts)):  # ensureMonotonic
        counts[i] = max(counts[i], counts[i - 1])
    observations = counts[-1]
    if observations == 0:
        return math.nan
    rank = q * observations
    b = bisect.bisect_left(counts[:-1], rank)  # sort.Search(len-1, count >= rank)
    if b == len(bounds) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start, end, count = 0.0, bounds[b], counts[b]
    if b > 0:
        start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    return start + (end - start) * (rank / count)


def exact_percentile(q: float, values: list[int]) -> float:
    """The exact ``q`` quantile of ``values``: the nearest-rank value ``ceil(q x n)``-th smallest."""
    s = sorted(values)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def within(estimate: float, exact: float, rel: float = 0.05) -> bool:
    """True when ``estimate`` is within ``max(1, rel x exact)`` of ``exact`` (the batch-size rule)."""
    return abs(estimate - exact) <= max(1.0, rel * exact)
