"""Clients that send and never read, on the real command (exporter/webconn.py's bounds).

One ``sglang-exporter`` on 127.0.0.1:0 reads a log of 8 DP ranks (a /metrics body of a few hundred
kB). Attackers with a 4 KiB receive buffer pipeline hundreds of scrapes and never read, or open
hundreds of connections that each scrape once and never read. Throughout, ``/healthz`` must answer
within 5 s, ``/metrics`` within the send deadline, the peak resident memory (VmHWM) stay under the
manifests' 128 MiB, and each pipelining connection get at most ``max_pipelined`` answers before it
is closed. Loopback only; every loop is bounded in count and time.
"""

from __future__ import annotations

import socket
import time
import urllib.request
from pathlib import Path

import pytest
from exporter_support import Exporter

from conftest import value
from exporter.web import Limits

MIB = 1 << 20
RSS_LIMIT = 128 * MIB
RANKS = 8


def _peak(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.fixture
def wide(tmp_path):
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc (Linux)")
    lines = []
    for s in range(30):
        for dp in range(RANKS):
            lines.append(f"[2026-09-13 16:00:{s:02d} DP{dp} TP{dp}] Decode batch, #running-req: 3, #token: 30, "
                         "token usage: 0.10, cuda graph: True, gen throughput (token/s): 12.5, #queue-req: 0")
            lines.append(f"[2026-09-13 16:00:{s:02d} DP{dp} TP{dp}] Prefill batch, #new-seq: 1, #new-token: 80, "
                         "#cached-token: 0, token usage: 0.10, #running-req: 3, #queue-req: 0")
    log = tmp_path / "sglang.log"
    log.write_text("\n".join(lines) + "\n")
    exp = Exporter("--log.path", str(log), "--log.from-beginning", "--gpu.enabled", "false")
    exp.wait_for(lambda m: value(m, "sglang_exporter_log_lines_total", kind="decode", result="parsed") == 30 * RANKS,
                 "the log")
    yield exp
    assert exp.terminate() == 0, "".join(exp.stderr_lines[-20:])


def _attacker(port: int, payload: bytes) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(payload)
    return s


def _timed_get(port: int, path: str, timeout: float) -> float:
    start = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        assert r.status == 200 and r.read()
    return time.monotonic() - start


def _healthz_throughout(port: int, seconds: float) -> float:
    """Poll /healthz for ``seconds``; every answer within 5 s. Returns the slowest, in seconds."""
    worst, end = 0.0, time.monotonic() + seconds
    while time.monotonic() < end:
        worst = max(worst, _timed_get(port, "/healthz", 5.0))
        time.sleep(0.1)
    return worst


def test_pipelined_scrapes_never_read(wide):
    body = _timed_get(wide.port, "/metrics", 10)  # warm
    assert body < 10
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
    attackers = [_attacker(wide.port, request * 300) for _ in range(8)]
    try:
        worst = _healthz_throughout(wide.port, 2.0)
        scrape = _timed_get(wide.port, "/metrics", Limits.send_timeout + 5)
        peak = _peak(wide.proc.pid)
        assert peak < RSS_LIMIT, f"peak RSS {peak / MIB:.1f} MiB"
        # Each attacker gets at most the pipelining depth of answers, then the connection closes.
        for s in attackers:
            s.settimeout(Limits.send_timeout + 5)
            got = b""
            try:
                while chunk := s.recv(1 << 16):
                    got += chunk
            except ConnectionResetError:
                pass
            assert 0 < got.count(b"HTTP/1.1 200 OK") <= Limits.max_pipelined
    finally:
        for s in attackers:
            s.close()
    print(f"8 x 300 pipelined scrapes unread: /healthz worst {worst:.2f} s, /metrics {scrape:.2f} s, "
          f"peak RSS {peak / MIB:.1f} MiB")


def test_many_connections_that_scrape_once_and_never_read(wide):
    attackers = []
    try:
        for _ in range(300):
            attackers.append(_attacker(wide.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"))
        worst = _healthz_throughout(wide.port, 2.0)
        scrape = _timed_get(wide.port, "/metrics", Limits.send_timeout + 5)
        peak = _peak(wide.proc.pid)
    finally:
        for s in attackers:
            s.close()
    assert peak < RSS_LIMIT, f"peak RSS {peak / MIB:.1f} MiB"
    print(f"300 connections, one unread scrape each: /healthz worst {worst:.2f} s, /metrics {scrape:.2f} s, "
          f"peak RSS {peak / MIB:.1f} MiB")
