"""The ``server_args`` start-up dump: split into its settings once, and the values the exporter uses read from them.

SGLang prints the dump at start-up in two forms: ``server_args=ServerArgs(name=value, ...)`` (up to
0.5.18, the dataclass repr) and ``server_args={'name': value, ...}`` (0.5.19+,
``_server_args_for_logging``). :func:`split_server_args` splits either at its top-level commas only, so
a value that holds commas, quotes, brackets or braces (``json_model_override_args='{"a": 1, "b": 2}'``,
``lora_paths=['/m/a, b', "c'd"]``, a dict of LoRA paths) stays one value, and a ``name=`` inside such
a value is never read as a setting. :func:`server_args_event` builds the
:class:`~exporter.events.ServerArgs` event from the split. No regular expression here; never raises.
"""

from __future__ import annotations

import re

from ...events import ServerArgs
from ...limits import DECODE_LOG_INTERVAL_MAX, DECODE_LOG_INTERVAL_MIN
from .prefix import parse_origin

__all__ = ["server_args_event", "split_server_args"]


def split_server_args(line: str) -> dict[str, str]:
    """The settings of a ``server_args`` dump as ``{name: value as printed (repr)}``.

    Splits on top-level ``,`` only: commas inside quotes (a backslash escapes the next character
    there), brackets and braces are kept. A dump cut short (a terminal's line limit) gives the
    settings before the cut. Returns ``{}`` when the line has neither form. Never raises.
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


_SETTING = re.compile(r"-?\d{1,9}|None", re.ASCII)  # a size SGLang prints: an int or None
_RANK_SIZE = re.compile(r"\d{1,6}", re.ASCII)
#: Parallel sizes of ``server_args`` by the rank tag they bound (``docs/log-format.md#rank-tags``).
_RANK_SIZES = (("DP", "dp_size"), ("TP", "tp_size"), ("PP", "pp_size"), ("EP", "ep_size"),
               ("ATTN_CP", "attn_cp_size"), ("MOE_DP", "moe_dp_size"))


def server_args_event(line: str, start: int):
    """The :class:`~exporter.events.ServerArgs` event of a ``server_args`` line whose message starts at
    ``start``, or ``("server_args", reason)`` for a dump with no setting the exporter reads (a line
    counted parsed is a line applied) or a ``decode_log_interval`` outside
    :data:`~exporter.limits.DECODE_LOG_INTERVAL_MIN`..\\ :data:`~exporter.limits.DECODE_LOG_INTERVAL_MAX`.

    ``decode_log_interval``, ``chunked_prefill_size`` and ``max_running_requests`` are read where the
    dump prints an int of at most 9 digits or ``None``; the parallel sizes where it prints 1 to 6
    digits (0 is no size); ``enable_mixed_chunk`` where it prints ``True``.
    """
    settings = split_server_args(line[start:])
    found = False
    values: dict[str, int | None] = {}
    for name in ("decode_log_interval", "chunked_prefill_size", "max_running_requests"):
        value = settings.get(name)
        if value is not None and _SETTING.fullmatch(value):
            found = True
            if value != "None":
                values[name] = int(value)
    interval = values.get("decode_log_interval")
    if interval is not None and not DECODE_LOG_INTERVAL_MIN <= interval <= DECODE_LOG_INTERVAL_MAX:
        return ("server_args", f"decode_log_interval={interval}")
    chunk = values.get("chunked_prefill_size")
    sizes = {}
    for tag, name in _RANK_SIZES:
        value = settings.get(name)
        if value is not None and _RANK_SIZE.fullmatch(value):
            found = True
            if int(value) > 0:
                sizes[tag] = int(value)
    if not found:
        return ("server_args", "no known setting")
    return ServerArgs(
        origin=parse_origin(line[:start]),
        decode_log_interval=interval,
        chunked_prefill_size=chunk if chunk is not None and chunk > 0 else None,
        max_running_requests=values.get("max_running_requests"),
        rank_sizes=sizes,
        enable_mixed_chunk=settings.get("enable_mixed_chunk") == "True",
        settings=settings,
    )
