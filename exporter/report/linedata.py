"""Line data the report reads itself, beside the parser (whose events do not carry it).

* the whole ``server_args=ServerArgs(...)`` dump as ``{name: repr}`` (:func:`split_server_args`),
  read only from lines that the parser already recognised as ``ServerArgs``;
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


KV_ALLOC = re.compile(r"KV Cache is allocated\.(?: dtype: [^,]{1,40},)? #tokens: (\S+), "
                       r"(?:K size: (\S+) GB, V size: (\S+) GB|KV size: (\S+) GB)")
MAMBA_NUM = re.compile(r"[ ,]mamba num: (\d{1,15}),")
SWA_TOKENS = re.compile(r"(?:#swa token: |#token: full=\d{1,15}, swa=)(\d{1,15}),")
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
