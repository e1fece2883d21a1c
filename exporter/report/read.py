"""Reading recorded logs: every line through the exporter's parser and scheduler state, plus the
per-line samples that percentiles need (:class:`Recorder`, :func:`read_logs`) and the line data the
report reads itself (:mod:`exporter.report.linedata`).
"""

from __future__ import annotations

import errno
import gzip
import os
import sys
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from ..status import PROG as COMMAND
from ..limits import DEFAULT_DECODE_LOG_INTERVAL, DEFAULT_MAX_LINE_BYTES, QUEUE_SAMPLE_MAX_GAP_SECONDS
from .linedata import MAMBA_NUM, SWA_TOKENS, FinishRecords, kv_allocation, line_time, split_server_args
from .upstream import (
    KIND_OF,
    Capacity,
    DecodeBatch,
    Malformed,
    PrefillBatch,
    ReqTimeStats,
    RetractAbort,
    Retraction,
    SchedulerStates,
    ServerArgs,
    parse_line,
)

PROG = f"{COMMAND} report"
#: Lines longer than this are skipped and counted (the tailer's default ``--log.max-line-bytes``).
MAX_LINE_BYTES = DEFAULT_MAX_LINE_BYTES
#: Inputs larger than this show progress on a terminal.
PROGRESS_MIN_BYTES = 64 << 20


class DecodeRow(NamedTuple):
    """One ``Decode batch`` line as the report uses it (``t``: seconds, midnight-unwrapped, or None).

    ``kv_ratio`` is the largest device-pool usage; ``pool_ratio`` the main pool's (``token usage``,
    ``full token usage`` or ``gpu token usage``) and ``used_tokens`` its ``#token``. ``after_idle``:
    the interval that this line closes may hold time without decoding (it is the replica's first
    Decode line, a Prefill line with ``#running-req: 0`` came between, or the gap to the previous
    Decode line exceeds :data:`~exporter.limits.QUEUE_SAMPLE_MAX_GAP_SECONDS`).
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


class PrefillRow(NamedTuple):
    """One ``Prefill batch`` line as the report uses it."""

    t: float | None
    new_seq: int
    new_token: int
    cached_token: int | None
    queue: int | None
    kv_ratio: float | None
    running: int | None


class RetractionRow(NamedTuple):
    t: float | None
    requests: int
    new_tokens_gained: int | None


@dataclass(slots=True)
class ReplicaSamples:
    """Per-line samples of one replica (``Origin.replica``) of one scheduler, in log order.

    ``idle``: a Prefill line with ``#running-req: 0`` came after the latest Decode line;
    ``last_decode_t``: that line's time (``False`` before the first Decode line).
    """

    decode: list[DecodeRow] = field(default_factory=list)
    prefill: list[PrefillRow] = field(default_factory=list)
    retractions: list[RetractionRow] = field(default_factory=list)
    idle: bool = False
    last_decode_t: float | None | bool = False


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
    """

    def __init__(self, decode_log_interval: int = DEFAULT_DECODE_LOG_INTERVAL,
                 chunked_prefill_size: int | None = None):
        self.states = SchedulerStates(decode_log_interval, clock=lambda: 0.0,
                                      chunked_prefill_size=chunked_prefill_size)
        self.lines: Counter[tuple[str, str]] = Counter()
        self.scheduler_lines = 0  # lines the parser read as a scheduler line (all kinds)
        self.samples: dict[tuple[str, str], ReplicaSamples] = {}
        self.server_args: dict[str, str] = {}
        self.server_args_count = 0
        self.req_stats: list[ReqTimeStats] = []
        self.req_stats_negative = 0
        self.finish = FinishRecords()
        self.kv_alloc: tuple[int, float] | None = None  # latest (#tokens, K+V GiB)
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
        key = (origin.dp_rank, origin.replica)
        s = self.samples.get(key)
        if s is None:
            s = self.samples[key] = ReplicaSamples()
            for tag in origin.replica.split():
                if tag.startswith("TP") and tag[2:].isascii() and tag[2:].isdigit() and len(tag) <= 8:
                    self.max_tp_tag = max(self.max_tp_tag, int(tag[2:]))
        return s

    def _kv_alloc_line(self, line: str) -> None:
        alloc = kv_allocation(line)
        if alloc is False:
            self.kv_alloc_rejected += 1
        elif alloc is not None:
            self.kv_alloc = alloc
            self.kv_alloc_tokens.add(alloc[0])

    def feed_line(self, line: str) -> None:
        """Read one line (without its terminator)."""
        if self.finish.feed(line):
            stamp = line_time(line)
            if stamp:
                self._note_time(*stamp)
            return
        if "KV Cache is allocated" in line:
            self._kv_alloc_line(line)
        ev = parse_line(line)
        kind = type(ev)
        if ev is None or kind is Malformed or kind not in KIND_OF:
            if ev is None or kind is not Malformed:
                self.lines[("other", "ignored")] += 1
            else:
                self.lines[(ev.kind, "malformed")] += 1
            stamp = line_time(line)
            if stamp:
                self._note_time(*stamp)
            return
        self.lines[(KIND_OF[kind], "parsed")] += 1
        self.scheduler_lines += 1
        origin = ev.origin
        t = self._event_time(origin)
        if kind is DecodeBatch:
            self._decode(ev, line, t)
        elif kind is PrefillBatch:
            kv = _share(ev.kv.max_device_ratio)
            if kv is None and ev.kv.max_device_ratio is not None:
                self.usage_rejected += 1
            samples = self._replica(origin)
            samples.prefill.append(PrefillRow(t, ev.new_seq, ev.new_token, ev.cached_token, ev.queue_req, kv,
                                              ev.running_req))
            if ev.running_req == 0:
                samples.idle = True
        elif kind is Retraction:
            sched = self.states.schedulers.get(origin.dp_rank)
            if ev.new_tokens_gained is None and (sched is None or sched.mean_tokens_per_running_req is None):
                self.unestimated[(origin.dp_rank, origin.replica)] += 1
            self._replica(origin).retractions.append(RetractionRow(t, ev.retracted_reqs, ev.new_tokens_gained))
        elif kind is ServerArgs:
            self.server_args = split_server_args(line)
            self.server_args_count += 1
        elif kind is ReqTimeStats:
            if ev.queue_duration < 0:
                self.req_stats_negative += 1
            self.req_stats.append(ev)
        elif kind in (Capacity, RetractAbort):
            self._replica(origin)
        self.states.apply(ev, wall=0.0)

    def _decode(self, ev: DecodeBatch, line: str, t: float | None) -> None:
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
            m = MAMBA_NUM.search(line) if mamba_ratio is not None else None
            mamba_used = int(m.group(1)) if m else None
            m = SWA_TOKENS.search(line) if swa_ratio is not None else None
            swa_used = int(m.group(1)) if m else None
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
            ev.preallocated_usage is not None or (bool(pd) and ("prealloc" in pd or "transfer" in pd))))

    @property
    def unestimated_retractions(self) -> int:
        """Retractions whose recompute could not be sized, counted once over replicas."""
        best: dict[str, int] = {}
        for (dp, _), n in self.unestimated.items():
            best[dp] = max(best.get(dp, 0), n)
        return sum(best.values())

    def finish_input(self) -> None:
        """Flush a Finish record still being joined at the end of the input."""
        self.finish.flush()


