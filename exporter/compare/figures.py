"""The comparison table's columns: where each figure comes from and whether it is exact or estimated.

Every log figure is read from the run's report document (the definition lives in the report's
section modules; nothing is derived again here), every client figure from the client's result
object, under SGLang's own key. :func:`figures` gives one run's ``{key: {"value", "kind", "reason"}}``;
``reason`` says why a figure is n/a (the report's own ``not_available`` reason where it has one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .runs import Run

EXACT, ESTIMATED, CLIENT = "exact", "estimated", "client"


@dataclass(frozen=True)
class Column:
    """One figure of the table.

    Attributes:
        key: its key in the JSON document.
        label: its header in text and HTML.
        source: ``"log"`` (``path`` into the report document) or ``"client"`` (``path[0]`` is the
            client result's key).
        kind: ``exact`` / ``estimated`` (the report's word for the figure) or ``client`` (measured by
            the benchmark client per request); ``decode_steps`` columns are exact only when every
            decode step is logged (``decode_log_interval`` 1 from ``server_args``).
        unit: ``"share"`` (0..1, shown in %), ``"ms"``, ``"s"``, ``"/s"`` or ``""``.
        digits: decimals shown.
        narrow: shown in the default text table (120 columns); the others with ``--wide``, in HTML and JSON.
    """

    key: str
    label: str
    source: str
    path: tuple[str, ...]
    kind: str
    unit: str = ""
    digits: int = 0
    narrow: bool = False


COLUMNS: tuple[Column, ...] = (
    Column("max_running_requests", "ceiling", "log", ("batch_size", "max_running_requests"), EXACT),
    Column("decode_batch_p50", "batch p50", "log", ("batch_size", "decode", "p50"), EXACT, narrow=True),
    Column("decode_batch_p90", "batch p90", "log", ("batch_size", "decode", "p90"), EXACT),
    Column("decode_batch_mean", "batch mean", "log", ("batch_size", "decode", "mean"), EXACT, digits=1),
    Column("useful_tokens_per_second", "useful tok/s", "log", ("throughput", "useful_tokens_per_second"),
           ESTIMATED, "/s", 1, narrow=True),
    Column("computed_tokens_per_second", "computed tok/s", "log", ("throughput", "computed_tokens_per_second"),
           ESTIMATED, "/s", 1),
    Column("recompute_share", "recompute", "log", ("throughput", "recompute_share"), ESTIMATED, "share", 1,
           narrow=True),
    Column("retraction_events", "retractions", "log", ("retractions", "events"), EXACT),
    Column("retracted_requests", "retracted req", "log", ("retractions", "requests"), EXACT),
    Column("retraction_share_of_batches", "retr/batches", "log", ("retractions", "share_of_batches"),
           "decode_steps", "share", 2, narrow=True),
    Column("kv_usage_p90", "KV p90", "log", ("batch_size", "kv_usage", "p90"), EXACT, "share", 0, narrow=True),
    Column("queue_wait_seconds", "queue wait", "log", ("queue_latency", "mean_wait_seconds_littles_law"),
           ESTIMATED, "s", 2),
    # max / mean of the DP ranks' #running-req at each stats line (n/a with one DP rank, with the reason)
    Column("dp_running_imbalance_p90", "DP imb p90", "log", ("dp_balance", "running_imbalance", "p90"),
           ESTIMATED, "", 2),
    Column("request_throughput", "req/s", "client", ("request_throughput",), CLIENT, "/s", 2),
    Column("output_throughput", "out tok/s", "client", ("output_throughput",), CLIENT, "/s", 1),
    Column("median_ttft_ms", "TTFT p50", "client", ("median_ttft_ms",), CLIENT, "ms", 0),
    Column("p99_ttft_ms", "TTFT p99", "client", ("p99_ttft_ms",), CLIENT, "ms", 0, narrow=True),
    Column("median_tpot_ms", "TPOT p50", "client", ("median_tpot_ms",), CLIENT, "ms", 1),
    Column("p99_tpot_ms", "TPOT p99", "client", ("p99_tpot_ms",), CLIENT, "ms", 1, narrow=True),
    # with the client's --goodput SLOs (sglang/benchmark/goodput.py): requests/s that met every SLO, and
    # their share of the requests sent
    Column("request_goodput", "goodput req/s", "client", ("request_goodput",), CLIENT, "/s", 2),
    Column("slo_attainment", "SLO met", "client", ("slo_attainment",), CLIENT, "share", 0, narrow=True),
)
BY_KEY = {c.key: c for c in COLUMNS}
#: The client's figures that exist only with its ``--goodput`` option.
GOODPUT_KEYS = frozenset({"request_goodput", "slo_attainment"})


def _kind(col: Column, doc: dict) -> str:
    if col.kind != "decode_steps":
        return col.kind
    r = doc.get("retractions") or {}
    exact = r.get("decode_log_interval") == 1 and r.get("decode_log_interval_source") == "server_args"
    return EXACT if exact else ESTIMATED


def _log_figure(col: Column, doc: dict) -> tuple[float | None, str | None]:
    section = doc.get(col.path[0]) or {}
    value: object = doc
    for part in col.path:
        value = value.get(part) if isinstance(value, dict) else None
    if value is not None:
        return value, None
    reasons = section.get("not_available") or {}
    for i in range(len(col.path), 1, -1):  # the most specific reason the report gives
        why = reasons.get(".".join(col.path[1:i]))
        if why:
            return None, why
    return None, "the report gives no value"


def _client_figure(col: Column, run: Run) -> tuple[float | None, str | None]:
    if run.client is None:
        return None, run.client_reason
    value = run.client.get(col.path[0])
    if value is None and col.key in GOODPUT_KEYS:
        return None, "the client ran without --goodput SLOs"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None, f"the client file has no number under {col.path[0]!r}"
    return value, None


def figures(run: Run) -> dict[str, dict]:
    """One run's figures: ``{column key: {"value": number | None, "kind": str, "reason": str | None}}``."""
    out = {}
    for col in COLUMNS:
        value, reason = _log_figure(col, run.doc) if col.source == "log" else _client_figure(col, run)
        out[col.key] = {"value": value, "kind": _kind(col, run.doc) if col.source == "log" else CLIENT,
                        "reason": reason}
    return out
