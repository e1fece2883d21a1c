"""Running the real command in tests: a live ``sglang-exporter`` on a loopback port, one-shot mode in
process, and the real GPU collector over the fake NVML backend (tests/gpu_fake.py)."""

from __future__ import annotations

import io
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import redirect_stdout
from pathlib import Path

from conftest import samples

from exporter.cli import main

DEADLINE = 30.0


def command() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m exporter``."""
    script = Path(sys.executable).parent / "sglang-exporter"
    return [str(script)] if script.exists() else [sys.executable, "-m", "exporter"]


class Exporter:
    """A running ``sglang-exporter`` subprocess on a free loopback port."""

    def __init__(self, *args: str, env: dict[str, str] | None = None):
        self.proc = subprocess.Popen(
            [*command(), "--web.listen-address", "127.0.0.1:0", "--log.poll-interval", "0.2", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.stderr_lines: list[str] = []
        self.port: int | None = None
        found = threading.Event()

        def pump():
            for line in self.proc.stderr:
                self.stderr_lines.append(line)
                m = re.search(r"serving metrics on http://127\.0\.0\.1:(\d+)/", line)
                if m:
                    self.port = int(m.group(1))
                    found.set()

        threading.Thread(target=pump, daemon=True).start()
        if not found.wait(DEADLINE):
            self.proc.kill()
            raise AssertionError("exporter did not start:\n" + "".join(self.stderr_lines))

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def metrics(self) -> dict:
        status, body = self.get("/metrics")
        assert status == 200
        return samples(body)

    def wait_for(self, predicate, what: str) -> dict:
        """Scrape until ``predicate(samples)`` holds, or fail at the deadline."""
        end = time.monotonic() + DEADLINE
        while True:
            m = self.metrics()
            if predicate(m):
                return m
            if time.monotonic() > end:
                raise AssertionError(f"timed out waiting for {what}; last scrape: {m}")
            time.sleep(0.05)

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(DEADLINE)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def one_shot_run(path: Path, *flags: str) -> tuple[int, str]:
    """Run the real command's main() in one-shot mode (with more ``flags``); returns its exit status
    and stdout."""
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["--log.path", str(path), "--one-shot", *flags])
    return code, out.getvalue()


def one_shot(path: Path) -> str:
    """Run the real command's main() in one-shot mode and return its stdout (exit status 0)."""
    code, out = one_shot_run(path)
    assert code == 0
    return out


A_UUID, B_UUID = "GPU-aaaaaaaa-0000-0000-0000-000000000001", "GPU-bbbbbbbb-0000-0000-0000-000000000002"
C_UUID, MIG_UUID = "GPU-cccccccc-0000-0000-0000-000000000003", "MIG-dddddddd-0000-0000-0000-000000000004"


def fake_gpu_poller():
    """A real :class:`GpuPoller` after one cycle over the fake NVML backend (tests/gpu_fake.py): two
    healthy GPUs (one power-capped), a third in MIG mode with one MIG device, and one XID event
    counted as the XID thread records it. Stop it with ``poller.stop()``.

    Returns:
        ``(poller, fake)``.
    """
    import pynvml
    from gpu_fake import FakeGpu, FakeMig, FakeNvml

    from exporter.sources.gpu.poller import GpuPoller

    nv = FakeNvml([FakeGpu(A_UUID), FakeGpu(B_UUID, name="NVIDIA H200", reasons=0),
                   FakeGpu(C_UUID, mig_mode=pynvml.NVML_DEVICE_MIG_ENABLE, migs=[FakeMig(MIG_UUID, 0, 1, 0)])])
    poller = GpuPoller(lambda: nv, xid_events=False)
    poller.run_cycle()
    poller.xids[("0", A_UUID, "79")] = 1  # as the XID thread records an event (tests/test_gpu_poller.py)
    return poller, nv


def gpu_exposition() -> str:
    """The real GPU collector's exposition text: :func:`fake_gpu_poller`, plus a poller whose library is
    missing, so that the init-error and NVML-error series exist too."""
    from prometheus_client import CollectorRegistry, generate_latest

    from exporter.sources.gpu.collector import GpuCollector
    from exporter.sources.gpu.nvml import load_pynvml
    from exporter.sources.gpu.poller import GpuPoller

    healthy, nv = fake_gpu_poller()
    missing = GpuPoller(lambda: load_pynvml("/nonexistent/libnvidia-ml.so.1"), xid_events=False)
    texts = []
    try:
        missing.run_cycle()
        for poller in (healthy, missing):
            registry = CollectorRegistry(auto_describe=False)
            registry.register(GpuCollector(poller))
            texts.append(generate_latest(registry).decode())
    finally:
        for poller in (healthy, missing):
            poller.stop(timeout=5)
    assert nv.unmodeled == [], nv.unmodeled
    return "".join(texts)


def fpm_exposition() -> str:
    """The real FPM collector's exposition text after SGLang messages of every pass mode (prefill,
    decode, mixed, idle) from two DP ranks, decoded as the subscriber decodes them, with the schema
    the subscriber samples (tests/fpm_publisher.py builds them from SGLang's structs)."""
    from fpm_publisher import encode, forward_pass
    from prometheus_client import CollectorRegistry, generate_latest

    from exporter.sources.fpm.collector import FpmCollector
    from exporter.sources.fpm.decode import decode_frames, schema_of
    from exporter.sources.fpm.stats import FpmStats

    stats = FpmStats(["ipc:///tmp/sglang-fpm.0"])
    passes = [forward_pass(dp, prefill=p, decode=d) for dp in (0, 1) for p, d in ((2, 0), (0, 8), (1, 7), (0, 0))]
    payloads = [encode(m) for m in passes]
    stats.apply(0, [decode_frames([b"", seq.to_bytes(8, "big"), p]) for seq, p in enumerate(payloads)],
                schema_of(payloads[0]))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FpmCollector(stats))
    return generate_latest(registry).decode()
