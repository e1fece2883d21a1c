"""Parser: one SGLang log line in, one typed event (or nothing) out.

:func:`parse_line` is a pure function. It recognises every scheduler line kind that SGLang printed
from 2024-01 to mid-2026 (``docs/log-format.md``) and that the real logs of ``tests/corpus/`` show,
under any prefix:

* SGLang's own ``[YYYY-MM-DD HH:MM:SS(.mmm) DPn PPn ATTN_CPn MOE_DPn TPn EPn] `` (tags in any
  order), the 2024 time-only ``[HH:MM:SS TP0] ``, no prefix at all, a prefix whose leading ``[``
  was lost, the 2024 inline ``[gpu_id=N] `` / ``[gpu=N] ``;
* wrapper prefixes before it (a Ray actor tag ``(SGLangEngine pid=N) ``, another framework's
  ISO-8601/level/logger prefix, a fork's ``DATE TIME LEVEL pid [file:line] ``, SGLang Omni's
  ``DATE TIME,ms [LEVEL] logger: `` or Python's default ``LEVEL:logger:``) and junk glued before
  the bracket.

A line whose title is recognised but whose body is damaged (terminal-truncated, spliced by two
writers, a value that is not a number, a required field missing) yields :class:`Malformed`, which
the pipeline counts and does not apply: a damaged line must not put wrong numbers into the
scheduler's story. Nothing here raises on any input, and no regular expression in this module can
backtrack catastrophically: the body is split with ``str.split``/``str.partition`` and the few
regexes used are linear (literal anchors, no nested quantifiers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...events import (
    Capacity,
    DecodeBatch,
    Event,
    KvAllocation,
    KvUsage,
    PrefillBatch,
    ReqTimeStats,
    RetractAbort,
    Retraction,
)
from ...limits import MAX_COUNT_DIGITS, in_value_range
from .omni import parse_omni_line
from .prefix import parse_origin, starts_message
from .serverargs import server_args_event

__all__ = ["Malformed", "parse_line", "parse_origin"]


@dataclass(frozen=True, slots=True)
class Malformed:
    """A line whose kind was recognised but whose fields could not be read.

    Attributes:
        kind: The line kind (one of :data:`exporter.events.KINDS` except ``other``).
        reason: A short human-readable reason, for debug logging.
    """

    kind: str
    reason: str


class _Damaged(Exception):
    """Internal: the body could not be read; becomes :class:`Malformed`."""


def _split_fields(body: str, sep: str = ", ") -> dict[str, str]:
    """Split a ``key: value`` body into a dict of raw strings.

    Handles a trailing separator or blank; the 2025-06/07 SWA form ``#token: full=F, swa=S,
    token usage: full=A, swa=B`` (normalised to ``#full token``/``#swa token``/``full token
    usage``/``swa token usage``); a bracketed list value that holds the separator (SGLang-JAX's
    ``#prefill per DP: [1, 2]``); and SGLang-JAX's ``accept-len X`` / ``accept-ratio X`` (read as
    ``accept len`` / ``accept rate``). Raises :class:`_Damaged` on a part that is not ``key: value``.
    """
    body = body.strip().rstrip(",.").rstrip()
    fields: dict[str, str] = {}
    sub_base = ""
    lists = "[" in body
    parts = iter(body.split(sep))
    for part in parts:
        if not part:
            continue
        key, colon, value = part.partition(": ")
        if colon:
            if lists and value.startswith("[") and "]" not in value:  # a list value split at its separators
                rest = []
                for more in parts:
                    rest.append(more)
                    if "]" in more:
                        break
                else:
                    raise _Damaged(f"unclosed list: {part[:40]!r}")
                value = sep.join((value, *rest))
            if "=" in value and key in ("#token", "token usage"):
                sub_base = key
                name, _, value = value.partition("=")
                key = _sub_key(sub_base, name)
            else:
                sub_base = ""
            fields[key] = value
            continue
        name, eq, value = part.partition("=")
        if eq and sub_base:
            fields[_sub_key(sub_base, name)] = value
            continue
        name, blank, value = part.partition(" ")
        if blank and name in _SPACED_KEYS:
            fields[_SPACED_KEYS[name]] = value
            continue
        raise _Damaged(f"field without value: {part[:40]!r}")
    return fields


#: SGLang-JAX's Decode line prints ``accept-len 2.10, accept-ratio 0.50, `` (no colon).
_SPACED_KEYS = {"accept-len": "accept len", "accept-ratio": "accept rate"}


def _sub_key(base: str, pool: str) -> str:
    return f"#{pool} token" if base == "#token" else f"{pool} token usage"


def _int(value: str) -> int:
    """A non-negative decimal count of at most :data:`~exporter.limits.MAX_COUNT_DIGITS` digits (no sign, no ``_``), else damage."""
    if not (value.isdigit() and value.isascii() and len(value) <= MAX_COUNT_DIGITS):
        raise _Damaged(f"not a count: {value[:40]!r}")
    return int(value)


def _float(value: str) -> float:
    """A finite number in ``0 <= x <`` :data:`~exporter.limits.MAX_VALUE` (a trailing ``%`` is dropped), else damage.

    SGLang prints no negative, infinite or NaN ratio, rate or length, and only ASCII digits (``float``
    itself would read ``٠.٥`` or ``０.５``); such a value is damage, as in every other field.
    """
    try:  # fast path: float() itself ignores surrounding blanks, as the rstrip below does
        result = float(value)
    except ValueError:
        stripped = value.rstrip()
        if stripped.endswith("%"):
            stripped = stripped[:-1]
        try:
            result = float(stripped)
        except ValueError:
            raise _Damaged(f"not a number: {value[:40]!r}") from None
    if not in_value_range(result) or "_" in value or not value.isascii():  # also false for NaN
        raise _Damaged(f"out of range: {value[:40]!r}")
    return result


def _ratio(value: str) -> float:
    """A usage ratio: :func:`_float` and at most 1 (SGLang prints used / capacity), else damage."""
    result = _float(value)
    if result > 1.0:
        raise _Damaged(f"ratio above 1: {value[:40]!r}")
    return result


def _bool(value: str) -> bool:
    if value == "True":
        return True
    if value == "False":
        return False
    raise _Damaged(f"not a boolean: {value[:40]!r}")


# Keys of the KV-usage fragment (docs/log-format.md#kv-usage), shared by Prefill and Decode lines.
_USAGE_POOL = {
    "token usage": "kv",
    "full token usage": "full",
    "swa token usage": "swa",
    "mamba usage": "mamba",
    "gpu token usage": "gpu",
    "cpu token usage": "cpu",
}
_USED_TOKENS = ("#full token", "#token", "#gpu token")
_GRAPH_KEYS = ("cuda graph", "cpu graph", "npu graph", "musa graph")
_PREFILL_PD = {
    "#unbootstrapped-req": "bootstrap",
    "#prealloc-req": "bootstrap",
    "#bootstrap-req": "bootstrap",
    "#transferring-req": "inflight",
    "#inflight-req": "inflight",
    "#optimistic-req": "optimistic",
}
_DECODE_PD = {"#prealloc-req": "prealloc", "#transfer-req": "transfer", "#host-receive-req": "host_receive",
              "#retracted-req": "retracted"}
_USAGE_POOL_ITEMS = tuple(_USAGE_POOL.items())


def _kv(fields: dict[str, str]) -> KvUsage:
    pools = {}
    for key, pool in _USAGE_POOL_ITEMS:  # in this order: it is the order of the exported series
        if key in fields:
            pools[pool] = _ratio(fields[key])
    used = None
    for key in _USED_TOKENS:
        if key in fields:
            used = _int(fields[key])
            break
    if "#swa token" not in fields and "mamba num" not in fields:  # the common line
        return KvUsage(pools, used)
    return KvUsage(pools, used, _opt_int(fields, "#swa token"), _opt_int(fields, "mamba num"))


def _graph(fields: dict[str, str]) -> bool | None:
    for key in _GRAPH_KEYS:
        if key in fields:
            return _bool(fields[key])
    return None


def _opt_int(fields: dict[str, str], *keys: str) -> int | None:
    for key in keys:
        if key in fields:
            return _int(fields[key])
    return None


def _opt_float(fields: dict[str, str], key: str) -> float | None:
    return _float(fields[key]) if key in fields else None


def _required(fields: dict[str, str], *keys: str) -> str:
    for key in keys:
        if key in fields:
            return fields[key]
    raise _Damaged(f"missing {keys[0]}")


def _foreign(fields: dict[str, str], known: frozenset[str]) -> bool:
    """True for a well-formed body holding none of its title's fields: another program's line that
    shares the title (SGLang-JAX's ``Prefill batch. #bid: 3, #cache_miss: 2``), not damage."""
    return bool(fields) and fields.keys().isdisjoint(known)


_KV_KEYS = frozenset({*_USAGE_POOL, *_USED_TOKENS, "#swa token", "#cpu token", "mamba num"})
_PREFILL_KEYS = frozenset({"#new-seq", "#seq", "#new-token", "#new_token", "#cached-token", "#cached_token",
                           "#running-req", "#running_req", "#queue-req", "#remaining_req", "#pending-token",
                           "input throughput (token/s)", "cache hit rate", "tree_cache_hit_rate",
                           *_PREFILL_PD, *_GRAPH_KEYS, *_KV_KEYS})
_DECODE_KEYS = frozenset({"#running-req", "#queue-req", "accept len", "accept rate", "gen throughput (token/s)",
                          "pre-allocated usage", *_DECODE_PD, *_GRAPH_KEYS, *_KV_KEYS})
_RETRACTION_KEYS = frozenset({"#retracted_reqs", "#new_tokens_gained", "#new_token_ratio", "#aborted_retracted_reqs"})
_KV_ALLOCATION_KEYS = frozenset({"#tokens", "dtype", "K size", "V size", "KV size"})


def _skip_title_tail(line: str, j: int) -> int:
    """Skip an optional `` [iter]`` and the ``.``/``,`` separator after a batch title."""
    n = len(line)
    if line.startswith(" [", j):
        k = line.find("]", j + 2)
        if k > 0 and line[j + 2:k].isdigit() and line[j + 2:k].isascii():
            j = k + 1
    if j < n and line[j] in ".,":
        j += 1
    return j


def _prefill(line: str, start: int, j: int, period_body: bool = False) -> Event | Malformed | None:
    origin = parse_origin(line[:start])
    mixed_running: int | None = None
    if line.startswith("(mixed #running-req: ", j):
        k = line.find(")", j)
        if k < 0:
            return Malformed("prefill", "unclosed mixed title")
        try:
            mixed_running = _int(line[j + 21:k])
        except _Damaged as exc:
            return Malformed("prefill", str(exc))
        j = k + 1
    j = _skip_title_tail(line, j)
    try:
        fields = _split_fields(line[j:], ". " if period_body else ", ")
        if "#new-seq" not in fields and "#seq" not in fields and _foreign(fields, _PREFILL_KEYS):
            return None
        # Most lines print no PD queue: one C-level disjointness test instead of six lookups.
        pd = ({} if fields.keys().isdisjoint(_PREFILL_PD) else
              {name: _int(fields[key]) for key, name in _PREFILL_PD.items() if key in fields})
        running = _opt_int(fields, "#running-req", "#running_req")
        return PrefillBatch(
            origin=origin,
            new_seq=_int(_required(fields, "#new-seq", "#seq")),
            new_token=_int(_required(fields, "#new-token", "#new_token")),
            cached_token=_opt_int(fields, "#cached-token", "#cached_token"),
            running_req=running if running is not None else mixed_running,
            queue_req=_opt_int(fields, "#queue-req", "#remaining_req"),
            pending_token=_opt_int(fields, "#pending-token"),
            kv=_kv(fields),
            pd_queues=pd,
            input_throughput=_opt_float(fields, "input throughput (token/s)"),
            graph=_graph(fields),
            replay_token=_opt_int(fields, "#replay-token"),
        )
    except _Damaged as exc:
        return Malformed("prefill", str(exc))


def _decode(line: str, start: int, j: int) -> Event | Malformed | None:
    origin = parse_origin(line[:start])
    j = _skip_title_tail(line, j)
    try:
        fields = _split_fields(line[j:])
        if "#running-req" not in fields and _foreign(fields, _DECODE_KEYS):
            return None
        kv = _kv(fields)
        if kv.used_tokens is not None and not kv.pools:
            # every SGLang version prints a token count with its usage: a line cut short after it
            raise _Damaged("cut short: a token count without its token usage")
        return DecodeBatch(
            origin=origin,
            running_req=_int(_required(fields, "#running-req")),
            queue_req=_opt_int(fields, "#queue-req"),
            kv=kv,
            accept_len=_opt_float(fields, "accept len"),
            accept_rate=_opt_float(fields, "accept rate"),
            gen_throughput=_opt_float(fields, "gen throughput (token/s)"),
            pd_queues=({} if fields.keys().isdisjoint(_DECODE_PD) else
                       {name: _int(fields[key]) for key, name in _DECODE_PD.items() if key in fields}),
            preallocated_usage=_ratio(fields["pre-allocated usage"]) if "pre-allocated usage" in fields else None,
            graph=_graph(fields),
        )
    except _Damaged as exc:
        return Malformed("decode", str(exc))


def _retraction(line: str, start: int, j: int) -> Event | Malformed | None:
    origin = parse_origin(line[:start])
    try:
        fields = _split_fields(line[j:])
        if "#retracted_reqs" not in fields and _foreign(fields, _RETRACTION_KEYS):
            return None
        before = after = None
        ratio = fields.get("#new_token_ratio")
        if ratio is not None:
            a, arrow, b = ratio.partition(" -> ")
            if not arrow:
                raise _Damaged(f"bad #new_token_ratio: {ratio[:40]!r}")
            before, after = _float(a), _float(b)
        return Retraction(
            origin=origin,
            retracted_reqs=_int(_required(fields, "#retracted_reqs")),
            new_tokens_gained=_opt_int(fields, "#new_tokens_gained"),
            new_token_ratio_before=before,
            new_token_ratio_after=after,
            aborted_retracted_reqs=_opt_int(fields, "#aborted_retracted_reqs"),
        )
    except _Damaged as exc:
        return Malformed("retraction", str(exc))


def _capacity(line: str, start: int) -> Event | Malformed:
    origin = parse_origin(line[:start])
    values: dict[str, str] = {}
    for part in line[start:].rstrip().split(", "):
        key, eq, value = part.partition("=")
        if eq:
            values[key] = value
    try:
        return Capacity(
            origin=origin,
            max_total_num_tokens=_int(values.get("max_total_num_tokens", "")),
            max_running_requests=_opt_setting(values, "max_running_requests"),
            context_len=_opt_setting(values, "context_len"),
            chunked_prefill_size=_opt_setting(values, "chunked_prefill_size"),
            max_prefill_tokens=_opt_setting(values, "max_prefill_tokens"),
        )
    except _Damaged as exc:
        return Malformed("capacity", str(exc))


def _opt_setting(values: dict[str, str], key: str) -> int | None:
    """An optional size of a start-up line: a count, or ``None`` when absent or printed as SGLang's
    "not set" (``-1``, e.g. ``chunked_prefill_size=-1`` for chunked prefill off, or ``None``)."""
    value = values.get(key)
    if value is None or value in ("-1", "None"):
        return None
    return _int(value)


def _gib(value: str) -> float:
    """A size printed as ``X GB`` (SGLang divides by 2**30) in bytes, else damage."""
    number, blank, unit = value.partition(" ")
    if not blank or unit != "GB":
        raise _Damaged(f"not a size: {value[:40]!r}")
    return _float(number) * (1 << 30)


def _kv_allocation(line: str, start: int, j: int, post_capture: bool = False) -> Event | Malformed | None:
    try:
        fields = _split_fields(line[j:])
        if "#tokens" not in fields and _foreign(fields, _KV_ALLOCATION_KEYS):
            return None
        if "KV size" in fields:
            size: float | None = _gib(fields["KV size"])
        elif "K size" in fields or "V size" in fields:
            size = _gib(_required(fields, "K size")) + _gib(_required(fields, "V size"))
        else:
            size = None
        return KvAllocation(parse_origin(line[:start]), _int(_required(fields, "#tokens")), size, post_capture)
    except _Damaged as exc:
        return Malformed("kv_allocation", str(exc))


def _server_args(line: str, start: int) -> Event | Malformed:
    ev = server_args_event(line, start)  # the dump split once (.serverargs)
    return Malformed(*ev) if type(ev) is tuple else ev


_QUEUE_DURATION = re.compile(r"(?<![\w(])queue_duration=(-?\d{1,12}(?:\.\d{1,9})?)ms", re.ASCII)
_REQ_INT = {
    "input_len": re.compile(r"[(, ]input[ _]len=(\d{1,15})(?!\d)", re.ASCII),
    "output_len": re.compile(r"[(, ]output[ _]len=(\d{1,15})(?!\d)", re.ASCII),
    "cached_input_len": re.compile(r"[(, ]cached_input_len=(\d{1,15})(?!\d)", re.ASCII),
    "attempts": re.compile(r"[(, ]attempts=(\d{1,15})(?!\d)", re.ASCII),
}


def _req_time_stats(line: str, start: int, head_end: int) -> Event | Malformed:
    body = line[start:]
    m = _QUEUE_DURATION.search(body)
    if not m:
        return Malformed("req_time_stats", "no queue_duration")
    head = line[start:head_end] if head_end > start else body
    ints: dict[str, int | None] = {}
    for name, pattern in _REQ_INT.items():
        hit = pattern.search(head)
        ints[name] = int(hit.group(1)) if hit else None
    return ReqTimeStats(
        origin=parse_origin(line[:start]),
        queue_duration=float(m.group(1)) / 1000.0,
        **ints,
    )


def parse_line(line: str) -> Event | Malformed | None:
    """Turn one log line into a typed event.

    Args:
        line: One line of text without its line terminator (a trailing ``\\r`` or blanks are fine).

    Returns:
        An event from :mod:`exporter.events` for a scheduler line; :class:`Malformed` when the line
        is of a known kind but damaged; ``None`` for every other line (access logs, start-up chatter,
        tracebacks, progress bars). SGLang Omni's own lines (:mod:`.omni`) are read after every SGLang
        title failed. Never raises.
    """
    try:
        ev = _parse(line)
        if ev is None:  # SGLang Omni's own lines, in Omni's format only (exporter/sources/log/omni.py)
            ev = parse_omni_line(line)
            if type(ev) is tuple:
                return Malformed(*ev)
        return ev
    except Exception as exc:  # pragma: no cover - defence in depth; every known path is handled
        return Malformed("other", f"parser error: {type(exc).__name__}")


#: What follows ``retract_decode: aborted `` on its two lines (``RetractAbort``).
_ABORT_TAILS = ("last request ", "request ")
#: The tail of the ``Post-capture KV sizing`` line, printed as ``name=value`` (cut before the fields are read).
_AVAIL_MEM = ", avail mem="


def _parse(line: str) -> Event | Malformed | None:
    i = line.find("Decode batch")
    if i >= 0 and starts_message(line, i):
        return _decode(line, i, i + 12)
    i = line.find("Prefill batch")
    if i >= 0 and starts_message(line, i):
        return _prefill(line, i, i + 13)
    i = line.find("KV cache pool is full. Retract requests.")
    if i >= 0 and starts_message(line, i):
        return _retraction(line, i, i + 40)
    i = line.find("ecode out of memory happened")
    if i > 0 and line[i - 1] in "Dd" and starts_message(line, i - 1):
        return _retraction(line, i - 1, _skip_title_tail(line, i + 28))
    i = line.find("Testing retraction.")
    if i >= 0 and starts_message(line, i):
        return _retraction(line, i, i + 19)
    i = line.find("retract_decode: aborted ")
    if i >= 0 and line.startswith(_ABORT_TAILS, i + 24) and starts_message(line, i):
        return RetractAbort(parse_origin(line[:i]))
    i = line.find("max_total_num_tokens=")
    if i >= 0 and starts_message(line, i):
        return _capacity(line, i)
    i = line.find("server_args=")
    if i >= 0 and starts_message(line, i):
        return _server_args(line, i)
    i = line.find("KV Cache is allocated.")
    if i >= 0 and starts_message(line, i):
        return _kv_allocation(line, i, i + 22)
    i = line.find("Post-capture KV sizing: KV cache allocated.")
    if i >= 0 and starts_message(line, i):
        k = line.find(_AVAIL_MEM, i)  # the only field of this line printed as name=value
        return _kv_allocation(line[:k] if k > 0 else line, i, i + 43, post_capture=True)
    i = line.find("Time Stats(")
    if i >= 4 and line.startswith("Req ", i - 4) and starts_message(line, i - 4):
        return _req_time_stats(line, i - 4, line.find("):", i))
    i = line.find("ReqTimeStats(")
    if i >= 0 and starts_message(line, i):
        return _req_time_stats(line, i, line.find("):", i))
    i = line.find("Prefil batch")
    if i >= 0 and starts_message(line, i):
        return _prefill(line, i, i + 12)
    i = line.find("new fill batch")
    if i >= 0 and starts_message(line, i):
        return _prefill(line, i, i + 14, period_body=True)
    i = line.find("#running-req: ")
    if i >= 0 and starts_message(line, i):
        return _decode(line, i, i)
    return None
