"""Line data the report reads itself, beside the parser (whose events do not carry it).

* the whole ``server_args=ServerArgs(...)`` dump as ``{name: repr}`` (:func:`split_server_args`),
  read only from lines that the parser already recognised as ``ServerArgs``;
* ``Finish: obj=... out={'meta_info': {...}}`` request records (``--log-requests``; the JSON form
  ``"event": "request.finished"`` too) for ``e2e_latency`` and request lengths (:class:`FinishRecords`);
* ``KV Cache is allocated. [dtype: D, ]#tokens: N, K size: X GB, V size: Y GB`` (``dtype`` since
  2026; SGLang Omni prints it and never the start-up capacity line): the KV capacity in tokens and
  the pool's bytes (:func:`kv_allocation`);
* ``mamba num`` and ``#swa token`` of hybrid models' Decode lines (the parser keeps their usage
  ratios only): :data:`MAMBA_NUM`, :data:`SWA_TOKENS`;
* the time stamp at the start of any line, scheduler line or not (:func:`line_time`).

Every number read here passes the parser's own bound (:func:`~exporter.limits.in_value_range`).
"""

from __future__ import annotations

import calendar
import functools
import re
from dataclasses import dataclass, field

from ..limits import in_value_range


def _value(text: str) -> float | None:
    """``text`` as a number the parser accepts too (:func:`~exporter.limits.in_value_range`), else ``None`` (never raises)."""
    if len(text) > 40 or not text.isascii():  # huge digit strings; non-ASCII digits, as in the parser
        return None
    try:
        x = float(text)
    except ValueError:
        return None
    return x if in_value_range(x) else None


def split_server_args(line: str) -> dict[str, str]:
    """The settings of a ``server_args`` dump as ``{name: value as printed (repr)}``.

    Both forms SGLang printed: ``server_args=ServerArgs(name=value, ...)`` (up to 0.5.18) and the
    Python dict ``server_args={'name': value, ...}`` (0.5.19+). Splits on top-level ``", "`` only
    (commas inside quotes, brackets and braces are kept), so ``json_model_override_args='{"a": 1,
    "b": 2}'`` stays one value. Returns ``{}`` when the line has neither body. Never raises.
    """
    i = line.find("ServerArgs(")
    if i >= 0:
        body, sep = line[i + 11:], "="
    else:
        i = line.find("server_args={")
        if i < 0:
            return {}
        body, sep = line[i + 13:], ": "
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
            if depth == 0:  # the closing parenthesis of ServerArgs( or brace of the dict
                break
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(body[start:k])
            start = k + 1
        k += 1
    parts.append(body[start:k])
    out: dict[str, str] = {}
    for part in parts:
        name, eq, value = part.strip().partition(sep)
        if sep == ": ":
            if len(name) < 3 or name[0] != "'" or name[-1] != "'":
                continue
            name = name[1:-1]
        if eq and name.isidentifier():
            out[name] = value
    return out


_FINISH_NUM = {
    name: re.compile(rf"['\"]{name}['\"]:\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")
    for name in ("e2e_latency", "queue_time", "prompt_tokens", "completion_tokens", "cached_tokens",
                 "request_received_ts")
}
KV_ALLOC = re.compile(r"KV Cache is allocated\.(?: dtype: [^,]{1,40},)? #tokens: (\S+), "
                       r"(?:K size: (\S+) GB, V size: (\S+) GB|KV size: (\S+) GB)")
MAMBA_NUM = re.compile(r"[ ,]mamba num: (\d{1,15}),")
SWA_TOKENS = re.compile(r"(?:#swa token: |#token: full=\d{1,15}, swa=)(\d{1,15}),")
_LINE_START = re.compile(r"^\s*(?:\(\w+ pid=\d+\) )?\[\d")
_STAMP = re.compile(r"\s{0,8}(?:\(\w{1,64} pid=\d{1,10}\) ?)?\[?(\d{4}-\d\d-\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")
_TIME_OF_DAY = re.compile(r"\s{0,8}(?:\(\w{1,64} pid=\d{1,10}\) ?)?\[(\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?[\] ]")


@functools.lru_cache(maxsize=4096)
def _epoch(date: str, h: str, mi: str, s: str) -> float | None:
    try:
        y, mo, d = date.split("-")
        return float(calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(s))))
    except (ValueError, OverflowError):
        return None


def line_time(line: str) -> tuple[float, bool] | None:
    """The time stamp at the start of any log line: ``(seconds, time_of_day_only)``, or ``None``.

    Dates give seconds since the epoch (the server's naive wall clock read as UTC, as the parser
    does); a time-only ``[HH:MM:SS`` prefix gives seconds of the day.
    """
    m = _STAMP.match(line)
    if m:
        t = _epoch(m.group(1), m.group(2), m.group(3), m.group(4))
        if t is None:
            return None
        frac = m.group(5)
        return (t + int(frac) / 10 ** len(frac) if frac else t), False
    m = _TIME_OF_DAY.match(line)
    if m:
        h, mi, s, frac = m.groups()
        if int(h) > 23 or int(mi) > 59 or int(s) > 60:
            return None
        return int(h) * 3600 + int(mi) * 60 + int(s) + (int(frac) / 10 ** len(frac) if frac else 0.0), True
    return None


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
    #: ``request_received_ts`` (seconds since the epoch; ``meta_info`` of SGLang 0.5.x) of the records that have it.
    arrivals: list[float] = field(default_factory=list)
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
        if "request_received_ts" in values:
            self.arrivals.append(values["request_received_ts"])


def kv_allocation(line: str) -> tuple[int, float] | None | bool:
    """``(#tokens, K+V GiB)`` of a ``KV Cache is allocated`` line; ``None`` when the line is not one;
    ``False`` when it is one with a damaged number (negative, not finite, too large, not whole)."""
    m = KV_ALLOC.search(line)
    if not m:
        return None
    tokens = _value(m.group(1))
    sizes = [_value(g) for g in ((m.group(4),) if m.group(4) else m.group(2, 3))]
    if tokens is None or tokens != int(tokens) or None in sizes:
        return False
    return int(tokens), sum(sizes)
