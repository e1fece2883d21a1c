"""HTTP endpoint: ``/metrics`` (configurable), ``/healthz`` and a landing page at ``/``.

Metrics are encoded by prometheus_client's encoders through :class:`~.exposition.Renderer` (content
negotiation for OpenMetrics, gzip, the ``name[]`` filter, as the library's WSGI app does; one render
at a time, shared by concurrent scrapes, unchanged families not encoded again); this module routes,
and serves with waitress, whose limits bound what a client can make the sidecar hold (see
:class:`Limits`): header bytes per request, open connections, worker threads, unsent bytes per
connection, and (added in :mod:`~.webconn`: waitress has only an inactivity timeout) a deadline for
receiving each request whole, a pipelining depth, a deadline for a response to be read, a byte
budget for unsent responses and a thread of its own for ``/healthz``.
"""

from __future__ import annotations

import dataclasses
import html
import logging
import resource
import socket
import threading
import zlib
from collections.abc import Callable, Iterator

from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry
from waitress import wasyncore
from waitress.adjustments import Adjustments

from . import __version__
from .exposition import Renderer
from .webconn import Server as _Server

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one client, or many, can make the HTTP server hold.

    Attributes:
        max_connections: Open connections at most; past it new ones wait in the listen backlog.
            Lowered at start to what the file-descriptor limit allows (see :meth:`WebServer.start`).
        backlog: Listen backlog (the kernel caps it at ``net.core.somaxconn``).
        threads: Worker threads that run the application (render metrics); requests queue for them.
        max_header_bytes: Request line and headers at most, in bytes; more is answered 431.
        max_body_bytes: Request body at most, in bytes (GET needs none); more is answered 413.
        request_timeout: Seconds from a request's first byte (a new connection's accept) until the
            request is received whole; a connection past it is closed.
        idle_timeout: Seconds a connection may sit without traffic between requests (keep-alive).
        max_response_bytes: Responses up to this size stay in memory; waitress would write larger ones
            to a temporary file, which a read-only root filesystem does not allow.
        output_high_water_bytes: Unsent bytes one connection may hold before the worker thread writing
            its next response waits for it to drain (waitress's ``outbuf_high_watermark``); one
            connection holds at most this plus one response.
        max_pipelined: Requests read ahead on one connection at most; past it the connection answers
            those, the last with ``Connection: close``, and closes.
        send_timeout: Seconds a response may wait, unsent, for its client to read it; then the
            connection is closed (and a worker waiting on it released).
        max_unsent_bytes: Unsent response bytes of all connections together at most; a response that
            would pass it first closes the connections whose output has waited longest.
    """

    max_connections: int = 2048
    backlog: int = 4096
    threads: int = 4
    max_header_bytes: int = 8192
    max_body_bytes: int = 8192
    request_timeout: float = 10.0
    idle_timeout: int = 120
    max_response_bytes: int = 1 << 30
    output_high_water_bytes: int = 1 << 20
    max_pipelined: int = 4
    send_timeout: float = 10.0
    max_unsent_bytes: int = 32 << 20

    #: File descriptors kept for everything but connections (log files, inotify, NVML, pipes).
    FD_RESERVE = 256


def gzip_wanted(accept_encoding: str) -> bool:
    """Whether an ``Accept-Encoding`` header value accepts gzip (RFC 9110 section 12.5.3).

    ``gzip`` (or ``x-gzip``, or ``*`` when gzip is not named) with a quality above 0; ``gzip;q=0``
    refuses it (prometheus_client's ``gzip_accepted`` looks for the word only). A quality that is not
    a number counts as 1, as a header without one.
    """
    named = star = None
    for item in accept_encoding.split(","):
        coding, _, params = item.partition(";")
        coding = coding.strip().lower()
        q = 1.0
        for param in params.split(";"):
            key, _, val = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(val.strip())
                except ValueError:
                    q = 1.0
        if coding in ("gzip", "x-gzip"):
            named = q if named is None else max(named, q)
        elif coding == "*":
            star = q
    if named is not None:
        return named > 0
    return star is not None and star > 0


#: Bytes handed to waitress at a time when a body is sent from its pieces: each response holds at
#: most this plus waitress's ``outbuf_high_watermark`` (:class:`Limits`) of its own, whatever its size.
RESPONSE_CHUNK = 256 << 10


def chunks(parts: list[bytes], size: int = RESPONSE_CHUNK) -> Iterator[bytes]:
    """The pieces of a body as chunks of about ``size`` bytes (small pieces joined, large ones as
    they are), so that a response never makes a copy of the whole body."""
    batch: list[bytes] = []
    held = 0
    for part in parts:
        if len(part) >= size:
            if batch:
                yield b"".join(batch)
                batch, held = [], 0
            yield part
            continue
        batch.append(part)
        held += len(part)
        if held >= size:
            yield b"".join(batch)
            batch, held = [], 0
    if batch:
        yield b"".join(batch)


def gzip_chunks(parts: list[bytes], size: int = RESPONSE_CHUNK) -> Iterator[bytes]:
    """The pieces of a body gzip-compressed as a stream (one gzip member, RFC 1952), in chunks of
    about ``size`` bytes of input: no compressed copy of the whole body is held."""
    z = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: gzip header and trailer
    for chunk in chunks(parts, size):
        out = z.compress(chunk)
        if out:
            yield out
    yield z.flush()


def make_app(registry: CollectorRegistry, telemetry_path: str = "/metrics",
             health: Callable[[], tuple[bool, str]] | None = None):
    """Build the WSGI application.

    Args:
        registry: The registry served at ``telemetry_path``.
        telemetry_path: Path of the metrics.
        health: Returns ``(healthy, text)`` for ``/healthz``; healthy when omitted.

    Returns:
        A WSGI callable: ``telemetry_path`` -> metrics, ``/healthz`` -> 200 "ok" or 503 with the reason,
        ``/`` -> an HTML page linking to the metrics, anything else -> 404; methods other than GET and
        HEAD -> 405.
    """
    renderer = Renderer(registry)

    def metrics_app(environ, start_response):
        arrived = renderer.clock()
        names = parse_qs(environ.get("QUERY_STRING", "")).get("name[]")
        parts, content_type = renderer.render_parts(environ.get("HTTP_ACCEPT"), names, arrived)
        headers = [("Content-Type", content_type)]
        if gzip_wanted(environ.get("HTTP_ACCEPT_ENCODING", "")):  # outside the render lock
            headers.append(("Content-Encoding", "gzip"))
            start_response("200 OK", headers)
            return gzip_chunks(parts)
        headers.append(("Content-Length", str(sum(map(len, parts)))))
        start_response("200 OK", headers)
        return chunks(parts)

    landing = (
        "<html><head><title>sglang-exporter</title></head><body><h1>sglang-exporter "
        f"{html.escape(__version__)}</h1><p>Prometheus exporter for SGLang scheduler logs.</p><ul>"
        f'<li><a href="{html.escape(telemetry_path)}">Metrics</a></li>'
        '<li><a href="/healthz">Health</a></li></ul></body></html>'
    ).encode()

    def app(environ, start_response):
        if environ.get("REQUEST_METHOD") == "HEAD":  # as GET, headers only (no body, per HTTP)
            body = route(dict(environ, REQUEST_METHOD="GET"), start_response)
            if hasattr(body, "close"):
                body.close()
            return [b""]
        return route(environ, start_response)

    def route(environ, start_response):
        path = environ.get("PATH_INFO", "/")
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            body = b"method not allowed\n"
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD"), ("Content-Type", "text/plain"),
                                                      ("Content-Length", str(len(body)))])
            return [body]
        if path == telemetry_path:
            return metrics_app(environ, start_response)
        if path == "/healthz":
            ok, text = health() if health else (True, "ok")
            body = (text + "\n").encode()
            start_response("200 OK" if ok else "503 Service Unavailable",
                           [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
            return [body]
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                      ("Content-Length", str(len(landing)))])
            return [landing]
        body = b"not found\n"
        start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]

    return app


def raise_fd_limit(wanted: int) -> int:
    """Raise the soft ``RLIMIT_NOFILE`` towards ``wanted`` (never past the hard limit, never lower it).

    Returns:
        The soft limit in force afterwards (a large number when unlimited).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 30
    if soft < wanted:
        new = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
        except (ValueError, OSError) as exc:
            log.debug("cannot raise RLIMIT_NOFILE to %d: %s", new, exc)
    return soft


class WebServer:
    """Serves a WSGI app on ``host:port`` with waitress, its event loop in a background thread.

    Args:
        host: Address to bind; ``""`` for every interface (IPv4), an IPv6 literal for IPv6, or a host
            name (resolved to its IPv4 address).
        port: Port; 0 picks a free one (see :attr:`port` after :meth:`start`).
        app: The WSGI application (:func:`make_app`).
        limits: The server's limits (:class:`Limits`).
        tls: Serve over TLS with these files (:class:`~exporter.webconfig.TlsFiles`); None: plain HTTP.

    Raises:
        OSError: from :meth:`start` when the address cannot be bound (in use, not permitted).
    """

    def __init__(self, host: str, port: int, app, limits: Limits = Limits(), tls=None):
        self.host, self.requested_port, self.app, self.limits, self.tls = host, port, app, limits, tls
        self.connection_limit = limits.max_connections
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port."""
        return self._server.socket.getsockname()[1] if self._server else self.requested_port

    def start(self) -> None:
        """Bind, listen and serve in a thread named ``http``.

        The soft file-descriptor limit is raised towards ``max_connections`` plus a reserve (as Go
        programs do at start); where the hard limit does not allow it, the connection limit is
        lowered so that accepting a connection never fails for want of a descriptor.
        """
        lim = self.limits
        queue_log = logging.getLogger("waitress.queue")
        if queue_log.level == logging.NOTSET and not log.isEnabledFor(logging.DEBUG):
            queue_log.setLevel(logging.ERROR)  # a warning per request queued for a thread: a flood under load
        soft = raise_fd_limit(lim.max_connections + Limits.FD_RESERVE)
        self.connection_limit = max(16, min(lim.max_connections, soft - Limits.FD_RESERVE))
        if self.connection_limit < lim.max_connections:
            log.info("file-descriptor limit %d: serving at most %d HTTP connections", soft, self.connection_limit)
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.requested_port))
            adj = Adjustments(
                sockets=[sock], backlog=lim.backlog, threads=lim.threads,
                connection_limit=self.connection_limit,
                max_request_header_size=lim.max_header_bytes, max_request_body_size=lim.max_body_bytes,
                channel_timeout=lim.idle_timeout, cleanup_interval=1,
                outbuf_overflow=lim.max_response_bytes, outbuf_high_watermark=lim.output_high_water_bytes,
                inbuf_overflow=max(lim.max_body_bytes, 1 << 16),
                asyncore_use_poll=True,  # poll(), not select(): works past 1024 descriptors
                ident="sglang-exporter", expose_tracebacks=False, clear_untrusted_proxy_headers=False)
            server = _Server(self.app, _sock=sock, adj=adj, bind_socket=False,
                             sockinfo=(sock.family, sock.type, sock.proto, sock.getsockname()))
        except BaseException:
            sock.close()
            raise
        server.configure(lim, self.tls)
        self._server = server
        self._thread = threading.Thread(target=server.run, name="http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Close the listening socket and every connection, and stop the worker threads."""
        server, self._server = self._server, None
        if server is None:
            return
        # Workers first, while the event loop still runs (a worker may wait on it to flush, and
        # wakes it when done); then the loop closes every socket from its own thread and ends.
        server.task_dispatcher.shutdown(timeout=5.0)
        if server.health_dispatcher is not None:
            server.health_dispatcher.shutdown(timeout=5.0)
        server.trigger.pull_trigger(lambda: wasyncore.close_all(server._map, ignore_all=True))
        if self._thread is not None:
            self._thread.join(5.0)
