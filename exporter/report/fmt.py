"""How the report writes numbers in words: the one place for units, percentages and ``n/a``."""

from __future__ import annotations

import math
from datetime import datetime, timezone


def num(x: float | None, digits: int = 0, unit: str = "") -> str:
    """``x`` with thousands separators and ``digits`` decimals, then `` unit``; ``"n/a"`` (no unit) when unknown."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    text = f"{x:,.0f}" if (isinstance(x, int) and not isinstance(x, bool)) or digits == 0 else f"{x:,.{digits}f}"
    return f"{text}{unit}"


def pct(x: float | None, digits: int = 1) -> str:
    """A share in [0, 1] as a percentage (``0.016`` -> ``"1.6%"``); ``"n/a"`` when unknown."""
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def count_range(pair: list[int] | None) -> str:
    """``[42, 49]`` -> ``"42-49"``, ``[1, 1]`` -> ``"1"``; ``"n/a"`` when unknown."""
    if not pair:
        return "n/a"
    lo, hi = pair
    return f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"


def iso_time(t: float | None, time_of_day: bool) -> str | None:
    """A time stamp as ``YYYY-MM-DD HH:MM:SS`` (UTC, the log's naive clock), or ``[+Nd ]HH:MM:SS.fff``
    for time-only logs (seconds of the day, unwrapped across midnight); ``None`` when unknown."""
    if t is None:
        return None
    if time_of_day:
        day, rest = divmod(t, 86400)
        h, rest = divmod(rest, 3600)
        m, s = divmod(rest, 60)
        return f"{'+%dd ' % day if day else ''}{int(h):02d}:{int(m):02d}:{s:06.3f}"
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
