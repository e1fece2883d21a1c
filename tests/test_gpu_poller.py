"""GPU poller and collector against the strict fake NVML (``tests/gpu_fake.py``): every failure kind.

Cycles are driven synchronously with ``run_cycle()`` where no thread is needed; the threaded tests
(backoff, hang, XID) wait on the poller's own counters with a deadline, never on fixed sleeps.
"""

from __future__ import annotations

import subprocess
import threading
import time

import pynvml
import pytest
from conftest import samples
from gpu_fake import FakeGpu, FakeMig, FakeNvml
from prometheus_client import CollectorRegistry, generate_latest

from exporter.sources.gpu import GpuCollector, GpuPoller

DEADLINE = 20.0
A, B = "GPU-aaaaaaaa-0000-0000-0000-000000000001", "GPU-bbbbbbbb-0000-0000-0000-000000000002"


@pytest.fixture
def fake():
    nv = FakeNvml([FakeGpu(A), FakeGpu(B, name="NVIDIA H200", used=10 << 30, reasons=0)])
    yield nv
    assert nv.unmodeled == [], f"the poller called functions the fake does not model: {nv.unmodeled}"


@pytest.fixture
def pollers():
    made: list[GpuPoller] = []

    def make(nv: FakeNvml, **kw) -> GpuPoller:
        kw.setdefault("backoff", (0.01, 0.05))
        kw.setdefault("xid_events", False)
        kw.setdefault("xid_wait_ms", 20)
        p = GpuPoller(lambda: nv, **kw)
        made.append(p)
        return p

    yield make
    for p in made:
        p.stop(timeout=5)


def scrape(poller: GpuPoller | None) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpuCollector(poller))
    return generate_latest(registry).decode()


def wait_until(predicate, what: str) -> None:
    end = time.monotonic() + DEADLINE
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def val(text_or_samples, metric: str, /, **labels) -> float | None:
    """One sample by name and exact labels (``name`` may be a label here), or None when absent."""
    data = samples(text_or_samples) if isinstance(text_or_samples, str) else text_or_samples
    return data.get((metric, tuple(sorted(labels.items()))))


def lab(uuid: str) -> dict:
    return {"gpu": "0" if uuid == A else "1", "uuid": uuid}


def test_healthy_gpus_all_readings_in_base_units(fake, pollers):
    p = pollers(fake)
    p.run_cycle()
    m = samples(scrape(p))
    assert val(m, "sglang_gpu_up") == 1
    assert val(m, "sglang_gpu_info", **lab(A), name="NVIDIA H100 80GB HBM3", driver_version="570.124.06",
                 cuda_version="12.8", mig_mode="disabled") == 1
    a = lab(A)
    assert val(m, "sglang_gpu_memory_used_bytes", **a) == 60 << 30
    assert val(m, "sglang_gpu_memory_reserved_bytes", **a) == 512 << 20
    assert val(m, "sglang_gpu_memory_total_bytes", **a) == 80 << 30
    assert val(m, "sglang_gpu_memory_free_bytes", **a) == (80 << 30) - (60 << 30) - (512 << 20)
    assert val(m, "sglang_gpu_utilization_ratio", **a) == pytest.approx(0.87)
    assert val(m, "sglang_gpu_memory_utilization_ratio", **a) == pytest.approx(0.41)
    assert val(m, "sglang_gpu_sm_clock_hertz", **a) == 1980e6
    assert val(m, "sglang_gpu_memory_clock_hertz", **a) == 2619e6
    assert val(m, "sglang_gpu_power_watts", **a) == pytest.approx(512.345)
    assert val(m, "sglang_gpu_power_limit_watts", **a) == 700
    assert val(m, "sglang_gpu_energy_joules_total", **a) == pytest.approx(123456.789)
    assert val(m, "sglang_gpu_temperature_celsius", **a) == 61
    assert val(m, "sglang_gpu_processes", **a) == 2
    assert val(m, "sglang_gpu_process_memory_used_bytes", **a) == 58 << 30
    assert val(m, "sglang_gpu_clocks_event_active", **a, reason="sw_power_cap") == 1
    assert val(m, "sglang_gpu_clocks_event_active", **a, reason="hw_thermal_slowdown") == 0
    assert val(m, "sglang_gpu_clocks_event_active", **lab(B), reason="sw_power_cap") == 0
    assert val(m, "sglang_gpu_ecc_errors_total", **a, error_type="corrected") == 3
    assert val(m, "sglang_gpu_ecc_errors_total", **a, error_type="uncorrected") == 0
    assert val(m, "sglang_gpu_remapped_rows", **a, kind="correctable") == 2
    assert val(m, "sglang_gpu_remapped_rows", **a, kind="pending") == 0
    assert val(m, "sglang_gpu_memory_used_bytes", **lab(B)) == 10 << 30
    assert val(m, "sglang_gpu_snapshot_age_seconds") is not None
    assert not [k for k in m if k[0] == "sglang_gpu_init_error"]


