"""The HTTP endpoint: methods, the whole-request deadline, large responses, label values that are not
UTF-8, and the real command on IPv6 with gzip, OpenMetrics and the name[] filter."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import CORPUS, samples, value

from exporter.cli import build_registry
from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.sources.log.source import LogSource
from exporter.web import Limits, WebServer, make_app
from exporter_support import Exporter


def _registry():
    store = SchedulerStore(SchedulerStates())
    return build_registry(store, LogSource([], store), None)


def _server():
    server = WebServer("127.0.0.1", 0, make_app(_registry()))
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


def test_a_client_that_never_finishes_its_request_is_disconnected():
    """The whole-request deadline: a partial request line, then nothing (and a connection that
    sends nothing at all) are closed once the request timeout has passed."""
    server = WebServer("127.0.0.1", 0, make_app(_registry()), Limits(request_timeout=1.0))
    server.start()
    try:
        partial = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        silent = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        partial.sendall(b"GET /metrics HTTP/1.1\r\n")  # ...and never finishes the request
        start = time.monotonic()
        assert partial.recv(1024) == b""  # the server closed the connection
        assert silent.recv(1024) == b""
        assert 0.9 < time.monotonic() - start < 8
        partial.close()
        silent.close()
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10) as r:
            assert r.status == 200
    finally:
        server.stop()


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


def test_a_large_response_needs_no_temporary_file(monkeypatch, tmp_path):
    """waitress keeps responses up to ``max_response_bytes`` in memory; past its own default (1 MiB)
    it would spill to a temporary file, which the sidecar's read-only root filesystem refuses."""
    import tempfile

    from prometheus_client import CollectorRegistry
    from prometheus_client.core import GaugeMetricFamily

    class Big:
        def collect(self):
            family = GaugeMetricFamily("test_big", "Many series.", labels=("i",))
            for i in range(60000):
                family.add_metric([str(i)], i)
            yield family

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Big())
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "read-only-root" / "tmp"))  # does not exist
    server = WebServer("127.0.0.1", 0, make_app(registry))
    server.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=30) as r:
            body = r.read()
        assert r.status == 200 and len(body) > 1 << 20
        assert body.rstrip().endswith(b'test_big{i="59999"} 59999.0')
    finally:
        server.stop()


def _start_on(address: str, *args: str) -> tuple[subprocess.Popen, str]:
    """The real command on ``address``; returns the process and its base URL (from its log line)."""
    import re
    import threading

    from exporter_support import command

    proc = subprocess.Popen([*command(), "--web.listen-address", address, "--gpu.enabled", "false", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    found: list[str] = []
    ready = threading.Event()

    def pump():
        for line in proc.stderr:
            m = re.search(r"serving metrics on (http://\S+?)/metrics", line)
            if m and not found:
                found.append(m.group(1))
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(30):
        proc.kill()
        raise AssertionError("the exporter did not start")
    return proc, found[0]


def test_real_command_on_ipv6_negotiates_gzip_and_openmetrics_and_filters_by_name(tmp_path):
    """What prometheus_client's WSGI app does, through waitress: gzip when asked, OpenMetrics when
    asked, and ``name[]`` restricted to the families named (empty before this was fixed)."""
    import gzip

    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        socket.socket(socket.AF_INET6).bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback")
    log = tmp_path / "sglang.log"
    log.write_text((CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log").read_text(encoding="utf-8"))
    proc, base = _start_on("[::1]:0", "--log.path", str(log), "--log.from-beginning")
    try:
        assert base.startswith("http://[::1]:")

        def get(path, **headers):
            with urllib.request.urlopen(urllib.request.Request(base + path, headers=headers), timeout=10) as r:
                return r.status, r.headers, r.read()

        deadline = time.monotonic() + 30
        while value(get("/metrics")[2].decode(), "sglang_scheduler_retractions_total", stage="", dp_rank="0") != 9:
            assert time.monotonic() < deadline, "the log was not read"
            time.sleep(0.1)
        status, headers, body = get("/metrics", **{"Accept-Encoding": "gzip"})
        assert status == 200 and headers["Content-Encoding"] == "gzip"
        assert value(gzip.decompress(body).decode(), "sglang_scheduler_retractions_total", stage="", dp_rank="0") == 9
        status, headers, body = get("/metrics", Accept="application/openmetrics-text; version=1.0.0")
        assert headers["Content-Type"].startswith("application/openmetrics-text")
        assert body.endswith(b"# EOF\n") and b"sglang_scheduler_retractions_total" in body

        from prometheus_client.parser import text_string_to_metric_families
        status, _, body = get("/metrics?name[]=sglang_exporter_build_info")
        families = list(text_string_to_metric_families(body.decode()))
        assert status == 200 and [f.name for f in families] == ["sglang_exporter_build_info"]
        assert len(families[0].samples) == 1 and families[0].samples[0].labels["version"]
        names = "name[]=sglang_scheduler_retractions_total&name[]=sglang_exporter_build_info"
        m = samples(get("/metrics?" + names)[2].decode())
        assert {name for name, _ in m} == {"sglang_scheduler_retractions_total", "sglang_exporter_build_info"}
        assert value(m, "sglang_scheduler_retractions_total", stage="", dp_rank="0") == 9
        assert get("/metrics?name[]=no_such_metric")[2] == b""
    finally:
        proc.terminate()
        assert proc.wait(30) == 0


def test_gzip_is_sent_only_when_accepted_with_a_quality_above_zero(tmp_path):
    """``Accept-Encoding: gzip;q=0`` refuses gzip (RFC 9110), on the real command."""
    log = tmp_path / "sglang.log"
    log.write_text((CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log").read_text(encoding="utf-8"))
    exp = Exporter("--log.path", str(log), "--log.from-beginning", "--gpu.enabled", "false")
    try:
        cases = {"gzip;q=0": False, "gzip; q=0.0, identity": False, "identity;q=1, *;q=0": False,
                 "GZIP;Q=0.5": True, "*": True, "br, gzip": True, "gzip;q=0, *;q=1": False, "": False}
        for accept, wanted in cases.items():
            req = urllib.request.Request(f"http://127.0.0.1:{exp.port}/metrics", headers={"Accept-Encoding": accept})
            with urllib.request.urlopen(req, timeout=10) as r:
                body = r.read()
                assert (r.headers.get("Content-Encoding") == "gzip") is wanted, accept
                assert (body[:2] == b"\x1f\x8b") is wanted, accept
    finally:
        assert exp.terminate() == 0
