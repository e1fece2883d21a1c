"""One device's readings in one cycle: each reading a small function of one NVML call, in base units.

A reading the device does not support (``NotSupported``) or a function the driver lacks
(``FunctionNotFound``, after the older call was tried) is remembered in the session and not asked
again until NVML is initialised anew; its series is absent, never 0. A device-level error
(``GpuIsLost``, ``Unknown``, ...) ends that device's cycle (:class:`DeviceSnapshot.ok` false).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType

from .devices import Device
from .session import DEVICE_KINDS, UNSUPPORTED_KINDS, DeviceFailed, Reinit, Session, error_kind

#: Clocks-event ("throttle") reasons: label value -> pynvml constant name (same bits in the older
#: ``nvmlClocksThrottleReason*`` constants).
CLOCK_EVENT_REASONS = (
    ("gpu_idle", "nvmlClocksEventReasonGpuIdle"),
    ("applications_clocks_setting", "nvmlClocksEventReasonApplicationsClocksSetting"),
    ("sw_power_cap", "nvmlClocksEventReasonSwPowerCap"),
    ("hw_slowdown", "nvmlClocksEventReasonHwSlowdown"),
    ("sync_boost", "nvmlClocksEventReasonSyncBoost"),
    ("sw_thermal_slowdown", "nvmlClocksEventReasonSwThermalSlowdown"),
    ("hw_thermal_slowdown", "nvmlClocksEventReasonHwThermalSlowdown"),
    ("hw_power_brake_slowdown", "nvmlClocksEventReasonHwPowerBrakeSlowdown"),
    ("display_clock_setting", "nvmlClocksEventReasonDisplayClockSetting"),
)


@dataclass(frozen=True)
class DeviceSnapshot:
    """Readings of one device in one cycle; a reading that failed or is unsupported is absent.

    Attributes:
        device: The device.
        values: Reading key -> value in base units (``memory_used_bytes``, ``power_watts``,
            ``energy_joules``, ...: the ``values.<key>`` of the ``sglang_gpu_*`` rows of
            :mod:`exporter.metrics`).
        clock_events: Reason label -> 0/1 (absent when unsupported).
        ecc: ``corrected``/``uncorrected`` -> volatile ECC error count (slow loop).
        remapped_rows: ``correctable``/``uncorrectable``/``pending``/``failure`` (slow loop).
        ok: False when a device-level error (``GpuIsLost``, ``Unknown``) cut this cycle short.
    """

    device: Device
    values: MappingProxyType
    clock_events: MappingProxyType
    ecc: MappingProxyType
    remapped_rows: MappingProxyType
    ok: bool = True


def read_device(session: Session, dev: Device, slow_due: bool) -> DeviceSnapshot:
    """Read every supported reading of ``dev``; the ECC and remapped-rows reads only when ``slow_due``
    (their latest values are kept in ``session.slow`` in between). MIG devices have memory,
    utilisation and processes only: clocks, power, energy and temperature belong to their GPU."""
    values: dict[str, float] = {}
    events: dict[str, int] = {}
    ok = True
    readers: list[tuple[str, Callable[[Session, Device], dict]]] = [
        ("memory", _memory), ("utilization", _utilization), ("processes", _processes)]
    if not dev.is_mig:
        readers += [("sm_clock", _sm_clock), ("memory_clock", _mem_clock), ("power", _power),
                    ("power_limit", _power_limit), ("energy", _energy), ("temperature", _temperature)]
    ecc, rows = session.slow.get(dev.uuid, ({}, {}))
    try:
        for key, reader in readers:
            values.update(_guarded(session, dev, key, reader))
        if not dev.is_mig:
            events = _guarded(session, dev, "clock_events", _clock_events)
            if slow_due:
                ecc = _guarded(session, dev, "ecc", _ecc)
                rows = _guarded(session, dev, "remapped_rows", _remapped_rows)
                session.slow[dev.uuid] = (ecc, rows)
    except DeviceFailed:
        ok = False
    return DeviceSnapshot(dev, MappingProxyType(values), MappingProxyType(events),
                          MappingProxyType(dict(ecc)), MappingProxyType(dict(rows)), ok)


def _guarded(session: Session, dev: Device, key: str, reader: Callable[[Session, Device], dict]) -> dict:
    """Run one reader; cache unsupported readings, end the device's cycle on device errors."""
    if (dev.uuid, key) in session.unsupported:
        return {}
    try:
        return reader(session, dev)
    except Reinit:
        raise
    except session.nv.NVMLError as exc:
        kind = error_kind(exc)
        if kind in UNSUPPORTED_KINDS:
            session.unsupported.add((dev.uuid, key))
        elif kind in DEVICE_KINDS:
            raise DeviceFailed(kind) from exc
        return {}