def test_init_once_and_no_nvml_call_per_scrape(fake, pollers):
    p = pollers(fake)
    for _ in range(5):
        p.run_cycle()
    assert fake.count("nvmlInit") == 1 and p.init_attempts == 1
    before = len(fake.calls)
    for _ in range(20):
        scrape(p)
    assert len(fake.calls) == before, "a scrape called NVML"


def test_slow_readings_only_on_the_slow_interval(fake, pollers):
    p = pollers(fake, slow_poll_interval=3600)
    for _ in range(4):
        p.run_cycle()
    assert fake.count("nvmlDeviceGetRemappedRows", A) == 1
    assert fake.count("nvmlDeviceGetTotalEccErrors", A) == 2  # corrected + uncorrected, once
    assert fake.count("nvmlDeviceGetPowerUsage", A) == 4
    assert val(scrape(p), "sglang_gpu_remapped_rows", **lab(A), kind="correctable") == 2  # still served


@pytest.mark.parametrize("code, kind", [
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "LibraryNotFound"),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "DriverNotLoaded"),
    (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "LibRmVersionMismatch"),
    (pynvml.NVML_ERROR_NO_PERMISSION, "NoPermission"),
    (pynvml.NVML_ERROR_UNKNOWN, "Unknown"),
])
def test_init_failure_kinds_then_recovery(fake, pollers, code, kind):
    fake.init_errors = [code, code]
    p = pollers(fake)
    p.run_cycle()
    p.run_cycle()
    text = scrape(p)
    assert val(text, "sglang_gpu_up") == 0
    assert val(text, "sglang_gpu_init_error", kind=kind) == 1
    assert val(text, "sglang_gpu_nvml_errors_total", call="nvmlInit", kind=kind) == 2
    assert val(text, "sglang_gpu_memory_used_bytes", **lab(A)) is None
    p.run_cycle()  # the driver came up: no restart needed
    text = scrape(p)
    assert val(text, "sglang_gpu_up") == 1
    assert val(text, "sglang_gpu_memory_used_bytes", **lab(A)) == 60 << 30
    assert "sglang_gpu_init_error{" not in text
    assert fake.count("nvmlInit") == 3


def test_library_not_found_from_a_bad_path_is_an_init_error(pollers):
    from exporter.sources.gpu.nvml import load_pynvml

    p = GpuPoller(lambda: load_pynvml("/nonexistent/libnvidia-ml.so.1"), xid_events=False)
    p.run_cycle()
    text = scrape(p)
    assert val(text, "sglang_gpu_up") == 0
    assert val(text, "sglang_gpu_init_error", kind="LibraryNotFound") == 1


def test_driver_comes_up_later_with_backoff_in_the_thread(fake, pollers):
    fake.init_errors = [pynvml.NVML_ERROR_DRIVER_NOT_LOADED] * 4
    p = pollers(fake, poll_interval=0.05, cycle_timeout=0.05)
    p.start()
    wait_until(lambda: p.status().up, "NVML to come up after the driver loads")
    assert fake.count("nvmlInit") == 5
    assert val(scrape(p), "sglang_gpu_nvml_errors_total", call="nvmlInit", kind="DriverNotLoaded") == 4


