"""The real command with the forward-pass stream in tests: start it on some endpoints, read its
message counts, and wait until a publisher's subscription has arrived."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from conftest import value
from exporter_support import DEADLINE, Exporter
from fpm_publisher import Publisher


def free_tcp() -> str:
    """A ``tcp://127.0.0.1:PORT`` endpoint with a port free just now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def exporter(tmp_path: Path, *endpoints: str, timeout: float = 5.0) -> Exporter:
    """The real command on an empty log, subscribed to ``endpoints`` (``--fpm.timeout`` seconds)."""
    log = tmp_path / "sglang.log"
    log.touch()
    return Exporter("--log.path", str(log), "--gpu.enabled", "false", "--fpm.endpoints", ",".join(endpoints),
                    "--fpm.timeout", str(timeout))


def messages(m: dict, endpoint: str, result: str) -> float:
    """``sglang_exporter_fpm_messages_total`` of one endpoint and result in a scrape (0 when absent)."""
    return value(m, "sglang_exporter_fpm_messages_total", endpoint=endpoint, result=result) or 0


def connect(exp: Exporter, pub: Publisher, heartbeat=None) -> dict:
    """Send heartbeats until the exporter has received one (ZeroMQ drops what a PUB socket sends
    before the subscription arrives), then return that scrape."""
    beat = heartbeat or pub.heartbeat
    before = messages(exp.metrics(), pub.endpoint, "heartbeat")
    end = time.monotonic() + DEADLINE
    while True:
        beat()
        m = exp.metrics()
        if messages(m, pub.endpoint, "heartbeat") > before:
            return m
        if time.monotonic() > end:
            raise AssertionError(f"the exporter never received a heartbeat from {pub.endpoint}")
        time.sleep(0.05)
