"""The reading thread: one ZeroMQ SUB socket per configured endpoint, drained in batches.

Data flow::

    SGLang scheduler PUB (one per DP rank) -> SUB socket -> thread "fpm-subscriber"
      -> decode.decode_frames -> FpmStats.apply (under its lock) -> FpmCollector (at scrape time)

What it keeps to:

* **Lazy connect, endless retry.** ``connect`` returns at once whether or not SGLang is up; ZeroMQ
  retries in the background every 0.1 s, backing off to 2 s, and reconnects by itself after a
  server restart (an ``ipc://`` socket file that reappears, a TCP port that listens again).
* **Never blocks a scrape.** Scrapes read :class:`~exporter.sources.fpm.stats.FpmStats` under its
  lock, held only while one drained batch is applied.
* **Bounded memory at any rate and any size.** A frame larger than :data:`MAX_FRAME_BYTES` is
  refused by ZeroMQ (``ZMQ_MAXMSGSIZE``: it drops that connection as a protocol error and, for
  such an error, would never connect again; a socket monitor sees the disconnect and the thread
  connects the endpoint again, so the stream resumes and the messages missed show as ``lost``). The sockets together queue at most :data:`QUEUE_BYTES` of such
  frames: each queues :func:`queue_messages` messages (``ZMQ_RCVHWM`` counts messages, not bytes);
  beyond that ZeroMQ stops reading, the publisher drops, and the drop shows as ``lost`` through the
  sequence numbers. One batch is at most :data:`MAX_BATCH` messages; after a full one the thread
  reads on without sleeping.
* **Cheap at 1,000 passes per second.** After a batch the thread sleeps ``drain_interval`` (200 ms)
  and lets messages queue, so it wakes about 5 times a second, not once per pass (batches of 200 run
  hot in the CPU cache: 0.8% of a core at 1,000 passes/s against 1.3% with 50 ms).
* **Says when it is down.** An endpoint with no pass or heartbeat for ``timeout`` seconds is down
  (``sglang_exporter_fpm_up`` 0); the first time is a warning naming the fix, later changes info.
"""

from __future__ import annotations

import logging
import threading
import time

import zmq

from .decode import decode_frames, schema_of
from .stats import FpmStats

log = logging.getLogger(__name__)

#: Largest frame accepted (``ZMQ_MAXMSGSIZE``); SGLang's pass message is about 300 bytes.
MAX_FRAME_BYTES = 4096
#: Bytes of frames of that size the sockets may queue together, all endpoints.
QUEUE_BYTES = 32 << 20
#: Messages one socket queues at most and at least, whatever the number of endpoints.
RCVHWM, MIN_RCVHWM = 8192, 64
#: Passes per second one SGLang rank makes at most in practice: the drain interval is shortened so
#: that a socket's queue holds twice what arrives between two drains.
PASS_RATE = 1_000
#: Most messages taken from one socket per batch (the lock is held while one batch is applied).
MAX_BATCH = 2_000
#: ZeroMQ reconnect interval and its back-off ceiling, milliseconds.
RECONNECT_IVL_MS, RECONNECT_IVL_MAX_MS = 100, 2_000
#: Seconds between two schema samples of one endpoint.
SCHEMA_EVERY = 1.0


