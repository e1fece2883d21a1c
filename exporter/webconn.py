"""waitress's connection and server, with the bounds a sidecar needs that waitress lacks.

waitress bounds header bytes, connections and threads, and closes a connection idle between
requests; it does not bound what a client that sends and never reads can make it hold or wait for.
The classes here add, each with the :class:`~exporter.web.Limits` field that sets it:

* **A whole-request deadline** (``request_timeout``): a connection that trickles a header line now
  and then is closed once its request is not whole within it.
* **A pipelining depth** (``max_pipelined``): requests read ahead on one connection at most; past it
  the connection answers those, the last with ``Connection: close``, drops the rest of its input
  and closes (HTTP lets a server close a persistent connection; clients retry).
* **A send deadline** (``send_timeout``): a connection whose response bytes are not all sent within
  it (from when they were written) is closed, and a worker thread waiting for it to drain (past
  waitress's ``outbuf_high_watermark``) is released. waitress's own idle timeout does not apply to
  a connection with a request in progress, so without this a client that never reads holds a
  worker thread for ever.
* **A byte budget for unsent responses** (``max_unsent_bytes``, all connections together): a
  response that would pass it first closes the connections whose output has waited longest.
* **No sent bytes kept**: a connection's drained output buffer is replaced by an empty one.
* **A thread of its own for /healthz**, so that liveness and readiness probes are answered whatever
  the other clients make the worker threads wait for.
* **TLS** (``--web.config.file``, :mod:`~exporter.webconfig`): each accepted connection is wrapped
  with Python's :mod:`ssl` (the context of the moment: certificates re-read when their files
  change), its handshake driven by the event loop; a failed handshake closes the connection.
"""

from __future__ import annotations

import logging
import ssl
import time

from waitress.buffers import OverflowableBuffer
from waitress.channel import ClientDisconnected, HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

log = logging.getLogger("exporter.web")

#: The path answered on the health thread.
HEALTH_PATH = "/healthz"


class Channel(HTTPChannel):
    """waitress's connection, plus the times and bounds of the module docstring.

    Attributes:
        receiving_since: ``time.time()`` since which the connection owes a request not whole yet:
            the accept time for a new connection (it must send its first request at once), the
            first byte's time for each later request, None while idle between requests.
        output_since: ``time.monotonic()`` since which response bytes have waited to be sent
            (None when none wait; cleared by the server's maintenance tick).
        discarding: Past the pipelining depth: input is dropped until the connection closes.
    """

    def __init__(self, server, sock, addr, adj, map=None):
        super().__init__(server, sock, addr, adj, map)
        self.receiving_since: float | None = self.creation_time
        self.output_since: float | None = None
        self.discarding = False
        self.tls = isinstance(sock, ssl.SSLSocket)
        self.handshaken = False

    def handle_read(self):
        """waitress's read, or over TLS: the handshake first, then records as they are whole (a
        partial record is no disconnection: waitress takes an empty read for one)."""
        if not self.tls:
            return super().handle_read()
        try:
            if not self.handshaken:
                self.socket.do_handshake()
                self.handshaken = True
            data = self.socket.recv(self.adj.recv_bytes)
            while data and self.socket.pending():
                data += self.socket.recv(self.socket.pending())
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except OSError as exc:  # no or a bad client certificate, plain HTTP on the TLS port, a reset
            log.debug("TLS connection from %s closed: %s", self.addr, exc)
            self.handle_close()
            return
        if data:
            self.last_activity = time.time()
            self.received(data)
        else:
            self.handle_close()

    def send(self, data, do_close=True):
        if not self.tls:
            return super().send(data, do_close)
        try:
            return self.socket.send(data)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return 0
        except OSError:
            if do_close:
                self.handle_close()
            return 0

    def received(self, data):
        if self.discarding:
            return True
        if data and self.receiving_since is None:
            self.receiving_since = time.time()
        try:
            return super().received(data)
        finally:
            self._bound_pipeline()
            if self.request is None:  # no partial request left over
                self.receiving_since = None

    def _bound_pipeline(self) -> None:
        """Keep ``max_pipelined`` queued requests at most; the last kept one closes the connection.

        Requests past the first are not yet in service (a worker takes ``requests[0]`` and pops it
        under ``requests_lock``), so the kept last one's headers can still be changed here.
        """
        depth = self.server.max_pipelined
        with self.requests_lock:
            if len(self.requests) <= depth:
                return
            for extra in self.requests[depth:]:
                extra.close()
            del self.requests[depth:]
            self.requests[-1].headers["CONNECTION"] = "close"
            if self.request is not None:
                self.request.close()
                self.request = None
            self.discarding = True
        log.debug("connection from %s: more than %d pipelined requests; closing after those", self.addr, depth)

    def _flush_some(self, do_close=True):
        """waitress's flush, then a drained buffer is let go: waitress keeps the last response's
        bytes, already sent, in the connection's buffer until another response replaces them, so
        every idle keep-alive connection would hold a whole ``/metrics`` body. Called with
        ``outbuf_lock`` held, or from the event loop while no request is in service."""
        sent = super()._flush_some(do_close)
        if not self.total_outbufs_len and len(self.outbufs) == 1 and self.current_outbuf_count:
            self.outbufs[0].close()
            self.outbufs[0] = OverflowableBuffer(self.adj.outbuf_overflow)
            self.current_outbuf_count = 0
        return sent

    def write_soon(self, data):
        if data:
            self.server.make_room(self, len(data))
            if not self.total_outbufs_len:
                self.output_since = time.monotonic()
        return super().write_soon(data)