def test_one_gpu_lost_others_keep_reporting(fake, pollers):
    p = pollers(fake)
    p.run_cycle()
    fake.fail[("*", B)] = pynvml.NVML_ERROR_GPU_IS_LOST
    n_before = fake.count("*") + sum(1 for s, u in fake.calls if u == B)
    p.run_cycle()
    text = scrape(p)
    assert val(text, "sglang_gpu_up") == 1
    assert val(text, "sglang_gpu_memory_used_bytes", **lab(A)) == 60 << 30
    assert val(text, "sglang_gpu_power_watts", **lab(A)) is not None
    assert val(text, "sglang_gpu_memory_used_bytes", **lab(B)) is None
    assert val(text, "sglang_gpu_power_watts", **lab(B)) is None
    assert val(text, "sglang_gpu_nvml_errors_total", call="nvmlDeviceGetMemoryInfo_v2", kind="GpuIsLost") == 1
    # the lost GPU's cycle ended at its first failed call
    assert sum(1 for s, u in fake.calls if u == B) - n_before == 1
    assert p.health()[0]


def test_unknown_errors_fail_healthz_after_the_threshold(fake, pollers):
    p = pollers(fake, unknown_error_threshold=3)
    p.run_cycle()
    fake.fail[("*", None)] = pynvml.NVML_ERROR_UNKNOWN  # the container lost access to /dev/nvidia*
    for i in range(1, 4):
        p.run_cycle()
        assert p.health()[0] is (i < 3)
    ok, text = p.health()
    assert not ok and "Unknown" in text
    assert val(scrape(p), "sglang_gpu_up") == 0  # no GPU answers
    assert val(scrape(p), "sglang_gpu_nvml_errors_total", call="nvmlDeviceGetMemoryInfo_v2", kind="Unknown") == 6
    del fake.fail[("*", None)]
    p.run_cycle()
    assert p.health() == (True, "ok")


def test_no_permission_on_one_reading_is_counted_and_retried(fake, pollers):
    fake.fail[("nvmlDeviceGetPowerUsage", A)] = pynvml.NVML_ERROR_NO_PERMISSION
    p = pollers(fake)
    p.run_cycle()
    p.run_cycle()
    text = scrape(p)
    assert val(text, "sglang_gpu_power_watts", **lab(A)) is None
    assert val(text, "sglang_gpu_power_watts", **lab(B)) is not None
    assert val(text, "sglang_gpu_temperature_celsius", **lab(A)) == 61  # later readings still taken
    assert val(text, "sglang_gpu_nvml_errors_total", call="nvmlDeviceGetPowerUsage", kind="NoPermission") == 2


def test_unsupported_readings_are_absent_and_not_retried(fake, pollers):
    fake.gpus[0].not_supported = {"nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetRemappedRows"}
    p = pollers(fake, slow_poll_interval=0)
    for _ in range(3):
        p.run_cycle()
    text = scrape(p)
    assert val(text, "sglang_gpu_energy_joules_total", **lab(A)) is None
    assert val(text, "sglang_gpu_energy_joules_total", **lab(B)) is not None
    assert not [k for k in samples(text) if k[0] == "sglang_gpu_remapped_rows" and ("uuid", A) in k[1]]
    assert fake.count("nvmlDeviceGetTotalEnergyConsumption", A) == 1
    assert fake.count("nvmlDeviceGetRemappedRows", A) == 1
    assert fake.count("nvmlDeviceGetTotalEnergyConsumption", B) == 3


def test_old_driver_falls_back_to_older_calls(fake, pollers):
    fake.missing = {"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetCurrentClocksEventReasons",
                    "nvmlDeviceGetTemperatureV", "nvmlDeviceGetComputeRunningProcesses_v3"}
    p = pollers(fake)
    for _ in range(3):
        p.run_cycle()
    text = scrape(p)
    a = lab(A)
    assert val(text, "sglang_gpu_memory_used_bytes", **a) == (60 << 30) + (512 << 20)  # v1 includes reserved
    assert val(text, "sglang_gpu_memory_reserved_bytes", **a) is None
    assert val(text, "sglang_gpu_clocks_event_active", **a, reason="sw_power_cap") == 1
    assert val(text, "sglang_gpu_temperature_celsius", **a) == 61
    assert val(text, "sglang_gpu_processes", **a) == 2
    for symbol in fake.missing:  # asked once, for the first device, then never again
        assert fake.count(symbol) == 1, symbol
        assert val(text, "sglang_gpu_nvml_errors_total", call=symbol, kind="FunctionNotFound") == 1


