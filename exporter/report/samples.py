"""The report's per-line samples: one row per Prefill/Decode/retraction line of a replica, and one mark
per server start (:class:`StartMark`). The :class:`~.read.Recorder` fills them from the events the
sidecar's ingest applied; :mod:`.basis` and the sections read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class DecodeRow(NamedTuple):
    """One ``Decode batch`` line as the report uses it (``t``: seconds, midnight-unwrapped, or None).

    ``kv_ratio`` is the largest device-pool usage; ``pool_ratio`` the main pool's (``token usage``,
    ``full token usage`` or ``gpu token usage``) and ``used_tokens`` its ``#token``. ``after_idle``:
    the interval that this line closes may hold time without decoding (it is the replica's first
    Decode line, a Prefill line with ``#running-req: 0`` came between, or the gap to the previous
    Decode line exceeds :data:`~exporter.limits.QUEUE_SAMPLE_MAX_GAP_SECONDS`). ``steps``: the decode
    steps the scheduler state counted for this line (the interval in effect when it was applied:
    ``decode_log_interval`` of the latest ``server_args``, else the setting).
    """

    t: float | None
    running: int
    queue: int | None
    kv_ratio: float | None
    used_tokens: int | None
    pool_ratio: float | None
    gen_throughput: float | None
    accept_len: float | None
    prealloc_ratio: float | None
    swa_used: int | None
    swa_ratio: float | None
    mamba_used: int | None
    mamba_ratio: float | None
    after_idle: bool
    pd_decode: bool
    seq: int = 0  # the scheduler line's number in read order (orders the ranks' lines of one second)
    steps: int = 0


class PrefillRow(NamedTuple):
    """One ``Prefill batch`` line as the report uses it (``decode_lines``: the replica's Decode lines
    read before it; ``admitted``: the requests the scheduler state counted as admitted by this line,
    ``#new-seq`` less a continuing chunk, :func:`~exporter.scheduler.rules.admissions`)."""

    t: float | None
    new_seq: int
    new_token: int
    cached_token: int | None
    queue: int | None
    kv_ratio: float | None
    running: int | None
    decode_lines: int = 0
    seq: int = 0  # as DecodeRow.seq
    admitted: int = 0


@dataclass(slots=True)
class StartMark:
    """One server start in the log (a log is a sequence of starts, each with its own settings).

    A start opens at a plain SGLang ``server_args`` line, or at a start-up capacity line when no
    ``server_args`` line opened one since the last stats line (older logs); stats lines before any
    start-up line make an implicit first start (``opened_by`` ``None``: the log began mid-run).

    Attributes:
        seq: :attr:`Recorder.scheduler_lines` when it opened: its stats lines have a higher ``seq``.
        t: Its first line's time (seconds, as the rows' ``t``), or None.
        opened_by: ``server_args``, ``capacity`` or ``None``.
        server_args: Its ``ServerArgs`` event, if it printed one.
        capacity: Its first start-up capacity line (``Capacity``), if it printed one.
        counters: Per scheduler key, the state's counters (replica-max) when it opened: a start's own
            counts are the next start's values minus its own (the state counted them, once).
    """

    seq: int
    t: float | None
    opened_by: str | None
    server_args: object | None = None
    capacity: object | None = None
    counters: dict = field(default_factory=dict)


#: Counters a start reports as its own (the state's, differenced at the starts' bounds).
START_COUNTERS = ("prefill_batches", "decode_lines", "decode_steps", "retractions", "retracted_requests")


class RetractionRow(NamedTuple):
    t: float | None
    requests: int
    new_tokens_gained: int | None


@dataclass(slots=True)
class ReplicaSamples:
    """Per-line samples of one replica (``Origin.replica``) of one scheduler, in log order.

    ``idle``: a Prefill line with ``#running-req: 0`` came after the latest Decode line;
    ``last_decode_t``: that line's time (``False`` before the first Decode line); ``counted``: the
    state's counters of this replica as of its latest row (a row's own figure is the difference).
    """

    decode: list[DecodeRow] = field(default_factory=list)
    prefill: list[PrefillRow] = field(default_factory=list)
    retractions: list[RetractionRow] = field(default_factory=list)
    idle: bool = False
    last_decode_t: float | None | bool = False
    counted: dict[str, float] = field(default_factory=dict)

    def counted_since(self, counters, name: str) -> float:
        """What the state's counter ``name`` of this replica (``counters``: its
        :class:`~exporter.scheduler.state.ReplicaCounters`) gained since this replica's previous row."""
        now = getattr(counters, name)
        gained = now - self.counted.get(name, 0)
        self.counted[name] = now
        return gained
