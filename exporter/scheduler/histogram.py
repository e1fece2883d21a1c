"""The scheduler state's histogram: bucket counts, sum and count, without Prometheus."""

from __future__ import annotations

from bisect import bisect_left


class Histogram:
    """A classic histogram's data: non-cumulative bucket counts, sum and count.

    Args:
        bounds: Upper bounds (``le``), strictly increasing; a ``+Inf`` bucket is implied.
    """

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]):
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        """Add one observation (``le`` semantics: a value equal to a bound falls in that bucket)."""
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> list[int]:
        """Cumulative counts per bound, ``+Inf`` last (its value is the observation count)."""
        out, running = [], 0
        for c in self.counts:
            running += c
            out.append(running)
        return out
