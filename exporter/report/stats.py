"""Small statistics of the report: nearest-rank percentiles, distributions, guarded ratios.

Percentiles are nearest-rank: the p-th percentile of n sorted samples is sample number
``ceil(p/100 * n)`` (1-based), always a value that was observed.
"""

from __future__ import annotations

import math


def percentile(sorted_values: list[float], p: float) -> float | None:
    """Nearest-rank percentile of already sorted values; ``None`` for no values."""
    n = len(sorted_values)
    if n == 0:
        return None
    rank = max(1, math.ceil(round(p * n / 100.0, 9)))  # round: 99.9 * 1000 / 100 is 999.0000000000001
    return sorted_values[min(rank, n) - 1]


def distribution(values: list[float], points: tuple[float, ...] = (50, 90, 99)) -> dict:
    """``{"count", "mean", "p50", ..., "max"}`` of the values (nearest-rank; ``None`` when empty).

    Keys for 99.9 are written ``p99_9``.
    """
    s = sorted(values)
    out: dict = {"count": len(s), "mean": (math.fsum(s) / len(s)) if s else None}
    for p in points:
        out["p" + (f"{p:g}".replace(".", "_"))] = percentile(s, p)
    out["max"] = s[-1] if s else None
    return out


def ratio(num: float | None, den: float | None) -> float | None:
    """``num / den``, or ``None`` when either is unknown or ``den`` is 0."""
    if num is None or den is None or den == 0:
        return None
    return num / den


def coefficient_of_variation(values: list[float]) -> float | None:
    """Sample standard deviation / mean, or ``None`` for fewer than two values or a zero mean."""
    if len(values) < 2:
        return None
    m = math.fsum(values) / len(values)
    if not m:
        return None
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / (len(values) - 1)) / m


def plural(n: float, word: str, words: str | None = None) -> str:
    """``"1 retraction"``, ``"9 retractions"`` (``n`` written with thousands separators)."""
    return f"{n:,.0f} {word if n == 1 else (words or word + 's')}"
