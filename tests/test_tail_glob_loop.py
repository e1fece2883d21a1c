"""A glob over a symlink loop, on the real command: 10 links to ``.`` under a pattern with ``*`` in 6
directory parts spell one file a million ways (``glob.glob`` listed them all at every relist: 96% of
a core, memory past 285 MiB, /healthz 503). The file is followed once, each line counted once,
/healthz answers within 5 s throughout and the peak resident memory stays under 128 MiB."""

from __future__ import annotations

import os
import time
import urllib.request
from pathlib import Path

from exporter_support import Exporter
from tail_support import append, decode_block

from conftest import value

MIB = 1 << 20


def _decode(m: dict) -> float:
    return value(m, "sglang_exporter_log_lines_total", kind="decode", result="parsed") or 0


def test_a_glob_over_a_symlink_loop_follows_the_file_once(tmp_path):
    for i in range(10):
        os.symlink(".", tmp_path / f"loop{i}")
    log = tmp_path / "sglang.log"
    log.write_bytes(decode_block(20))
    pattern = str(tmp_path) + "/*" * 6 + "/sglang.log"
    exp = Exporter("--log.path", pattern, "--log.from-beginning", "--gpu.enabled", "false")
    try:
        exp.wait_for(lambda m: _decode(m) >= 20, "the 20 lines")
        append(log, decode_block(10, start=20))
        end = time.monotonic() + 2.0
        while time.monotonic() < end:  # relists happen meanwhile (file events, every few seconds)
            start = time.monotonic()
            with urllib.request.urlopen(f"http://127.0.0.1:{exp.port}/healthz", timeout=5) as r:
                assert r.status == 200
            assert time.monotonic() - start < 5
            time.sleep(0.1)
        m = exp.wait_for(lambda m: _decode(m) >= 30, "the 10 appended lines")
        assert _decode(m) == 30
        files = {dict(k[1])["path"] for k in m if k[0] == "sglang_exporter_log_file_present"}
        assert len(files) == 1, sorted(files)[:3]
        status = Path(f"/proc/{exp.proc.pid}/status").read_text()
        peak = int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) * 1024
        assert peak < 128 * MIB, f"peak RSS {peak / MIB:.1f} MiB"
    finally:
        assert exp.terminate() == 0