def test_hung_call_hits_the_deadline_and_the_snapshot_goes_stale(fake, pollers):
    p = pollers(fake, poll_interval=0.2, cycle_timeout=0.1)
    p.start()
    wait_until(lambda: p.status().up, "the first snapshot")
    release = threading.Event()
    calls_at_hang = fake.count("nvmlDeviceGetPowerUsage")
    fake.hangs["nvmlDeviceGetPowerUsage"] = release
    try:
        wait_until(lambda: p.overruns >= 1, "a cycle to overrun its deadline")
        calls = len(fake.calls)
        text = scrape(p)  # answers although an NVML call is hung
        assert len(fake.calls) == calls
        assert val(text, "sglang_gpu_up") == 0
        assert val(text, "sglang_gpu_nvml_errors_total", call="nvmlDeviceGetPowerUsage", kind="DeadlineExceeded") >= 1
        assert val(text, "sglang_gpu_memory_used_bytes", **lab(A)) is None  # stale readings withheld
        assert val(text, "sglang_gpu_snapshot_age_seconds") is not None
        wait_until(lambda: p.overruns >= 1 and val(scrape(p), "sglang_gpu_snapshot_age_seconds") > 0.3,
                   "time to pass while the call hangs")
        # one hung call in flight, no pile-up of cycles behind it
        assert fake.count("nvmlDeviceGetPowerUsage") - calls_at_hang == 1
    finally:
        del fake.hangs["nvmlDeviceGetPowerUsage"]
        release.set()
    wait_until(lambda: p.status().up, "recovery after the hung call returns")
    assert fake.count("nvmlInit") == 1


def test_snapshot_older_than_stale_after_is_withheld(fake, pollers):
    now = [100.0]
    p = pollers(fake, poll_interval=10, cycle_timeout=5, clock=lambda: now[0])
    p.run_cycle()
    assert val(scrape(p), "sglang_gpu_up") == 1
    now[0] += 3 * 10 + 5 + 1
    text = scrape(p)
    assert val(text, "sglang_gpu_up") == 0
    assert val(text, "sglang_gpu_snapshot_age_seconds") == 36
    assert val(text, "sglang_gpu_memory_used_bytes", **lab(A)) is None


def test_driver_unloaded_after_init_reinitialises(fake, pollers):
    p = pollers(fake)
    p.run_cycle()
    fake.fail[("*", None)] = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    p.run_cycle()
    assert not p.initialized and val(scrape(p), "sglang_gpu_up") == 0
    del fake.fail[("*", None)]
    p.run_cycle()
    assert val(scrape(p), "sglang_gpu_up") == 1
    assert fake.count("nvmlInit") == 2


def mig_fake() -> FakeNvml:
    migs = [FakeMig("MIG-11111111-0000-0000-0000-000000000001", slot=0, gi=1, ci=0, procs=[(77, 3 << 30)]),
            FakeMig("MIG-22222222-0000-0000-0000-000000000002", slot=4, gi=5, ci=0)]
    return FakeNvml([FakeGpu(A, mig_mode=pynvml.NVML_DEVICE_MIG_ENABLE, migs=migs),
                     FakeGpu(B, mig_mode=None)])


def test_mig_devices_enumerated_with_empty_slots_skipped():
    nv = mig_fake()
    p = GpuPoller(lambda: nv, xid_events=False)
    p.run_cycle()
    p.run_cycle()
    text = scrape(p)
    m1 = {"gpu": "0", "uuid": "MIG-11111111-0000-0000-0000-000000000001", "gpu_instance_id": "1",
          "compute_instance_id": "0"}
    assert val(text, "sglang_gpu_info", **m1, name="NVIDIA H100 80GB HBM3 MIG 1g.10gb",
                 driver_version="570.124.06", cuda_version="12.8", mig_mode="enabled") == 1
    assert val(text, "sglang_gpu_memory_used_bytes", **m1) == 1 << 30
    assert val(text, "sglang_gpu_process_memory_used_bytes", **m1) == 3 << 30
    assert val(text, "sglang_gpu_utilization_ratio", **m1) is None  # NotSupported on MIG
    assert val(text, "sglang_gpu_utilization_ratio", **lab(A)) is None
    assert val(text, "sglang_gpu_power_watts", **lab(A)) is not None  # the parent GPU still reports
    infos = [k for k in samples(text) if k[0] == "sglang_gpu_info"]
    assert len(infos) == 4  # 2 GPUs + 2 MIG devices; 5 empty slots skipped
    assert nv.count("nvmlDeviceGetMigDeviceHandleByIndex") == 7  # enumerated once (slow interval)
    assert nv.count("nvmlDeviceGetUtilizationRates", "MIG-11111111-0000-0000-0000-000000000001") == 1
    assert val(text, "sglang_gpu_info", **lab(B), name="NVIDIA H100 80GB HBM3", driver_version="570.124.06",
                 cuda_version="12.8", mig_mode="unsupported") == 1
    assert nv.unmodeled == []


