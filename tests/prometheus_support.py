"""A real Prometheus server on loopback for the tests: free ports, polling with a deadline, the query
API, stopping processes, and corpus lines as SGLang wrote them. Shared by
tests/test_prometheus_integration.py and tests/test_fleet_remote_write.py."""

from __future__ import annotations

import json
import re
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

    def query_range(self, expr: str, start: float, end: float, step: float = 1.0) -> list[dict]:
        """The range vector of ``expr`` evaluated every ``step`` seconds from ``start`` to ``end``
        (Unix seconds): series with ``values``, ``[[t, "v"], ...]`` (raises on a query error)."""
        url = f"{self.base}/api/v1/query_range?" + urllib.parse.urlencode(
            {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step}"})
        body = json.loads(get(url))
        assert body["status"] == "success", body
        return body["data"]["result"]

    def rule_evaluations(self) -> list[float]:
        """When each rule group was last evaluated (Unix seconds), from ``/api/v1/rules``."""
        from datetime import datetime

        def seconds(stamp: str) -> float:  # RFC 3339 with nanoseconds; Python's parser takes microseconds
            stamp = re.sub(r"(\.\d{6})\d+", r"\1", stamp)
            return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()

        return [seconds(g["lastEvaluation"]) for g in json.loads(get(f"{self.base}/api/v1/rules"))["data"]["groups"]]

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


#: Grafana's variables as a dashboard with every variable at "All" fills them in.
ALL_VARIABLES = (("$__rate_interval", "5m"), ("$safety_factor", "0.7"), ("$namespace", ".*"), ("$pod", ".*"),
                 ("$stage", ".*"), ("$dp_rank", ".*"), ("$gpu", ".*"), ("$sglang_group", ".*"), ("$source", ".*"))


def dashboard_targets(board: dict) -> list[tuple[str, str, str]]:
    """``(panel title, refId, PromQL)`` of every query of a Grafana dashboard (collapsed rows too),
    with :data:`ALL_VARIABLES` filled in."""
    out = []
    for panel in [q for top in board["panels"] for q in (top, *top.get("panels", []))]:
        for t in panel.get("targets", []):
            expr = t["expr"]
            for var, val in ALL_VARIABLES:
                expr = expr.replace(var, val)
            out.append((panel["title"], t["refId"], expr))
    return out


def start_prometheus(config: dict, folder: Path) -> tuple[subprocess.Popen, Prometheus]:
    """Debian's ``prometheus`` on a free loopback port with ``config`` (written as JSON, which is
    YAML) and its TSDB under ``folder``; its output in ``folder/prometheus.out``. The caller stops it
    (:func:`stop`). Skips locally, fails under CI=true, when it is not installed."""
    from conftest import require_tool

    binary = require_tool("prometheus")
    port = free_port()
    (folder / "prometheus.yml").write_text(json.dumps(config))
    with open(folder / "prometheus.out", "w") as out:
        proc = subprocess.Popen(
            [binary, f"--config.file={folder / 'prometheus.yml'}", f"--storage.tsdb.path={folder / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=out, stderr=subprocess.STDOUT, cwd=folder)
    return proc, Prometheus(f"http://127.0.0.1:{port}")
