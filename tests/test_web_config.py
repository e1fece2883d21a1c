"""``--web.config.file`` (exporter-toolkit format): TLS, mutual TLS, basic authentication and response
headers on the real command, with a real TLS client (Python's ``ssl``) and a real Prometheus scraping
over TLS with basic auth and a client certificate. Certificates are made here with the ``openssl``
command (a CA, a server certificate for 127.0.0.1, a client certificate); bcrypt hashes with ``bcrypt``."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import bcrypt
import pytest

from conftest import require_tool
from exporter_support import DEADLINE, command
from tail_support import append, decode_block

PASSWORD = "s3cret pass"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run([require_tool("openssl"), *args], cwd=cwd, check=True, capture_output=True)


def _certs(d: Path, cn: str = "sglang-exporter") -> None:
    """ca.crt/ca.key, server.crt/server.key (SAN 127.0.0.1, signed by the CA), client.crt/client.key."""
    d.mkdir(parents=True, exist_ok=True)
    if not (d / "ca.key").exists():
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
                 "-days", "2", "-subj", "/CN=test-ca", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, subj in (("server", f"/CN={cn}"), ("client", "/CN=prometheus")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", subj, cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.crt", "-days", "2", *(["-extfile", "san.ext"] if name == "server" else []), cwd=d)


def _config(d: Path, tls: bool = True, mtls: bool = False, users: bool = True, headers: bool = True) -> Path:
    lines = []
    if tls:
        lines += ["tls_server_config:", "  cert_file: server.crt", "  key_file: server.key"]
        if mtls:
            lines += ["  client_ca_file: ca.crt", "  client_auth_type: RequireAndVerifyClientCert"]
    if users:
        hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
        lines += ["basic_auth_users:", f"  prometheus: '{hashed}'"]
    if headers:
        lines += ["http_server_config:", "  headers:", "    X-Frame-Options: deny"]
    path = d / "web.yml"
    path.write_text("\n".join(lines) + "\n")
    return path


class _Served:
    """The real command with a web configuration, on a free loopback port."""

    def __init__(self, tmp_path: Path, web_yml: Path):
        self.log = tmp_path / "sglang.log"
        self.log.write_bytes(b"")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc = subprocess.Popen([*command(), "--log.path", str(self.log), "--gpu.enabled", "false",
                                      "--web.listen-address", f"127.0.0.1:{self.port}",
                                      "--web.config-file", str(web_yml)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def wait_up(self, ctx: ssl.SSLContext | None) -> None:
        end = time.monotonic() + DEADLINE
        while True:
            try:
                if self.get("/healthz", ctx)[0] == 200:
                    return
            except OSError:
                pass
            assert self.proc.poll() is None, self.proc.stderr.read()
            assert time.monotonic() < end, "not up"
            time.sleep(0.05)

    def get(self, path: str, ctx: ssl.SSLContext | None, auth: str | None = None) -> tuple[int, object, str]:
        scheme = "https" if ctx is not None else "http"
        req = urllib.request.Request(f"{scheme}://127.0.0.1:{self.port}{path}")
        if auth is not None:
            req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
        try:
            with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
                return r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read().decode()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(DEADLINE)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def _client(d: Path, cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(d / "ca.crt"))
    if cert:
        ctx.load_cert_chain(str(d / "client.crt"), str(d / "client.key"))
    return ctx


def _peer_cn(port: int, ctx: ssl.SSLContext) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            return dict(x[0] for x in s.getpeercert()["subject"])["commonName"]


def test_tls_with_basic_auth_headers_and_a_certificate_rotated_in_place(tmp_path):
    d = tmp_path / "tls"
    _certs(d)
    server = _Served(tmp_path, _config(d))
    try:
        ctx = _client(d)
        server.wait_up(ctx)
        status, headers, _ = server.get("/metrics", ctx)
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
        assert server.get("/metrics", ctx, "prometheus:wrong")[0] == 401
        assert server.get("/metrics", ctx, "nobody:" + PASSWORD)[0] == 401
        status, headers, body = server.get("/metrics", ctx, "prometheus:" + PASSWORD)
        assert status == 200 and "sglang_exporter_build_info" in body and headers["X-Frame-Options"] == "deny"
        status, headers, body = server.get("/healthz", ctx)  # kubelet probes send no password
        assert status == 200 and body == "ok\n" and headers["X-Frame-Options"] == "deny"
        with pytest.raises(OSError):  # plain HTTP on the TLS port gets no answer
            server.get("/healthz", None)
        assert server.proc.poll() is None
        # Kubernetes updates a mounted Secret in place: the next connection gets the new certificate.
        assert _peer_cn(server.port, ctx) == "sglang-exporter"
        new = tmp_path / "new"
        shutil.copytree(d, new)
        _certs(new, cn="rotated")
        for name in ("server.crt", "server.key"):
            os.replace(new / name, d / name)
        end = time.monotonic() + DEADLINE
        while _peer_cn(server.port, ctx) != "rotated":
            assert time.monotonic() < end, "the new certificate was not served"
            time.sleep(0.05)
    finally:
        server.stop()


def test_mutual_tls_refuses_a_client_without_a_certificate(tmp_path):
    d = tmp_path / "tls"
    _certs(d)
    server = _Served(tmp_path, _config(d, mtls=True, users=False, headers=False))
    try:
        with_cert = _client(d, cert=True)
        server.wait_up(with_cert)
        status, _, body = server.get("/metrics", with_cert)
        assert status == 200 and "sglang_exporter_build_info" in body
        with pytest.raises((ssl.SSLError, OSError)):
            server.get("/metrics", _client(d))
        assert server.get("/metrics", with_cert)[0] == 200  # the refused client left the server serving
    finally:
        server.stop()


@pytest.mark.parametrize("text, expected", [
    ("tls_server_config:\n  cert_file: a.crt\n", "needs both cert_file and key_file"),
    ("basic_auth_users:\n  prometheus: plaintext\n", "must be a bcrypt hash"),
    ("tls_server_config:\n  cipher_suites: [x]\n", "cipher_suites is not supported"),
    ("tls_config:\n  cert_file: a\n", "unknown key tls_config"),
    ("http_server_config:\n  headers:\n    Content-Type: x\n", "cannot set Content-Type"),
    ("tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n", "cannot load the TLS"),
])
def test_a_bad_web_configuration_stops_start_up_with_one_line(tmp_path, text, expected):
    web = tmp_path / "web.yml"
    web.write_text(text)
    r = subprocess.run([*command(), "--log.path", str(tmp_path / "x.log"), "--web.config-file", str(web)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "--web.config-file" in lines[0] and expected in lines[0], r.stderr


def test_a_real_prometheus_scrapes_over_mutual_tls_with_basic_auth(tmp_path):
    prometheus_bin = require_tool("prometheus")
    d = tmp_path / "tls"
    _certs(d)
    server = _Served(tmp_path, _config(d, mtls=True))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        prom_port = s.getsockname()[1]
    (tmp_path / "password").write_text(PASSWORD)
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [{
            "job_name": "sglang-exporter", "scheme": "https",
            "basic_auth": {"username": "prometheus", "password_file": str(tmp_path / "password")},
            "tls_config": {"ca_file": str(d / "ca.crt"), "cert_file": str(d / "client.crt"),
                           "key_file": str(d / "client.key"), "server_name": "127.0.0.1"},
            "static_configs": [{"targets": [f"127.0.0.1:{server.port}"]}]}]}))
    prom = subprocess.Popen([prometheus_bin, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        server.wait_up(_client(d, cert=True))
        append(server.log, decode_block(5))

        def query(q: str) -> list:
            url = f"http://127.0.0.1:{prom_port}/api/v1/query?query=" + urllib.parse.quote(q)
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    return json.load(r)["data"]["result"]
            except OSError:
                return []

        end = time.monotonic() + 60
        while True:
            up = query('up{job="sglang-exporter"}')
            lines = query('sglang_exporter_log_lines_total{kind="decode",result="parsed"}')
            if up and up[0]["value"][1] == "1" and lines and float(lines[0]["value"][1]) == 5:
                break
            assert time.monotonic() < end, f"Prometheus did not scrape over mTLS + basic auth: up={up} lines={lines}"
            time.sleep(0.5)
    finally:
        prom.terminate()
        prom.wait(30)
        server.stop()


def test_the_exporter_toolkits_flag_spelling_is_taken_too(tmp_path):
    """node_exporter and the other exporters take ``--web.config.file``: the same setting here (a bad
    file proves the flag reached it: before, the flag itself was unknown)."""
    web = tmp_path / "web.yml"
    web.write_text("basic_auth_users:\n  prometheus: plaintext\n")
    r = subprocess.run([*command(), "--log.path", str(tmp_path / "x.log"), "--web.config.file", str(web)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "must be a bcrypt hash" in r.stderr and "unknown flag" not in r.stderr, r.stderr
