"""A real Prometheus server on loopback for the tests: free ports, polling with a deadline, the query
API, stopping processes, and corpus lines as SGLang wrote them. Shared by
tests/test_prometheus_integration.py and tests/test_fleet_remote_write.py."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

DEADLINE_S = 60.0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_lines(path: Path) -> list[str]:
    """The log lines of a corpus file (its three '# ' header lines are not log output)."""
    return [line for line in path.read_text().splitlines(keepends=True) if not line.startswith("# ")]


def get(url: str, timeout: float = 5.0) -> str:
    """The body of a GET on loopback, decoded."""
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback only
        return response.read().decode()


def wait_for(what: str, probe, deadline_s: float = DEADLINE_S, procs=()):
    """Poll ``probe()`` until it returns something truthy; fail with the last value at the deadline,
    or as soon as one of ``procs`` has exited."""
    end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < end:
        for p in procs:
            if p.poll() is not None:
                pytest.fail(f"{what}: {p.args[0]} exited with {p.returncode}")
        try:
            last = probe()
        except (OSError, urllib.error.URLError, ValueError, KeyError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(0.2)
    pytest.fail(f"timed out after {deadline_s:.0f}s waiting for {what}; last: {last!r}")


class Prometheus:
    """The HTTP query API of a Prometheus server at ``base`` (``http://127.0.0.1:PORT``)."""

    def __init__(self, base: str):
        self.base = base

    def query(self, expr: str) -> list[dict]:
        """The instant vector of ``expr`` now (raises on a query error)."""
        url = f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        body = json.loads(get(url))
        assert body["status"] == "success", body
        return body["data"]["result"]

    def scalar(self, expr: str) -> float | None:
        """The value of ``expr`` when it has exactly one series, else None."""
        result = self.query(expr)
        if len(result) != 1:
            return None
        return float(result[0]["value"][1])


def stop(proc: subprocess.Popen) -> None:
    """Terminate a process we started, killing it after 10 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
