"""A stand-in for SGLang's Forward Pass Metrics publisher, built from SGLang's own definitions.

SGLang cannot run here (no GPU), so tests and the bench publish what it publishes, the way it does:

* the structs are SGLang's ``ForwardPassMetrics``, ``ScheduledRequestMetrics`` and
  ``QueuedRequestMetrics`` (``python/sglang/srt/observability/forward_pass_metrics.py`` at
  sgl-project/sglang commit ``48ccb9a4``): same names, same fields, same defaults, ``msgspec.Struct``
  encoded as maps by ``msgspec.msgpack.Encoder``; :class:`ForwardPassMetricsV1` is the variant of
  commit ``e861116e`` and NVIDIA Dynamo (``version``, ``counter_id``);
* :class:`Publisher` behaves like ``_FpmPublisherThread._run``: a PUB socket bound to the endpoint,
  multipart ``(b"", 8-byte big-endian sequence, payload)``, sequence from ``itertools.count()``
  shared by passes and heartbeats, ``zmq.NOBLOCK`` sends, heartbeats of the struct's defaults with
  ``worker_id`` and ``dp_rank`` set.

Run as a script it publishes at a steady rate for the bench::

    python tests/fpm_publisher.py ENDPOINT DP_RANK RATE SECONDS
"""

from __future__ import annotations

import sys
import time

import msgspec
import zmq


class ScheduledRequestMetrics(msgspec.Struct, frozen=True, gc=False):
    """SGLang's: requests scheduled in this iteration."""

    num_prefill_requests: int = 0
    sum_prefill_tokens: int = 0
    var_prefill_length: float = 0.0
    sum_prefill_kv_tokens: int = 0
    num_decode_requests: int = 0
    sum_decode_kv_tokens: int = 0
    var_decode_kv_tokens: float = 0.0


class QueuedRequestMetrics(msgspec.Struct, frozen=True, gc=False):
    """SGLang's: requests waiting in the queue."""

    num_prefill_requests: int = 0
    sum_prefill_tokens: int = 0
    var_prefill_length: float = 0.0
    num_decode_requests: int = 0
    sum_decode_kv_tokens: int = 0
    var_decode_kv_tokens: float = 0.0


class ForwardPassMetrics(msgspec.Struct, frozen=True, gc=False):
    """SGLang's per-iteration message (commit 48ccb9a4)."""

    worker_id: str = ""
    dp_rank: int = 0
    wall_time: float = 0.0
    scheduled_requests: ScheduledRequestMetrics = ScheduledRequestMetrics()
    queued_requests: QueuedRequestMetrics = QueuedRequestMetrics()


class ForwardPassMetricsV1(msgspec.Struct, frozen=True, gc=False):
    """The versioned variant (SGLang commit e861116e, NVIDIA Dynamo): ``version`` and ``counter_id``."""

    version: int = 1
    worker_id: str = ""
    dp_rank: int = 0
    counter_id: int = 0
    wall_time: float = 0.0
    scheduled_requests: ScheduledRequestMetrics = ScheduledRequestMetrics()
    queued_requests: QueuedRequestMetrics = QueuedRequestMetrics()


_encoder = msgspec.msgpack.Encoder()


def encode(metrics) -> bytes:
    """SGLang's ``encode``: msgpack of the struct (a map)."""
    return _encoder.encode(metrics)


