"""The common line templates of the bulk path: one compiled ``bytes`` pattern for whole lines.

The pattern recognises the ``Prefill batch`` and ``Decode batch`` lines that SGLang prints under its
own prefix (``docs/log-format.md``), the shapes that make up nearly every line of a busy server's
log, and captures the fields the scheduler state uses. It is strict on purpose: a line matches only
when every field has the canonical shape that the per-line parser (:mod:`.parser`, the reference)
reads to the same value, so a match can skip the parser. Anything else does not match and is
handed to the parser: other prefixes (wrappers other than a Ray actor tag, Python logging, SGLang
Omni), other eras and titles, fields in another order or with other spellings, damaged lines,
``\\r`` inside a line, NUL bytes, non-ASCII digits, values with a sign, an exponent, ``_`` or
``%``, counts of more than :data:`~exporter.limits.MAX_COUNT_DIGITS` digits.

What a match guarantees, so that no value needs checking again:

* the prefix is SGLang's ``[YYYY-MM-DD HH:MM:SS(.frac) RANK TAGS] `` (or ``HH:MM:SS`` of 2024;
  the ``[`` may have been lost at a cut), a fork's ``YYYY-MM-DD HH:MM:SS LEVEL pid [file:line] ``,
  either one after a Ray actor tag ``(Name pid=N) ``, or nothing. The rank tags are read by
  :func:`.prefix.parse_origin` itself, once per distinct text (upper-case letters, digits, ``_``
  and blanks after a blank: no date, time, quote or ``=`` can hide there, so the time stamp and the
  message start are the ones the parser finds);
* the title starts the message (:func:`.prefix.starts_message` holds), and it is the first title the
  parser looks for in the line;
* every count is 1 to 15 ASCII digits and every number has at most 15 digits before its point,
  so both are inside :func:`~exporter.limits.in_value_range`, as the parser requires, and every
  usage ratio is at most 1;
* the line holds no quote, no ``obj=``, no ``\\r`` except one at its end, no NUL, and only ASCII.

Two compilations of one pattern: :data:`SCAN` captures only what every line needs (identity, time,
the histogrammed and integrated fields, and empty groups that say which optional fields a line
prints), since each capture costs time on every line; :data:`FULL` captures every field and reads
the few lines whose values become the latest gauges. Both accept exactly the same lines. The fields
follow SGLang's order of printing them (``scheduler_metrics_mixin.py``, 2024-06 to 2026-07).
"""

from __future__ import annotations

import re

from ...events import DecodeBatch, KvUsage, PrefillBatch
from .prefix import parse_origin

_COUNT = rb"\d{1,15}"
_NUMBER = rb"\d{1,15}(?:\.\d{1,17})?"
#: A usage ratio the parser accepts: a number of at most 1 (SGLang prints used / capacity).
_RATIO = rb"(?:0{1,15}(?:\.\d{1,17})?|0{0,14}1(?:\.0{1,17})?)"


def _graph(name: str) -> bytes:
    return rb"(?:cuda|cpu|npu|musa) graph: (?P<" + name.encode() + rb">True|False)"



def _field(name: str, value: bytes = _NUMBER) -> bytes:
    return b"(?P<" + name.encode() + b">" + value + b")"


