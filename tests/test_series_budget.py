"""The series budget (issue 36): at most 200 ``sglang_scheduler_*`` series per scheduler by default on
the test bed's real one-scheduler logs, every served bucket exactly the full histogram's count at that
``le``, and ``--sglang.fine-buckets`` serving the full bounds (the deep-dive setting).

The percentiles' accuracy with the default buckets is checked on every corpus log by
tests/test_buckets.py; the rules and dashboards on the default set by tests/test_rules_real.py and
tests/test_prometheus_integration.py.
"""

from __future__ import annotations

import math
from collections import Counter

import pytest
from conftest import CORPUS, samples
from exporter_support import one_shot_run

from exporter.metrics import get

BUDGET = 200
#: The test bed's real logs: one scheduler (max_running_requests 16 and 32), two DP ranks, TP 2.
REAL = ("060", "061", "062", "067")


def _run(prefix: str, *flags: str) -> dict:
    code, text = one_shot_run(next(CORPUS.glob(f"{prefix}-*.log")), *flags)
    assert code == 0
    return samples(text)


def _per_scheduler(m: dict) -> Counter:
    return Counter((dict(lb)["stage"], dict(lb)["dp_rank"]) for (n, lb) in m if n.startswith("sglang_scheduler_"))


@pytest.mark.parametrize("prefix", REAL)
def test_default_series_per_scheduler_within_the_budget(prefix):
    default, fine = _run(prefix), _run(prefix, "--sglang.fine-buckets", "true")
    counts, fine_counts = _per_scheduler(default), _per_scheduler(fine)
    assert counts and set(counts) == set(fine_counts)
    for scheduler, n in counts.items():
        assert n <= BUDGET, (scheduler, n)
        # the full bounds: 116 series per batch-size phase and 214 for prefill tokens
        assert fine_counts[scheduler] - n >= 2 * 116 + 214 - 2 * 40 - 20, (scheduler, fine_counts[scheduler], n)
    # Every served bucket is the full histogram's count at that le (a subset of cumulative buckets),
    # and everything else is the same series with the same value.
    assert set(default) < set(fine)
    assert all(fine[key] == value for key, value in default.items() if "_bucket" in key[0])
    def others(m: dict) -> dict:  # the read-time clock of the latest line differs between two runs
        return {k: v for k, v in m.items() if k[0].startswith("sglang_scheduler_") and "_bucket" not in k[0]
                and k[0] != "sglang_scheduler_last_stats_line_timestamp_seconds"}
    assert others(fine) == others(default)


@pytest.mark.parametrize("prefix", ("060", "061"))
def test_batch_size_buckets_stop_at_max_running_requests(prefix):
    m = _run(prefix)
    ceiling = next(v for (n, _), v in m.items() if n == "sglang_scheduler_max_running_requests")
    full = get("sglang_scheduler_batch_size").buckets
    for phase in ("prefill", "decode"):
        les = sorted(float(dict(lb)["le"]) for (n, lb) in m
                     if n == "sglang_scheduler_batch_size_bucket" and dict(lb)["phase"] == phase)
        assert les[-1] == math.inf
        finite = les[:-1]
        # every full bound up to the ceiling (the max(1, 5%) rule holds there), then two above it
        assert finite[:-2] == [b for b in full if b <= ceiling], phase
        assert ceiling * 2 <= finite[-2] < finite[-1] and finite[-1] >= ceiling * 4, phase


def test_prefill_tokens_one_bucket_per_power_of_two():
    m = _run("060")
    les = sorted(float(dict(lb)["le"]) for (n, lb) in m if n == "sglang_scheduler_prefill_batch_tokens_bucket")
    finite = les[:-1]
    assert les[-1] == math.inf and len(finite) <= 20
    for low, high in zip(finite, finite[1:]):
        assert high <= 2.1 * low, (low, high)
    assert finite[-1] >= 4 * 16384  # 4 x max_prefill_tokens of the log's server_args