def test_uuid_selection_by_flag_and_by_a_file_that_appears_later(fake, pollers, tmp_path):
    p = pollers(fake, uuids=[B])
    p.run_cycle()
    m = samples(scrape(p))
    assert val(m, "sglang_gpu_memory_used_bytes", **lab(B)) is not None
    assert val(m, "sglang_gpu_memory_used_bytes", **lab(A)) is None
    assert fake.count("nvmlDeviceGetPowerUsage", A) == 0  # unselected GPUs are not read

    path = tmp_path / "gpus"
    q = pollers(fake, uuids_file=str(path))
    q.run_cycle()
    assert not [k for k in samples(scrape(q)) if k[0] == "sglang_gpu_info"]
    assert val(scrape(q), "sglang_gpu_up") == 1
    path.write_text(f"# written by the server's entrypoint\n{A}\n")
    q.run_cycle()
    m = samples(scrape(q))
    assert val(m, "sglang_gpu_memory_used_bytes", **lab(A)) is not None
    assert val(m, "sglang_gpu_memory_used_bytes", **lab(B)) is None


def test_mig_uuid_selects_only_that_mig_device():
    nv = mig_fake()
    p = GpuPoller(lambda: nv, xid_events=False, uuids=["MIG-22222222-0000-0000-0000-000000000002"])
    p.run_cycle()
    infos = [dict(k[1])["uuid"] for k in samples(scrape(p)) if k[0] == "sglang_gpu_info"]
    assert infos == ["MIG-22222222-0000-0000-0000-000000000002"]


def test_xid_events_are_counted_per_gpu_and_code(fake, pollers):
    p = pollers(fake, poll_interval=0.2, cycle_timeout=0.1, xid_events=True)
    p.start()
    wait_until(lambda: p.status().up, "the first snapshot")
    wait_until(lambda: fake.count("nvmlEventSetWait_v2") >= 1, "the XID thread to wait on its event set")
    fake.xid(B, 79)
    fake.xid(B, 79)
    fake.xid(A, 48)
    wait_until(lambda: sum(p.status().xids.values()) == 3, "three XID events")
    text = scrape(p)
    assert val(text, "sglang_gpu_xid_errors_total", gpu="1", uuid=B, xid="79") == 2
    assert val(text, "sglang_gpu_xid_errors_total", gpu="0", uuid=A, xid="48") == 1
    assert fake.count("nvmlDeviceRegisterEvents") == 2


def test_stop_shuts_nvml_down(fake, pollers):
    p = pollers(fake, poll_interval=0.2, cycle_timeout=0.1, xid_events=False)
    p.start()
    wait_until(lambda: p.status().up, "the first snapshot")
    p.stop()
    assert fake.count("nvmlShutdown") == 1 and not fake.initialized


def test_gpu_collector_off_reports_only_up_zero():
    text = scrape(None)
    assert val(text, "sglang_gpu_up") == 0
    assert [k for k in samples(text)] == [("sglang_gpu_up", ())]


def test_output_passes_promtool(promtool, tmp_path):
    nv = mig_fake()
    nv.gpus[1].not_supported = {"nvmlDeviceGetPowerUsage"}
    p = GpuPoller(lambda: nv, xid_events=False)
    p.run_cycle()
    p.xids[("0", A, "79")] = 1
    out = tmp_path / "gpu.prom"
    out.write_text(scrape(p))
    r = subprocess.run([promtool, "check", "metrics"], input=out.read_text(), capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
