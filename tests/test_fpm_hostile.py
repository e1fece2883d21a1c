"""A hostile or broken forward-pass publisher, through the real command over real ZeroMQ: frames far
larger than SGLang's (one huge message, a flood of 64 kB ones) stay outside the exporter's memory,
and sequence numbers that jump back and forth do not make ``lost`` count passes nobody sent.
Loopback ipc:// only; every loop bounded."""

from __future__ import annotations

import time
from pathlib import Path

import zmq
from conftest import value
from exporter_support import DEADLINE
from fpm_publisher import Publisher, forward_pass
from fpm_support import connect, exporter, messages

MIB = 1 << 20
RSS_LIMIT = 128 * MIB


def _peak(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _passes_arrive(exp, pub: Publisher, ep: str, ok_before: float) -> dict:
    """After the publisher was refused: its later passes are received again (the exporter reconnects)."""
    end = time.monotonic() + DEADLINE
    while True:
        pub.publish(forward_pass(0, decode=2))
        m = exp.metrics()
        if messages(m, ep, "ok") > ok_before:
            return m
        assert time.monotonic() < end, "no pass received after the oversize frames"
        time.sleep(0.05)


def test_oversize_frames_stay_outside_memory(tmp_path):
    ep = f"ipc://{tmp_path}/fpm.0"
    pub = Publisher(ep)
    pub.pub.setsockopt(zmq.SNDHWM, 0)
    exp = exporter(tmp_path, ep)
    try:
        connect(exp, pub)
        pub.send_payload(b"x" * (100 * MIB))  # one message: SGLang's is about 300 bytes
        m = _passes_arrive(exp, pub, ep, 0)
        flood = b"y" * 65536
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            pub.send_payload(flood)
        _passes_arrive(exp, pub, ep, messages(m, ep, "ok"))
        peak = _peak(exp.proc.pid)
        assert peak < RSS_LIMIT, f"peak RSS {peak / MIB:.1f} MiB"
        assert exp.get("/healthz") == (200, "ok\n")
    finally:
        pub.close()
        assert exp.terminate() == 0
    print(f"100 MiB frame, then 2 s of 64 KiB frames: peak RSS {peak / MIB:.1f} MiB")


def test_sequence_numbers_that_jump_back_and_forth_are_restarts_not_losses(tmp_path):
    ep = f"ipc://{tmp_path}/fpm.0"
    pub = Publisher(ep)
    exp = exporter(tmp_path, ep)
    try:
        connect(exp, pub)
        for i in range(103):
            pub.next_seq = 10_000_000 if i % 2 else 0
            pub.publish(forward_pass(0, decode=1))
        m = exp.wait_for(lambda m: messages(m, ep, "ok") == 103, "the 103 passes")
        assert messages(m, ep, "lost") == 0
        assert value(m, "sglang_exporter_fpm_publisher_restarts_total", endpoint=ep) >= 100
        # A real gap still counts: 7 numbers skipped, then the sequence goes on.
        pub.skip(7)
        pub.publish(forward_pass(0, decode=1))
        m = exp.wait_for(lambda m: messages(m, ep, "ok") == 104, "the pass after the gap")
        assert messages(m, ep, "lost") == 7
    finally:
        pub.close()
        assert exp.terminate() == 0