class Server(TcpWSGIServer):
    """waitress's TCP server with :class:`Channel`, the deadlines, the byte budget and the health thread.

    waitress calls :meth:`maintenance` from its event loop every ``cleanup_interval`` seconds; a
    channel marked ``will_close`` is closed by the same loop (which also wakes a worker waiting for
    that channel's output to drain). Call :meth:`configure` before serving.
    """

    channel_class = Channel
    request_timeout = 10.0
    send_timeout = 10.0
    max_pipelined = 4
    max_unsent_bytes = 64 << 20
    health_dispatcher: ThreadedTaskDispatcher | None = None
    tls = None  # exporter.webconfig.TlsFiles: connections are wrapped in its context

    def accept(self):
        """A new connection, wrapped in TLS when configured (the handshake is done by reads)."""
        accepted = super().accept()
        if accepted is None or self.tls is None:
            return accepted
        conn, addr = accepted
        try:
            conn = self.tls.context().wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        except (OSError, ValueError) as exc:
            log.debug("cannot start TLS with %s: %s", addr, exc)
            conn.close()
            return None
        return conn, addr

    def configure(self, limits, tls=None) -> None:
        """Take the bounds from a :class:`~exporter.web.Limits` and start the health thread; ``tls``
        (:class:`~exporter.webconfig.TlsFiles`) serves every connection over TLS."""
        self.tls = tls
        self.request_timeout = limits.request_timeout
        self.send_timeout = limits.send_timeout
        self.max_pipelined = max(2, limits.max_pipelined)
        self.max_unsent_bytes = limits.max_unsent_bytes
        self.health_dispatcher = ThreadedTaskDispatcher()
        self.health_dispatcher.set_thread_count(1)

    def add_task(self, task):
        """Queue a channel's next request: ``/healthz`` on the health thread, the rest on the workers."""
        request = task.requests[0] if getattr(task, "requests", None) else None
        if (self.health_dispatcher is not None and request is not None and request.error is None
                and request.path == HEALTH_PATH and request.command in ("GET", "HEAD")):
            self.health_dispatcher.add_task(task)
        else:
            self.task_dispatcher.add_task(task)

    def make_room(self, channel: Channel, size: int) -> None:
        """Before ``channel`` queues ``size`` response bytes: keep the unsent bytes of all
        connections within ``max_unsent_bytes``, closing those whose output has waited longest.

        Raises:
            ClientDisconnected: When only ``channel`` itself could make the room (it is closed).
        """
        channels = [c for c in list(self.active_channels.values()) if not c.will_close]
        unsent = sum(c.total_outbufs_len for c in channels)
        if unsent + size <= self.max_unsent_bytes:
            return
        waiting = sorted((c for c in channels if c.total_outbufs_len and c is not channel),
                         key=lambda c: c.output_since or 0.0)
        for other in waiting:
            log.debug("closing a connection from %s: %d unsent response bytes in all", other.addr, unsent)
            other.will_close = True
            unsent -= other.total_outbufs_len
            if unsent + size <= self.max_unsent_bytes:
                break
        self.pull_trigger()
        if unsent + size > self.max_unsent_bytes:
            channel.will_close = True
            raise ClientDisconnected

    def maintenance(self, now):
        super().maintenance(now)
        cutoff = now - self.request_timeout
        send_cutoff = time.monotonic() - self.send_timeout
        for channel in self.active_channels.values():
            if channel.will_close:
                continue
            since = getattr(channel, "receiving_since", None)
            if since is not None and since < cutoff and not channel.requests:
                log.debug("closing a connection from %s: no whole request within %.0f s",
                          channel.addr, self.request_timeout)
                channel.will_close = True
            if not channel.total_outbufs_len:
                channel.output_since = None
            elif channel.output_since is not None and channel.output_since < send_cutoff:
                log.debug("closing a connection from %s: response not read within %.0f s",
                          channel.addr, self.send_timeout)
                channel.will_close = True
