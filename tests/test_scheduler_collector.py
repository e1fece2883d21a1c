"""The scheduler collector (exporter/scheduler/collector.py): families from a store snapshot."""

from __future__ import annotations

from conftest import value
from scheduler_support import DECODE, feed, scrape


def test_latest_line_gauges_disappear_when_idle_counters_stay():
    now = [1000.0]
    p = feed([DECODE.format(s=0, tags="", r=7, t=10, q=2)], clock=lambda: now[0])
    fresh = scrape(p, idle_after=60, clock=lambda: now[0])
    assert value(fresh, "sglang_scheduler_running_requests", stage="", dp_rank="0") == 7
    now[0] += 61
    stale = scrape(p, idle_after=60, clock=lambda: now[0])
    assert value(stale, "sglang_scheduler_running_requests", stage="", dp_rank="0") is None
    assert value(stale, "sglang_scheduler_kv_usage_ratio", stage="", dp_rank="0") is None
    assert value(stale, "sglang_scheduler_batches_total", stage="", dp_rank="0", phase="decode") == 40
