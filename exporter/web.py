"""HTTP endpoint: ``/metrics`` (configurable), ``/healthz`` and a landing page at ``/``.

Metrics are encoded by prometheus_client's WSGI app (content negotiation for OpenMetrics, gzip);
this module only routes and serves, with a threading WSGI server so a slow client cannot block
another scrape.
"""

from __future__ import annotations

import html
import logging
import socket
import threading
from collections.abc import Callable
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from . import __version__

log = logging.getLogger(__name__)


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    # A client that sends nothing for this long is dropped, so idle connections cannot pile up threads.
    timeout = 30

    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        log.debug("%s - %s", self.address_string(), format % args)


def make_app(registry: CollectorRegistry, telemetry_path: str = "/metrics",
             health: Callable[[], tuple[bool, str]] | None = None):
    """Build the WSGI application.

    Args:
        registry: The registry served at ``telemetry_path``.
        telemetry_path: Path of the metrics.
        health: Returns ``(healthy, text)`` for ``/healthz``; healthy when omitted.

    Returns:
        A WSGI callable: ``telemetry_path`` -> metrics, ``/healthz`` -> 200 "ok" or 503 with the reason,
        ``/`` -> an HTML page linking to the metrics, anything else -> 404.
    """
    metrics_app = make_wsgi_app(registry)
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


class WebServer:
    """Serves a WSGI app on ``host:port`` in a background thread.

    Args:
        host: Address to bind; ``""`` for every interface (IPv4), an IPv6 literal for IPv6.
        port: Port; 0 picks a free one (see :attr:`port` after :meth:`start`).
        app: The WSGI application (:func:`make_app`).

    Raises:
        OSError: from :meth:`start` when the address cannot be bound (in use, not permitted).
    """

    def __init__(self, host: str, port: int, app):
        self.host, self.requested_port, self.app = host, port, app
        self._httpd = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port."""
        return self._httpd.server_address[1] if self._httpd else self.requested_port

    def start(self) -> None:
        server_class = _Server6 if ":" in self.host else _Server
        self._httpd = make_server(self.host, self.requested_port, self.app, server_class=server_class,
                                  handler_class=_QuietHandler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
