"""Reading recorded lines: every line through the sidecar's own ingest (:class:`~exporter.sources.log.ingest.Ingest`:
parser, stage attribution, scheduler store, line counts), plus the per-line samples that percentiles need
(:class:`Recorder`, the ingest's observer). Everything is read from the parser's events (the
``server_args`` settings, the ``KV Cache is allocated`` line, hybrid pools' ``#swa token`` and ``mamba
num``) and the prefix parse (:func:`~exporter.sources.log.prefix.line_time` of a line that is no event);
the report reads no line itself. The files are split into lines by the sidecar's splitter in :mod:`.files`.

An SGLang Omni log holds one scheduler per pipeline stage: the samples are kept per stage, and
:meth:`Recorder.stage_view` gives each stage's own recorder, so the report has one section per stage
and never merges two stages (``docs/sglang-omni.md``).
"""

from __future__ import annotations

import copy
import logging
from collections import Counter

from ..limits import DEFAULT_DECODE_LOG_INTERVAL, QUEUE_SAMPLE_MAX_GAP_SECONDS
from .samples import START_COUNTERS, DecodeRow, PrefillRow, ReplicaSamples, RetractionRow, StartMark
from .upstream import (
    KIND_OF,
    Capacity,
    DecodeBatch,
    Ingest,
    KvAllocation,
    Malformed,
    PrefillBatch,
    ReqTimeStats,
    RequestLog,
    RetractAbort,
    Retraction,
    SchedulerStates,
    SchedulerStore,
    ServerArgs,
    StageAttribution,
    line_time,
)

#: Event types of SGLang Omni's own lines that are no scheduler line of the report (pipeline facts).
_SCHEDULER_KINDS = frozenset(KIND_OF) - {t for t, k in KIND_OF.items() if k == "omni"}



def _share(x: float | None) -> float | None:
    """A usage ratio as the report keeps it: ``None`` above 1 (SGLang prints ``used / capacity``)."""
    return x if x is None or x <= 1.0 else None


