"""The HTTP endpoint: methods, idle clients, and label values that are not UTF-8."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request

from conftest import CORPUS, samples, value
from prometheus_client import generate_latest

from exporter import web
from exporter.cli import build_registry
from exporter.pipeline import Pipeline
from exporter.state import SchedulerStates
from exporter.tailer import make_sources
from exporter.web import WebServer, make_app


def _server(pipeline=None):
    registry = build_registry(pipeline or Pipeline(SchedulerStates()), None)
    server = WebServer("127.0.0.1", 0, make_app(registry))
    server.start()
    return server


def test_only_get_and_head_are_allowed():
    server = _server()
    try:
        for method in ("POST", "DELETE", "PUT"):
            for path in ("/", "/metrics", "/healthz"):
                req = urllib.request.Request(f"http://127.0.0.1:{server.port}{path}", method=method, data=b"x")
                try:
                    urllib.request.urlopen(req, timeout=10)
                    raise AssertionError(f"{method} {path} was accepted")
                except urllib.error.HTTPError as e:
                    assert e.code == 405 and e.headers["Allow"] == "GET, HEAD"
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10) as r:
            assert r.status == 200
    finally:
        server.stop()


def test_an_idle_client_is_disconnected(monkeypatch):
    monkeypatch.setattr(web._QuietHandler, "timeout", 0.5)
    server = _server()
    try:
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.sendall(b"GET /metrics HTTP/1.1\r\n")  # ...and never finishes the request
        start = time.monotonic()
        assert s.recv(1024) == b""  # the server closed the connection
        assert time.monotonic() - start < 8
        s.close()
    finally:
        server.stop()


def test_a_file_name_that_is_not_utf8_does_not_break_metrics(tmp_path, promtool):
    bad = os.fsdecode(os.path.join(os.fsencode(str(tmp_path)), b"evil\xff.log"))
    with open(bad, "w", encoding="utf-8") as f:
        f.write((CORPUS / "007-decode-oom-retract-tp16.log").read_text(encoding="utf-8"))
    pipeline = Pipeline(SchedulerStates())
    for source in make_sources([str(tmp_path / "*.log")], pipeline, from_beginning=True):
        source.poll()
    text = generate_latest(build_registry(pipeline, None)).decode()
    m = samples(text)
    assert value(m, "sglang_exporter_log_file_opens_total", path=str(tmp_path / "evil\\xff.log")) == 1
    assert value(m, "sglang_scheduler_retractions_total", dp_rank="0") == 2
    lint = subprocess.run([promtool, "check", "metrics"], input=text, text=True, capture_output=True, timeout=60)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_head_is_get_without_a_body():
    server = _server()
    try:
        for path in ("/metrics", "/healthz", "/"):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            s.sendall(f"HEAD {path} HTTP/1.0\r\n\r\n".encode())
            data = b""
            while chunk := s.recv(65536):
                data += chunk
            s.close()
            head, _, body = data.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.0 200"), (path, head)
            assert body == b"", (path, body[:80])
    finally:
        server.stop()