def forward_pass(dp_rank: int = 0, *, prefill: int = 0, decode: int = 0, wall_time: float = 0.02,
                 prefill_tokens: int | None = None, prefill_kv_tokens: int = 0, decode_kv_tokens: int | None = None,
                 queued_prefill: int = 0, queued_prefill_tokens: int = 0, queued_decode: int = 0,
                 queued_decode_kv_tokens: int = 0, worker_id: str = "worker-0", v1: bool = False):
    """A pass as SGLang's ``_emit_forward_pass_metrics`` builds it (defaults: 128 prompt tokens per
    prefill request, 1,000 KV tokens per decode request)."""
    scheduled = ScheduledRequestMetrics(
        num_prefill_requests=prefill,
        sum_prefill_tokens=128 * prefill if prefill_tokens is None else prefill_tokens,
        var_prefill_length=0.0, sum_prefill_kv_tokens=prefill_kv_tokens,
        num_decode_requests=decode,
        sum_decode_kv_tokens=1000 * decode if decode_kv_tokens is None else decode_kv_tokens,
        var_decode_kv_tokens=0.0)
    queued = QueuedRequestMetrics(num_prefill_requests=queued_prefill, sum_prefill_tokens=queued_prefill_tokens,
                                  num_decode_requests=queued_decode, sum_decode_kv_tokens=queued_decode_kv_tokens)
    cls = ForwardPassMetricsV1 if v1 else ForwardPassMetrics
    return cls(worker_id=worker_id, dp_rank=dp_rank, wall_time=wall_time, scheduled_requests=scheduled,
               queued_requests=queued)


class Publisher:
    """SGLang's ``_FpmPublisherThread`` without the thread: bind, then send passes and heartbeats.

    Args:
        endpoint: Where to bind (``ipc://...`` or ``tcp://127.0.0.1:PORT``).
        dp_rank, worker_id: Set in heartbeats, as SGLang does.
        v1: Send the versioned variant (``version``, ``counter_id`` = the sequence).
    """

    def __init__(self, endpoint: str, dp_rank: int = 0, worker_id: str = "worker-0", v1: bool = False):
        self.ctx = zmq.Context()
        self.pub = self.ctx.socket(zmq.PUB)
        self.pub.bind(endpoint)
        self.endpoint = endpoint
        self.dp_rank, self.worker_id, self.v1 = dp_rank, worker_id, v1
        self.next_seq = 0  # SGLang: itertools.count(), shared by passes and heartbeats
        self.sent = 0

    def _send(self, payload: bytes) -> int:
        seq = self.next_seq
        self.next_seq += 1
        try:
            self.pub.send_multipart((b"", seq.to_bytes(8, "big"), payload), flags=zmq.NOBLOCK)
            self.sent += 1
        except zmq.Again:
            pass
        return seq

    def publish(self, metrics) -> int:
        """Send one message (a pass or a heartbeat) with the next sequence number; returns it."""
        if self.v1:
            metrics = msgspec.structs.replace(metrics, counter_id=self.next_seq)
        return self._send(encode(metrics))

    def heartbeat(self) -> int:
        """SGLang's idle heartbeat: the defaults with worker_id and dp_rank."""
        cls = ForwardPassMetricsV1 if self.v1 else ForwardPassMetrics
        return self.publish(cls(worker_id=self.worker_id, dp_rank=self.dp_rank))

    def skip(self, n: int = 1) -> None:
        """Take ``n`` sequence numbers without sending: messages lost on the way."""
        self.next_seq += n

    def send_payload(self, payload: bytes) -> int:
        """Send an arbitrary payload in the right frames, with the next sequence number."""
        return self._send(payload)

    def send_frames(self, frames: list[bytes]) -> None:
        """Send arbitrary frames (no sequence number taken)."""
        self.pub.send_multipart(frames)

    def close(self) -> None:
        """Unbind and close, as SGLang's shutdown does."""
        self.pub.close(linger=0)
        self.ctx.term()


def run(endpoint: str, dp_rank: int, rate: float, seconds: float) -> int:
    """Publish decode passes at ``rate`` per second for ``seconds`` (batch sizes cycling 1..256, a
    prefill of 2 requests every 20th pass); returns the number sent."""
    pub = Publisher(endpoint, dp_rank=dp_rank)
    period = 1.0 / rate
    start = time.perf_counter()
    i = 0
    try:
        while True:
            due = start + i * period
            now = time.perf_counter()
            if now - start >= seconds:
                break
            if due > now:
                time.sleep(due - now)
            pub.publish(forward_pass(dp_rank, decode=1 + i % 256, prefill=2 if i % 20 == 0 else 0,
                                     wall_time=0.01 + (i % 7) * 0.001, queued_prefill=i % 5))
            i += 1
        return pub.sent
    finally:
        pub.close()


if __name__ == "__main__":
    ep, rank, rate_, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    print(run(ep, rank, rate_, secs), flush=True)
