"""Decode SGLang's Forward Pass Metrics (FPM) messages: ZeroMQ frames -> (sequence, metrics).

The wire format, from SGLang's ``python/sglang/srt/observability/forward_pass_metrics.py``
(``_FpmPublisherThread._run``; read at sgl-project/sglang commits ``48ccb9a4`` and ``e861116e``):

* one ZeroMQ PUB multipart message per forward pass: ``(topic, sequence, payload)`` with topic
  ``b""``, ``sequence`` an 8-byte big-endian counter of the publisher (``itertools.count()``, 0 at
  the publisher's start; heartbeats take a number too);
* ``payload``: ``msgspec.msgpack`` of ``ForwardPassMetrics``, a struct encoded as a map::

      ForwardPassMetrics{worker_id: str, dp_rank: int, wall_time: float (s),
                         scheduled_requests: {num_prefill_requests, sum_prefill_tokens,
                             var_prefill_length, sum_prefill_kv_tokens, num_decode_requests,
                             sum_decode_kv_tokens, var_decode_kv_tokens},
                         queued_requests: {num_prefill_requests, sum_prefill_tokens,
                             var_prefill_length, num_decode_requests, sum_decode_kv_tokens,
                             var_decode_kv_tokens}}

* every second without a pass, a heartbeat: the struct's defaults (``wall_time`` 0, every count 0)
  with only ``worker_id`` and ``dp_rank`` set.

Other versions exist: commit ``e861116e`` and NVIDIA Dynamo add ``version`` (1) and ``counter_id``
(the sequence again), vLLM's variant ``timing_scope``. Decoding is tolerant: unknown fields are
ignored, missing ones take SGLang's defaults, integral floats and numeric strings are accepted as
counts (``msgspec`` lax mode); :func:`schema_of` records which fields a publisher actually sends.
"""

from __future__ import annotations

from typing import Annotated, NamedTuple

import msgspec

from ...limits import MAX_VALUE

#: Fields of SGLang's structs (commit 48ccb9a4), by struct: "" is ``ForwardPassMetrics`` itself.
SGLANG_FIELDS: dict[str, tuple[str, ...]] = {
    "": ("worker_id", "dp_rank", "wall_time", "scheduled_requests", "queued_requests"),
    "scheduled_requests": ("num_prefill_requests", "sum_prefill_tokens", "var_prefill_length",
                           "sum_prefill_kv_tokens", "num_decode_requests", "sum_decode_kv_tokens",
                           "var_decode_kv_tokens"),
    "queued_requests": ("num_prefill_requests", "sum_prefill_tokens", "var_prefill_length",
                        "num_decode_requests", "sum_decode_kv_tokens", "var_decode_kv_tokens"),
}
#: Longest wall_time accepted, seconds: a forward pass of an hour is damage, not a measurement.
MAX_PASS_SECONDS = 3600.0
#: Highest dp_rank accepted (exclusive). SGLang's DP sizes are far below; a larger value is damage.
MAX_DP_RANK = 1 << 16
#: Longest label value written for the schema's field lists.
MAX_SCHEMA_LABEL = 512


#: A count as SGLang sends it: a non-negative integer below the value bound of :mod:`exporter.limits`.
Count = Annotated[int, msgspec.Meta(ge=0, lt=int(MAX_VALUE))]


class ScheduledRequestMetrics(msgspec.Struct, frozen=True, gc=False):
    """``scheduled_requests``: the requests this forward pass computed (SGLang's field names).

    Only the fields the exporter uses are declared; the variances are ignored like any unknown field.

    Attributes:
        num_prefill_requests: Prefill (extend) requests in the pass: new requests and continuing
            chunks of a chunked prefill (SGLang: ``prefill_stats.num_new_seqs``, else the extend reqs).
        sum_prefill_tokens: Prompt tokens computed by the pass (``prefill_stats.log_input_tokens``).
        sum_prefill_kv_tokens: Prompt tokens read from the KV cache instead: radix-cache hits and the
            earlier chunks of a chunked prefill (``len(req.prefix_indices)`` summed).
        num_decode_requests: Decode requests in the pass (one new token each, more with speculation).
        sum_decode_kv_tokens: KV context of those requests, tokens (``req.seqlen`` summed).
    """

    num_prefill_requests: Count = 0
    sum_prefill_tokens: Count = 0
    sum_prefill_kv_tokens: Count = 0
    num_decode_requests: Count = 0
    sum_decode_kv_tokens: Count = 0


class QueuedRequestMetrics(msgspec.Struct, frozen=True, gc=False):
    """``queued_requests``: the scheduler's waiting queue after the pass (SGLang's field names).

    Attributes:
        num_prefill_requests: Waiting requests with no output yet (PD prefill: the bootstrap queue).
        sum_prefill_tokens: Their prompt tokens (``len(req.origin_input_ids)`` summed).
        num_decode_requests: Waiting requests that had output: retracted requests waiting to resume
            (PD decode: the pre-allocation and transfer queues).
        sum_decode_kv_tokens: Their KV context, tokens (``req.seqlen`` summed).
    """

    num_prefill_requests: Count = 0
    sum_prefill_tokens: Count = 0
    num_decode_requests: Count = 0
    sum_decode_kv_tokens: Count = 0


