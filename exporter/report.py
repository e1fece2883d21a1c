"""``sglang-exporter report``: the performance-validation checklist answered from recorded logs.

The method (``../shared/notes/method.md``) ends in a decision: which batch-size ceiling, which
scenario, is the throughput real. This module reads recorded SGLang logs through the same
:func:`exporter.parser.parse_line` and :class:`exporter.state.SchedulerStates` as the live exporter
(so counters follow the same replica-max rule), keeps the per-line samples that percentiles need in
:class:`Recorder`, and turns both into one plain ``dict`` (:func:`analyse`) with stable keys
(:data:`SCHEMA`). :mod:`exporter.report_render` prints it as text, JSON or HTML.

Extra line data kept here, beside the parser (the parser's events do not carry it):

* the whole ``server_args=ServerArgs(...)`` dump as ``{name: repr}`` (:func:`split_server_args`),
  read only from lines that the parser already recognised as :class:`~exporter.events.ServerArgs`;
* ``Finish: obj=... out={'meta_info': {...}}`` request records (``--log-requests``; the JSON form
  ``"event": "request.finished"`` too), which the parser ignores, for ``e2e_latency`` and request
  lengths (:class:`FinishRecords`);
* ``KV Cache is allocated. #tokens: N, K size: X GB, V size: Y GB`` for the model-config cross-check.

Percentiles are nearest-rank: the p-th percentile of n sorted samples is sample number
``ceil(p/100 * n)`` (1-based), always a value that was observed.
"""

from __future__ import annotations

import argparse
import errno
import gzip
import json
import math
import os
import re
import sys
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone

from .events import KINDS, Capacity, DecodeBatch, PrefillBatch, ReqTimeStats, RetractAbort, Retraction, ServerArgs
from .parser import Malformed, parse_line
from .pipeline import KIND_OF
from .limits import (
    DECODE_LOG_INTERVAL_MAX,
    DECODE_LOG_INTERVAL_MIN,
    DEFAULT_DECODE_LOG_INTERVAL,
    DEFAULT_MAX_LINE_BYTES,
    QUEUE_SAMPLE_MAX_GAP_SECONDS,
    in_value_range,
)
from .state import SchedulerStates
from .status import ExitStatus

PROG = "sglang-exporter report"

#: Version tag of the JSON document; bumped only when a key is renamed or removed.
SCHEMA = "sglang-exporter-report/1"
BASELINE_SCHEMA = "sglang-exporter-report-baseline/1"

#: The method's rule: more than this share of batches retracted means the ceiling is too high.
RETRACTION_RULE = 0.05
#: The method's safety factor on the theoretical KV capacity in requests.
SAFETY_FACTOR = 0.7
#: Offline work: ceiling at 60-70% of the requests the KV pool holds.
OFFLINE_RANGE = (0.6, 0.7)
#: Lines longer than this are skipped (the tailer's default ``--log.max-line-bytes``).
MAX_LINE_BYTES = DEFAULT_MAX_LINE_BYTES
#: Inputs larger than this show progress on a terminal.
PROGRESS_MIN_BYTES = 64 << 20
#: Bounds of the numeric options (``--decode-log-interval`` as the main command's setting).
DECODE_LOG_INTERVAL_RANGE = (DECODE_LOG_INTERVAL_MIN, DECODE_LOG_INTERVAL_MAX)
WINDOW_RANGE = (0.001, 1e9)
KV_BYTES_RANGE = (0.0, 64.0)  # exclusive low: fp4 is 0.5, float64 8


def _value(text: str) -> float | None:
    """``text`` as a number the parser accepts too (:func:`~exporter.limits.in_value_range`), else ``None`` (never raises)."""
    if len(text) > 40:  # also keeps int()/float() away from huge digit strings
        return None
    try:
        x = float(text)
    except ValueError:
        return None
    return x if in_value_range(x) else None


def display_path(path: str) -> str:
    """``path`` (or any command-line text) as valid Unicode: bytes that are not UTF-8 as ``\\xNN``.

    Python decodes such bytes of file names and arguments to lone surrogates (``surrogateescape``);
    a lone surrogate is not valid UTF-8, so strict JSON parsers and UTF-8 writers reject it.
    """
    try:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that no undecodable byte produced
        return path.encode("utf-8", "backslashreplace").decode("utf-8")


# -- small numeric helpers ------------------------------------------------------------------------

def percentile(sorted_values: list[float], p: float) -> float | None:
    """Nearest-rank percentile of already sorted values; ``None`` for no values."""
    n = len(sorted_values)
    if n == 0:
        return None
    rank = max(1, math.ceil(round(p * n / 100.0, 9)))  # round: 99.9 * 1000 / 100 is 999.0000000000001
    return sorted_values[min(rank, n) - 1]


def distribution(values: list[float], points: tuple[float, ...] = (50, 90, 99)) -> dict:
    """``{"count", "mean", "p50", ..., "max"}`` of the values (nearest-rank; ``None`` when empty).

    Keys for 99.9 are written ``p99_9``.
    """
    s = sorted(values)
    out: dict = {"count": len(s), "mean": (sum(s) / len(s)) if s else None}
    for p in points:
        out["p" + (f"{p:g}".replace(".", "_"))] = percentile(s, p)
    out["max"] = s[-1] if s else None
    return out


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den == 0:
        return None
    return num / den


def _iso(t: float | None, tod: bool) -> str | None:
    if t is None:
        return None
    if tod:
        day, rest = divmod(t, 86400)
        h, rest = divmod(rest, 3600)
        m, s = divmod(rest, 60)
        return f"{'+%dd ' % day if day else ''}{int(h):02d}:{int(m):02d}:{s:06.3f}"
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


# -- extra line data ------------------------------------------------------------------------------

def split_server_args(line: str) -> dict[str, str]:
    """The ``name=value`` pairs of a ``server_args=ServerArgs(...)`` dump, values as printed (repr).

    Splits on top-level ``", "`` only (commas inside quotes, brackets and braces are kept), so
    ``json_model_override_args='{"a": 1, "b": 2}'`` stays one value. Returns ``{}`` when the line has
    no ``ServerArgs(`` body. Never raises.
    """
    i = line.find("ServerArgs(")
    if i < 0:
        return {}
    body = line[i + 11:]
    parts: list[str] = []
    depth, quote, start, k = 0, "", 0, 0
    n = len(body)
    while k < n:
        c = body[k]
        if quote:
            if c == "\\":
                k += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:  # the closing parenthesis of ServerArgs(
                break
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(body[start:k])
            start = k + 1
        k += 1
    parts.append(body[start:k])
    out: dict[str, str] = {}
    for part in parts:
        name, eq, value = part.strip().partition("=")
        if eq and name.isidentifier():
            out[name] = value
    return out


