"""The ingest step (exporter/sources/log/ingest.py): lines -> parser -> SchedulerStore.apply, each line
counted once by kind and result; damage and overflow are counted, never applied, never fatal."""

from __future__ import annotations

from conftest import samples, value
from prometheus_client import CollectorRegistry, generate_latest
from scheduler_support import DECODE, PREFILL, feed, scrape

from exporter.limits import MAX_SCHEDULERS
from exporter.scheduler.state import REJECT_REASONS
from exporter.sources.log.collector import LogCollector


def test_malformed_lines_are_counted_and_not_applied():
    p = feed(["[2026-05-28 02:59:59 TP0] Decode batch, #running-req: 45, #token: 44672, token usaccept rate: 0.32, "
              "npu graph: False, gen throughput (token/s): 863.65, #queue-req",
              "hello"])
    assert p.stats.lines[("decode", "malformed")] == 1
    assert p.stats.lines[("other", "ignored")] == 1
    assert p.store.states.schedulers == {}


def test_decode_line_cut_short_is_malformed_not_a_batch():
    # issue 24, 7: a Decode line cut after its token count (a crash, a truncated copy) is damaged: it is
    # no batch and sets no kv_used_tokens of 12 beside the previous line's usage of 1.0
    whole = DECODE.format(s=0, tags="", r=70, t=87000, q=0).replace("0.81", "1.00")
    p = feed([whole, "[2026-09-13 16:06:01] Decode batch, #running-req: 70, #token: 12"])
    assert p.stats.lines[("decode", "malformed")] == 1 and p.stats.lines[("decode", "parsed")] == 1
    m = scrape(p)
    assert value(m, "sglang_scheduler_kv_used_tokens", stage="", dp_rank="0") == 87000
    assert value(m, "sglang_scheduler_batches_total", stage="", dp_rank="0", phase="decode") == 40


def test_garbage_rank_tags_cannot_grow_series_without_bound():
    lines = [DECODE.format(s=0, tags=f" DP{dp} TP0", r=1, t=1, q=0) for dp in range(MAX_SCHEDULERS + 50)]
    p = feed(lines)
    assert len(p.store.states.schedulers) == MAX_SCHEDULERS
    assert p.stats.lines[("decode", "parsed")] == MAX_SCHEDULERS
    assert p.stats.lines[("decode", "malformed")] == 50
    # Known schedulers keep counting.
    p.feed([DECODE.format(s=1, tags=" DP0 TP0", r=1, t=1, q=0)])
    assert p.stats.lines[("decode", "parsed")] == MAX_SCHEDULERS + 1


def test_an_event_that_cannot_be_applied_is_counted_and_loses_nothing_else(monkeypatch):
    p = feed([])
    real = p.store.states._prefill
    monkeypatch.setattr(p.store.states, "_prefill",
                        lambda ev, wall: (_ for _ in ()).throw(OverflowError) if ev.new_token == 7 else real(ev, wall))
    p.feed([PREFILL.format(s=0, tags="", n=1, t=5, q=0), PREFILL.format(s=1, tags="", n=1, t=7, q=0),
            PREFILL.format(s=2, tags="", n=1, t=9, q=0)])
    assert p.stats.lines[("prefill", "parsed")] == 2 and p.stats.lines[("prefill", "malformed")] == 1
    assert p.store.states.schedulers[("", "0")].replicas[""].prefill_computed_tokens == 14


def _log_metrics(p) -> dict:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LogCollector(p.stats))
    return samples(generate_latest(registry).decode())


def test_refused_lines_are_counted_by_reason_in_a_metric():
    m = _log_metrics(feed([]))
    assert {r: value(m, "sglang_exporter_log_rejected_lines_total", reason=r) for r in REJECT_REASONS} == \
        dict.fromkeys(REJECT_REASONS, 0)  # every reason is there from the start
    p = feed(["[2026-09-13 16:05:00] server_args=ServerArgs(model_path='m', tp_size=2, dp_size=2)",
              DECODE.format(s=0, tags=" DP5 TP0", r=1, t=1, q=0),
              DECODE.format(s=0, tags=" DP1 TP1", r=10**14, t=1, q=0)])
    m = _log_metrics(p)
    assert value(m, "sglang_exporter_log_rejected_lines_total", reason="rank") == 1
    assert value(m, "sglang_exporter_log_rejected_lines_total", reason="range") == 1
    assert value(m, "sglang_exporter_log_lines_total", kind="decode", result="malformed") == 2


def test_startup_facts_include_the_kv_allocation_line():
    p = feed([])
    head = ("[2026-07-10 11:00:00 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 500000, "
            "K size: 7.63 GB, V size: 7.63 GB\n[2026-07-10 11:00:01 TP0] Prefill batch, #new-seq: 1, #new-token: 5\n")
    assert p.startup_facts([head.encode()]) == 1
    snap = p.store.snapshot()
    assert snap.schedulers[0].capacity.max_total_num_tokens == 500000
    assert snap.schedulers[0].counter["prefill_batches"] == 0  # start-up facts move no counter
    assert p.stats.lines[("kv_allocation", "parsed")] == 0
