"""Scheduler lines as real SGLang prints them, fed through the real ingest step, scraped through the
real scheduler collector (shared by the scheduler-state, scheduler-collector and ingest tests)."""

from __future__ import annotations

from conftest import samples
from prometheus_client import CollectorRegistry, generate_latest

from exporter.scheduler.collector import SchedulerCollector
from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.sources.log.ingest import Ingest

#: Format strings of real line shapes (2025 OOM retraction; 2026 Decode and Prefill batch lines).
RETRACT = ("[2025-03-07 21:49:{s:02d} TP{tp}] Decode out of memory happened. #retracted_reqs: {n}, "
           "#new_token_ratio: 0.1474 -> 0.1845")
DECODE = ("[2026-09-13 16:06:{s:02d}{tags}] Decode batch, #running-req: {r}, #token: {t}, token usage: 0.81, "
          "cuda graph: False, gen throughput (token/s): 2661.81, #queue-req: {q}")
PREFILL = ("[2026-09-13 16:06:{s:02d}{tags}] Prefill batch, #new-seq: {n}, #new-token: {t}, #cached-token: 0, "
           "token usage: 0.5, #running-req: 1, #queue-req: {q}, #pending-token: 0, cuda graph: True, "
           "input throughput (token/s): 1.0")


def scrape(ingest: Ingest, idle_after=None, clock=None) -> dict:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SchedulerCollector(ingest.store, idle_after, clock or (lambda: 0.0)))
    return samples(generate_latest(registry).decode())


def feed(lines, interval=40, clock=lambda: 1000.0) -> Ingest:
    p = Ingest(SchedulerStore(SchedulerStates(interval, clock=clock)), clock=clock)
    p.feed(lines)
    return p