_PREFIX = (
    rb"(?P<prefix>"
    rb"(?:\((?P<actor>\w{1,64} pid=\d{1,10})\) )?"                       # Ray actor tag (SGLangEngine pid=N)
    rb"\[?(?:(?P<date>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)|(?P<tod>\d\d:\d\d:\d\d))"  # date and time, or time of day
    rb"(?:\.(?P<frac>\d{1,9}))?"                                          # fraction of a second
    rb"(?:(?P<tags>(?: [A-Z_0-9 ]{0,127})?)\]"                          # SGLang's rank tags, or
    rb"|(?P<fork> (?:DEBUG|INFO|WARNING|ERROR) \d{1,10} \[[\w.]{1,64}:\d{1,6}\]))"  # a fork's level pid [file:line]
    rb" )?"                                                               # (or no prefix at all)
)
_DECODE = (
    rb"Decode batch(?: \[\d{1,15}\])?[.,] #running-req: " + _field("d_running", _COUNT) + rb", "
    rb"(?:#token: " + _field("d_token", _COUNT) + rb", token usage: " + _field("d_usage", _RATIO) + rb", "
    rb"|#full token: " + _field("d_full_token", _COUNT) + rb", full token usage: " + _field("d_full_usage", _RATIO)
    + rb", #swa token: " + _field("d_swa_token", _COUNT) + rb", swa token usage: " + _field("d_swa_usage", _RATIO) + rb", )"
    rb"(?:pre-allocated usage: (?P<d_has_prealloc>)" + _field("d_prealloc_usage", _RATIO) + rb", #prealloc-req: "
    + _field("d_prealloc", _COUNT) + rb", #transfer-req: " + _field("d_transfer", _COUNT)
    + rb", #retracted-req: " + _field("d_retracted", _COUNT) + rb", )?"
    rb"(?:accept len: " + _field("d_accept_len") + rb", )?"
    rb"(?:accept rate: (?P<d_has_accept_rate>)" + _field("d_accept_rate") + rb", )?"
    rb"(?:" + _graph("d_graph") + rb", )?"
    rb"gen throughput \(token/s\): " + _field("d_gen") + rb", "
    rb"(?:largest-len: \d{1,15}, )?"
    rb"#queue-req: " + _field("d_queue", _COUNT)
)
_PREFILL = (
    rb"Prefill batch(?: \[\d{1,15}\])?[.,] #new-seq: " + _field("p_new_seq", _COUNT) + rb", #new-token: "
    + _field("p_new_token", _COUNT) + rb", #cached-token: " + _field("p_cached", _COUNT) + rb", "
    rb"(?:cache hit rate: " + _NUMBER + rb"%, )?"
    rb"(?:token usage: " + _field("p_usage", _RATIO) + rb", |full token usage: " + _field("p_full_usage", _RATIO)
    + rb", mamba usage: " + _field("p_mamba_usage", _RATIO) + rb", )"
    rb"#running-req: " + _field("p_running", _COUNT) + rb", #queue-req: " + _field("p_queue", _COUNT)
    + rb"(?:, #prealloc-req: (?P<p_has_pd>)" + _field("p_bootstrap", _COUNT) + rb", #inflight-req: "
    + _field("p_inflight", _COUNT) + rb")?"
    rb"(?:, #pending-token: (?P<p_has_pending>)" + _field("p_pending", _COUNT) + rb")?"
    rb"(?:, " + _graph("p_graph") + rb")?"
    rb"(?:, input throughput \(token/s\): (?P<p_has_input>)" + _field("p_input") + rb")?"
)
#: One whole line: prefix, then a Decode or a Prefill body, then what the parser strips at the end.
_SOURCE = _PREFIX + rb"(?:" + _DECODE + rb"|" + _PREFILL + rb")[,.]* ?\r?\Z"

#: Groups that :data:`SCAN` keeps, in this order in ``match.groups()``.
SCAN_FIELDS = (
    "actor", "date", "tod", "frac", "tags", "fork",
    "d_running", "d_token", "d_usage", "d_full_token", "d_full_usage", "d_swa_usage", "d_has_prealloc", "d_accept_len",
    "d_has_accept_rate", "d_queue",
    "p_new_seq", "p_new_token", "p_cached", "p_usage", "p_full_usage", "p_mamba_usage", "p_running", "p_queue",
    "p_has_pd", "p_has_pending", "p_has_input",
)


def _branches(source: bytes) -> bytes:
    """``source`` with every optional group ``(...)?`` written as the alternation ``(?:(...)|)``.

    Both match the same text with the same groups (greedy: the group first, then nothing), but CPython's
    ``re`` runs an optional group that holds capturing groups as a repeat that saves and restores its
    marks, and an alternation without that: on the bench log's template lines :data:`SCAN` takes 1.48
    instead of 1.92 us a line. Handles escapes and character classes; a lazy ``??`` is left alone.
    """
    out = bytearray()
    opened: list[int] = []  # where each open group starts in `out`
    i, n = 0, len(source)
    in_class = False
    while i < n:
        c = source[i:i + 1]
        if c == b"\\":
            out += source[i:i + 2]
            i += 2
            continue
        if in_class:
            in_class = c != b"]"
        elif c == b"[":
            in_class = True
            if source[i + 1:i + 2] == b"]":  # a ']' first in a class is a literal
                out += b"[]"
                i += 2
                continue
        elif c == b"(":
            opened.append(len(out))
        elif c == b")":
            start = opened.pop()
            if source[i + 1:i + 2] == b"?" and source[i + 2:i + 3] != b"?":
                group = bytes(out[start:]) + b")"
                del out[start:]
                out += b"(?:" + group + b"|)"
                i += 2
                continue
        out += c
        i += 1
    if opened or in_class:
        raise ValueError("templates: unbalanced pattern")
    return bytes(out)