def _memory(s: Session, dev: Device) -> dict:
    nv = s.nv
    symbol, m = s.fallback(dev.handle, [
        ("nvmlDeviceGetMemoryInfo_v2", lambda h: nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2), ()),
        ("nvmlDeviceGetMemoryInfo", nv.nvmlDeviceGetMemoryInfo, ())])
    out = {"memory_used_bytes": float(m.used), "memory_free_bytes": float(m.free),
           "memory_total_bytes": float(m.total)}
    if symbol.endswith("_v2"):
        out["memory_reserved_bytes"] = float(m.reserved)
    return out


def _utilization(s: Session, dev: Device) -> dict:
    u = s.call("nvmlDeviceGetUtilizationRates", s.nv.nvmlDeviceGetUtilizationRates, dev.handle)
    return {"utilization_ratio": u.gpu / 100.0, "memory_utilization_ratio": u.memory / 100.0}


def _processes(s: Session, dev: Device) -> dict:
    nv = s.nv
    _, procs = s.fallback(dev.handle, [
        ("nvmlDeviceGetComputeRunningProcesses_v3", nv.nvmlDeviceGetComputeRunningProcesses_v3, ()),
        ("nvmlDeviceGetComputeRunningProcesses_v2", nv.nvmlDeviceGetComputeRunningProcesses_v2, ())])
    used = sum(p.usedGpuMemory for p in procs if p.usedGpuMemory is not None)
    return {"processes": float(len(procs)), "process_memory_used_bytes": float(used)}


def _sm_clock(s: Session, dev: Device) -> dict:
    mhz = s.call("nvmlDeviceGetClockInfo", s.nv.nvmlDeviceGetClockInfo, dev.handle, s.nv.NVML_CLOCK_SM)
    return {"sm_clock_hertz": mhz * 1e6}


def _mem_clock(s: Session, dev: Device) -> dict:
    mhz = s.call("nvmlDeviceGetClockInfo", s.nv.nvmlDeviceGetClockInfo, dev.handle, s.nv.NVML_CLOCK_MEM)
    return {"memory_clock_hertz": mhz * 1e6}


def _power(s: Session, dev: Device) -> dict:
    mw = s.call("nvmlDeviceGetPowerUsage", s.nv.nvmlDeviceGetPowerUsage, dev.handle)
    return {"power_watts": mw / 1000.0}


def _power_limit(s: Session, dev: Device) -> dict:
    mw = s.call("nvmlDeviceGetEnforcedPowerLimit", s.nv.nvmlDeviceGetEnforcedPowerLimit, dev.handle)
    return {"power_limit_watts": mw / 1000.0}


def _energy(s: Session, dev: Device) -> dict:
    mj = s.call("nvmlDeviceGetTotalEnergyConsumption", s.nv.nvmlDeviceGetTotalEnergyConsumption, dev.handle)
    return {"energy_joules": mj / 1000.0}


def _temperature(s: Session, dev: Device) -> dict:
    nv = s.nv
    _, c = s.fallback(dev.handle, [
        ("nvmlDeviceGetTemperatureV", nv.nvmlDeviceGetTemperatureV, (nv.NVML_TEMPERATURE_GPU,)),
        ("nvmlDeviceGetTemperature", nv.nvmlDeviceGetTemperature, (nv.NVML_TEMPERATURE_GPU,))])
    return {"temperature_celsius": float(c)}


def _clock_events(s: Session, dev: Device) -> dict:
    nv = s.nv
    _, mask = s.fallback(dev.handle, [
        ("nvmlDeviceGetCurrentClocksEventReasons", nv.nvmlDeviceGetCurrentClocksEventReasons, ()),
        ("nvmlDeviceGetCurrentClocksThrottleReasons", nv.nvmlDeviceGetCurrentClocksThrottleReasons, ())])
    return {label: 1 if mask & getattr(nv, const) else 0 for label, const in CLOCK_EVENT_REASONS}


def _ecc(s: Session, dev: Device) -> dict:
    nv = s.nv
    out = {}
    for label, etype in (("corrected", nv.NVML_MEMORY_ERROR_TYPE_CORRECTED),
                         ("uncorrected", nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED)):
        out[label] = float(s.call("nvmlDeviceGetTotalEccErrors", nv.nvmlDeviceGetTotalEccErrors,
                                  dev.handle, etype, nv.NVML_VOLATILE_ECC))
    return out


def _remapped_rows(s: Session, dev: Device) -> dict:
    corr, unc, pending, failure = s.call("nvmlDeviceGetRemappedRows", s.nv.nvmlDeviceGetRemappedRows, dev.handle)
    return {"correctable": float(corr), "uncorrectable": float(unc),
            "pending": float(bool(pending)), "failure": float(bool(failure))}
