"""The self-metrics (exporter/selfmetrics.py): a failing collector loses only its own families."""

from __future__ import annotations

from conftest import samples, value
from prometheus_client import CollectorRegistry, generate_latest
from scheduler_support import DECODE, feed

from exporter.scheduler.collector import SchedulerCollector
from exporter.selfmetrics import GuardedCollectors


def test_a_failing_collector_does_not_fail_the_scrape():
    class Broken:
        def collect(self):
            raise RuntimeError("boom")

    p = feed([DECODE.format(s=0, tags="", r=7, t=10, q=2)])
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GuardedCollectors([("broken", Broken()), ("scheduler", SchedulerCollector(p.store, None))]))
    m = samples(generate_latest(registry).decode())
    assert value(m, "sglang_exporter_collector_success", collector="broken") == 0
    assert value(m, "sglang_exporter_collector_success", collector="scheduler") == 1
    assert value(m, "sglang_scheduler_running_requests", stage="", dp_rank="0") == 7
