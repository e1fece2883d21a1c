"""A run's queue integral (exporter/scheduler/runs.py) is the one the state adds line by line.

Both go through :func:`exporter.scheduler.rules.integrate_queue` and :func:`~exporter.scheduler.rules.queue_step`;
what differs is only where the steps between a run's own lines are computed.

:class:`ReplicaRun` computes the steps between its own lines when it is finished (on a worker
process, for large inputs) and :func:`apply_run` adds them to the replica's integral; the reference is
``SchedulerStates._integrate_queue`` applied to the same lines one by one, from the same state. The
float must be the same bit for bit (the sum is served as a counter, and the bulk path's /metrics
must be byte-identical to the per-line path's), and so must the sample the run leaves behind.
"""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from exporter.events import Origin
from exporter.scheduler import rules
from exporter.scheduler.runs import ReplicaRun, integrate_run_queue
from exporter.scheduler.state import QUEUE_SAMPLE_MAX_GAP_SECONDS, ReplicaCounters, queue_clock

CLOCKS = ("log", "tod", "wall")
#: Times where equal, capped and midnight-wrapping steps start.
NEAR = [0.0, 0.1, 59.5, 43199.0, 43200.0, 86339.0, 86399.5, 86400.0, 1_789_000_000.0, 1_789_000_000.1]
TIMES = st.one_of(
    st.sampled_from(NEAR),
    st.floats(0, 86400, allow_nan=False),
    st.floats(allow_nan=False, allow_infinity=False),  # huge values: gaps that overflow to inf
)
QUEUES = st.one_of(st.integers(0, 300), st.integers(0, 2**63 - 1))
STATE = st.tuples(
    st.one_of(st.none(), QUEUES),                              # last_queue
    st.one_of(st.none(), TIMES),                               # last_queue_time
    st.sampled_from(("",) + CLOCKS),                           # last_queue_clock
    st.one_of(st.sampled_from([0.0, 1e-300, 12345.678]),       # queue_request_seconds
              st.floats(0, 1e300, allow_nan=False)),
)


@st.composite
def lines_of_a_replica(draw) -> list[tuple[int, str, float]]:
    """``(#queue-req, clock, time)`` per line, as a log moves: mostly one clock, times that stay,
    advance by a fraction of a second or past the cap, go back, jump anywhere or wrap at midnight."""
    lines = []
    clock = draw(st.sampled_from(CLOCKS))
    t = draw(TIMES)
    for _ in range(draw(st.integers(0, 60))):
        if draw(st.integers(0, 5)) == 0:
            clock = draw(st.sampled_from(CLOCKS))
        move = draw(st.sampled_from(("stay", "advance", "advance", "back", "jump", "wrap")))
        if move == "advance":
            t += draw(st.floats(0, 90, allow_nan=False))
        elif move == "back":
            t -= draw(st.floats(0, 90, allow_nan=False))
        elif move == "jump":
            t = draw(TIMES)
        elif move == "wrap":  # past midnight on a time-only prefix; a large step back on the others
            t = t - 86400 + draw(st.floats(0, 90, allow_nan=False))
        if abs(t) > 1e308:  # stay finite, as a parsed time is
            t = draw(TIMES)
        lines.append((draw(QUEUES), clock, t))
    return lines


def line_by_line(state: tuple, lines: list[tuple[int, str, float]], wall: float) -> ReplicaCounters:
    """The reference: each line through :func:`rules.integrate_queue` alone, as the per-line path does."""
    r = counters(state)
    for q, clock, t in lines:
        origin = Origin(log_time=None if clock == "wall" else t, time_of_day_only=clock == "tod")
        at = queue_clock(origin, wall)
        rules.integrate_queue(r, at, (), at, q)
    return r


def as_run(state: tuple, lines: list[tuple[int, str, float]], wall: float) -> ReplicaCounters:
    """The bulk path: the lines as the columns the scan builds, finished, then applied."""
    rr = ReplicaRun(Origin())
    for q, clock, t in lines:
        rr.queue.append(q)
        rr.queue_time.append(None if clock == "wall" else t)
        rr.queue_clock.append(clock)
    rr.finish({})  # no histogram column is filled: no bucket bounds needed
    r = counters(state)
    integrate_run_queue(r, rr, wall)
    return r


def counters(state: tuple) -> ReplicaCounters:
    r = ReplicaCounters()
    r.last_queue, r.last_queue_time, r.last_queue_clock, r.queue_request_seconds = state
    return r


def outcome(r: ReplicaCounters) -> tuple:
    return (repr(r.queue_request_seconds), r.last_queue, repr(r.last_queue_time), r.last_queue_clock)


@settings(max_examples=600, deadline=None)
@given(state=STATE, lines=lines_of_a_replica(), wall=TIMES)
@example(state=(5, 86390.0, "tod", 0.0), lines=[(7, "tod", 10.0), (3, "tod", 30.0)], wall=1.0)  # wrap
@example(state=(5, 100.0, "wall", 0.0), lines=[(7, "wall", 0.0), (3, "wall", 0.0)], wall=130.0)
@example(state=(None, None, "", 0.0), lines=[(2, "log", 1.0), (4, "tod", 3.0), (9, "log", 500.0)], wall=0.0)
def test_run_integrates_the_queue_as_the_state_does_line_by_line(state, lines, wall):
    ref, got = line_by_line(state, lines, wall), as_run(state, lines, wall)
    assert got.queue_request_seconds == ref.queue_request_seconds
    assert outcome(got) == outcome(ref)


def test_the_cases_the_property_relies_on_add_what_they_should():
    """The hand-checked values behind the examples above: a time-only prefix that wraps at midnight
    counts the 20 s across it, the wall clock counts from the previous block's read time (capped),
    and a change of clock adds nothing."""
    cap = QUEUE_SAMPLE_MAX_GAP_SECONDS
    assert as_run((5, 86390.0, "tod", 0.0), [(7, "tod", 10.0), (3, "tod", 30.0)], 1.0).queue_request_seconds \
        == 5 * 20.0 + 7 * 20.0
    assert as_run((5, 100.0, "wall", 0.0), [(7, "wall", 0.0), (3, "wall", 0.0)], 130.0).queue_request_seconds \
        == 5 * 30.0
    got = as_run((None, None, "", 0.0), [(2, "log", 1.0), (4, "tod", 3.0), (9, "log", 500.0), (1, "log", 600.0)], 0.0)
    assert got.queue_request_seconds == 9 * min(100.0, cap)
    assert (got.last_queue, got.last_queue_time, got.last_queue_clock) == (1, 600.0, "log")
