"""``sglang_gpu_*`` metric families from the poller's latest snapshot (no NVML call at scrape time).

Per-device series carry ``gpu`` (NVML index; a MIG device's GPU index) and ``uuid`` (``GPU-...``
or ``MIG-...``); MIG devices add ``gpu_instance_id`` and ``compute_instance_id``. A reading the
device does not support, or that failed in the latest cycle, has no series.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .poller import GpuPoller

#: (reading key, metric name, HELP) of per-device gauges.
GAUGES = (
    ("memory_used_bytes", "sglang_gpu_memory_used_bytes",
     "Device memory in use, bytes (nvmlDeviceGetMemoryInfo_v2 used: excludes reserved; the v1 call on old "
     "drivers includes it)."),
    ("memory_free_bytes", "sglang_gpu_memory_free_bytes", "Free device memory, bytes (nvmlDeviceGetMemoryInfo free)."),
    ("memory_total_bytes", "sglang_gpu_memory_total_bytes",
     "Total device memory, bytes (nvmlDeviceGetMemoryInfo total)."),
    ("memory_reserved_bytes", "sglang_gpu_memory_reserved_bytes",
     "Device memory reserved by the driver and firmware, bytes (nvmlDeviceGetMemoryInfo_v2 reserved)."),
    ("utilization_ratio", "sglang_gpu_utilization_ratio",
     "Share of the last sample period in which a kernel ran (nvmlDeviceGetUtilizationRates gpu / 100); not "
     "available on MIG devices."),
    ("memory_utilization_ratio", "sglang_gpu_memory_utilization_ratio",
     "Share of the last sample period in which device memory was read or written "
     "(nvmlDeviceGetUtilizationRates memory / 100)."),
    ("sm_clock_hertz", "sglang_gpu_sm_clock_hertz", "SM clock, hertz (nvmlDeviceGetClockInfo NVML_CLOCK_SM)."),
    ("memory_clock_hertz", "sglang_gpu_memory_clock_hertz",
     "Memory clock, hertz (nvmlDeviceGetClockInfo NVML_CLOCK_MEM)."),
    ("power_watts", "sglang_gpu_power_watts", "Power draw, watts (nvmlDeviceGetPowerUsage)."),
    ("power_limit_watts", "sglang_gpu_power_limit_watts",
     "Enforced power limit, watts (nvmlDeviceGetEnforcedPowerLimit)."),
    ("temperature_celsius", "sglang_gpu_temperature_celsius",
     "GPU die temperature, degrees Celsius (nvmlDeviceGetTemperatureV, older drivers nvmlDeviceGetTemperature)."),
    ("process_memory_used_bytes", "sglang_gpu_process_memory_used_bytes",
     "Device memory used by the compute processes on the device, summed, bytes "
     "(nvmlDeviceGetComputeRunningProcesses_v3 usedGpuMemory)."),
    ("processes", "sglang_gpu_processes",
     "Compute processes on the device (nvmlDeviceGetComputeRunningProcesses_v3)."),
)


class GpuCollector(Collector):
    """Yields every ``sglang_gpu_*`` family from :meth:`GpuPoller.status` (a copy, no NVML call).

    Args:
        poller: The running poller; None when NVML polling is off for this process, which yields
            only ``sglang_gpu_up 0``.
    """

    def __init__(self, poller: GpuPoller | None):
        self.poller = poller

    def describe(self) -> Iterator[Metric]:
        return iter(())  # do not run collect() at registration

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("sglang_gpu_up", "1 when NVML is initialised and the latest poll cycle read the "
                               "device list within its deadline, is not stale, and at least one reported GPU "
                               "answered.")
        if self.poller is None:
            up.add_metric([], 0)
            return iter([up])
        st = self.poller.status()
        up.add_metric([], 1 if st.up else 0)
        init = GaugeMetricFamily("sglang_gpu_init_error",
                                 "1 for the kind of the latest failed nvmlInit while NVML is not initialised "
                                 "(LibraryNotFound, DriverNotLoaded, LibRmVersionMismatch, NoPermission, ...).",
                                 labels=("kind",))
        if st.init_error:
            init.add_metric([st.init_error], 1)
        errors = CounterMetricFamily("sglang_gpu_nvml_errors", "Failed NVML calls by C function and error kind "
                                     "(NVMLError_<kind>; DeadlineExceeded: the call hung past --gpu.cycle-timeout).",
                                     labels=("call", "kind"))
        for (call, kind), n in sorted(st.errors.items()):
            errors.add_metric([call, kind], n)
        age = GaugeMetricFamily("sglang_gpu_snapshot_age_seconds",
                                "Seconds since the latest completed NVML poll cycle.")
        if st.snapshot_age is not None:
            age.add_metric([], st.snapshot_age)
        xid = CounterMetricFamily("sglang_gpu_xid_errors", "XID errors reported by the driver "
                                  "(nvmlEventSetWait_v2, nvmlEventTypeXidCriticalError) since the exporter started.",
                                  labels=("gpu", "uuid", "xid"))
        for (gpu, uuid, code), n in sorted(st.xids.items()):
            xid.add_metric([gpu, uuid, code], n)

        info = GaugeMetricFamily("sglang_gpu_info", "GPU identity; value 1 (nvmlDeviceGetName, "
                                 "nvmlSystemGetDriverVersion, nvmlSystemGetCudaDriverVersion, nvmlDeviceGetMigMode).")
        gauges = {key: GaugeMetricFamily(name, help_) for key, name, help_ in GAUGES}
        energy = CounterMetricFamily("sglang_gpu_energy_joules", "Energy used since the driver was loaded, joules "
                                     "(nvmlDeviceGetTotalEnergyConsumption / 1000).")
        events = GaugeMetricFamily("sglang_gpu_clocks_event_active", "1 while the clocks-event (throttle) reason "
                                   "holds clocks down (nvmlDeviceGetCurrentClocksEventReasons bit), else 0.")
        ecc = CounterMetricFamily("sglang_gpu_ecc_errors", "ECC errors since the driver was loaded "
                                  "(nvmlDeviceGetTotalEccErrors, volatile counter), by error_type.")
        rows = GaugeMetricFamily("sglang_gpu_remapped_rows", "Remapped memory rows by kind: correctable, "
                                 "uncorrectable (counts), pending, failure (0/1) (nvmlDeviceGetRemappedRows).")
        for snap in st.devices:
            d = snap.device
            labels = d.labels()
            info.add_sample("sglang_gpu_info", {**labels, "name": d.name, "driver_version": st.driver_version,
                                                "cuda_version": st.cuda_version, "mig_mode": d.mig_mode}, 1)
            for key, fam in gauges.items():
                if key in snap.values:
                    fam.add_sample(fam.name, labels, snap.values[key])
            if "energy_joules" in snap.values:
                energy.add_sample("sglang_gpu_energy_joules_total", labels, snap.values["energy_joules"])
            for reason, active in snap.clock_events.items():
                events.add_sample(events.name, {**labels, "reason": reason}, active)
            for etype, n in snap.ecc.items():
                ecc.add_sample("sglang_gpu_ecc_errors_total", {**labels, "error_type": etype}, n)
            for kind, n in snap.remapped_rows.items():
                rows.add_sample(rows.name, {**labels, "kind": kind}, n)
        return iter([up, init, errors, age, info, *gauges.values(), energy, events, ecc, rows, xid])