class ForwardPassMetrics(msgspec.Struct, frozen=True, gc=False):
    """One FPM message: one forward pass of one scheduler, or a heartbeat (see :func:`is_heartbeat`).

    Attributes:
        dp_rank: The publishing scheduler's data-parallel rank (0 without DP).
        wall_time: Seconds the pass took: GPU time of the forward pass where SGLang's device timer
            runs (current main: `_fpm_uses_device_timer`), else wall-clock from batch start to result
            (earlier versions). 0 in a heartbeat.
        scheduled_requests: See :class:`ScheduledRequestMetrics`.
        queued_requests: See :class:`QueuedRequestMetrics`.
    """

    dp_rank: Annotated[int, msgspec.Meta(ge=0, lt=MAX_DP_RANK)] = 0
    wall_time: Annotated[float, msgspec.Meta(ge=0.0, lt=MAX_PASS_SECONDS)] = 0.0
    scheduled_requests: ScheduledRequestMetrics = ScheduledRequestMetrics()
    queued_requests: QueuedRequestMetrics = QueuedRequestMetrics()


class _Loose(msgspec.Struct, gc=False):
    """The same shape without bounds: tells a value out of range (invalid) from damage (undecodable)."""

    dp_rank: int = 0
    wall_time: float = 0.0
    scheduled_requests: dict[str, int | float] = {}
    queued_requests: dict[str, int | float] = {}


_decoder = msgspec.msgpack.Decoder(ForwardPassMetrics, strict=False)
_loose_decoder = msgspec.msgpack.Decoder(_Loose, strict=False)
_raw_decoder = msgspec.msgpack.Decoder()

#: What a message that is not a pass or heartbeat is: frames or payload that do not decode, or a
#: payload that decodes to a value SGLang cannot send (a negative or huge count, a negative,
#: non-finite or hour-long wall_time, an impossible dp_rank).
UNDECODABLE, INVALID = "undecodable", "invalid"


def decode_frames(frames: list[bytes]) -> tuple[int | None, ForwardPassMetrics | str]:
    """Split and decode one multipart message (bounds are checked by msgspec, in C).

    Args:
        frames: The frames of one ZeroMQ message, as received.

    Returns:
        ``(sequence, metrics)``: ``sequence`` is None when the frames are not ``(topic, 8-byte
        sequence, payload)``; ``metrics`` is a :class:`ForwardPassMetrics`, or :data:`UNDECODABLE`
        (msgpack damage, not a map, a string where a count belongs) or :data:`INVALID` (decodes, but
        a value is out of SGLang's range). Never raises.
    """
    if len(frames) != 3 or len(frames[1]) != 8:
        return None, UNDECODABLE
    seq = int.from_bytes(frames[1], "big")
    try:
        return seq, _decoder.decode(frames[2])
    except (msgspec.DecodeError, msgspec.ValidationError, OverflowError, ValueError, TypeError):
        pass
    try:
        _loose_decoder.decode(frames[2])
    except (msgspec.DecodeError, msgspec.ValidationError, OverflowError, ValueError, TypeError):
        return seq, UNDECODABLE
    return seq, INVALID


def is_heartbeat(m: ForwardPassMetrics) -> bool:
    """SGLang's idle heartbeat: ``wall_time`` 0 and no request scheduled."""
    s = m.scheduled_requests
    return m.wall_time == 0.0 and not s.num_prefill_requests and not s.num_decode_requests


class Schema(NamedTuple):
    """The fields a publisher sends, relative to SGLang's structs (:data:`SGLANG_FIELDS`).

    Attributes:
        version: The ``version`` field's value (Dynamo and forks send 1), "" when absent.
        extra_fields: Sorted dotted names sent beyond SGLang's (``counter_id``, ...), comma-joined.
        missing_fields: Sorted dotted names of SGLang's that were not sent, comma-joined.
    """

    version: str
    extra_fields: str
    missing_fields: str


def schema_of(payload: bytes) -> Schema | None:
    """The :class:`Schema` of one payload, or None when it is not a msgpack map."""
    try:
        top = _raw_decoder.decode(payload)
    except (msgspec.DecodeError, ValueError, TypeError, OverflowError):
        return None
    if not isinstance(top, dict):
        return None
    extra: list[str] = []
    missing: list[str] = []
    for struct, known in SGLANG_FIELDS.items():
        obj = top if struct == "" else top.get(struct)
        prefix = f"{struct}." if struct else ""
        if not isinstance(obj, dict):
            if struct and struct in top:  # present but not a map (an absent one is named above)
                missing.append(struct)
            continue
        keys = {str(k) for k in obj}
        extra.extend(prefix + k for k in keys - set(known))
        missing.extend(prefix + k for k in known if k not in keys)
    version = top.get("version", "")
    return Schema(_label(str(version) if isinstance(version, (int, str)) else type(version).__name__),
                  _label(",".join(sorted(extra))), _label(",".join(sorted(missing))))


def _label(text: str) -> str:
    """Bound a label value: keep the first :data:`MAX_SCHEMA_LABEL` characters, mark a cut with '...'."""
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= MAX_SCHEMA_LABEL else text[:MAX_SCHEMA_LABEL - 3] + "..."
