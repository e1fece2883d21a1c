"""The one interface into the scheduler state (exporter/scheduler/store.py): apply and snapshot."""

from __future__ import annotations

import threading

from scheduler_support import DECODE, PREFILL, RETRACT

from exporter.events import Capacity, Origin, RetractAbort
from exporter.limits import MAX_SCHEDULERS
from exporter.scheduler.state import HISTOGRAM_BOUNDS, SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.sources.log.parser import parse_line


def events(lines):
    return [parse_line(line) for line in lines]


def test_apply_returns_only_the_events_it_could_not_apply_with_the_reason():
    store = SchedulerStore(SchedulerStates(40))
    many = events([DECODE.format(s=0, tags=f" DP{dp} TP0", r=1, t=1, q=0) for dp in range(MAX_SCHEDULERS + 3)])
    rejected = store.apply(many, wall=1.0)
    # Ranks 0..255 fill the 256 slots; a DP rank of 256 or more cannot have one: an impossible rank.
    assert rejected == [(ev, "rank") for ev in many[MAX_SCHEDULERS:]]
    assert store.apply(events([RETRACT.format(s=1, tp=0, n=2)]), wall=2.0) == []


def test_the_scheduler_cap_still_holds_for_identities_that_are_not_ranks():
    store = SchedulerStore(SchedulerStates(40))
    batch = [RetractAbort(Origin(f"stage{i}")) for i in range(MAX_SCHEDULERS + 2)]
    assert store.apply(batch, wall=1.0) == [(ev, "schedulers") for ev in batch[MAX_SCHEDULERS:]]


def test_an_event_that_raises_is_rejected_and_the_rest_applied(monkeypatch):
    store = SchedulerStore(SchedulerStates(40))
    real = store.states.apply
    monkeypatch.setattr(store.states, "apply",
                        lambda ev, wall=None: (_ for _ in ()).throw(ValueError) if ev.new_token == 7 else real(ev, wall))
    batch = events([PREFILL.format(s=i, tags="", n=1, t=t, q=0) for i, t in enumerate((5, 7, 9))])
    assert store.apply(batch, wall=1.0) == [(batch[1], "error")]
    assert store.snapshot().schedulers[0].counter["prefill_computed_tokens"] == 14


def test_a_snapshot_is_a_copy_ordered_by_rank_with_the_effective_capacity():
    store = SchedulerStore(SchedulerStates(40))
    store.apply([Capacity(Origin("0"), 1000, max_running_requests=8)], wall=0.0)
    store.apply(events([DECODE.format(s=0, tags=f" DP{dp} TP0", r=dp + 1, t=10, q=0) for dp in (10, 2)]), wall=5.0)
    snap = store.snapshot()
    assert [s.identity for s in snap.schedulers] == [("", "0"), ("", "2"), ("", "10")]
    dp2 = snap.schedulers[1]
    assert dp2.capacity.max_total_num_tokens == 1000  # DP0's capacity line stands for every rank
    assert (dp2.latest["running_requests"], dp2.counter["decode_steps"], dp2.last_stats_wall) == (3, 40, 5.0)
    assert dp2.histogram["batch_size_decode"].cumulative[-1] == 1
    store.apply(events([DECODE.format(s=1, tags=" DP2 TP0", r=9, t=10, q=0)]), wall=6.0)
    assert (dp2.latest["running_requests"], dp2.counter["decode_steps"]) == (3, 40)  # unchanged copy
    assert store.snapshot().schedulers[1].latest["running_requests"] == 9
    only_capacity = snap.schedulers[0]  # DP0 printed nothing but its capacity line
    for name, hist in only_capacity.histogram.items():  # every bound at 0, not +Inf alone: rate() sees
        assert hist.bounds == HISTOGRAM_BOUNDS[name]     # the first observation
        assert hist.cumulative == (0,) * (len(HISTOGRAM_BOUNDS[name]) + 1)


def test_snapshots_and_applies_from_many_threads_never_see_half_a_batch():
    """Counters are applied a batch at a time under the lock: prefill batches and computed tokens of
    one scheduler move together (each batch here adds 2 batches and 10 tokens)."""
    store = SchedulerStore(SchedulerStates(40))
    batch = events([PREFILL.format(s=0, tags="", n=1, t=5, q=0)] * 2)
    stop = threading.Event()
    seen = []

    def reader():
        while not stop.is_set():
            for s in store.snapshot().schedulers:
                seen.append((s.counter["prefill_batches"], s.counter["prefill_computed_tokens"]))

    t = threading.Thread(target=reader)
    t.start()
    for _ in range(2000):
        store.apply(batch, wall=1.0)
    stop.set()
    t.join()
    assert seen and all(batches % 2 == 0 and tokens == 5 * batches for batches, tokens in seen)


def test_a_snapshot_reduces_replicas_outside_the_lock_to_what_the_state_computes():
    """Maxima over replicas and cumulative buckets, computed from raw copies, equal the state's own."""
    from exporter.scheduler.state import COUNTER_FIELDS, HISTOGRAM_FIELDS

    store = SchedulerStore(SchedulerStates(40))
    lines = [DECODE.format(s=i % 60, tags=f" DP{i % 3} TP{i % 4}", r=(i * 7) % 300, t=i, q=i % 9) for i in range(400)]
    lines += [PREFILL.format(s=i % 60, tags=f" DP{i % 3} TP{i % 2}", n=1 + i % 5, t=50 * i, q=i % 4) for i in range(300)]
    lines += [RETRACT.format(s=i, tp=i % 4, n=1 + i % 3) for i in range(20)]
    store.apply(events(lines), wall=5.0)
    snap = store.snapshot()
    for view in snap.schedulers:
        s = store.states.schedulers[view.identity]
        assert view.counter == {name: s.counter(name) for name in COUNTER_FIELDS}
        for name in HISTOGRAM_FIELDS:
            bounds, cumulative, total = s.histogram(name)
            h = view.histogram[name]
            assert (h.bounds, list(h.cumulative), h.sum) == (bounds, cumulative, total)


def test_every_apply_moves_the_generation_and_a_snapshot_carries_it():
    store = SchedulerStore(SchedulerStates(40))
    assert store.snapshot().generation == store.generation == 0
    store.apply(events([DECODE.format(s=1, tags=" DP0 TP0", r=1, t=1, q=0)]), wall=1.0)
    assert store.snapshot().generation == store.generation == 1
    from exporter.scheduler.runs import Run
    store.apply_run(Run(), wall=2.0)
    assert store.snapshot().generation == 2
