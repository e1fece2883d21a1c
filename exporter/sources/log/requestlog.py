"""SGLang's request log (``--log-requests``, level >= 1) read into one record per finished request: the
one reader of these records, for ``traffic`` (its model and trace) and ``report`` (latency and lengths).

SGLang's ``RequestLogger`` (``sglang/srt/utils/request_logger.py``, 0.5.x) prints, per request, a
``Receive:`` line and, when it finishes, a ``Finish: obj=GenerateReqInput(...), out={'meta_info':
{...}}`` line (text format, the default), or with ``--log-requests-format json`` one JSON object per
line with ``"event": "request.finished"`` and ``out.meta_info``. The finished record carries what a
traffic model needs (``meta_info``, seconds since the epoch and tokens): ``request_received_ts``,
``request_finished_ts``, ``prompt_tokens``, ``completion_tokens``, ``e2e_latency``,
``first_token_latency``, ``cached_tokens``, ``num_retractions``. Releases whose ``meta_info`` has no
``request_received_ts`` give the arrival as the log line's own time stamp (1 s resolution) less
``e2e_latency``. Level 0 skips nothing a model needs either; ``Receive:`` lines carry no length at level
1 and are only counted.

A text record that a terminal or a poster hard-wrapped continues on the following lines that do not
start a log record; up to :data:`MAX_CONTINUATION` of those are joined. Every finished record's values
that pass the parser's bound (:func:`~exporter.limits.in_value_range`) are kept in
:attr:`RequestLog.values` (a value out of it is counted in :attr:`RequestLog.rejected`); a record
without an arrival or both lengths is no :class:`Request` and is counted in :attr:`RequestLog.damaged`.
Never fatal.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime

from ...limits import in_value_range

#: Continuation lines joined to a hard-wrapped text record at most.
MAX_CONTINUATION = 64
#: A log record's start: SGLang's ``[YYYY-MM-DD HH:MM:SS...]`` or ``[HH:MM:SS`` prefix, a Ray actor's
#: ``(Name pid=N)`` before it, or a bare date (a continuation line has none).
_RECORD_START = re.compile(r"^\s*(?:(?:\(\w+ pid=\d+\) )?\[\d|\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})")
_PREFIX_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)")
_NUM = r"(-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|-inf)"
_TEXT_KEYS = ("request_received_ts", "request_finished_ts", "prompt_tokens", "completion_tokens", "e2e_latency",
              "first_token_latency", "cached_tokens", "num_retractions", "queue_time")
_TEXT_FIELDS = {k: re.compile(rf"['\"]{k}['\"]:\s*{_NUM}") for k in _TEXT_KEYS}
_RID = re.compile(r"rid='([^']*)'")


@dataclass(frozen=True)
class Request:
    """One finished request of SGLang's request log.

    Attributes:
        rid: SGLang's request id (``rid``), or ``""``.
        arrival: when SGLang received it, seconds since the epoch (``request_received_ts``, else the
            line's time stamp less ``e2e_latency``).
        input_len / output_len: ``prompt_tokens`` / ``completion_tokens``.
        e2e_latency / ttft: seconds (``e2e_latency``, ``first_token_latency``), ``None`` when absent.
        cached_tokens: prompt tokens served from the radix cache, ``None`` when absent.
        retractions: ``num_retractions``, ``None`` when absent.
        exact_arrival: the arrival is SGLang's own ``request_received_ts`` (else derived, 1 s resolution).
    """

    rid: str
    arrival: float
    input_len: int
    output_len: int
    e2e_latency: float | None = None
    ttft: float | None = None
    cached_tokens: int | None = None
    retractions: int | None = None
    exact_arrival: bool = True


@dataclass
class RequestLog:
    """A line sink (``feed``, as the report's reader hands lines: :func:`~exporter.report.files.read_logs`)
    that keeps the finished requests of SGLang's request log.

    Attributes:
        requests: the finished requests, in log order.
        values: every finished record's values by ``meta_info`` name (``e2e_latency``, ``queue_time``,
            ``prompt_tokens``...), those inside the parser's bound, in log order: partial records too.
        rejected: values outside it (negative, not finite, too large), left out.
        received: ``Receive:`` / ``request.received`` records seen (arrivals whose finish may be missing).
        damaged: finished records that gave no usable arrival or lengths.
        formats: ``{"text": n, "json": n}`` finished records per format.
    """

    requests: list[Request] = field(default_factory=list)
    values: list[dict[str, float]] = field(default_factory=list)
    received: int = 0
    damaged: int = 0
    rejected: int = 0
    formats: dict[str, int] = field(default_factory=lambda: {"text": 0, "json": 0})
    scheduler_lines: int = 0  # the report's reader asks every sink; a request log has none
    _pending: list[str] = field(default_factory=list)

    def feed(self, lines: list[str]) -> None:
        """Offer complete log lines, in order (any lines; others are ignored)."""
        for line in lines:
            self.feed_line(line)

    def feed_line(self, line: str) -> None:
        """Offer one log line (any line; others are ignored)."""
        if self._pending:
            if not _RECORD_START.match(line) and line.strip() and len(self._pending) <= MAX_CONTINUATION:
                self._pending.append(line)
                return
            self._flush()
        if "Finish: obj=" in line:
            self._pending = [line]
            if "e2e_latency" in line and line.rstrip().endswith("}"):
                self._flush()
        elif '"event": "request.finished"' in line:
            self._json(line)
        elif "Receive: obj=" in line or '"event": "request.received"' in line:
            self.received += 1

    def column(self, name: str) -> list[float]:
        """The values of ``name`` (a ``meta_info`` name of :data:`_TEXT_KEYS`) of every finished record
        that printed one inside the bound, in log order (partial records included)."""
        return [v[name] for v in self.values if name in v]

    def finish_input(self) -> None:
        """End of one file: a record still pending is read as it is."""
        self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending = []
        self.formats["text"] += 1
        values: dict[str, float] = {}
        for key, pattern in _TEXT_FIELDS.items():
            m = pattern.search(text)
            if m:
                values[key] = _number(m.group(1))
        rid = _RID.search(text)
        self._add(rid.group(1) if rid else "", values, _line_time(text))

    def _json(self, line: str) -> None:
        self.formats["json"] += 1
        try:
            obj = json.loads(line[line.index("{"):])
            meta = obj["out"]["meta_info"]
        except (ValueError, KeyError, TypeError):
            self.damaged += 1
            return
        values = {k: float(meta[k]) for k in _TEXT_KEYS if isinstance(meta.get(k), (int, float))
                  and not isinstance(meta.get(k), bool)}
        stamp = _iso_time(obj.get("timestamp")) if isinstance(obj, dict) else None
        self._add(str(obj.get("rid") or meta.get("id") or ""), values, stamp)

    def _add(self, rid: str, values: dict[str, float | None], stamp: float | None) -> None:
        v = {k: x for k, x in values.items() if x is not None and in_value_range(x)}
        self.rejected += len(values) - len(v)
        self.values.append(v)
        n_in, n_out = v.get("prompt_tokens"), v.get("completion_tokens")
        arrival, exact = v.get("request_received_ts"), True
        if arrival is None and stamp is not None and v.get("e2e_latency") is not None:
            arrival, exact = stamp - v["e2e_latency"], False
        if not all(x is not None and math.isfinite(x) and x >= 0 for x in (n_in, n_out, arrival)) \
                or n_in != int(n_in) or n_out != int(n_out):
            self.damaged += 1
            return

        def opt(key: str, kind=float):
            x = v.get(key)
            return kind(x) if x is not None and math.isfinite(x) and x >= 0 else None
        self.requests.append(Request(rid, arrival, int(n_in), int(n_out), opt("e2e_latency"),
                                     opt("first_token_latency"), opt("cached_tokens", int),
                                     opt("num_retractions", int), exact))


def _number(text: str) -> float | None:
    """A printed number as a float (``nan``, ``inf`` included, for the bound to refuse), or ``None``."""
    try:
        return float(text)
    except ValueError:
        return None


def _line_time(text: str) -> float | None:
    """The record's prefix time stamp as local epoch seconds (SGLang logs local time), or ``None``."""
    m = _PREFIX_TIME.search(text[:64])
    if not m:
        return None
    try:
        return datetime.fromisoformat(f"{m.group(1)} {m.group(2).replace(',', '.')}").timestamp()
    except ValueError:
        return None


def _iso_time(value) -> float | None:
    """The JSON record's ``timestamp`` (``datetime.now().isoformat()``, local time) in epoch seconds."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None
