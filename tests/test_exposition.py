"""The whole ``/metrics`` text, as node_exporter's e2e-output.txt: one golden for the bundled sample.

``tests/golden/e2e-output.prom`` is what the command's registry serves (``cli.build_registry``) after
a one-shot read of ``exporter/data/sample.log``, with the GPU collector polling the fake NVML backend
(``exporter_support.fake_gpu_poller``): every family's HELP and TYPE, every bucket, every GPU series.
Samples whose value depends on the machine or the moment are left out (their HELP and TYPE stay).
A change of a HELP text, a label, a bucket bound or a value shows as a diff of that file. Regenerate
with ``UPDATE_GOLDEN=1 python -m pytest tests/test_exposition.py`` and check the diff by hand
(tests/golden/CHECKED.md records the first check).
"""

from __future__ import annotations

import os
import re
import subprocess

from conftest import CORPUS, ROOT
from exporter_support import fake_gpu_poller, one_shot
from prometheus_client import generate_latest

from exporter.cli import build_registry
from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.sources.gpu.collector import GpuCollector
from exporter.sources.log.ingest import Ingest
from exporter.sources.log.source import LogSource

GOLDEN = ROOT / "tests" / "golden" / "e2e-output.prom"
SAMPLE = "exporter/data/sample.log"  # relative, so that the path label is the same on every machine
#: Series whose value is the machine's or the moment's, not the log's: left out of the golden.
VOLATILE = re.compile(r"^(sglang_exporter_last_line_timestamp_seconds"
                      r"|sglang_scheduler_last_stats_line_timestamp_seconds"
                      r"|sglang_exporter_collector_duration_seconds|sglang_exporter_build_info"
                      r"|sglang_gpu_snapshot_age_seconds)[ {]")
HEADER = ("# The whole /metrics text for exporter/data/sample.log (one-shot) with the GPU collector on\n"
          "# tests/gpu_fake.py; machine- and time-dependent samples left out. Written by\n"
          "# tests/test_exposition.py (UPDATE_GOLDEN=1); hand-checked, see tests/golden/CHECKED.md.\n")


def stable(text: str) -> str:
    """The exposition without its volatile samples."""
    return "".join(line + "\n" for line in text.splitlines() if not VOLATILE.match(line))


def whole_exposition(monkeypatch) -> str:
    monkeypatch.chdir(ROOT)
    store = SchedulerStore(SchedulerStates())
    log = LogSource([SAMPLE], store, from_beginning=True)
    log.read_all()
    poller, _ = fake_gpu_poller()
    try:
        return generate_latest(build_registry(store, log, None, GpuCollector(poller))).decode()
    finally:
        poller.stop(timeout=5)


def test_whole_exposition_golden(monkeypatch, promtool):
    got = HEADER + stable(whole_exposition(monkeypatch))
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(got)
    assert got == GOLDEN.read_text()
    lint = subprocess.run([promtool, "check", "metrics"], input=GOLDEN.read_bytes(), capture_output=True, timeout=60)
    assert lint.returncode == 0, lint.stdout.decode() + lint.stderr.decode()


def test_the_golden_is_what_the_one_shot_command_prints(monkeypatch):
    """Without NVML the command's own one-shot output is the golden less the GPU families."""
    monkeypatch.chdir(ROOT)
    command = stable(one_shot(ROOT / SAMPLE)).replace(str(ROOT / SAMPLE), SAMPLE)
    golden = [line for line in GOLDEN.read_text().splitlines(keepends=True)[HEADER.count("\n"):]
              if "sglang_gpu_" not in line and 'collector="gpu"' not in line]
    assert command == "".join(golden)


def test_full_registry_exposition_lints_clean(promtool):
    store = SchedulerStore(SchedulerStates())
    p = Ingest(store)
    for name in ("008-retraction-storm-tokens-gained-uvicorn.log", "024-dp-attention-mtp-dp-tp-tags.log",
                 "010-pd-prefill-node0-mooncake-transfer-fail.log", "019-npu-mamba-usage-full-token-prefill-burst.log"):
        p.feed((CORPUS / name).read_text(encoding="utf-8").splitlines())
    text = generate_latest(build_registry(store, LogSource([], store), None))
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
