"""Contract tests of the real nvidia-ml-py bindings against a fake libnvidia-ml.so.1 written in C.

``tests/fake_nvml/fake_nvml.c`` is compiled here with gcc against the official ``nvml.h`` of the PyPI
package ``nvidia-nvml-dev`` (in the ``[test]`` extra) and loaded through ``--gpu.nvml-library-path``'s
code path (:func:`exporter.sources.gpu.nvml.load_pynvml`). This checks what the pure-Python fake cannot:
that our calls go through pynvml's real ctypes structs (versioned memory and temperature structs,
the two-call INSUFFICIENT_SIZE protocol for processes, event data) and error mapping.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import IN_CI, require_tool, samples
from prometheus_client import CollectorRegistry, generate_latest

from exporter.sources.gpu import GpuCollector, GpuPoller
from exporter.sources.gpu.nvml import load_pynvml, unload_pynvml

SOURCE = Path(__file__).parent / "fake_nvml" / "fake_nvml.c"
G0, G1 = "GPU-fa4e0000-0000-0000-0000-000000000000", "GPU-fa4e0000-0000-0000-0000-000000000001"


def _nvml_header() -> Path:
    for entry in map(Path, sys.path):
        for header in sorted(entry.glob("nvidia/*/include/nvml.h")):
            return header
    message = "nvml.h not found: pip install nvidia-nvml-dev (it is in the [test] extra)"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def libs(tmp_path_factory) -> dict[str, str]:
    gcc = require_tool("gcc")
    include = _nvml_header().parent
    out = {}
    for variant, flags in (("new", []), ("old", ["-DOLD_DRIVER"])):
        d = tmp_path_factory.mktemp(f"nvml-{variant}")
        lib = d / "libnvidia-ml.so.1"
        subprocess.run([gcc, "-shared", "-fPIC", "-Wall", "-Werror", "-Wno-deprecated-declarations", *flags,
                        f"-I{include}", "-Wl,-soname,libnvidia-ml.so.1", "-o", str(lib), str(SOURCE)], check=True)
        out[variant] = str(lib)
    return out


@pytest.fixture
def poller(libs, monkeypatch):
    made = []

    def make(variant="new", mode="ok", **kw):
        monkeypatch.setenv("FAKE_NVML_MODE", mode)
        kw.setdefault("xid_events", False)
        p = GpuPoller(lambda: load_pynvml(libs[variant]), xid_wait_ms=20, **kw)
        made.append(p)
        return p

    yield make
    for p in made:
        p.stop(timeout=5)
    unload_pynvml()


def scrape(p: GpuPoller) -> dict:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(GpuCollector(p))
    return samples(generate_latest(reg).decode())


def val(m, metric, /, **labels):
    return m.get((metric, tuple(sorted(labels.items()))))


def g(uuid):
    return {"gpu": uuid[-1], "uuid": uuid}


def test_readings_through_the_real_bindings(poller):
    p = poller()
    p.run_cycle()
    m = scrape(p)
    assert val(m, "sglang_gpu_up") == 1
    assert val(m, "sglang_gpu_info", **g(G0), name="NVIDIA A100-SXM4-80GB", driver_version="535.183.01",
               cuda_version="12.2", mig_mode="disabled") == 1
    assert val(m, "sglang_gpu_info", **g(G1), name="NVIDIA L4", driver_version="535.183.01",
               cuda_version="12.2", mig_mode="unsupported") == 1
    a = g(G0)
    assert val(m, "sglang_gpu_memory_total_bytes", **a) == 85899345920
    assert val(m, "sglang_gpu_memory_reserved_bytes", **a) == 536870912
    assert val(m, "sglang_gpu_memory_used_bytes", **a) == 64424509440
    assert val(m, "sglang_gpu_memory_free_bytes", **a) == 85899345920 - 536870912 - 64424509440
    assert val(m, "sglang_gpu_utilization_ratio", **a) == pytest.approx(0.93)
    assert val(m, "sglang_gpu_memory_utilization_ratio", **a) == pytest.approx(0.37)
    assert val(m, "sglang_gpu_processes", **a) == 2
    assert val(m, "sglang_gpu_process_memory_used_bytes", **a) == 3 * 1073741824
    assert val(m, "sglang_gpu_processes", **g(G1)) == 0
    assert val(m, "sglang_gpu_sm_clock_hertz", **a) == 1410e6
    assert val(m, "sglang_gpu_memory_clock_hertz", **a) == 1593e6
    assert val(m, "sglang_gpu_power_watts", **a) == pytest.approx(250.5)
    assert val(m, "sglang_gpu_power_limit_watts", **a) == 400
    assert val(m, "sglang_gpu_energy_joules_total", **a) == pytest.approx(987654.321)
    assert val(m, "sglang_gpu_energy_joules_total", **g(G1)) is None  # NotSupported: absent
    assert val(m, "sglang_gpu_temperature_celsius", **a) == 55
    assert val(m, "sglang_gpu_clocks_event_active", **a, reason="sw_thermal_slowdown") == 1
    assert val(m, "sglang_gpu_clocks_event_active", **a, reason="gpu_idle") == 1
    assert val(m, "sglang_gpu_clocks_event_active", **a, reason="hw_slowdown") == 0
    assert val(m, "sglang_gpu_ecc_errors_total", **a, error_type="corrected") == 7
    assert val(m, "sglang_gpu_ecc_errors_total", **a, error_type="uncorrected") == 1
    assert val(m, "sglang_gpu_remapped_rows", **a, kind="correctable") == 4
    assert val(m, "sglang_gpu_remapped_rows", **a, kind="pending") == 1
    assert val(m, "sglang_gpu_nvml_errors_total", call="nvmlDeviceGetTotalEnergyConsumption", kind="NotSupported") == 1


def test_xid_event_through_the_real_event_set(poller, monkeypatch):
    monkeypatch.setenv("FAKE_NVML_XID", "1:79")
    p = poller(xid_events=True, poll_interval=0.5, cycle_timeout=0.5)
    p.start()
    end = time.monotonic() + 20
    while not p.status().xids and time.monotonic() < end:
        time.sleep(0.01)
    assert dict(p.status().xids) == {("1", G1, "79"): 1}


@pytest.mark.parametrize("mode, kind", [("driver_not_loaded", "DriverNotLoaded"),
                                        ("mismatch", "LibRmVersionMismatch"),
                                        ("no_permission", "NoPermission")])
def test_init_errors_map_to_the_real_error_classes(poller, monkeypatch, mode, kind):
    p = poller(mode=mode)
    p.run_cycle()
    m = scrape(p)
    assert val(m, "sglang_gpu_up") == 0 and val(m, "sglang_gpu_init_error", kind=kind) == 1
    monkeypatch.setenv("FAKE_NVML_MODE", "ok")  # the driver came up
    p.run_cycle()
    assert val(scrape(p), "sglang_gpu_up") == 1


def test_gpu_lost_and_unknown(poller, monkeypatch):
    p = poller(mode="gpu_lost", unknown_error_threshold=2)
    p.run_cycle()
    m = scrape(p)
    assert val(m, "sglang_gpu_power_watts", **g(G0)) == pytest.approx(250.5)
    assert val(m, "sglang_gpu_power_watts", **g(G1)) is None
    assert val(m, "sglang_gpu_nvml_errors_total", call="nvmlDeviceGetMemoryInfo_v2", kind="GpuIsLost") == 1
    monkeypatch.setenv("FAKE_NVML_MODE", "unknown")
    p.run_cycle()
    p.run_cycle()
    assert p.health()[0] is False
    assert val(scrape(p), "sglang_gpu_up") == 0  # no GPU answers


def test_old_driver_falls_back_through_the_real_bindings(poller):
    p = poller("old")
    p.run_cycle()
    p.run_cycle()
    m = scrape(p)
    a = g(G0)
    assert val(m, "sglang_gpu_memory_used_bytes", **a) == 64424509440 + 536870912
    assert val(m, "sglang_gpu_memory_reserved_bytes", **a) is None
    assert val(m, "sglang_gpu_temperature_celsius", **a) == 55
    assert val(m, "sglang_gpu_clocks_event_active", **a, reason="sw_thermal_slowdown") == 1
    assert val(m, "sglang_gpu_process_memory_used_bytes", **a) == 3 * 1073741824
    for symbol in ("nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetTemperatureV",
                   "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetComputeRunningProcesses_v3"):
        assert val(m, "sglang_gpu_nvml_errors_total", call=symbol, kind="FunctionNotFound") == 1, symbol