@dataclass
class InputFile:
    """One input's path, bytes and lines read, and how many of its lines were scheduler lines."""

    path: str
    bytes: int = 0
    lines: int = 0
    oversized_lines: int = 0
    scheduler_lines: int = 0


def read_logs(paths: list[str], recorder: Recorder, progress: bool | None = None) -> list[InputFile]:
    """Feed every line of the files, in order, into the recorder.

    Several files are one run: rotated segments in order, or the logs of the nodes of one
    multi-node group (replica tags keep them apart). ``.gz`` files are decompressed. Bytes are split
    on ``\\n`` only (a tqdm ``\\r`` stays inside its line), decoded as UTF-8 with replacement.

    Raises:
        OSError: a file cannot be opened or read (a damaged ``.gz`` included), naming the file.
    """
    total = sum(os.path.getsize(p) for p in paths)
    if progress is None:
        progress = total >= PROGRESS_MIN_BYTES and sys.stderr.isatty()
    done = 0
    next_report = [0.0]  # shared with _read_one across files
    started = time.monotonic()
    out = []
    for path in paths:
        info = InputFile(path)
        before = recorder.scheduler_lines
        try:
            _read_one(path, info, recorder, progress, total, done, started, next_report)
        except OSError as exc:  # gzip.BadGzipFile included; name the file when the error does not
            if exc.filename is None:
                raise OSError(exc.errno or errno.EIO, exc.strerror or str(exc) or type(exc).__name__,
                              path) from exc
            raise
        except (EOFError, zlib.error) as exc:  # a truncated or corrupt .gz
            raise OSError(errno.EIO, f"damaged gzip data ({exc})", path) from exc
        recorder.finish_input()
        info.scheduler_lines = recorder.scheduler_lines - before
        done += os.path.getsize(path) if not path.endswith(".gz") else info.bytes
        out.append(info)
    if progress:
        print(file=sys.stderr)
    return out


def _read_one(path: str, info: InputFile, recorder: Recorder, progress: bool, total: int, done: int,
              started: float, next_report: list[float]) -> None:
    """Feed one file's lines; a line over :data:`MAX_LINE_BYTES` is skipped without being held whole."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                break
            info.bytes += len(raw)
            info.lines += 1
            if len(raw) > MAX_LINE_BYTES:
                info.oversized_lines += 1
                while not raw.endswith(b"\n"):
                    raw = f.readline(MAX_LINE_BYTES + 1)
                    if not raw:
                        break
                    info.bytes += len(raw)
                continue
            recorder.feed_line(raw.decode("utf-8", "replace").rstrip("\r\n"))
            if progress and (done + info.bytes) >= next_report[0]:
                pct = 100.0 * (done + info.bytes) / total if total else 100.0
                print(f"\r{PROG}: {pct:5.1f}% of {total / 1e6:.0f} MB, {time.monotonic() - started:.0f} s",
                      end="", file=sys.stderr, flush=True)
                next_report[0] += max(total / 100, 1)
