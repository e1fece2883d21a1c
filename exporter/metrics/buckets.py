"""Histogram bounds shared by the metric table's rows: the one bucket rule for integer counts.

Batch sizes and tokens per batch are integers, and what users ask of them is a percentile
(``histogram_quantile``). :func:`relative_bounds` gives bounds under which Prometheus' answer is
within ``max(1, 5%)`` of the exact percentile; the log's batch-size and prefill-token histograms
and the per-forward-pass stream's requests histogram all use it, so the figures of both sources
are read the same way (``tests/test_fpm_buckets.py`` proves the rule, ``tests/test_corpus_quantiles.py``
checks it on every corpus log).
"""

from __future__ import annotations

from bisect import bisect_left


def relative_bounds(top: int, rel: float = 0.05) -> tuple[int, ...]:
    """Integer bucket bounds ``1, 2, 3, ...`` up to the first bound at or above ``top``.

    Each bucket ``(L, U]`` is ``max(1, floor(rel * (L + 1)))`` wide. For integer observations every
    value in it is at least ``L + 1``, and Prometheus' ``histogram_quantile`` interpolates inside
    ``(L, U]``, so its answer is off by less than the width: within ``max(1, rel x the exact
    percentile)`` for any distribution of values in ``1..top``.

    Args:
        top: The largest value the rule must cover.
        rel: The relative width, 0.05 for 5%.

    Returns:
        Strictly increasing integer bounds, the first 1, the last at or above ``top``.
    """
    bounds = [1]
    while bounds[-1] < top:
        low = bounds[-1]
        bounds.append(low + max(1, int(rel * (low + 1))))
    return tuple(bounds)


#: Requests per batch: exact-to-5% up to 1024 (111 bounds), then coarse bounds for the rare larger
#: batch (DP-attention decode servers reach a few thousand). 115 bounds.
REQUESTS_BUCKETS = relative_bounds(1024) + (1536, 2048, 3072, 4096)
#: Tokens computed per prefill batch: exact-to-5% up to 131,072 (210 bounds; a prefill batch is at
#: most ``--max-prefill-tokens``, or a whole prompt when chunked prefill is off), then 262,144,
#: 524,288 and 1,048,576 for million-token contexts. 213 bounds.
PREFILL_BATCH_TOKENS_BUCKETS = relative_bounds(131072) + (262144, 524288, 1048576)


def served_bounds(bounds: tuple[int, ...], ceiling: int | None, coarse: bool = False) -> tuple[int, ...]:
    """The bounds ``/metrics`` serves out of a histogram's full ``bounds``: a subset, so that the
    served cumulative counts are exact (a cumulative histogram read at fewer ``le`` is still one).

    Up to the server's ``ceiling`` (the largest value it can reach, e.g. ``max_running_requests``)
    every bound is kept (``coarse`` false: the max(1, 5%) rule of :func:`relative_bounds` holds
    there) or only the first bound at or above each power of two (``coarse``: within a factor of
    two); above it, the first bounds at or above ``2 x ceiling`` and ``4 x ceiling`` catch a
    value past it. Without a ceiling the whole range is covered the same way.

    Args:
        bounds: The full bounds, strictly increasing integers.
        ceiling: The largest value the server can reach, or ``None`` when unknown.
        coarse: Keep about one bound per power of two instead of every bound.

    Returns:
        Strictly increasing bounds, each one of ``bounds``.
    """
    top = bounds[-1] if ceiling is None else _snap(bounds, ceiling)
    if coarse:
        powers, p = set(), 1
        while p <= top:
            powers.add(_snap(bounds, p))
            p *= 2
        kept = sorted(b for b in powers if b <= top) + [top]
    else:
        kept = [b for b in bounds if b <= top]
    if ceiling is not None:
        kept += [_snap(bounds, ceiling * 2), _snap(bounds, ceiling * 4)]
    return tuple(sorted(set(kept)))


def _snap(bounds: tuple[int, ...], value: int) -> int:
    """The first of ``bounds`` at or above ``value`` (the last bound past the end)."""
    return bounds[min(bisect_left(bounds, value), len(bounds) - 1)]