class Recorder:
    """Feeds lines to the parser and a scheduler state, and keeps the samples reports need.

    Args:
        decode_log_interval: Decode steps per ``Decode batch`` line when the log has no
            ``server_args`` line (the log's value wins, as in the exporter).
        chunked_prefill_size: SGLang's ``--chunked-prefill-size`` when the log has neither the
            start-up capacity line nor ``server_args`` (as the main command's setting).
        stage_decode_log_intervals: SGLang Omni stage -> its decode steps per Decode line
            (``--stage-decode-log-intervals``), before ``decode_log_interval`` for that stage.
    """

    def __init__(self, decode_log_interval: int = DEFAULT_DECODE_LOG_INTERVAL,
                 chunked_prefill_size: int | None = None, stage_decode_log_intervals: dict[str, int] | None = None):
        self.states = SchedulerStates(decode_log_interval, clock=lambda: 0.0,
                                      chunked_prefill_size=chunked_prefill_size,
                                      stage_decode_log_intervals=stage_decode_log_intervals)
        # the sidecar's own ingest: the report reads, applies and counts every line as the sidecar does
        self.ingest = Ingest(SchedulerStore(self.states, assumed_interval_level=logging.DEBUG),
                             clock=lambda: 0.0, observer=self._observe)
        self.scheduler_lines = 0  # scheduler lines applied and recorded, in read order (DecodeRow.seq)
        # the report says it in its header: why the lines have no stage, in the sidecar's words
        self.attribution_reasons: list[str] = []
        self.ingest.attribution = StageAttribution(warn=self.attribution_reasons.append)
        # (stage, dp_rank, replica) -> samples; stage "" for plain SGLang
        self.all_samples: dict[tuple[str, str, str], ReplicaSamples] = {}
        self.samples: dict[tuple[str, str], ReplicaSamples] = {}  # of stage "" (a stage view's: its own)
        self.kv_alloc_by_stage: dict[str, tuple[int, float | None]] = {}  # SGLang Omni stages' KV Cache lines
        self.ceiling_proxy: int | None = None  # a stage view's CUDA-graph batch-size proxy
        self.server_args: dict[str, str] = {}
        self.starts: list[StartMark] = []
        self._stats_in_start = False  # a stats line since the latest start opened
        self.req_stats: list[ReqTimeStats] = []
        self.req_stats_negative = 0
        self.finish = RequestLog()  # SGLang's request records (--log-requests): the one reader of them
        self.kv_alloc: tuple[int, float | None] | None = None  # latest (#tokens, K+V GiB or None)
        self.kv_alloc_tokens: set[int] = set()  # every #tokens printed (several AR stages differ)
        self.kv_alloc_rejected = 0  # KV Cache is allocated lines with a damaged number
        self.usage_rejected = 0  # usage ratios above 1 on stats lines, not used as samples
        self.max_tp_tag = -1
        self.unestimated: Counter[tuple[str, str]] = Counter()  # per (dp, replica); replica-max later
        self.timestamped_lines = 0
        self.sched_first: float | None = None  # scheduler lines only
        self.sched_last: float | None = None
        self._dated: list[float | None] = [None, None]
        self._tod: list[float | None] = [None, None]
        self._tod_offset = 0.0
        self._tod_last: float | None = None

    # -- time ------------------------------------------------------------------------------------

    def _unwrap(self, t: float) -> float:
        """Seconds of the day of time-only stamps, unwrapped across midnight (in file order)."""
        if self._tod_last is not None and t + self._tod_offset < self._tod_last - 43200:
            self._tod_offset += 86400
        t += self._tod_offset
        self._tod_last = t
        return t

    def _note_time(self, t: float, tod: bool) -> float:
        """Count a time-stamped line and widen the span; returns ``t`` (unwrapped when time-only)."""
        self.timestamped_lines += 1
        if tod:
            t = self._unwrap(t)
        span = self._tod if tod else self._dated
        if span[0] is None:
            span[0] = span[1] = t
        elif t < span[0]:
            span[0] = t
        elif t > span[1]:
            span[1] = t
        return t

    @property
    def time_of_day_only(self) -> bool:
        """True when the only time stamps are time-only ones (``[HH:MM:SS``)."""
        return self._dated[0] is None and self._tod[0] is not None

    @property
    def first_time(self) -> float | None:
        """The earliest time stamp of any line (dated lines win over time-only ones)."""
        return (self._dated if self._dated[0] is not None else self._tod)[0]

    @property
    def last_time(self) -> float | None:
        """The latest time stamp of any line (dated lines win over time-only ones)."""
        return (self._dated if self._dated[0] is not None else self._tod)[1]

    def _event_time(self, origin) -> float | None:
        t = origin.log_time
        if t is None:
            return None
        t = self._note_time(t, origin.time_of_day_only)
        if self.sched_first is None:
            self.sched_first = self.sched_last = t
        elif t < self.sched_first:
            self.sched_first = t
        elif t > self.sched_last:
            self.sched_last = t
        return t

    # -- lines -----------------------------------------------------------------------------------

    def _replica(self, origin) -> ReplicaSamples:
        key = (origin.stage, origin.dp_rank, origin.replica)
        s = self.all_samples.get(key)
        if s is None:
            s = self.all_samples[key] = ReplicaSamples()
            if not origin.stage:
                self.samples[key[1:]] = s
            for tag in origin.replica.split():
                if tag.startswith("TP") and tag[2:].isascii() and tag[2:].isdigit() and len(tag) <= 8:
                    self.max_tp_tag = max(self.max_tp_tag, int(tag[2:]))
        return s

    def feed(self, lines: list[str]) -> None:
        """Read complete lines (without their terminators; the sidecar's splitter made them), in order.

        Every line goes through the sidecar's :class:`~exporter.sources.log.ingest.Ingest` (parser, stage
        attribution, scheduler store, line counts), one at a time so that each applied event is recorded
        with its own line (:meth:`_observe`); the lines of ``Finish`` request records
        (:class:`~exporter.sources.log.requestlog.RequestLog`) are also read for the request figures.
        """
        finish = self.finish.feed_line
        feed = self.ingest.feed
        for line in lines:
            finish(line)  # a request record's line is a line the sidecar counts too (ignored)
            feed([line])

    def _observe(self, lines: list[str], parsed: list, applied: list) -> None:
        """The sidecar's ingest read ``lines`` (one line, or none at the end of the input) and applied
        ``applied``: record each applied event with the samples the report needs."""
        line = lines[0] if lines else ""
        own = parsed[0] if parsed else None
        kind = type(own)
        if kind is KvAllocation and own.origin.task is None:  # plain SGLang's; an SGLang Omni stage's: _record
            self.kv_alloc = (own.tokens, own.size_bytes / 2**30 if own.size_bytes is not None else None)
            self.kv_alloc_tokens.add(own.tokens)
        elif kind is Malformed and own.kind == "kv_allocation":
            self.kv_alloc_rejected += 1
        if not applied or applied[-1] is not own:  # no event of its own applied: the line's time still counts
            stamp = line_time(line) if line else None
            if stamp:
                self._note_time(*stamp)
        for ev in applied:
            self._record(ev)

    def finish_attribution(self) -> None:
        """Decide SGLang Omni's held start-up lines (the end of the input)."""
        self.ingest.finish()

    @property
    def lines(self) -> Counter:
        """Lines per ``(kind, result)``, as the sidecar counts them (``sglang_exporter_log_lines_total``)."""
        return self.ingest.stats.lines

    def _record(self, ev) -> None:
        """Record one applied event with the samples the report needs (an SGLang Omni start-up event
        may come after later lines: the attribution holds it until its stage is known)."""
        kind = type(ev)
        origin = ev.origin
        if kind is KvAllocation and origin.stage:  # an SGLang Omni stage's KV pool: (#tokens, K+V GiB)
            self.kv_alloc_by_stage[origin.stage] = (
                ev.tokens, ev.size_bytes / 2**30 if ev.size_bytes is not None else None)
        if kind not in _SCHEDULER_KINDS:  # SGLang Omni's pipeline lines
            if origin.log_time is not None:
                self._note_time(origin.log_time, origin.time_of_day_only)
            return
        self.scheduler_lines += 1
        t = self._event_time(origin)
        if not origin.stage:
            self._note_start(ev, kind, t)
        if kind is DecodeBatch:
            self._decode(ev, t)
        elif kind is PrefillBatch:
            kv = _share(ev.kv.max_device_ratio)
            if kv is None and ev.kv.max_device_ratio is not None:
                self.usage_rejected += 1
            samples = self._replica(origin)
            admitted = samples.counted_since(self._counters(origin), "admitted_requests")
            samples.prefill.append(PrefillRow(t, ev.new_seq, ev.new_token, ev.cached_token, ev.queue_req, kv,
                                              ev.running_req, len(samples.decode), self.scheduler_lines,
                                              int(admitted)))
            if ev.running_req == 0:
                samples.idle = True
        elif kind is Retraction:
            sched = self.states.schedulers.get((origin.stage, origin.dp_rank))
            if ev.new_tokens_gained is None and (sched is None or sched.mean_tokens_per_running_req is None):
                self.unestimated[(origin.stage, origin.dp_rank, origin.replica)] += 1
            self._replica(origin).retractions.append(RetractionRow(t, ev.retracted_reqs, ev.new_tokens_gained))
        elif kind is ServerArgs:
            self.server_args = ev.settings
        elif kind is ReqTimeStats:
            if ev.queue_duration < 0:
                self.req_stats_negative += 1
            self.req_stats.append(ev)
        elif kind in (Capacity, RetractAbort):
            self._replica(origin)

    def _counters(self, origin):
        """The scheduler state's counters of the replica that printed an applied line."""
        return self.states.schedulers[(origin.stage, origin.dp_rank)].replicas[origin.replica]

    def _decode(self, ev: DecodeBatch, t: float | None) -> None:
        origin = ev.origin
        kvu = ev.kv
        pools = kvu.pools
        if len(pools) == 1 and "kv" in pools:  # the common line: one plain pool
            main = kv = pools["kv"]
            swa_ratio = mamba_ratio = swa_used = mamba_used = None
        else:
            main = next((pools[p] for p in ("kv", "full", "gpu") if p in pools), None)
            kv = kvu.max_device_ratio
            swa_ratio, mamba_ratio = pools.get("swa"), pools.get("mamba")
            mamba_used = kvu.mamba_num if mamba_ratio is not None else None
            swa_used = kvu.swa_tokens if swa_ratio is not None else None
            for name in ("swa", "mamba", "full", "gpu"):  # a ratio above 1 is damage: not a sample
                if pools.get(name, 0.0) > 1.0:
                    self.usage_rejected += 1
            swa_ratio, mamba_ratio = _share(swa_ratio), _share(mamba_ratio)
        if main is not None and main > 1.0:
            main = None
            self.usage_rejected += 1
        kv = _share(kv)
        prealloc = ev.preallocated_usage
        if prealloc is not None and prealloc > 1.0:
            prealloc = None
            self.usage_rejected += 1
        samples = self._replica(origin)
        prev_t = samples.last_decode_t
        after_idle = (prev_t is False or samples.idle
                      or (t is not None and prev_t is not None and t - prev_t > QUEUE_SAMPLE_MAX_GAP_SECONDS))
        samples.idle = False
        samples.last_decode_t = t
        pd = ev.pd_queues
        samples.decode.append(DecodeRow(
            t, ev.running_req, ev.queue_req, kv, kvu.used_tokens, main, ev.gen_throughput, ev.accept_len,
            prealloc, swa_used, swa_ratio, mamba_used, mamba_ratio, after_idle,
            ev.preallocated_usage is not None or (bool(pd) and ("prealloc" in pd or "transfer" in pd)),
            self.scheduler_lines, int(samples.counted_since(self._counters(origin), "decode_steps"))))

    def _note_start(self, ev, kind: type, t: float | None) -> None:
        """Open a start at its start-up line (:class:`StartMark`), or note a stats line in the current one."""
        if kind is ServerArgs or (kind is Capacity and (self._stats_in_start or not self.starts)):
            counters = {key: {name: s.counter(name) for name in START_COUNTERS}
                        for key, s in self.states.schedulers.items()}
            self.starts.append(StartMark(self.scheduler_lines - 1, t, "server_args" if kind is ServerArgs else "capacity",
                                         counters=counters))
            self._stats_in_start = False
        elif kind in (DecodeBatch, PrefillBatch, Retraction):
            if not self.starts:
                self.starts.append(StartMark(0, t, None))
            self._stats_in_start = True
        if self.starts:
            start = self.starts[-1]
            if kind is ServerArgs:
                start.server_args = ev
            elif kind is Capacity and start.capacity is None:
                start.capacity = ev

    @property
    def unestimated_retractions(self) -> int:
        """Retractions whose recompute could not be sized, counted once over replicas."""
        best: dict[tuple[str, str], int] = {}
        for (stage, dp, _), n in self.unestimated.items():
            best[(stage, dp)] = max(best.get((stage, dp), 0), n)
        return sum(best.values())

    @property
    def stages(self) -> list[str]:
        """SGLang Omni stages with a scheduler in the log, sorted (``[]`` for plain SGLang)."""
        return sorted({stage for stage, _ in self.states.schedulers} - {""})

    def stage_view(self, stage: str) -> Recorder:
        """A recorder of one stage's schedulers only (``""``: plain SGLang's), for the sections.

        The line counts, the time span, ``server_args`` and the request records stay the whole run's;
        samples, scheduler states, capacities and counters are the stage's own, and a stage's KV
        capacity comes from its own ``KV Cache is allocated`` line.
        """
        view = copy.copy(self)
        view.samples = {(dp, r): s for (st, dp, r), s in self.all_samples.items() if st == stage}
        view.unestimated = Counter({k: n for k, n in self.unestimated.items() if k[0] == stage})
        view.req_stats = [r for r in self.req_stats if r.origin.stage == stage]
        states = copy.copy(self.states)
        states.schedulers = {k: s for k, s in self.states.schedulers.items() if k[0] == stage}
        states.capacities = {k: c for k, c in self.states.capacities.items() if k == stage}
        if stage in self.states.stage_decode_log_intervals:  # the section's interval is the stage's own
            states.configured_decode_log_interval = self.states.stage_decode_log_intervals[stage]
            states.configured_decode_log_interval_source = "--stage-decode-log-intervals"
        view.states = states
        if stage:
            alloc = self.kv_alloc_by_stage.get(stage)
            view.kv_alloc, view.kv_alloc_tokens = alloc, ({alloc[0]} if alloc else set())
            view.ceiling_proxy = self.states.pipeline.ceiling_proxy.get(stage)
        return view

    def finish_input(self) -> None:
        """Flush a Finish record still being joined, and SGLang Omni's held start-up lines, at the end
        of the input."""
        self.finish.finish_input()
        self.finish_attribution()
