"""The ingest step (exporter/sources/log/ingest.py): lines -> parser -> SchedulerStore.apply, each line
counted once by kind and result; damage and overflow are counted, never applied, never fatal."""

from __future__ import annotations

from scheduler_support import DECODE, PREFILL, feed

from exporter.limits import MAX_SCHEDULERS


def test_malformed_lines_are_counted_and_not_applied():
    p = feed(["[2026-05-28 02:59:59 TP0] Decode batch, #running-req: 45, #token: 44672, token usaccept rate: 0.32, "
              "npu graph: False, gen throughput (token/s): 863.65, #queue-req",
              "hello"])
    assert p.stats.lines[("decode", "malformed")] == 1
    assert p.stats.lines[("other", "ignored")] == 1
    assert p.store.states.schedulers == {}


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
    assert p.store.states.schedulers["0"].replicas[""].prefill_computed_tokens == 14
