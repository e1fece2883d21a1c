"""``sglang_gpu_*``: NVML readings of the GPUs on this machine (never in one-shot mode).

Read paths are relative to the GPU collector's view of a :class:`~exporter.sources.gpu.poller.GpuStatus`:
``device.*`` rows have one series per reported device (:class:`~exporter.sources.gpu.readings.DeviceSnapshot`:
``values``, ``clock_events``, ``ecc``, ``remapped_rows``, ``info``), labelled ``gpu``, ``uuid`` and, on
MIG devices, ``gpu_instance_id`` and ``compute_instance_id``; the other rows describe the poller.
"""

from __future__ import annotations

from .defs import COUNTER, DEVICE_LABELS, GAUGE, MIG_LABELS, MetricDef

D = DEVICE_LABELS


def _m(name, type_, labels, unit, read, source, help_) -> MetricDef:
    optional = MIG_LABELS if read.startswith("device.") else ()
    return MetricDef(name, type_, labels, unit, source, help_, "gpu", read, (), optional)


def _reading(name, key, unit, source, help_) -> MetricDef:
    return _m(name, GAUGE, D, unit, f"device.values.{key}", source, help_)


ROWS = (
    _m("sglang_gpu_up", GAUGE, (), "1", "up",
       "the poller: nvmlInit state, the latest cycle's deadline and the devices' answers",
       "1 when NVML is initialised and the latest poll cycle read the device list within its deadline, is not "
       "stale, and at least one reported GPU answered."),
    _m("sglang_gpu_init_error", GAUGE, ("kind",), "1", "init_error",
       "nvmlInit (NVMLError_<kind>), or loading libnvidia-ml",
       "1 for the kind of the latest failed nvmlInit while NVML is not initialised "
       "(LibraryNotFound, DriverNotLoaded, LibRmVersionMismatch, NoPermission, ...)."),
    _m("sglang_gpu_nvml_errors_total", COUNTER, ("call", "kind"), "errors", "errors",
       "every NVML call the poller makes (NVMLError_<kind>); DeadlineExceeded from the cycle's deadline",
       "Failed NVML calls by C function and error kind "
       "(NVMLError_<kind>; DeadlineExceeded: the call hung past --gpu.cycle-timeout)."),
    _m("sglang_gpu_snapshot_age_seconds", GAUGE, (), "seconds", "snapshot_age",
       "the poller's monotonic clock since its latest completed cycle",
       "Seconds since the latest completed NVML poll cycle."),
    _m("sglang_gpu_info", GAUGE, (*D, "name", "driver_version", "cuda_version", "mig_mode"), "1", "device.info",
       "nvmlDeviceGetName, nvmlSystemGetDriverVersion, nvmlSystemGetCudaDriverVersion, nvmlDeviceGetMigMode",
       "GPU identity; value 1 (nvmlDeviceGetName, "
       "nvmlSystemGetDriverVersion, nvmlSystemGetCudaDriverVersion, nvmlDeviceGetMigMode)."),
    _reading("sglang_gpu_memory_used_bytes", "memory_used_bytes", "bytes",
             "nvmlDeviceGetMemoryInfo_v2 used (v1 on old drivers)",
             "Device memory in use, bytes (nvmlDeviceGetMemoryInfo_v2 used: excludes reserved; the v1 call on "
             "old drivers includes it)."),
    _reading("sglang_gpu_memory_free_bytes", "memory_free_bytes", "bytes", "nvmlDeviceGetMemoryInfo free",
             "Free device memory, bytes (nvmlDeviceGetMemoryInfo free)."),
    _reading("sglang_gpu_memory_total_bytes", "memory_total_bytes", "bytes", "nvmlDeviceGetMemoryInfo total",
             "Total device memory, bytes (nvmlDeviceGetMemoryInfo total)."),
    _reading("sglang_gpu_memory_reserved_bytes", "memory_reserved_bytes", "bytes",
             "nvmlDeviceGetMemoryInfo_v2 reserved (absent on old drivers)",
             "Device memory reserved by the driver and firmware, bytes (nvmlDeviceGetMemoryInfo_v2 reserved)."),
    _reading("sglang_gpu_utilization_ratio", "utilization_ratio", "ratio",
             "nvmlDeviceGetUtilizationRates gpu / 100",
             "Share of the last sample period in which a kernel ran (nvmlDeviceGetUtilizationRates gpu / 100); "
             "not available on MIG devices."),
    _reading("sglang_gpu_memory_utilization_ratio", "memory_utilization_ratio", "ratio",
             "nvmlDeviceGetUtilizationRates memory / 100",
             "Share of the last sample period in which device memory was read or written "
             "(nvmlDeviceGetUtilizationRates memory / 100)."),
    _reading("sglang_gpu_sm_clock_hertz", "sm_clock_hertz", "hertz", "nvmlDeviceGetClockInfo NVML_CLOCK_SM x 1e6",
             "SM clock, hertz (nvmlDeviceGetClockInfo NVML_CLOCK_SM)."),
    _reading("sglang_gpu_memory_clock_hertz", "memory_clock_hertz", "hertz",
             "nvmlDeviceGetClockInfo NVML_CLOCK_MEM x 1e6",
             "Memory clock, hertz (nvmlDeviceGetClockInfo NVML_CLOCK_MEM)."),
    _reading("sglang_gpu_power_watts", "power_watts", "watts", "nvmlDeviceGetPowerUsage / 1000",
             "Power draw, watts (nvmlDeviceGetPowerUsage)."),
    _reading("sglang_gpu_power_limit_watts", "power_limit_watts", "watts", "nvmlDeviceGetEnforcedPowerLimit / 1000",
             "Enforced power limit, watts (nvmlDeviceGetEnforcedPowerLimit)."),
    _reading("sglang_gpu_temperature_celsius", "temperature_celsius", "celsius",
             "nvmlDeviceGetTemperatureV (older drivers nvmlDeviceGetTemperature), NVML_TEMPERATURE_GPU",
             "GPU die temperature, degrees Celsius (nvmlDeviceGetTemperatureV, older drivers "
             "nvmlDeviceGetTemperature)."),
    _reading("sglang_gpu_process_memory_used_bytes", "process_memory_used_bytes", "bytes",
             "nvmlDeviceGetComputeRunningProcesses_v3 (v2 on old drivers) usedGpuMemory, summed",
             "Device memory used by the compute processes on the device, summed, bytes "
             "(nvmlDeviceGetComputeRunningProcesses_v3 usedGpuMemory)."),
    _reading("sglang_gpu_processes", "processes", "processes",
             "nvmlDeviceGetComputeRunningProcesses_v3 (v2 on old drivers), counted",
             "Compute processes on the device (nvmlDeviceGetComputeRunningProcesses_v3)."),
    _m("sglang_gpu_energy_joules_total", COUNTER, D, "joules", "device.values.energy_joules",
       "nvmlDeviceGetTotalEnergyConsumption / 1000",
       "Energy used since the driver was loaded, joules "
       "(nvmlDeviceGetTotalEnergyConsumption / 1000)."),
    _m("sglang_gpu_clocks_event_active", GAUGE, (*D, "reason"), "1", "device.clock_events",
       "nvmlDeviceGetCurrentClocksEventReasons (older drivers ...ThrottleReasons), one bit per reason",
       "1 while the clocks-event (throttle) reason "
       "holds clocks down (nvmlDeviceGetCurrentClocksEventReasons bit), else 0."),
    _m("sglang_gpu_ecc_errors_total", COUNTER, (*D, "error_type"), "errors", "device.ecc",
       "nvmlDeviceGetTotalEccErrors, NVML_VOLATILE_ECC (read every --gpu.slow-poll-interval)",
       "ECC errors since the driver was loaded "
       "(nvmlDeviceGetTotalEccErrors, volatile counter), by error_type."),
    _m("sglang_gpu_remapped_rows", GAUGE, (*D, "kind"), "rows", "device.remapped_rows",
       "nvmlDeviceGetRemappedRows (read every --gpu.slow-poll-interval)",
       "Remapped memory rows by kind: correctable, "
       "uncorrectable (counts), pending, failure (0/1) (nvmlDeviceGetRemappedRows)."),
    _m("sglang_gpu_xid_errors_total", COUNTER, (*D, "xid"), "errors", "xids",
       "nvmlEventSetWait_v2 on nvmlEventTypeXidCriticalError (the XID thread)",
       "XID errors reported by the driver "
       "(nvmlEventSetWait_v2, nvmlEventTypeXidCriticalError) since the exporter started."),
)