_FINISH_NUM = {
    name: re.compile(rf"['\"]{name}['\"]:\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")
    for name in ("e2e_latency", "queue_time", "prompt_tokens", "completion_tokens", "cached_tokens")
}
_KV_ALLOC = re.compile(r"KV Cache is allocated\. #tokens: (\S+), (?:K size: (\S+) GB, V size: (\S+) GB"
                       r"|KV size: (\S+) GB)")
_LINE_START = re.compile(r"^\s*(?:\(\w+ pid=\d+\) )?\[\d")


@dataclass
class FinishRecords:
    """Per-request values from ``Finish`` records (``--log-requests``), in seconds and tokens.

    A record that the poster or a terminal hard-wrapped continues on following lines that do not
    start a new log record; up to 64 of those are joined before the values are read.
    """

    e2e_latency: list[float] = field(default_factory=list)
    queue_time: list[float] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)
    completion_tokens: list[int] = field(default_factory=list)
    #: Values that were negative, not finite or not below :data:`~exporter.limits.MAX_VALUE` (damage), ignored.
    rejected: int = 0
    _pending: list[str] = field(default_factory=list)

    @staticmethod
    def starts(line: str) -> bool:
        return "Finish: obj=" in line or '"request.finished"' in line

    def feed(self, line: str) -> bool:
        """Offer a line; True when it was consumed as part of a Finish record."""
        if self._pending:
            if not _LINE_START.match(line) and line.strip() and len(self._pending) < 64:
                self._pending.append(line)
                return True
            self.flush()
        if self.starts(line):
            self._pending = [line]
            if "e2e_latency" in line:
                self.flush()
            return True
        return False

    def flush(self) -> None:
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending = []
        values = {}
        for name, pattern in _FINISH_NUM.items():
            m = pattern.search(text)
            if m:
                x = _value(m.group(1))
                if x is None:
                    self.rejected += 1
                else:
                    values[name] = x
        if "e2e_latency" in values:
            self.e2e_latency.append(values["e2e_latency"])
        if "queue_time" in values:
            self.queue_time.append(values["queue_time"])
        if "prompt_tokens" in values:
            self.prompt_tokens.append(int(values["prompt_tokens"]))
        if "completion_tokens" in values:
            self.completion_tokens.append(int(values["completion_tokens"]))


# -- recording ------------------------------------------------------------------------------------

@dataclass
class ReplicaSamples:
    """Per-line samples of one replica (``Origin.replica``) of one scheduler.

    ``decode``: ``(t, running_req, queue_req, kv_ratio, used_tokens, pool, kv_pool_ratio,
    gen_throughput, accept_len)``; ``prefill``: ``(t, new_seq, new_token, cached_token, queue_req,
    kv_ratio)``; ``retractions``: ``(t, retracted_reqs, new_tokens_gained)``. ``t`` is the line's own
    timestamp in seconds (time-of-day logs unwrapped across midnight) or ``None``.
    """

    decode: list[tuple] = field(default_factory=list)
    prefill: list[tuple] = field(default_factory=list)
    retractions: list[tuple] = field(default_factory=list)


class Recorder:
    """Feeds lines to the parser and a :class:`SchedulerStates`, and keeps the samples reports need.

    Args:
        decode_log_interval: Decode steps per ``Decode batch`` line when the log has no
            ``server_args`` line (the log's value wins, as in the exporter).
    """

    def __init__(self, decode_log_interval: int = DEFAULT_DECODE_LOG_INTERVAL):
        self.states = SchedulerStates(decode_log_interval, clock=lambda: 0.0)
        self.lines: Counter[tuple[str, str]] = Counter()
        self.samples: dict[tuple[str, str], ReplicaSamples] = {}
        self.server_args: dict[str, str] = {}
        self.server_args_count = 0
        self.req_stats: list[ReqTimeStats] = []
        self.req_stats_negative = 0
        self.finish = FinishRecords()
        self.kv_alloc: tuple[int, float] | None = None  # (#tokens, K+V GiB)
        self.kv_alloc_rejected = 0  # KV Cache is allocated lines with a damaged number
        self.max_tp_tag = -1
        self.unestimated: Counter[tuple[str, str]] = Counter()  # per (dp, replica); replica-max later
        self.time_of_day_only = False
        self.first_time: float | None = None
        self.last_time: float | None = None
        self._tod_offset = 0.0
        self._tod_last: float | None = None

    def _time(self, origin) -> float | None:
        t = origin.log_time
        if t is None:
            return None
        if origin.time_of_day_only:
            self.time_of_day_only = True
            if self._tod_last is not None and t + self._tod_offset < self._tod_last - 43200:
                self._tod_offset += 86400
            t += self._tod_offset
            self._tod_last = t
        if self.first_time is None or t < self.first_time:
            self.first_time = t
        if self.last_time is None or t > self.last_time:
            self.last_time = t
        return t

    def _replica(self, origin) -> ReplicaSamples:
        key = (origin.dp_rank, origin.replica)
        s = self.samples.get(key)
        if s is None:
            s = self.samples[key] = ReplicaSamples()
            for tag in origin.replica.split():
                if tag.startswith("TP") and tag[2:].isascii() and tag[2:].isdigit() and len(tag) <= 8:
                    self.max_tp_tag = max(self.max_tp_tag, int(tag[2:]))
        return s

    def feed_line(self, line: str) -> None:
        """Read one line (without its terminator)."""
        if self.finish.feed(line):
            return
        ev = parse_line(line)
        if ev is None:
            self.lines[("other", "ignored")] += 1
            if "KV Cache is allocated" in line:
                m = _KV_ALLOC.search(line)
                if m:
                    tokens = _value(m.group(1))
                    sizes = [_value(g) for g in ((m.group(4),) if m.group(4) else m.group(2, 3))]
                    if tokens is None or tokens != int(tokens) or None in sizes:
                        self.kv_alloc_rejected += 1
                    else:
                        self.kv_alloc = (int(tokens), sum(sizes))
            return
        if type(ev) is Malformed:
            self.lines[(ev.kind, "malformed")] += 1
            return
        self.lines[(KIND_OF[type(ev)], "parsed")] += 1
        kind = type(ev)
        t = self._time(ev.origin)
        if kind is DecodeBatch:
            kv = ev.kv
            pool = "kv" if "kv" in kv.pools else "full" if "full" in kv.pools else "gpu" if "gpu" in kv.pools else None
            self._replica(ev.origin).decode.append(
                (t, ev.running_req, ev.queue_req, kv.max_device_ratio, kv.used_tokens, pool,
                 kv.pools.get(pool) if pool else None, ev.gen_throughput, ev.accept_len))
        elif kind is PrefillBatch:
            self._replica(ev.origin).prefill.append(
                (t, ev.new_seq, ev.new_token, ev.cached_token, ev.queue_req, ev.kv.max_device_ratio))
        elif kind is Retraction:
            sched = self.states.schedulers.get(ev.origin.dp_rank)
            if ev.new_tokens_gained is None and (sched is None or sched.mean_tokens_per_running_req is None):
                self.unestimated[(ev.origin.dp_rank, ev.origin.replica)] += 1
            self._replica(ev.origin).retractions.append((t, ev.retracted_reqs, ev.new_tokens_gained))
        elif kind is ServerArgs:
            self.server_args = split_server_args(line)
            self.server_args_count += 1
        elif kind is ReqTimeStats:
            if ev.queue_duration < 0:
                self.req_stats_negative += 1
            self.req_stats.append(ev)
        elif kind in (Capacity, RetractAbort):
            self._replica(ev.origin)
        self.states.apply(ev, wall=0.0)

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
    """One input's path, bytes and lines read."""

    path: str
    bytes: int = 0
    lines: int = 0
    oversized_lines: int = 0