def _only(source: bytes, keep: tuple[str, ...]) -> bytes:
    """``source`` with every named group outside ``keep`` made non-capturing."""
    return re.sub(rb"\(\?P<(\w+)>", lambda m: m.group(0) if m.group(1).decode() in keep else b"(?:", source)


#: Longest line a template can match (every field at its longest is about 900 bytes), below the least
#: ``--log.max-line-bytes`` (:data:`~exporter.limits.MAX_LINE_BYTES_MIN`): no template line is oversized.
TEMPLATE_MAX_BYTES = 1024

#: Every field captured (``match.group(name)``): for the lines whose values become the latest gauges.
FULL = re.compile(_branches(_SOURCE))
#: The fields of :data:`SCAN_FIELDS` captured: for every line.
SCAN = re.compile(_branches(_only(_SOURCE, SCAN_FIELDS)))
#: Position of each :data:`SCAN_FIELDS` group in ``SCAN.match(...).groups()``.
GROUP = {name: SCAN.groupindex[name] - 1 for name in SCAN_FIELDS}
if SCAN.groups != len(SCAN_FIELDS) or sorted(GROUP.values()) != list(range(len(SCAN_FIELDS))):
    raise AssertionError("templates: SCAN_FIELDS must list SCAN's groups in pattern order")


#: :data:`FULL` for text (``re.ASCII``: the same lines as the bytes pattern, ASCII digits only).
FULL_TEXT = re.compile(_branches(_SOURCE).decode("ascii"), re.ASCII)


def parse_template(line: str) -> DecodeBatch | PrefillBatch | None:
    """The event of a template line, equal to what :func:`.parser.parse_line` returns for it; ``None``
    for any other line (then ask the parser). About three times cheaper than the parser for the lines
    it reads; ``tests/test_log_bulk.py`` compares both on the corpus and fuzzed lines.

    Args:
        line: One line of text without its ``\\n``.
    """
    m = FULL_TEXT.match(line)
    if m is None:
        return None
    f = m.group
    origin = parse_origin(line[:max(m.end("prefix"), 0)])
    if f("d_running") is not None:
        if f("d_usage") is not None:
            kv = KvUsage({"kv": float(f("d_usage"))}, int(f("d_token")))
        else:
            kv = KvUsage({"full": float(f("d_full_usage")), "swa": float(f("d_swa_usage"))}, int(f("d_full_token")),
                         int(f("d_swa_token")))
        pd = ({"prealloc": int(f("d_prealloc")), "transfer": int(f("d_transfer")), "retracted": int(f("d_retracted"))}
              if f("d_prealloc") is not None else {})
        return DecodeBatch(
            origin=origin, running_req=int(f("d_running")), queue_req=int(f("d_queue")), kv=kv,
            accept_len=_number(f("d_accept_len")), accept_rate=_number(f("d_accept_rate")),
            gen_throughput=float(f("d_gen")), pd_queues=pd, preallocated_usage=_number(f("d_prealloc_usage")),
            graph=None if f("d_graph") is None else f("d_graph") == "True")
    if f("p_usage") is not None:
        kv = KvUsage({"kv": float(f("p_usage"))}, None)
    else:
        kv = KvUsage({"full": float(f("p_full_usage")), "mamba": float(f("p_mamba_usage"))}, None)
    pd = {"bootstrap": int(f("p_bootstrap")), "inflight": int(f("p_inflight"))} if f("p_bootstrap") is not None else {}
    return PrefillBatch(
        origin=origin, new_seq=int(f("p_new_seq")), new_token=int(f("p_new_token")), cached_token=int(f("p_cached")),
        running_req=int(f("p_running")), queue_req=int(f("p_queue")),
        pending_token=None if f("p_pending") is None else int(f("p_pending")), kv=kv, pd_queues=pd,
        input_throughput=_number(f("p_input")), graph=None if f("p_graph") is None else f("p_graph") == "True")


def _number(text: str | None) -> float | None:
    return None if text is None else float(text)
