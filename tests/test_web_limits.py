"""The HTTP server's limits under hostile and heavy clients, on the real command.

One ``sglang-exporter`` process on 127.0.0.1:0 (the corpus log read from its beginning, so /metrics
has real series) takes, in turn: oversize headers, 30 concurrent requests carrying about 6 MB of
headers, 1,500 connections that trickle their headers while others scrape, and 200 concurrent
scrapers. After each, it must still serve, and its peak resident memory (VmHWM of
/proc/PID/status) must stay under the sidecar's 128 MiB limit. Loopback only; every loop is
bounded in count and time.

The test process needs about 1,600 file descriptors at once: it raises its own soft RLIMIT_NOFILE
to 4,096 where the hard limit allows, and skips the 1,500-connection test where it does not.
"""

from __future__ import annotations

import errno
import resource
import select
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from exporter_support import Exporter

from conftest import CORPUS, value
from exporter.web import Limits

MIB = 1 << 20
#: The sidecar's memory limit in the shipped manifests.
RSS_LIMIT = 128 * MIB
SLOW_CONNECTIONS = 1500


def _status(pid: int, field: str) -> int:
    """A ``kB`` field of /proc/PID/status, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"{field} not in /proc/{pid}/status")


@pytest.fixture(scope="module")
def exporter(tmp_path_factory):
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc (Linux)")
    log = tmp_path_factory.mktemp("web-limits") / "sglang.log"
    log.write_text((CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log").read_text(encoding="utf-8"))
    exp = Exporter("--log.path", str(log), "--log.from-beginning", "--gpu.enabled", "false")
    exp.wait_for(lambda m: value(m, "sglang_scheduler_retractions_total", stage="", dp_rank="0") == 9, "the log")
    yield exp
    code = exp.terminate()
    assert code == 0, "".join(exp.stderr_lines[-20:])


def _serves(exp) -> None:
    status, body = exp.get("/metrics")
    assert status == 200 and "sglang_scheduler_retractions_total" in body
    assert exp.proc.poll() is None


def _status_count(pid: int, field: str) -> int:
    """A plain number field of /proc/PID/status (``Threads``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


def _sockets(pid: int) -> int:
    """Open sockets of a process (its listening socket included)."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            count += fd.readlink().name.startswith("socket:")
        except OSError:
            pass
    return count


def _peak_ok(exp) -> int:
    peak = _status(exp.proc.pid, "VmHWM")
    assert peak < RSS_LIMIT, f"peak RSS {peak / MIB:.1f} MiB"
    return peak


def _raw(port: int, payload: bytes, timeout: float = 20.0) -> bytes:
    """Send ``payload`` (as far as the server takes it) and return what comes back until close."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server stopped reading and closed: also a refusal
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except ConnectionResetError:
            pass
        return out


def _refused(reply: bytes) -> bool:
    """431 (or 400), or closed without a response."""
    return reply == b"" or reply.split(b" ", 2)[1] in (b"431", b"400")


def test_oversize_headers_are_refused_and_the_sidecar_serves(exporter):
    port = exporter.port
    # 99 headers of 65,000 bytes: what the issue found accepted.
    big = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"".join(
        b"X-%d: %s\r\n" % (i, b"a" * 65000) for i in range(99)) + b"\r\n"
    reply = _raw(port, big)
    assert _refused(reply), reply[:200]
    # Just over the limit: answered 431.
    reply = _raw(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * Limits.max_header_bytes + b"\r\n\r\n")
    assert reply.split(b" ", 2)[1] == b"431", reply[:200]
    # Well inside it: served.
    reply = _raw(port, b"GET /metrics HTTP/1.0\r\nX-Pad: " + b"a" * 2000 + b"\r\n\r\n")
    assert reply.startswith(b"HTTP/1.0 200") and b"sglang_scheduler_retractions_total" in reply
    _serves(exporter)
    _peak_ok(exporter)


def test_30_concurrent_requests_with_6_mb_of_headers(exporter):
    port = exporter.port
    one = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"".join(
        b"X-%d: %s\r\n" % (i, b"b" * 20000) for i in range(10)) + b"\r\n"   # 200 kB each
    assert 30 * len(one) > 6_000_000
    with ThreadPoolExecutor(30) as pool:
        replies = list(pool.map(lambda _: _raw(port, one), range(30)))
    assert all(_refused(r) for r in replies), [r[:80] for r in replies if not _refused(r)]
    _serves(exporter)
    peak = _peak_ok(exporter)
    print(f"30 x 200 kB headers: peak RSS {peak / MIB:.1f} MiB")


def _fd_room(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {needed}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def test_slow_connections_are_dropped_by_the_deadline_while_scrapes_succeed(exporter):
    """1,500 clients send a request line and, later, one more header line (activity that resets
    waitress's own inactivity timeout) but never finish; meanwhile 20 scrapers keep scraping."""
    _fd_room(SLOW_CONNECTIONS + 500)
    port = exporter.port
    slow: list[socket.socket] = []
    try:
        start = time.monotonic()
        for _ in range(SLOW_CONNECTIONS):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            slow.append(s)
        results: list[int | str] = []
        stop = threading.Event()

        def scraper():
            while not stop.is_set():
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                        r.read()
                        results.append(r.status)
                except (OSError, urllib.error.URLError) as e:
                    results.append(repr(e))
                time.sleep(0.05)

        threads = [threading.Thread(target=scraper) for _ in range(20)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        # One event loop reads every connection: no thread per connection.
        server_threads = _status_count(exporter.proc.pid, "Threads")
        assert server_threads <= 20, f"{server_threads} threads with {len(slow)} connections open"
        time.sleep(max(0.0, Limits.request_timeout / 2 - (time.monotonic() - start)))
        for s in slow:  # a trickled header line: activity, but still no whole request
            try:
                s.sendall(b"X-Trickle: 1\r\n")
            except OSError:
                pass
        # Every slow connection is closed by the deadline (plus the 1 s maintenance tick and slack).
        closed: set[int] = set()
        poller = select.poll()
        by_fd = {s.fileno(): s for s in slow}
        for fd in by_fd:
            poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        end = start + Limits.request_timeout + 15
        while len(closed) < len(slow) and time.monotonic() < end:
            for fd, _ in poller.poll(500):
                try:
                    data = by_fd[fd].recv(1024)
                except OSError as e:
                    data = b"" if e.errno in (errno.ECONNRESET, errno.EPIPE) else b"?"
                assert data == b"", f"a slow connection got a response: {data[:80]!r}"
                closed.add(fd)
                poller.unregister(fd)
        dropped_after = time.monotonic() - start
        stop.set()
        for t in threads:
            t.join(30)
    finally:
        for s in slow:
            s.close()
    failures = [r for r in results if r != 200]
    assert len(closed) == len(slow), f"{len(slow) - len(closed)} slow connections still open"
    assert dropped_after >= Limits.request_timeout - 1, "dropped before the deadline"
    assert results and not failures, f"{len(failures)} of {len(results)} scrapes failed: {failures[:3]}"
    _serves(exporter)
    peak = _peak_ok(exporter)
    print(f"{SLOW_CONNECTIONS} slow connections: all dropped after {dropped_after:.1f} s; "
          f"{len(results)} concurrent scrapes, 0 failures; {server_threads} threads; peak RSS {peak / MIB:.1f} MiB")


def test_open_connections_are_capped(exporter):
    """More idle connections than the limit: the sidecar holds at most the limit open (the rest wait
    in the listen backlog), and serves again once they are gone."""
    extra = 300
    _fd_room(Limits.max_connections + extra + 500)
    port, pid = exporter.port, exporter.proc.pid
    conns: list[socket.socket] = []
    try:
        for _ in range(Limits.max_connections + extra):
            conns.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        end = time.monotonic() + Limits.request_timeout / 2
        held = seen = 0
        while time.monotonic() < end:  # until the accepted count stops growing
            held = _sockets(pid)
            if held == seen and held >= Limits.max_connections:
                break
            seen = held
            time.sleep(0.3)
        assert Limits.max_connections - 5 <= held <= Limits.max_connections + 1, held
    finally:
        for s in conns:
            s.close()
    deadline = time.monotonic() + 30
    while _sockets(pid) > 10 and time.monotonic() < deadline:
        time.sleep(0.2)
    _serves(exporter)
    peak = _peak_ok(exporter)
    print(f"{len(conns)} idle connections: {held} held open; peak RSS {peak / MIB:.1f} MiB")


def test_200_concurrent_scrapers_without_a_failure(exporter):
    _fd_room(1024)
    port = exporter.port
    barrier = threading.Barrier(200, timeout=30)

    def scrape(_):
        barrier.wait()
        out = []
        for _ in range(5):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
                    ok = r.status == 200 and b"sglang_scheduler_retractions_total" in r.read()
                    out.append(ok or "bad body")
            except (OSError, urllib.error.URLError) as e:
                out.append(repr(e))
        return out

    with ThreadPoolExecutor(200) as pool:
        results = [r for rs in pool.map(scrape, range(200)) for r in rs]
    failures = [r for r in results if r is not True]
    assert len(results) == 1000 and not failures, f"{len(failures)} failures: {failures[:3]}"
    # Load is not logged request by request (waitress warns for each request that waits for a thread).
    assert len(exporter.stderr_lines) < 20, exporter.stderr_lines[-5:]
    _serves(exporter)
    peak = _peak_ok(exporter)
    print(f"200 concurrent scrapers x 5: 0 failures; peak RSS {peak / MIB:.1f} MiB")
