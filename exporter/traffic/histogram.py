"""Request lengths from SGLang's own ``/metrics`` histograms, where no request log exists.

SGLang (``--enable-metrics``) observes each finished request's prompt and output tokens in
``sglang:prompt_tokens_histogram`` and ``sglang:generation_tokens_histogram`` (default buckets 100,
300, 500, 700, 1000, 1500, ... tokens; ``--prompt-tokens-buckets`` and
``--generation-tokens-buckets`` change them) and counts requests in ``sglang:num_requests_total``.
A scraped exposition file (``curl http://SGLANG/metrics > FILE``) gives them since the server
started; two files of one server give the period between them (the later less the earlier). The
series of every label set (model, engine type, DP rank) are summed.

What a histogram allows: the count and the exact mean (``_sum / _count``); each percentile only as
its bucket (``(lower, upper]``); the variance not at all. A Poisson trace from histograms draws each
length from a bucket in proportion to its count, uniformly inside it (the last finite bucket's upper
bound caps the open one), input and output independently (the histograms do not pair them).
"""

from __future__ import annotations

import math
import random

from prometheus_client.parser import text_string_to_metric_families

PROMPT = "sglang:prompt_tokens_histogram"
GENERATION = "sglang:generation_tokens_histogram"
REQUESTS = "sglang:num_requests"


class HistogramError(ValueError):
    """An exposition text that holds neither of SGLang's length histograms, or cannot be parsed."""


def read(text: str) -> dict:
    """``{"prompt": {"buckets": [(le, cumulative)], "count", "sum"}, "generation": {...}, "requests": n | None}``
    of one exposition text (``None`` for a histogram the text lacks).

    Raises:
        HistogramError: the text does not parse, or has neither histogram.
    """
    out: dict = {"prompt": None, "generation": None, "requests": None}
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as exc:  # the parser raises ValueError and others on damaged text
        raise HistogramError(f"not a Prometheus exposition text ({exc})") from exc
    for fam in families:
        key = {PROMPT: "prompt", GENERATION: "generation"}.get(fam.name)
        if fam.name in (REQUESTS, REQUESTS + "_total"):
            out["requests"] = sum(s.value for s in fam.samples if s.name.endswith("_total"))
        if key is None:
            continue
        buckets: dict[float, float] = {}
        h = {"count": 0.0, "sum": 0.0}
        for s in fam.samples:
            if s.name.endswith("_bucket"):
                le = float(s.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + s.value
            elif s.name.endswith("_count"):
                h["count"] += s.value
            elif s.name.endswith("_sum"):
                h["sum"] += s.value
        out[key] = {"buckets": sorted(buckets.items()), **h}
    if out["prompt"] is None and out["generation"] is None:
        raise HistogramError(f"neither {PROMPT} nor {GENERATION} in the text (SGLang started without --enable-metrics?)")
    return out


def difference(later: dict, earlier: dict) -> dict:
    """The requests between two scrapes of one server (``later`` less ``earlier``), same shape as :func:`read`.

    Raises:
        HistogramError: the counts went down (a restart between the scrapes) or the buckets differ.
    """
    out = {"requests": (later["requests"] - earlier["requests"])
           if later["requests"] is not None and earlier["requests"] is not None else None}
    for key in ("prompt", "generation"):
        a, b = later[key], earlier[key]
        if a is None or b is None:
            out[key] = a if b is None else None
            continue
        if [le for le, _ in a["buckets"]] != [le for le, _ in b["buckets"]]:
            raise HistogramError(f"the two scrapes' {key} buckets differ")
        if a["count"] < b["count"]:
            raise HistogramError("the later scrape counts fewer requests: the server restarted between them")
        out[key] = {"buckets": [(le, x - y) for (le, x), (_, y) in zip(a["buckets"], b["buckets"])],
                    "count": a["count"] - b["count"], "sum": a["sum"] - b["sum"]}
    return out


def lengths(h: dict | None) -> dict:
    """``{"count", "mean", "variance": None, "cv": None, "p50", "p90", "p99", "max": None, "buckets": {"p50":
    [lower, upper]...}}``: the percentiles as their bucket's upper bound (``inf`` in the open bucket)."""
    empty = {"count": 0, "mean": None, "variance": None, "cv": None, "p50": None, "p90": None, "p99": None,
             "max": None, "buckets": {}}
    if h is None or not h["count"]:
        return empty
    out = {**empty, "count": int(h["count"]), "mean": h["sum"] / h["count"]}
    for p in (50, 90, 99):
        rank = max(1, math.ceil(p / 100 * h["count"]))
        lower = 0.0
        for le, cum in h["buckets"]:
            if cum >= rank:
                out[f"p{p}"] = le
                out["buckets"][f"p{p}"] = [lower, le]
                break
            lower = le
    return out


def draw(h: dict, rng: random.Random) -> int:
    """One length drawn from a histogram: a bucket in proportion to its count, uniform inside it."""
    edges = [(lo, hi, c2 - c1) for (lo, c1), (hi, c2) in zip([(0.0, 0.0)] + h["buckets"][:-1], h["buckets"])]
    finite = [e for e in edges if math.isfinite(e[1])]
    cap = finite[-1][1] if finite else 1.0
    weights = [max(w, 0.0) for _, _, w in edges]
    lo, hi, _ = rng.choices(edges, weights=weights)[0]
    hi = cap if not math.isfinite(hi) else hi
    lo = min(lo, hi - 1)
    return max(1, int(rng.uniform(lo, hi)) + 1)
