"""A line's prefix: who printed it and when (rank tags, timestamp), and where its message starts.

SGLang's prefix is ``[YYYY-MM-DD HH:MM:SS(.mmm) DPn PPn ATTN_CPn MOE_DPn TPn EPn] `` (tags in any order),
the 2024 time-only ``[HH:MM:SS TP0] ``, or the 2024 inline ``[gpu_id=N] ``; wrapper prefixes may come
before it (``docs/log-format.md#line-prefix``, ``docs/log-format.md#rank-tags``).

SGLang Omni's format is ``DATE TIME,ms [LEVEL] logger: `` (Python logging, set up by Omni's profiler
modules); with the logging shim of ``deploy/sglang-omni/sitecustomize.py`` it carries
``[processName/threadName] `` after the level (``docs/sglang-omni.md``). The token is read here
(:attr:`~exporter.events.Origin.task`); which stage it names is decided by
:mod:`exporter.sources.log.attribution`.
"""

from __future__ import annotations

import calendar
import re

from ...events import Origin

_NO_ORIGIN = Origin()
# re.ASCII: ``\d`` is 0-9 only, as in every field (``DP١`` is no rank tag, ``２０２６-...`` no date).
_RANK_TAG = re.compile(r"(DP|PP|ATTN_CP|MOE_DP|TP|EP)(\d{1,6})", re.ASCII)
_REPLICA_ORDER = {"PP": 0, "ATTN_CP": 1, "MOE_DP": 2, "TP": 3, "EP": 4}
_DATETIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?", re.ASCII)
_TIME_OF_DAY = re.compile(r"(?<!\d)(\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(?!\d)", re.ASCII)
_ORIGIN_CACHE: dict[str, Origin] = {}
_ORIGIN_CACHE_MAX = 4096
_ORIGIN_CACHE_KEY_MAX = 256
#: SGLang Omni's prefix at the end of the text before a message: ``DATE TIME,ms [LEVEL] `` then the
#: shim's optional ``[process/thread] `` then ``logger: `` (Python logger names: dots, word characters,
#: ``<module>``-style brackets and dashes). Linear: no nested quantifiers, bounded repeats.
_OMNI_PREFIX = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \[[A-Z]{4,8}\] "
                          r"(?:\[([^\[\]/]{1,200})/([^\[\]]{1,200})\] )?[\w.<>-]{1,200}: ?\Z")


_EPOCH_CACHE: dict[str, float | None] = {}


def _epoch_seconds(m: re.Match) -> float | None:
    """Whole seconds since the epoch of a :data:`_DATETIME` match (fraction excluded), or None.

    Memoised by the date-time text: the origin memo misses whenever the rank tags or the prefix
    around the time differ, yet the seconds repeat over many lines, and ``calendar.timegm`` is the
    dearest step of an origin. Bounded like the origin memo.
    """
    key = m.group(0)[:19]  # "YYYY-MM-DD HH:MM:SS": the pattern's fixed-width part
    if key in _EPOCH_CACHE:
        return _EPOCH_CACHE[key]
    y, mo, d, h, mi, s = m.groups()[:6]
    try:
        value: float | None = float(calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(s))))
    except (ValueError, OverflowError):
        value = None
    if len(_EPOCH_CACHE) >= _ORIGIN_CACHE_MAX:
        _EPOCH_CACHE.clear()
    _EPOCH_CACHE[key] = value
    return value


def parse_origin(prefix: str) -> Origin:
    """Read rank tags and timestamp from the text that precedes a line's message.

    Args:
        prefix: Everything before the message title, e.g. ``"[2026-07-21 10:00:00 DP3 TP3 EP3] "``
            or ``"(SGLangEngine pid=1) [2026-03-22 13:53:37 TP0] "``; may be empty or junk.

    Returns:
        The :class:`Origin`. Rank tags are read from the last ``[...]`` group (or from the text
        before a ``]`` whose ``[`` was lost); the timestamp from the first date-time in the prefix,
        else from a time of day; ``task`` from SGLang Omni's prefix (``""`` without the shim's
        token, ``None`` for any other format); ``stage`` stays empty. Results for prefixes up to 256 characters are memoised (prefixes
        repeat within a second); the memo holds at most 4096 entries, so memory stays bounded.
    """
    if not prefix:
        return _NO_ORIGIN
    cached = _ORIGIN_CACHE.get(prefix)
    if cached is not None:
        return cached
    dp = "0"
    replica_tags: list[tuple[int, str]] = []
    end = prefix.rfind("]")
    if end >= 0:
        start = prefix.rfind("[", 0, end) + 1
        for token in prefix[start:end].split():
            m = _RANK_TAG.fullmatch(token)
            if m:  # ranks are normalised (DP007 is DP7) so one rank is one label value
                if m.group(1) == "DP":
                    dp = str(int(m.group(2)))
                else:
                    replica_tags.append((_REPLICA_ORDER[m.group(1)], f"{m.group(1)}{int(m.group(2))}"))
            elif token.startswith(("gpu_id=", "gpu=")):
                value = token.partition("=")[2]
                if value.isascii() and value.isdigit() and len(value) <= 6:
                    dp = str(int(value))
    replica = " ".join(t for _, t in sorted(replica_tags))
    log_time: float | None = None
    tod = False
    m = _DATETIME.search(prefix)
    if m:
        log_time = _epoch_seconds(m)
        frac = m.group(7)
        if log_time is not None and frac:
            log_time += int(frac) / 10 ** len(frac)
    else:
        m = _TIME_OF_DAY.search(prefix)
        if m:
            h, mi, s, frac = m.groups()
            log_time = int(h) * 3600 + int(mi) * 60 + int(s) + (int(frac) / 10 ** len(frac) if frac else 0.0)
            tod = True
    task = None
    if "," in prefix:  # Python logging's comma before the milliseconds: maybe Omni (SGLang's has none)
        omni = _OMNI_PREFIX.search(prefix)
        if omni is not None:
            task = f"{omni.group(1)}/{omni.group(2)}" if omni.group(1) is not None else ""
    origin = Origin(dp, replica, log_time, tod, "", task)
    if len(prefix) <= _ORIGIN_CACHE_KEY_MAX:  # junk-laden prefixes are not worth keeping
        if len(_ORIGIN_CACHE) >= _ORIGIN_CACHE_MAX:
            _ORIGIN_CACHE.clear()
        _ORIGIN_CACHE[prefix] = origin
    return origin