def read_logs(paths: list[str], recorder: Recorder, progress: bool | None = None) -> list[InputFile]:
    """Feed every line of the files, in order, into the recorder.

    Several files are one run: rotated segments in order, or the logs of the nodes of one
    multi-node group (replica tags keep them apart). ``.gz`` files are decompressed. Bytes are split
    on ``\\n`` only (a tqdm ``\\r`` stays inside its line), decoded as UTF-8 with replacement.

    Raises:
        OSError: a file cannot be opened or read.
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


# -- analysis -------------------------------------------------------------------------------------

def _primary(rec: Recorder, attr: str) -> dict[str, ReplicaSamples]:
    """Per scheduler, the replica with the most samples of ``attr`` (the replica-max rule)."""
    best: dict[str, ReplicaSamples] = {}
    for (dp, _), s in sorted(rec.samples.items()):
        cur = best.get(dp)
        if cur is None or len(getattr(s, attr)) > len(getattr(cur, attr)):
            best[dp] = s
    return best


def _capacity_estimate(decode: list[tuple]) -> dict | None:
    """KV capacity from ``#token / token usage`` when the log has no start-up line.

    Each line bounds the capacity to ``[used/(u+0.005), used/(u-0.005)]`` (usage printed with two
    decimals); the estimate is the middle of the intersection of lines with usage >= 0.10 (the
    median of ``used/u`` when the bounds disagree).
    """
    lo, hi, ratios = 0.0, math.inf, []
    for row in decode:
        used, u = row[4], row[6]
        if used is None or u is None or u < 0.10:
            continue
        lo = max(lo, used / (u + 0.005))
        hi = min(hi, used / (u - 0.005))
        ratios.append(used / u)
    if not ratios:
        return None
    if lo <= hi:
        return {"tokens": int(round((lo + hi) / 2)), "low": int(math.ceil(lo)), "high": int(hi)}
    ratios.sort()
    return {"tokens": int(round(percentile(ratios, 50))), "low": None, "high": None}


def _verdict(code: str, text: str) -> dict:
    return {"code": code, "text": text}


def _pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def _num(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "n/a"
    return f"{x:,.{digits}f}"


def model_kv_bytes_per_token(config: dict, tp_size: int, kv_bytes: float | None) -> dict:
    """Per-token KV size of one tensor-parallel rank from a Hugging Face ``config.json``.

    Standard attention: ``2 x layers x (KV heads / TP) x head_dim x bytes`` (K and V; KV heads are
    replicated when fewer than TP ranks). MLA (``kv_lora_rank`` present, DeepSeek): one latent of
    ``kv_lora_rank + qk_rope_head_dim`` per layer, replicated on every rank.

    Raises:
        ValueError: the config is not a JSON object, or a required key is missing or not a positive
            whole number.
    """
    if not isinstance(config, dict):
        raise ValueError("not a JSON object")
    cfg = config.get("text_config", config) if "num_hidden_layers" not in config else config
    if not isinstance(cfg, dict):
        raise ValueError("text_config is not a JSON object")

    def whole(key: str, required: bool = True, zero: bool = False) -> int | None:
        v = cfg.get(key)
        if v is None and not required:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise ValueError(f"{key} missing or not a number")
        x = _value(str(v))
        if x is None or x != int(x) or (x == 0 and not zero) or x > 1 << 24:
            raise ValueError(f"{key}: {str(v)[:40]!r} is not a positive whole number")
        return int(x)

    layers = whole("num_hidden_layers")
    dtype = str(cfg.get("torch_dtype") or config.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    elem = kv_bytes if kv_bytes else {"float32": 4, "float64": 8}.get(dtype.replace("torch.", ""), 2)
    if cfg.get("kv_lora_rank"):
        rank, rope = whole("kv_lora_rank"), whole("qk_rope_head_dim", required=False, zero=True) or 0
        per_token = layers * (rank + rope) * elem
        formula = f"{layers} layers x ({rank} + {rope}) latent x {elem:g} B (MLA)"
        return {"bytes_per_token": per_token, "formula": formula, "attention": "mla",
                "layers": layers, "kv_heads_per_rank": None, "head_dim": None, "element_bytes": elem}
    heads = whole("num_attention_heads")
    kv_heads = whole("num_key_value_heads", required=False, zero=True) or heads
    head_dim = whole("head_dim", required=False, zero=True) or whole("hidden_size") // heads
    if head_dim == 0:
        raise ValueError("hidden_size is smaller than num_attention_heads")
    per_rank = max(1, kv_heads // max(tp_size, 1)) if kv_heads >= tp_size else 1
    per_token = 2 * layers * per_rank * head_dim * elem
    formula = f"2 x {layers} layers x {per_rank} KV heads/rank x {head_dim} head dim x {elem:g} B"
    return {"bytes_per_token": per_token, "formula": formula, "attention": "mha/gqa", "layers": layers,
            "kv_heads_per_rank": per_rank, "head_dim": head_dim, "element_bytes": elem}


def analyse(rec: Recorder, inputs: list[InputFile], window: float = 10.0,
            model_config: dict | None = None, kv_bytes: float | None = None,
            expect: dict[str, str] | None = None) -> dict:
    """Turn a filled :class:`Recorder` into the report document (see :data:`SCHEMA` and the README).

    Args:
        rec: The recorder after :func:`read_logs`.
        inputs: What :func:`read_logs` returned.
        window: Seconds per window of the per-window retraction share.
        model_config: A parsed Hugging Face ``config.json`` for the per-token KV size, or None.
        kv_bytes: Bytes per KV element overriding the config's dtype (``fp8``: 1), or None.
        expect: Start-up parameters the server was launched with (``name -> value``), checked against
            the log's ``server_args``.
    """
    st = rec.states
    scheds = st.schedulers
    interval = st.decode_log_interval
    interval_source = ("server_args" if st.server_args is not None and st.server_args.decode_log_interval
                       else "default")

    def total(name: str) -> float:
        return sum(s.counter(name) for s in scheds.values())

    stats = _primary(rec, "decode")
    pstats = _primary(rec, "prefill")
    retr = _primary(rec, "retractions")
    decode = [row for s in stats.values() for row in s.decode]
    prefill = [row for s in pstats.values() for row in s.prefill]

    has_time = rec.first_time is not None
    duration = (rec.last_time - rec.first_time) if has_time else None
    stats_times = [r[0] for r in decode + prefill if r[0] is not None]
    stats_span = (max(stats_times) - min(stats_times)) if stats_times else None

    # Settings in effect.
    cap = None
    for dp in sorted(scheds):
        cap = st.effective_capacity(scheds[dp])
        if cap is not None:
            break
    sa = st.server_args
    ceiling = cap.max_running_requests if cap and cap.max_running_requests else (
        sa.max_running_requests if sa and sa.max_running_requests else None)
    ceiling_source = ("capacity line" if cap and cap.max_running_requests else
                      "server_args" if ceiling is not None else None)
    tp_size, tp_source = None, None
    sa_tp = rec.server_args.get("tp_size", "")
    if sa_tp.isascii() and sa_tp.isdigit() and 1 <= len(sa_tp) <= 6 and int(sa_tp) >= 1:
        tp_size, tp_source = int(sa_tp), "server_args"
    elif rec.max_tp_tag >= 0:
        tp_size, tp_source = rec.max_tp_tag + 1, "highest TP tag + 1 (lower bound)"

    # 1. Batch size.
    dsizes = [r[1] for r in decode]
    psizes = [r[1] for r in prefill]
    at_ceiling = (sum(1 for v in dsizes if v >= ceiling) / len(dsizes)) if (ceiling and dsizes) else None
    kv_ratios = [r[3] for r in decode if r[3] is not None]
    kv_dist = distribution(kv_ratios)
    queues = [r[2] for r in decode if r[2] is not None]
    all_queues = [r[2] for r in decode if r[2] is not None] + [r[4] for r in prefill if r[4] is not None]
    queue_empty_share = (sum(1 for q in all_queues if q == 0) / len(all_queues)) if all_queues else None
    retractions = total("retractions")
    if not dsizes:
        bound = _verdict("unknown", "No Decode batch lines: the log cannot say what bounded the batch.")
    elif at_ceiling is not None and at_ceiling >= 0.5:
        bound = _verdict("ceiling", f"The running batch sat at the configured ceiling of {ceiling} in "
                         f"{_pct(at_ceiling)} of logged decode steps: bounded by --max-running-requests.")
    elif retractions > 0 or (kv_dist["p90"] is not None and kv_dist["p90"] >= 0.9):
        bound = _verdict("kv_memory", "Bounded by KV memory: "
                         + (f"{int(retractions)} retractions, " if retractions else "")
                         + f"KV usage p90 {_pct(kv_dist['p90'], 0)}, max {_pct(kv_dist['max'], 0)}, "
                         + f"decode batch p50 {_num(percentile(sorted(dsizes), 50))}"
                         + (f" below the ceiling of {ceiling}" if ceiling else " (ceiling unknown)")
                         + (f", with requests waiting in {_pct(1 - queue_empty_share, 0)} of stats lines"
                            if queue_empty_share is not None and queue_empty_share < 1 else "") + ".")
    elif queue_empty_share is not None and queue_empty_share >= 0.8:
        bound = _verdict("arrivals", f"Bounded by arrivals: the queue was empty in {_pct(queue_empty_share, 0)} "
                         "of stats lines and KV memory had room; a higher ceiling would change nothing.")
    else:
        bound = _verdict("mixed", "No single bound: the queue was often non-empty but neither the ceiling "
                         "nor KV memory was reached consistently (check prefill limits: chunked_prefill_size, "
                         "max_prefill_tokens).")
    batch = {
        "decode": distribution(dsizes),
        "prefill": distribution(psizes),
        "max_running_requests": ceiling,
        "max_running_requests_source": ceiling_source,
        "at_ceiling_share": at_ceiling,
        "kv_usage": kv_dist,
        "queue_empty_share": queue_empty_share,
        "bound": bound,
    }

    # 2. Retractions (counters follow the replica-max rule of the state).
    prefill_batches = total("prefill_batches")
    decode_steps = total("decode_steps")
    batches = prefill_batches + decode_steps
    share = _ratio(retractions, batches)
    windows = []
    if has_time and window > 0:
        start = rec.first_time
        buckets: dict[int, list[float]] = {}
        for r in decode:
            if r[0] is not None:
                buckets.setdefault(int((r[0] - start) // window), [0, 0])[0] += interval
        for r in prefill:
            if r[0] is not None:
                buckets.setdefault(int((r[0] - start) // window), [0, 0])[0] += 1
        for s in retr.values():
            for r in s.retractions:
                if r[0] is not None:
                    buckets.setdefault(int((r[0] - start) // window), [0, 0])[1] += 1
        for k in sorted(buckets):
            b, n = buckets[k]
            windows.append({"start": _iso(start + k * window, rec.time_of_day_only), "batches": b,
                            "retractions": n, "share": _ratio(n, b)})
    shares = [w["share"] for w in windows if w["share"] is not None]
    peak = max(shares) if shares else None
    over = sum(1 for x in shares if x > RETRACTION_RULE)
    orphan = sum(1 for w in windows if w["batches"] == 0 and w["retractions"] > 0)
    if retractions == 0:
        rv = _verdict("none", "No retractions: KV memory never ran out." if decode or prefill
                      else "No retractions, and no batch lines either.")
    elif share is None:
        rv = _verdict("unknown_share", f"{int(retractions)} retraction events, but the log has no batch lines, so "
                      "their share of batches (the 5% rule) cannot be computed.")
    elif share > RETRACTION_RULE or over:
        rv = _verdict("above_rule", f"{_pct(share, 2)} of batches were retractions overall, peak {_pct(peak, 2)} in a "
                      f"{window:g}-s window ({over} of {len(shares)} windows above 5%): the ceiling is too high "
                      "for this load (method: more than 5% of batches preempted).")
    else:
        rv = _verdict("below_rule", f"{_pct(share, 2)} of batches were retractions overall, peak {_pct(peak, 2)} in a "
                      f"{window:g}-s window: below the 5% rule, but every retraction is recomputed work; "
                      "see throughput truth.")
    ratio_after = [g.gauges.get("new_token_ratio") for g in scheds.values() if "new_token_ratio" in g.gauges]
    retraction = {
        "events": int(retractions),
        "requests": int(total("retracted_requests")),
        "aborted_requests": int(total("retract_aborts")),
        "freed_tokens": int(total("retraction_freed_tokens")),
        "replicas_reporting": sum(1 for s in rec.samples.values() if s.retractions),
        "batches": int(batches),
        "prefill_batches": int(prefill_batches),
        "decode_steps": int(decode_steps),
        "decode_log_interval": interval,
        "decode_log_interval_source": interval_source,
        "share_of_batches": share,
        "rule": RETRACTION_RULE,
        "window_seconds": window,
        "windows": windows,
        "peak_window_share": peak,
        "windows_above_rule": over,
        "windows_with_retractions_but_no_batches": orphan,
        "latest_new_token_ratio": max(ratio_after) if ratio_after else None,
        "verdict": rv,
    }

    # 3. Throughput truth.
    p_comp = total("prefill_computed_tokens")
    p_cached = total("prefill_cached_tokens")
    d_tok = total("decode_tokens")
    gained = total("recomputed_tokens_gained")
    estimated = total("recomputed_tokens_estimated")
    recomputed = gained + estimated
    computed = p_comp + d_tok
    useful = computed - recomputed
    rshare = _ratio(recomputed, computed)
    span = stats_span if stats_span else None
    gen_tp = [r[7] for r in decode if r[7] is not None]
    if computed == 0:
        tv = _verdict("unknown", "No Prefill/Decode lines: nothing computed in the log."
                      + (f" {rec.unestimated_retractions} retractions whose recompute cannot be sized."
                         if rec.unestimated_retractions else ""))
    elif retractions and recomputed == 0:
        tv = _verdict("unknown_recompute", f"{int(retractions)} retractions, but their recompute cannot be sized "
                      "(no #new_tokens_gained and no Decode line before them): the throughput includes an "
                      "unknown share of recomputed work.")
    elif rshare and rshare > RETRACTION_RULE:
        tv = _verdict("fake_throughput", f"{_pct(rshare)} of computed tokens are recompute ({_num(recomputed)} of "
                      f"{_num(computed)}): a tokens/s figure over computed work overstates useful work by "
                      f"{_pct(recomputed / useful if useful else None)}.")
    elif rshare:
        tv = _verdict("minor_recompute", f"{_pct(rshare)} of computed tokens are recompute: small.")
    else:
        tv = _verdict("real", "No recomputed tokens: computed throughput is useful throughput.")
    throughput = {
        "prefill_computed_tokens": int(p_comp),
        "prefill_cached_tokens": int(p_cached),
        "decode_tokens": d_tok,
        "computed_tokens": computed,
        "recomputed_tokens": recomputed,
        "recomputed_tokens_method": ("new_tokens_gained" if gained and not estimated else
                                     "estimated" if estimated and not gained else
                                     "mixed" if recomputed else None),
        "retractions_not_sized": rec.unestimated_retractions,
        "useful_tokens": useful,
        "recompute_share": rshare,
        "cache_hit_ratio": _ratio(p_cached, p_cached + p_comp),
        "seconds": span,
        "computed_tokens_per_second": _ratio(computed, span),
        "useful_tokens_per_second": _ratio(useful, span),
        "sglang_gen_throughput": distribution(gen_tp, (50,)),
        "verdict": tv,
    }

    # 4. KV capacity.
    cap_tokens = cap.max_total_num_tokens if cap else None
    cap_source = "start-up line" if cap else None
    cap_range = None
    if cap_tokens is None:
        est = _capacity_estimate(decode)
        if est:
            cap_tokens, cap_source = est["tokens"], "estimated from #token / token usage"
            cap_range = [est["low"], est["high"]] if est["low"] is not None else None
    used_rows = [(r[4], r[1]) for r in decode if r[4] is not None and r[1] > 0]
    mean_tpr = _ratio(sum(u for u, _ in used_rows), sum(n for _, n in used_rows)) if used_rows else None
    per_line = distribution([u / n for u, n in used_rows], (50, 90))
    cap_reqs = _ratio(cap_tokens, mean_tpr)
    safe = math.floor(cap_reqs * SAFETY_FACTOR) if cap_reqs else None
    offline = [math.floor(cap_reqs * OFFLINE_RANGE[0]), math.floor(cap_reqs * OFFLINE_RANGE[1])] if cap_reqs else None
    if cap_reqs is None:
        kvv = _verdict("unknown", "Capacity in requests needs the KV capacity (start-up line or #token with "
                       "token usage) and Decode lines with #token.")
    else:
        text = (f"{_num(cap_tokens)} KV tokens / {_num(mean_tpr)} tokens per running request = {_num(cap_reqs)} "
                f"requests in theory, {safe} at the 0.7 safety factor.")
        if ceiling and ceiling > safe:
            kvv = _verdict("ceiling_above_safe", text + f" The configured ceiling {ceiling} is above it: the KV pool, "
                           "not the ceiling, decides the batch, and retractions follow.")
        elif ceiling:
            kvv = _verdict("ceiling_within_safe", text + f" The configured ceiling {ceiling} is within it.")
        else:
            kvv = _verdict("ceiling_unknown", text + " The configured ceiling is not in the log.")
    kv_model = None
    if model_config is not None:
        per = model_kv_bytes_per_token(model_config, tp_size or 1, kv_bytes)
        pool_gib = cap_tokens * per["bytes_per_token"] / 2**30 if cap_tokens else None
        kv_model = dict(per, tp_size=tp_size or 1, tp_size_source=tp_source or "assumed 1",
                        pool_gib=pool_gib, log_kv_alloc_tokens=rec.kv_alloc[0] if rec.kv_alloc else None,
                        log_kv_alloc_gib=rec.kv_alloc[1] if rec.kv_alloc else None,
                        log_vs_model_ratio=(_ratio(rec.kv_alloc[1], rec.kv_alloc[0] * per["bytes_per_token"] / 2**30)
                                            if rec.kv_alloc else None),
                        bytes_per_request=(per["bytes_per_token"] * mean_tpr) if mean_tpr else None)
    kv = {
        "capacity_tokens": cap_tokens,
        "capacity_source": cap_source,
        "capacity_estimate_range": cap_range,
        "mean_tokens_per_running_request": mean_tpr,
        "tokens_per_running_request": per_line,
        "capacity_requests": cap_reqs,
        "safety_factor": SAFETY_FACTOR,
        "safe_ceiling_requests": safe,
        "recommended_max_running_requests_offline": offline,
        "max_running_requests": ceiling,
        "decode_batch_p99": batch["decode"]["p99"],
        "model": kv_model,
        "verdict": kvv,
    }

    # 5. Queue and latency.
    qrs = total("queue_request_seconds")
    admitted = total("admitted_requests")
    little = _ratio(qrs, admitted) if (has_time and admitted) else None
    tw_queue = _ratio(qrs, stats_span) if stats_span else None
    ordered = sorted([(r[0], r[2]) for r in decode if r[2] is not None and r[0] is not None]
                     + [(r[0], r[4]) for r in prefill if r[4] is not None and r[0] is not None], key=lambda x: x[0])
    q_start = ordered[0][1] if ordered else None
    q_end = ordered[-1][1] if ordered else None
    growth = (q_end - q_start) if ordered else None
    steady = growth is not None and growth <= max(2, 0.1 * (admitted or 0))
    step_dt, step_n = 0.0, 0
    for s in stats.values():
        prev = None
        for r in s.decode:
            t = r[0]
            if t is not None and prev is not None and 0 < t - prev <= QUEUE_SAMPLE_MAX_GAP_SECONDS:
                step_dt += t - prev
                step_n += interval
            if t is not None:
                prev = t
    step_s = _ratio(step_dt, step_n)
    arrivals = None
    if stats_span and growth is not None:
        arrivals = (admitted + growth - total("retracted_requests")) / stats_span
    qd = [r.queue_duration for r in rec.req_stats if r.queue_duration >= 0]
    lat_points = (50, 95, 99, 99.9)
    if not has_time:
        qv = _verdict("unknown", "The log has no timestamps: queue wait and rates cannot be derived.")
    elif admitted == 0:
        qv = _verdict("unknown", "No requests were admitted in the log: no queue wait to derive.")
    elif not steady:
        qv = _verdict("not_steady", f"The queue grew from {q_start} to {q_end} requests during the log: not a steady "
                      f"state, so the Little's-law mean ({_num(little, 2)} s) is not a wait time: arrivals exceed "
                      "service and queued requests wait longer the longer the run.")
    else:
        qv = _verdict("steady", f"Mean queue wait {_num(little, 3)} s by Little's law (time-averaged queue "
                      f"{_num(tw_queue, 2)} / admission rate)." + ("" if qd or rec.finish.e2e_latency else
                      " Percentiles need --enable-request-time-stats-logging or --log-requests."))
    queue = {
        "depth": distribution(queues),
        "depth_max_all_lines": max(all_queues) if all_queues else None,
        "depth_first": q_start,
        "depth_last": q_end,
        "time_weighted_mean_depth": tw_queue,
        "admitted_requests": int(admitted),
        "queue_request_seconds": qrs,
        "mean_wait_seconds_littles_law": little,
        "steady_state": steady if ordered else None,
        "arrival_rate_per_second": arrivals,
        "admission_rate_per_second": _ratio(admitted, stats_span),
        "decode_step_seconds": step_s,
        "queue_wait_seconds": distribution(qd, lat_points),
        "queue_wait_negative_skipped": rec.req_stats_negative,
        "finish_queue_time_seconds": distribution(rec.finish.queue_time, lat_points),
        "e2e_latency_seconds": distribution(rec.finish.e2e_latency, lat_points),
        "verdict": qv,
    }
    timeline = {
        "decode": [[r[0], r[1], r[2], r[3]] for r in sorted((r for r in decode if r[0] is not None),
                                                            key=lambda r: r[0])],
        "retractions": sorted(r[0] for s in retr.values() for r in s.retractions if r[0] is not None),
    }

    # 6. Scenario and checklist.
    saturated = [why for cond, why in (
        (queue_empty_share is not None and queue_empty_share < 0.5, "requests waited in most stats lines"),
        (retractions > 0, "KV memory ran out (retractions)"),
        (at_ceiling is not None and at_ceiling >= 0.5, "the batch sat at the ceiling"),
        (kv_dist["p90"] is not None and kv_dist["p90"] >= 0.9, "KV usage p90 at or above 90%"),
    ) if cond]
    if not decode and not prefill:
        sc = _verdict("unknown", "No Prefill/Decode lines: the scheduler's behaviour cannot be classified.")
    elif saturated:
        sc = _verdict("throughput_first", "Throughput-first (saturated): " + "; ".join(saturated) + ". This is the "
                      "offline-batch regime: judge it by useful tokens/s, retractions under 5% of batches and a "
                      "ceiling at 60-70% of KV capacity. For online traffic this load is too high: expect TTFT "
                      "dominated by queueing.")
    elif queue_empty_share is not None and queue_empty_share >= 0.9:
        sc = _verdict("latency_first", "Latency-first (sparse arrivals): the queue was empty and KV had headroom. "
                      "This is the online regime: judge it by P99 TTFT/TPOT and zero retractions; a larger ceiling "
                      "would only add waiting.")
    else:
        sc = _verdict("mixed", "Between the regimes: some queueing, no saturation.")
    lens_in = [r.input_len for r in rec.req_stats if r.input_len is not None] or rec.finish.prompt_tokens
    lens_out = [r.output_len for r in rec.req_stats if r.output_len is not None] or rec.finish.completion_tokens
    din, dout = distribution(lens_in), distribution(lens_out)

    def cv(values):
        if len(values) < 2:
            return None
        m = sum(values) / len(values)
        return (math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1)) / m) if m else None

    checklist = [
        {"question": "Online interactive or offline batch?", "answerable": "partly",
         "answer": f"The log shows {sc['code'].replace('_', '-')} behaviour ({sc['text'].split(':')[0]}). "
                   "The intent is yours; the log says which regime the load produced."},
        {"question": "Which latency matters: TTFT (chat) or TPOT (long generation)?", "answerable": "partly",
         "answer": ("The choice is yours. Measured: mean decode step "
                    f"{_num(step_s * 1000, 1)} ms (about the TPOT of a running request)" if step_s else
                    "The choice is yours. The log has too few timed Decode lines for the decode step time")
                   + "; TTFT is not in the scheduler log (use the benchmark client or --log-requests)."},
        {"question": "What is the request length distribution, and how large is its variance?",
         "answerable": "yes" if lens_in else "no",
         "answer": (f"Input tokens p50 {_num(din['p50'])}, p90 {_num(din['p90'])}, max {_num(din['max'])} "
                    f"(CV {_num(cv(lens_in), 2)}); output p50 {_num(dout['p50'])}, p90 {_num(dout['p90'])}, "
                    f"max {_num(dout['max'])} (CV {_num(cv(lens_out), 2)}); n={din['count']}."
                    if lens_in else
                    "Not in the scheduler log: enable --enable-request-time-stats-logging or --log-requests. "
                    f"Proxy: KV tokens per running request p50 {_num(per_line['p50'])}, p90 {_num(per_line['p90'])}.")},
        {"question": "How many requests' KV cache fit in GPU memory?",
         "answerable": "yes" if cap_reqs else "no",
         "answer": (f"About {_num(cap_reqs)} at the observed {_num(mean_tpr)} tokens per running request; "
                    f"{safe} with the 0.7 safety factor." if cap_reqs else kvv["text"])},
        {"question": "What is the arrival rate?", "answerable": "yes" if arrivals is not None else "no",
         "answer": (f"About {_num(arrivals, 2)} new requests/s (admitted {int(admitted)} + queue growth "
                    f"{growth} - retracted {int(total('retracted_requests'))}, over {_num(stats_span, 0)} s); "
                    f"admissions {_num(queue['admission_rate_per_second'], 2)}/s."
                    if arrivals is not None else "The log has no timed stats lines.")},
        {"question": "Are several priorities mixed? Then how is capacity shared?", "answerable": "no",
         "answer": "Scheduler lines carry no priority; "
                   + (f"server_args enable_priority_scheduling={rec.server_args['enable_priority_scheduling']}."
                      if "enable_priority_scheduling" in rec.server_args else "the log has no server_args line.")},
        {"question": "What preemption rate is acceptable?", "answerable": "partly",
         "answer": f"A policy choice (the method's rule: under 5% of batches). Observed: {_pct(share, 2)} overall, "
                   f"peak {_pct(peak, 2)} per {window:g}-s window."},
    ]

    # Start-up parameter check.
    sa_checks = []
    if expect:
        for name, wanted in expect.items():
            got = rec.server_args.get(name)
            norm = got.strip("'\"") if got is not None else None
            sa_checks.append({"name": name, "expected": wanted, "found": got,
                              "status": ("missing" if got is None else
                                         "ok" if norm == wanted.strip("'\"") else "different")})
    consistency = []
    if sa is not None and cap is not None:
        for name in ("max_running_requests", "chunked_prefill_size"):
            a, b = getattr(sa, name), getattr(cap, name)
            if a is not None and b is not None and a != b:
                consistency.append({"name": name, "server_args": a, "effective": b})
    startup = {
        "server_args_found": bool(rec.server_args),
        "server_args": rec.server_args,
        "expected": sa_checks,
        "adjusted_by_server": consistency,
        "verdict": (_verdict("mismatch", "Some expected parameters did not take effect: "
                             + ", ".join(f"{c['name']} ({c['status']})" for c in sa_checks if c["status"] != "ok"))
                    if any(c["status"] != "ok" for c in sa_checks) else
                    _verdict("ok", "Every expected parameter is in server_args with its value.") if sa_checks else
                    _verdict("unchecked", "No --expect given." + ("" if rec.server_args else
                             " The log has no server_args line (start the server at --log-level info and keep "
                             "the start-up lines)."))),
    }

    kinds = [k for k in KINDS if k != "other"]
    lines = {"parsed": {k: rec.lines[(k, "parsed")] for k in kinds},
             "malformed": {k: rec.lines[(k, "malformed")] for k in kinds},
             "ignored": rec.lines[("other", "ignored")],
             # values the report reads itself (outside the parser) that were damaged and ignored
             "values_rejected": {"finish": rec.finish.rejected, "kv_alloc": rec.kv_alloc_rejected,
                                 "server_args_tp_size": int(bool(sa_tp) and tp_source != "server_args")}}
    return {
        "schema": SCHEMA,
        "inputs": [{"path": display_path(i.path), "bytes": i.bytes, "lines": i.lines, "oversized_lines": i.oversized_lines}
                   for i in inputs],
        "lines": lines,
        "span": {"first": _iso(rec.first_time, rec.time_of_day_only), "last": _iso(rec.last_time, rec.time_of_day_only),
                 "seconds": duration, "stats_seconds": stats_span, "timestamps": has_time,
                 "time_of_day_only": rec.time_of_day_only},
        "schedulers": sorted(scheds),
        "settings": {
            "decode_log_interval": interval, "decode_log_interval_source": interval_source,
            "max_running_requests": ceiling, "max_total_num_tokens": cap.max_total_num_tokens if cap else None,
            "chunked_prefill_size": st.chunked_prefill_size(scheds[sorted(scheds)[0]]) if scheds else None,
            "context_len": cap.context_len if cap else None, "tp_size": tp_size, "tp_size_source": tp_source,
        },
        "batch_size": batch,
        "retractions": retraction,
        "throughput": throughput,
        "kv_capacity": kv,
        "queue_latency": queue,
        "scenario": {"verdict": sc, "saturation_signals": saturated},
        "checklist": checklist,
        "startup": startup,
        "timeline": timeline,
    }


# -- baseline comparison --------------------------------------------------------------------------

#: Figures compared in ``--baseline`` mode: (dotted key, label, better direction: +1 up, -1 down, 0 neutral).
COMPARED = (
    ("batch_size.decode.p50", "decode batch p50", 0),
    ("batch_size.decode.p99", "decode batch p99", 0),
    ("batch_size.prefill.p50", "prefill batch p50", 0),
    ("batch_size.kv_usage.p90", "KV usage p90", 0),
    ("retractions.events", "retraction events", -1),
    ("retractions.share_of_batches", "retraction share of batches", -1),
    ("retractions.peak_window_share", "peak window retraction share", -1),
    ("throughput.recompute_share", "recompute share", -1),
    ("throughput.cache_hit_ratio", "cache-hit ratio", +1),
    ("throughput.computed_tokens_per_second", "computed tokens/s", +1),
    ("throughput.useful_tokens_per_second", "useful tokens/s", +1),
    ("kv_capacity.capacity_tokens", "KV capacity (tokens)", +1),
    ("kv_capacity.mean_tokens_per_running_request", "KV tokens per running request", 0),
    ("kv_capacity.capacity_requests", "capacity (requests)", +1),
    ("queue_latency.time_weighted_mean_depth", "mean queue depth", -1),
    ("queue_latency.mean_wait_seconds_littles_law", "mean queue wait (Little)", -1),
    ("queue_latency.decode_step_seconds", "decode step time", -1),
    ("queue_latency.queue_wait_seconds.p99", "queue wait p99", -1),
    ("queue_latency.e2e_latency_seconds.p99", "e2e latency p99", -1),
    ("settings.max_running_requests", "max_running_requests", 0),
    ("settings.max_total_num_tokens", "max_total_num_tokens", 0),
    ("settings.decode_log_interval", "decode_log_interval", 0),
)


def _get(doc: dict, dotted: str):
    cur = doc
    for part in dotted.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def compare(old: dict, new: dict, threshold: float = 0.10) -> dict:
    """Side-by-side figures of two reports with changes flagged, plus the ``server_args`` difference.

    A figure is flagged when it appears or disappears, or changes by more than ``threshold``
    (relative); the flag is ``worse``/``better`` where a direction is defined, else ``changed``.
    """
    rows = []
    for key, label, better in COMPARED:
        a, b = _get(old, key), _get(new, key)
        change = None
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            change = (b - a) / abs(a) if a else (0.0 if b == 0 else math.inf)
        flag = None
        if (a is None) != (b is None):
            flag = "changed"
        elif change is not None and abs(change) > threshold:
            flag = "changed" if better == 0 else ("better" if change * better > 0 else "worse")
        rows.append({"key": key, "label": label, "baseline": a, "current": b,
                     "change_ratio": change if change is None or math.isfinite(change) else None, "flag": flag})
    sa_old, sa_new = old["startup"]["server_args"], new["startup"]["server_args"]
    diff = {
        "baseline_has_server_args": bool(sa_old),
        "current_has_server_args": bool(sa_new),
        "only_in_baseline": {k: sa_old[k] for k in sorted(sa_old.keys() - sa_new.keys())},
        "only_in_current": {k: sa_new[k] for k in sorted(sa_new.keys() - sa_old.keys())},
        "changed": {k: [sa_old[k], sa_new[k]] for k in sorted(sa_old.keys() & sa_new.keys()) if sa_old[k] != sa_new[k]},
    }
    verdicts = {sec: [_get(old, sec + ".code"), _get(new, sec + ".code")] for sec in (
        "batch_size.bound", "retractions.verdict", "throughput.verdict", "kv_capacity.verdict",
        "queue_latency.verdict", "scenario.verdict")}
    return {"schema": BASELINE_SCHEMA, "threshold": threshold, "figures": rows,
            "flagged": sum(1 for r in rows if r["flag"]), "verdicts": verdicts,
            "server_args_diff": diff, "baseline": old, "current": new}


# -- command line ---------------------------------------------------------------------------------

class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # exit code 2 with the argparse message, handled in main()
        raise _ArgError(message)


def build_parser() -> argparse.ArgumentParser:
    """The ``report`` subcommand's argument parser."""
    p = _Parser(prog=PROG, description=(
        "Answer the performance-validation checklist from recorded SGLang logs: batch size, retractions "
        "and the 5% rule, throughput truth (recompute), KV capacity in requests, queue and latency "
        "percentiles, scenario. Several LOG files are one run (rotated segments in order, or the nodes of "
        "one group). Exit codes: 0 done, 1 a file could not be read or written, 2 bad arguments."))
    p.add_argument("logs", nargs="+", metavar="LOG", help="recorded SGLang log file(s); .gz allowed")
    p.add_argument("--format", choices=("text", "json", "html"), default="text", help="output format (default text)")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout (required for html)")
    p.add_argument("--plots", metavar="DIR", help="also write the plots as PNG files into DIR (needs matplotlib)")
    p.add_argument("--baseline", metavar="OLD_LOG", action="append",
                   help="compare against this earlier log (repeat for several files of one run)")
    p.add_argument("--threshold", type=float, default=0.10,
                   help="relative change that flags a figure in --baseline mode (default 0.10; finite, >= 0)")
    p.add_argument("--window", type=float, default=10.0,
                   help="seconds per window of the per-window retraction share (default 10; "
                        f"{WINDOW_RANGE[0]:g} to {WINDOW_RANGE[1]:g})")
    p.add_argument("--decode-log-interval", type=int, default=DEFAULT_DECODE_LOG_INTERVAL,
                   help="decode steps per Decode batch line when the log has no server_args (default 40; "
                        f"{DECODE_LOG_INTERVAL_RANGE[0]} to {DECODE_LOG_INTERVAL_RANGE[1]})")
    p.add_argument("--model-config", metavar="CONFIG_JSON",
                   help="Hugging Face config.json: per-token KV size, cross-checked against the log's capacity")
    p.add_argument("--kv-bytes", type=float, help="bytes per KV element (fp8: 1), overriding the config's dtype "
                   f"(> 0, at most {KV_BYTES_RANGE[1]:g})")
    p.add_argument("--expect", action="append", default=[], metavar="NAME=VALUE",
                   help="a start-up parameter you launched with, checked against server_args (repeatable)")
    prog = p.add_mutually_exclusive_group()
    prog.add_argument("--progress", dest="progress", action="store_true", default=None,
                      help="show progress on stderr (default: on a terminal for inputs over 64 MB)")
    prog.add_argument("--no-progress", dest="progress", action="store_false")
    return p