def queue_messages(endpoints: int) -> int:
    """Messages each of ``endpoints`` SUB sockets may queue (``ZMQ_RCVHWM``): :data:`QUEUE_BYTES`
    shared out in frames of :data:`MAX_FRAME_BYTES`, within :data:`MIN_RCVHWM`..:data:`RCVHWM`
    (past 128 endpoints the floor wins: 256 endpoints may queue 64 MiB).

    ZeroMQ counts a multipart message once whatever its frames, so a publisher that sends messages
    of many frames is bounded by the frame size only; SGLang sends three (topic, sequence, payload).
    """
    return max(MIN_RCVHWM, min(RCVHWM, QUEUE_BYTES // MAX_FRAME_BYTES // max(1, endpoints)))


class FpmSubscriber:
    """Subscribes to SGLang's FPM publishers and feeds :class:`FpmStats`.

    Args:
        endpoints: ZeroMQ endpoints (``ipc://PATH``, ``tcp://HOST:PORT``), one per DP rank.
        stats: The sink; its endpoint order is ``endpoints``' order.
        drain_interval: Seconds the thread sleeps after a batch, letting messages queue.

    Raises:
        zmq.ZMQError: An endpoint ZeroMQ cannot connect to (malformed address, unknown transport).
    """

    def __init__(self, endpoints: list[str], stats: FpmStats, drain_interval: float = 0.2):
        self.stats = stats
        self.rcvhwm = queue_messages(len(endpoints))
        self.drain_interval = min(drain_interval, self.rcvhwm / (2 * PASS_RATE))
        self._ctx = zmq.Context()
        self._sockets: list[zmq.Socket] = []
        self._monitors: list[zmq.Socket] = []
        self._endpoints = list(endpoints)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._was_up = [False] * len(endpoints)
        self._warned = [False] * len(endpoints)
        self._schema_at = [float("-inf")] * len(endpoints)
        self._started = time.monotonic()
        try:
            for endpoint in endpoints:
                sock = self._ctx.socket(zmq.SUB)
                self._sockets.append(sock)
                sock.setsockopt(zmq.LINGER, 0)
                sock.setsockopt(zmq.RCVHWM, self.rcvhwm)
                sock.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES)
                sock.setsockopt(zmq.RECONNECT_IVL, RECONNECT_IVL_MS)
                sock.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_IVL_MAX_MS)
                sock.setsockopt(zmq.SUBSCRIBE, b"")
                self._monitors.append(sock.get_monitor_socket(zmq.EVENT_DISCONNECTED))
                sock.connect(endpoint)
        except zmq.ZMQError:
            self._close()
            raise

    def start(self) -> None:
        """Start the thread ``fpm-subscriber`` (daemon)."""
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="fpm-subscriber", daemon=True)
        self._thread.start()

    def is_alive(self) -> bool:
        """True while the thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread and close the sockets."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if not self.is_alive():
            self._close()

    def _close(self) -> None:
        for sock in self._sockets:
            try:
                sock.disable_monitor()
            except zmq.ZMQError:
                pass
        for sock in self._monitors + self._sockets:
            sock.close(linger=0)
        self._ctx.term()

    def _run(self) -> None:
        poller = zmq.Poller()
        for sock in self._sockets + self._monitors:
            poller.register(sock, zmq.POLLIN)
        poll_ms = int(min(0.25, self.stats.timeout / 4) * 1000) or 1
        while not self._stop.is_set():
            full = False
            try:
                ready = dict(poller.poll(poll_ms))
                for index, sock in enumerate(self._sockets):
                    if sock in ready:
                        full |= self._drain(index, sock) == MAX_BATCH
                for index, mon in enumerate(self._monitors):
                    if mon in ready:
                        self._reconnect(index, mon)
                self._check_up()
            except Exception:  # a bug here must not end the thread: log it and keep reading
                log.exception("FPM subscriber: unexpected error; continuing")
                ready = {}
                self._stop.wait(1.0)
            if ready and not full:  # a full batch means more is waiting: read on at once
                self._stop.wait(self.drain_interval)

    def _reconnect(self, index: int, monitor: zmq.Socket) -> None:
        """After a disconnect (the monitor's events): connect the endpoint again. ZeroMQ reconnects
        by itself after a network error but not after a protocol error (a frame past
        :data:`MAX_FRAME_BYTES`); connecting again after either is harmless."""
        events = 0
        while True:
            try:
                monitor.recv_multipart(zmq.NOBLOCK)
                events += 1
            except zmq.Again:
                break
        if not events:
            return
        sock, endpoint = self._sockets[index], self._endpoints[index]
        try:
            sock.disconnect(endpoint)
        except zmq.ZMQError:
            pass  # the session is gone already (a protocol error ends it)
        sock.connect(endpoint)
        log.debug("FPM %s: disconnected; connecting again", endpoint)

    def _drain(self, index: int, sock: zmq.Socket) -> int:
        """Read up to :data:`MAX_BATCH` waiting messages of one socket into the stats; returns how many."""
        messages = []
        append = messages.append
        recv = sock.recv_multipart
        first = None
        for _ in range(MAX_BATCH):
            try:
                frames = recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            seq, m = decoded = decode_frames(frames)
            append(decoded)
            if first is None and m.__class__ is not str:
                first = frames[2]
            elif m.__class__ is str and log.isEnabledFor(logging.DEBUG):
                log.debug("FPM %s: %s message (%d frames, first bytes %r)", self.stats.endpoints[index].endpoint,
                          m, len(frames), frames[-1][:32] if frames else b"")
        schema = None
        if first is not None:
            now = time.monotonic()
            if now - self._schema_at[index] >= SCHEMA_EVERY:
                self._schema_at[index] = now
                schema = schema_of(first)
        if messages:
            self.stats.apply(index, messages, schema)
        return len(messages)

    def _check_up(self) -> None:
        stats = self.stats
        now = time.monotonic()
        with stats.lock:
            states = [stats.endpoint_up(i, now) for i in range(len(stats.endpoints))]
        for i, up in enumerate(states):
            endpoint = stats.endpoints[i].endpoint
            if up and not self._was_up[i]:
                log.info("FPM %s: receiving SGLang's forward-pass metrics", endpoint)
            elif not up and (self._was_up[i] or (not self._warned[i] and now - self._started > stats.timeout)):
                level = logging.INFO if self._warned[i] else logging.WARNING
                self._warned[i] = True
                log.log(level, "FPM %s: no forward-pass metrics for %.0f s; is SGLang running with "
                        "--enable-forward-pass-metrics and --forward-pass-metrics-ipc-name matching this "
                        "endpoint (SGLang appends .<dp_rank>)? Only the sglang_scheduler_forward_pass* "
                        "metrics are affected.", endpoint, stats.timeout)
            self._was_up[i] = up