#: The time stamp that starts a line (after blanks and a Ray actor tag): the prefix's date-time or
#: time of day, in a bracket or not. Linear: bounded repeats, anchored at the start.
_LEADING_STAMP = re.compile(r"\s{0,8}(?:\(\w{1,64} pid=\d{1,10}\) ?)?(?:\[?(?=\d{4}-)|\[(\d\d):(\d\d):(\d\d)"
                            r"(?:[.,](\d{1,9}))?[\] ])", re.ASCII)


def line_time(line: str) -> tuple[float, bool] | None:
    """The time stamp that starts any log line, scheduler line or not: ``(seconds, time_of_day_only)``,
    or ``None`` when the line starts with none.

    Read as :func:`parse_origin` reads a prefix's time: a date and time gives seconds since the epoch
    (the server's naive wall clock read as UTC); SGLang's 2024 time-only ``[HH:MM:SS`` gives seconds of
    the day (``time_of_day_only`` True). Used for the lines that are no event (start-up chatter,
    tracebacks, request records), whose time still bounds a log's span.
    """
    m = _LEADING_STAMP.match(line)
    if m is None:
        return None
    if m.group(1) is None:  # a date follows
        d = _DATETIME.match(line, m.end())
        if d is None:
            return None
        t = _epoch_seconds(d)
        if t is None:
            return None
        frac = d.group(7)
        return (t + int(frac) / 10 ** len(frac) if frac else t), False
    h, mi, s, frac = m.groups()
    if int(h) > 23 or int(mi) > 59 or int(s) > 60:
        return None
    return int(h) * 3600 + int(mi) * 60 + int(s) + (int(frac) / 10 ** len(frac) if frac else 0.0), True


def starts_message(line: str, i: int) -> bool:
    """True when position ``i`` is where a log record's message starts.

    That is the start of the line (after blanks), right after a ``]`` (SGLang's bracket, an inline
    ``[gpu_id=N]``, a fork's ``[file:line]``), right after a ``:`` (a logger-name prefix), or right
    after a bare level word that follows a time stamp (hosted platforms' ``2026-09-26T19:55:58.468Z
    host INFO msg``). A title
    found anywhere else, such as inside a logged request's text, is not a scheduler line.

    A prefix holding ``obj=`` or a quote may be a request logged by ``--log-requests`` (Python repr or
    JSON) whose prompt imitates a scheduler line; it must not forge metrics. ``obj=`` always refuses.
    A quote is allowed only in text *glued* before the record (model output printed without a
    newline, common in notebooks and ``2>&1`` pipes): every quote lies before the prefix's first time
    stamp, and the rest of the line from the title on holds none. A quoted prompt fails one or the
    other: its record's time stamp comes before the opening quote, and repr and JSON close the quote
    after the imitation.
    """
    if i == 0:
        return True
    j = i - 1
    if line[j] == " ":
        j -= 1
        while j >= 0 and line[j] == " ":
            j -= 1
        if j < 0:
            return True
    if line[j] not in "]:":
        if not _after_level_word(line, j):
            return False
    prefix = line[:i]
    if "obj=" in prefix:
        return False
    if "'" not in prefix and '"' not in prefix:
        return True
    return _glued(line, prefix, i)


#: Level words of Python logging (and ``WARN``), as hosted platforms print them before a message.
_LEVEL_WORDS = ("INFO", "WARNING", "WARN", "DEBUG", "ERROR", "CRITICAL")


def _after_level_word(line: str, j: int) -> bool:
    """``line[j]`` ends a level word (:data:`_LEVEL_WORDS`) that stands alone after blanks, in a
    prefix holding a date-time stamp: ``2026-09-26T19:55:58.468Z host INFO `` before a message."""
    for word in _LEVEL_WORDS:
        k = j + 1 - len(word)
        if k >= 1 and line.startswith(word, k) and line[k - 1] == " ":
            return _DATETIME.search(line, 0, k) is not None
    return False


def _glued(line: str, prefix: str, i: int) -> bool:
    """The quotes of ``prefix`` belong to output glued before the record (see :func:`starts_message`)."""
    stamp = _DATETIME.search(prefix)
    start = stamp.start() if stamp else len(prefix)
    tod = _TIME_OF_DAY.search(prefix, 0, start)
    if tod:
        start = tod.start()
    if start == len(prefix):
        return False  # no time stamp: nothing tells a record's own prefix from quoted text
    record = prefix[start:]
    if "'" in record or '"' in record:
        return False
    rest = line[i:]
    return "'" not in rest and '"' not in rest
