"""``sglang_scheduler_forward_pass*`` and ``sglang_exporter_fpm_*`` families from :class:`FpmStats`,
built from the metric table (:mod:`exporter.metrics.fpm`).

Every figure here is exact: SGLang sends one message per forward pass, so counts, histograms and
sums are complete (up to the messages counted as ``lost``). Per-scheduler series carry the labels of
:data:`SCHEDULER_LABELS`; the endpoint's series carry ``endpoint``. The values are copied under the
statistics' lock; families are built outside it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from ... import metrics
from ...metrics import SCHEDULER_LABELS
from ...metrics.families import Compiled, describe, fill
from ...scheduler.store import HistogramData
from .stats import MODES, Buckets, EndpointStats, FpmStats, RankStats

__all__ = ["METRICS", "SCHEDULER_LABELS", "FpmCollector", "scheduler_labels"]


def scheduler_labels(dp_rank: int, stage: str = "") -> list[str]:
    """Values of :data:`SCHEDULER_LABELS` for a scheduler: the stream's ranks are plain SGLang's
    (stage ``""``); an SGLang Omni stage's stream would name its stage here."""
    return [stage, str(dp_rank)]


def _metrics() -> tuple[tuple[str, str, tuple[str, ...], str], ...]:
    """``(name, type, labels beyond the scheduler's, HELP)`` of this source's rows of the metric table
    (docs/fpm.md renders them; tests/test_fpm_doc.py keeps the two in step)."""
    out = []
    for m in metrics.rows("fpm"):
        extra = m.labels[len(SCHEDULER_LABELS):] if m.name.startswith("sglang_scheduler_") else m.labels
        out.append((m.name, m.type, extra, m.help))
    return tuple(out)


#: This source's metric reference, a view of the metric table.
METRICS = _metrics()


def _hist(b: Buckets) -> HistogramData:
    return HistogramData(b.bounds, tuple(b.cumulative()), b.total)


def _rank_view(st: FpmStats, r: RankStats, now: float) -> dict[str, Any]:
    """One scheduler's values (call under the lock); the queue is withheld once the rank is silent."""
    q = r.queued if r.queued is not None and st.rank_fresh(r, now) else None
    return {
        "passes": dict(zip(MODES, r.passes)),
        "prefill_requests": _hist(r.prefill_requests),
        "decode_requests": _hist(r.decode_requests),
        "seconds": _hist(r.seconds),
        "prefill_tokens": _hist(r.prefill_tokens),
        "prefill_cached_tokens": r.prefill_cached_tokens,
        "decode_kv_tokens": r.decode_kv_tokens,
        "retracted_tokens": r.retracted_tokens,
        "queued_requests": None if q is None else {"prefill": q.num_prefill_requests,
                                                   "decode": q.num_decode_requests},
        "queued_tokens": None if q is None else {"prefill": q.sum_prefill_tokens, "decode": q.sum_decode_kv_tokens},
        "last_pass_wall": r.last_pass_wall,
    }


def _endpoint_view(st: FpmStats, index: int, ep: EndpointStats, now: float) -> dict[str, Any]:
    """One endpoint's values (call under the lock)."""
    return {
        "up": st.endpoint_up(index, now),
        "results": dict(ep.results),
        "restarts": ep.restarts,
        "schema": None if ep.schema is None else {tuple(ep.schema): 1},
        "last_message_wall": ep.last_message_wall,
    }


class FpmCollector(Collector):
    """Yields this source's families from :class:`FpmStats` (a copy under its lock; no I/O).

    Args:
        stats: The statistics the subscriber keeps.
    """

    def __init__(self, stats: FpmStats):
        self.stats = stats
        self._rows = Compiled("fpm")
        self._rank_rows = Compiled("fpm", lambda m: m.name.startswith("sglang_scheduler_"))
        self._endpoint_rows = Compiled("fpm", lambda m: not m.name.startswith("sglang_scheduler_"))

    def describe(self) -> Iterator[Metric]:
        return describe("fpm")

    def collect(self) -> Iterator[Metric]:
        st = self.stats
        with st.lock:
            now = st.monotonic()
            ranks = [(tuple(scheduler_labels(dp)), _rank_view(st, st.ranks[dp], now)) for dp in sorted(st.ranks)]
            endpoints = [((ep.endpoint,), _endpoint_view(st, i, ep, now)) for i, ep in enumerate(st.endpoints)]
        fams = self._rows.families(raw=True)  # up to ~290 series per rank: the renderer's fast path
        for labels, view in ranks:
            fill(fams, self._rank_rows, view, labels)
        for labels, view in endpoints:
            fill(fams, self._endpoint_rows, view, labels)
        return iter(fams.values())
