"""SGLang's length histograms read from a Prometheus server over a time range, where no request log exists.

Prometheus keeps what it scraped from SGLang's ``/metrics``; the requests between ``start`` and
``end`` are the histograms at ``end`` less those at ``start`` (each summed over every series: pods,
models, DP ranks), read with two instant queries of the HTTP API (``GET /api/v1/query``) each:
``sum by (le) (sglang:prompt_tokens_histogram_bucket)``, its ``_count`` and ``_sum``, the same for
``sglang:generation_tokens_histogram``, and ``sum(sglang:num_requests_total)``. Each query takes the
latest sample at or before its time (Prometheus' 5-minute look-back). A server restarted inside the
range lowers the counts: refused with :class:`~exporter.traffic.histogram.HistogramError`, as for two
scraped files; pick a range without a restart.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

from .histogram import GENERATION, PROMPT, REQUESTS, HistogramError, difference

#: Seconds an HTTP request to Prometheus may take.
TIMEOUT = 30.0


class PrometheusError(OSError):
    """Prometheus could not be reached or answered an error (the message says which)."""


def query(url: str, expr: str, at: float) -> list[dict]:
    """The result vector of one instant query at ``at`` (epoch seconds).

    Raises:
        PrometheusError: no answer, not JSON, or ``status`` not ``success``.
    """
    full = f"{url.rstrip('/')}/api/v1/query?" + urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
    try:
        with urllib.request.urlopen(full, timeout=TIMEOUT) as r:  # noqa: S310 - the user's Prometheus URL
            body = json.loads(r.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise PrometheusError(f"Prometheus at {url}: {getattr(exc, 'reason', None) or exc}") from exc
    if body.get("status") != "success":
        raise PrometheusError(f"Prometheus at {url}: {body.get('errorType')}: {body.get('error')}")
    return body["data"]["result"]


def _at(url: str, t: float) -> dict:
    """The histograms' cumulative state at ``t`` in :func:`exporter.traffic.histogram.read`'s shape."""
    out: dict = {"prompt": None, "generation": None, "requests": None}
    for key, name in (("prompt", PROMPT), ("generation", GENERATION)):
        buckets = query(url, f"sum by (le) ({name}_bucket)", t)
        if not buckets:
            continue
        count = query(url, f"sum({name}_count)", t)
        total = query(url, f"sum({name}_sum)", t)
        out[key] = {"buckets": sorted((float(s["metric"]["le"]), float(s["value"][1])) for s in buckets),
                    "count": float(count[0]["value"][1]) if count else 0.0,
                    "sum": float(total[0]["value"][1]) if total else 0.0}
    requests = query(url, f"sum({REQUESTS}_total)", t)
    out["requests"] = float(requests[0]["value"][1]) if requests else None
    return out


def between(url: str, start: float, end: float) -> dict:
    """The requests between ``start`` and ``end`` (epoch seconds), :func:`~.histogram.read`'s shape.

    Raises:
        PrometheusError: Prometheus did not answer; HistogramError: no length histogram at ``end``, or a
        restart inside the range.
    """
    later, earlier = _at(url, end), _at(url, start)
    if later["prompt"] is None and later["generation"] is None:
        raise HistogramError(f"Prometheus has neither {PROMPT} nor {GENERATION} at the end of the range "
                             "(is SGLang scraped, with --enable-metrics?)")
    if earlier["prompt"] is None and earlier["generation"] is None:  # the server's first scrape is inside the range
        earlier = {k: ({"buckets": [(le, 0.0) for le, _ in v["buckets"]], "count": 0.0, "sum": 0.0} if v else None)
                   for k, v in later.items() if k != "requests"} | {"requests": 0.0}
    return difference(later, earlier)