def _usage(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return ExitStatus.USAGE


def _load(paths: list[str], args) -> dict:
    rec = Recorder(args.decode_log_interval)
    inputs = read_logs(paths, rec, args.progress)
    return analyse(rec, inputs, args.window, args.model_config_data, args.kv_bytes, args.expect_map)


def main(argv: list[str] | None = None) -> int:
    """Run ``sglang-exporter report``; ``argv`` excludes the word ``report``. Returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _ArgError as exc:
        return _usage(str(exc))
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    for name, paths in (("LOG", args.logs), ("--baseline", args.baseline or [])):
        for path in paths:
            if not os.path.isfile(path):
                return _usage(f"argument {name}: {display_path(path)!r} is not a readable file")
    # Comparisons with NaN are all false, so every check below is written to fail on NaN.
    if not WINDOW_RANGE[0] <= args.window <= WINDOW_RANGE[1]:
        return _usage(f"argument --window: {args.window:g} is not a number of seconds from "
                      f"{WINDOW_RANGE[0]:g} to {WINDOW_RANGE[1]:g}")
    lo, hi = DECODE_LOG_INTERVAL_RANGE
    if not lo <= args.decode_log_interval <= hi:
        return _usage(f"argument --decode-log-interval: must be from {lo} to {hi}")
    if not (math.isfinite(args.threshold) and args.threshold >= 0):
        return _usage(f"argument --threshold: {args.threshold:g} is not a finite number >= 0")
    if args.kv_bytes is not None and not KV_BYTES_RANGE[0] < args.kv_bytes <= KV_BYTES_RANGE[1]:
        return _usage(f"argument --kv-bytes: {args.kv_bytes:g} is not a number of bytes above "
                      f"{KV_BYTES_RANGE[0]:g} and at most {KV_BYTES_RANGE[1]:g}")
    if args.format == "html" and not args.output:
        return _usage("argument --output: required with --format html")
    args.expect_map = {}
    for item in args.expect:
        name, eq, value = item.partition("=")
        if not eq or not name.strip().isidentifier():
            return _usage(f"argument --expect: {item!r} is not NAME=VALUE")
        if not value.strip():
            return _usage(f"argument --expect: {item!r} has an empty VALUE (write the value as server_args "
                          "prints it, e.g. NAME=None or NAME='')")
        args.expect_map[name.strip()] = display_path(value.strip())  # valid Unicode for JSON/HTML
    args.model_config_data = None
    if args.model_config:
        try:
            with open(args.model_config, encoding="utf-8") as f:
                args.model_config_data = json.load(f)
            model_kv_bytes_per_token(args.model_config_data, 1, args.kv_bytes)
        except (OSError, ValueError, RecursionError) as exc:
            return _usage(f"argument --model-config: {display_path(args.model_config)!r}: {exc}")
    from . import report_render

    if args.plots or args.format == "html":
        if not report_render.have_matplotlib() and args.plots:
            return _usage("argument --plots: needs matplotlib (pip install 'sglang-exporter[report]')")
    try:
        doc = _load(args.logs, args)
        if args.baseline:
            doc = compare(_load(args.baseline, args), doc, args.threshold)
        plots = report_render.make_plots(doc, args.plots) if (args.plots or args.format == "html") else {}
        if args.format == "json":
            out = json.dumps(report_render.jsonable(doc), indent=2, sort_keys=False) + "\n"
        elif args.format == "html":
            out = report_render.html(doc, plots)
        else:
            out = report_render.text(doc)
        if args.output:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(out)
        else:
            sys.stdout.write(out)
            sys.stdout.flush()
    except OSError as exc:
        name = display_path(os.fsdecode(exc.filename)) if exc.filename is not None else "?"
        print(f"{PROG}: error: {name}: {exc.strerror or exc}", file=sys.stderr)
        return ExitStatus.RUNTIME
    return ExitStatus.OK
