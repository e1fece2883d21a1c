"""The real command on a machine without NVML: sglang_gpu_up 0 with the reason, log metrics still flow."""

from __future__ import annotations

import ctypes
import subprocess

import pytest
from conftest import CORPUS, samples, value
from exporter_support import Exporter, one_shot


def _nvml_loadable() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        return True
    except OSError:
        return False


def test_no_nvml_gpu_down_log_metrics_flow_and_promtool_passes(tmp_path, promtool):
    log = tmp_path / "sglang.log"
    log.write_text("")
    # Without a driver the default library is missing; on a GPU machine a bad path gives the same case.
    extra = ["--gpu.nvml-library-path", str(tmp_path / "missing" / "libnvidia-ml.so.1")] if _nvml_loadable() else []
    exp = Exporter("--log.path", str(log), "--gpu.poll-interval", "0.5", "--gpu.cycle-timeout", "0.5", *extra)
    try:
        m = exp.wait_for(lambda m: value(m, "sglang_gpu_init_error", kind="LibraryNotFound") == 1,
                         "the GPU collector to report the missing library")
        assert value(m, "sglang_gpu_up") == 0
        assert value(m, "sglang_exporter_collector_success", collector="gpu") == 1
        lines = (CORPUS / "007-decode-oom-retract-tp16.log").read_text(encoding="utf-8")
        with log.open("a", encoding="utf-8") as f:
            f.write(lines)
        m = exp.wait_for(lambda m: (value(m, "sglang_scheduler_retractions_total", stage="", dp_rank="0") or 0) > 0,
                         "scheduler metrics while NVML is missing")
        status, body = exp.get("/metrics")
        r = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        assert exp.get("/healthz") == (200, "ok\n")
        assert value(m, "sglang_gpu_nvml_errors_total", call="nvmlInit", kind="LibraryNotFound") >= 1
    finally:
        assert exp.terminate() == 0


def test_gpu_collector_disabled_and_one_shot_have_no_gpu_series(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_text("")
    exp = Exporter("--log.path", str(log), "--gpu.enabled", "false")
    try:
        names = {k[0] for k in exp.metrics()}
    finally:
        assert exp.terminate() == 0
    assert "sglang_exporter_build_info" in names
    assert not [n for n in names if n.startswith("sglang_gpu_")]
    out = one_shot(CORPUS / "007-decode-oom-retract-tp16.log")
    assert "sglang_scheduler_batches_total" in out and "sglang_gpu_" not in out


@pytest.mark.skipif(not _nvml_loadable(), reason="no NVML library on this machine")
def test_real_gpu_if_present():
    """Runs only where a driver exists: names, labels and value ranges against real NVML."""
    from exporter.sources.gpu import GpuCollector, GpuPoller
    from exporter.sources.gpu.nvml import load_pynvml
    from prometheus_client import CollectorRegistry, generate_latest

    p = GpuPoller(load_pynvml, xid_events=False, slow_poll_interval=0)
    try:
        p.run_cycle()
        reg = CollectorRegistry(auto_describe=False)
        reg.register(GpuCollector(p))
        m = samples(generate_latest(reg).decode())
    finally:
        p.stop()
    if value(m, "sglang_gpu_up") != 1:
        pytest.skip(f"NVML library present but not usable here: {p.status().init_error}")
    infos = [dict(k[1]) for k in m if k[0] == "sglang_gpu_info"]
    assert infos and all(i["uuid"].startswith(("GPU-", "MIG-")) and i["driver_version"] for i in infos)
    for (name, labels), v in m.items():
        if name.endswith("_ratio"):
            assert 0 <= v <= 1, (name, labels, v)
        if name in ("sglang_gpu_temperature_celsius",):
            assert 0 < v < 120
        if name == "sglang_gpu_memory_total_bytes":
            assert v > 1 << 30
