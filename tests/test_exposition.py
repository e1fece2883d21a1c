"""The whole ``/metrics`` text of the command's registry."""

from __future__ import annotations

import subprocess

from conftest import CORPUS
from prometheus_client import generate_latest

from exporter.cli import build_registry
from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.sources.log.ingest import Ingest
from exporter.sources.log.source import LogSource


def test_full_registry_exposition_lints_clean(promtool):
    store = SchedulerStore(SchedulerStates())
    p = Ingest(store)
    for name in ("008-retraction-storm-tokens-gained-uvicorn.log", "024-dp-attention-mtp-dp-tp-tags.log",
                 "010-pd-prefill-node0-mooncake-transfer-fail.log", "019-npu-mamba-usage-full-token-prefill-burst.log"):
        p.feed((CORPUS / name).read_text(encoding="utf-8").splitlines())
    text = generate_latest(build_registry(store, LogSource([], store), None))
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
