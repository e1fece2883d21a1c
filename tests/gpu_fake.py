"""A strict pure-Python fake of the pynvml functions the GPU poller calls.

Faithful to nvidia-ml-py where it matters to the poller:

* constants and the ``NVMLError`` / ``NVMLError_<Kind>`` classes are the real module's (attribute
  access falls through to ``pynvml`` for every non-callable name and every exception class);
* results are the real ctypes structures (``c_nvmlMemory_v2_t``, ``c_nvmlUtilization_t``, ...) or the
  real friendly objects; signatures match the real functions (``tests/test_gpu_fake.py`` checks);
* any function the fake does not model is recorded in :attr:`FakeNvml.unmodeled` and raises
  ``AssertionError``; the ``fake_nvml`` fixture fails the test if anything was recorded (the poller
  catches exceptions, so raising alone would not be enough).

Injection: ``init_errors`` (codes for successive ``nvmlInit`` calls), ``missing`` (C symbols an old
driver lacks -> ``FunctionNotFound``), ``fail[(symbol, uuid_or_None)] = code``, ``hangs[symbol] =
Event`` (the call blocks until the event is set), MIG layouts, and :meth:`FakeNvml.xid`.
Every call is recorded as ``(symbol, uuid_or_None)`` in :attr:`FakeNvml.calls`.
"""

from __future__ import annotations

import queue
import threading
import types
from dataclasses import dataclass, field

import pynvml


@dataclass
class FakeMig:
    """A MIG device in slot ``slot`` of its GPU."""

    uuid: str
    slot: int
    gi: int
    ci: int
    total: int = 10 << 30
    used: int = 1 << 30
    procs: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class FakeGpu:
    """One fake GPU and its readings in NVML's own units (MiB-free bytes, MHz, mW, mJ, percent)."""

    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    total: int = 80 << 30
    reserved: int = 512 << 20
    used: int = 60 << 30
    util_gpu: int = 87
    util_mem: int = 41
    sm_mhz: int = 1980
    mem_mhz: int = 2619
    power_mw: int = 512_345
    limit_mw: int = 700_000
    energy_mj: int = 123_456_789
    temp_c: int = 61
    reasons: int = pynvml.nvmlClocksEventReasonSwPowerCap
    procs: list[tuple[int, int]] = field(default_factory=lambda: [(4242, 50 << 30), (4243, 8 << 30)])
    ecc: tuple[int, int] = (3, 0)
    rows: tuple[int, int, int, int] = (2, 0, 0, 0)
    mig_mode: int | None = pynvml.NVML_DEVICE_MIG_DISABLE  # None: NotSupported (pre-Ampere)
    mig_slots: int = 7
    migs: list[FakeMig] = field(default_factory=list)
    not_supported: set[str] = field(default_factory=set)  # C symbols answering NotSupported


class _Handle:
    def __init__(self, uuid: str, mig: FakeMig | None = None, gpu: FakeGpu | None = None):
        self.uuid, self.mig, self.gpu = uuid, mig, gpu

    def __repr__(self):
        return f"<handle {self.uuid}>"


class FakeNvml:
    """The fake module. Pass ``lambda: fake`` as the poller's loader."""

    def __init__(self, gpus: list[FakeGpu], driver: str = "570.124.06", cuda: int = 12080):
        self.gpus = gpus
        self.driver, self.cuda = driver, cuda
        self.init_errors: list[int] = []
        self.missing: set[str] = set()
        self.fail: dict[tuple[str, str | None], int] = {}
        self.hangs: dict[str, threading.Event] = {}
        self.calls: list[tuple[str, str | None]] = []
        self.unmodeled: list[str] = []
        self.initialized = False
        self.events: queue.Queue = queue.Queue()
        self.lock = threading.Lock()
        self._handles = {g.uuid: _Handle(g.uuid, gpu=g) for g in gpus}
        self._mig_handles = {m.uuid: _Handle(m.uuid, mig=m, gpu=g) for g in gpus for m in g.migs}

    # -- strictness: constants and error classes from the real module, nothing else
    def __getattr__(self, name):
        real = getattr(pynvml, name)  # AttributeError for names pynvml lacks, as the real module
        if isinstance(real, type) or not callable(real):
            return real
        self.unmodeled.append(name)
        raise AssertionError(f"fake NVML does not model {name}()")

    def xid(self, uuid: str, code: int) -> None:
        """Queue an XID critical-error event on GPU ``uuid`` for ``nvmlEventSetWait_v2``."""
        self.events.put((uuid, code))

    def count(self, symbol: str, uuid: str | None = None) -> int:
        """How many times ``symbol`` was called (on ``uuid``, if given)."""
        with self.lock:
            return sum(1 for s, u in self.calls if s == symbol and (uuid is None or u == uuid))

    # -- machinery
    def _enter(self, symbol: str, handle: _Handle | None = None, *, needs_init: bool = True):
        uuid = handle.uuid if handle is not None else None
        with self.lock:
            self.calls.append((symbol, uuid))
        hang = self.hangs.get(symbol)
        if hang is not None:
            hang.wait()
        if symbol in self.missing:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        if needs_init and not self.initialized:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        for key in ((symbol, uuid), (symbol, None), ("*", uuid), ("*", None)):
            if key in self.fail:
                raise pynvml.NVMLError(self.fail[key])
        gpu = handle.gpu if handle is not None else None
        if gpu is not None and handle.mig is None and symbol in gpu.not_supported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    # -- library
    def nvmlInit(self):
        self._enter("nvmlInit", needs_init=False)
        if self.init_errors:
            raise pynvml.NVMLError(self.init_errors.pop(0))
        self.initialized = True

    def nvmlShutdown(self):
        self._enter("nvmlShutdown")
        self.initialized = False

    def nvmlSystemGetDriverVersion(self):
        self._enter("nvmlSystemGetDriverVersion")
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self):
        self._enter("nvmlSystemGetCudaDriverVersion")
        return self.cuda

    # -- enumeration
    def nvmlDeviceGetCount(self):
        self._enter("nvmlDeviceGetCount_v2")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        h = self._handles[self.gpus[index].uuid]
        self._enter("nvmlDeviceGetHandleByIndex_v2", h)
        return h

    def nvmlDeviceGetUUID(self, handle):
        self._enter("nvmlDeviceGetUUID", handle)
        return handle.uuid

    def nvmlDeviceGetName(self, handle):
        self._enter("nvmlDeviceGetName", handle)
        if handle.mig is not None:
            return f"{handle.gpu.name} MIG 1g.10gb"
        return handle.gpu.name

    def nvmlDeviceGetMigMode(self, device):
        self._enter("nvmlDeviceGetMigMode", device)
        if device.gpu.mig_mode is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [device.gpu.mig_mode, device.gpu.mig_mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, device):
        self._enter("nvmlDeviceGetMaxMigDeviceCount", device)
        return device.gpu.mig_slots

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device, index):
        self._enter("nvmlDeviceGetMigDeviceHandleByIndex", device)
        if device.gpu.mig_mode != pynvml.NVML_DEVICE_MIG_ENABLE:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        for m in device.gpu.migs:
            if m.slot == index:
                return self._mig_handles[m.uuid]
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)  # an empty slot, as the driver answers

    def nvmlDeviceGetGpuInstanceId(self, device):
        self._enter("nvmlDeviceGetGpuInstanceId", device)
        if device.mig is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return device.mig.gi

    def nvmlDeviceGetComputeInstanceId(self, device):
        self._enter("nvmlDeviceGetComputeInstanceId", device)
        if device.mig is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return device.mig.ci

    # -- readings
    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        if version:
            self._enter("nvmlDeviceGetMemoryInfo_v2", handle)
            if version != pynvml.nvmlMemory_v2:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            m = pynvml.c_nvmlMemory_v2_t()
            m.version = version
        else:
            self._enter("nvmlDeviceGetMemoryInfo", handle)
            m = pynvml.c_nvmlMemory_t()
        src = handle.mig or handle.gpu
        reserved = 0 if handle.mig is not None else handle.gpu.reserved
        m.total = src.total
        if version:
            m.reserved, m.used = reserved, src.used
        else:
            m.used = src.used + reserved  # v1: used includes reserved
        m.free = src.total - src.used - reserved
        return m

    def nvmlDeviceGetUtilizationRates(self, handle):
        self._enter("nvmlDeviceGetUtilizationRates", handle)
        if handle.mig is not None or handle.gpu.mig_mode == pynvml.NVML_DEVICE_MIG_ENABLE:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        u = pynvml.c_nvmlUtilization_t()
        u.gpu, u.memory = handle.gpu.util_gpu, handle.gpu.util_mem
        return u

    def _procs(self, handle, struct):
        src = handle.mig or handle.gpu
        out = []
        for pid, used in src.procs:
            c = struct()
            c.pid, c.usedGpuMemory = pid, used
            out.append(pynvml.nvmlStructToFriendlyObject(c))
        return out

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle):
        self._enter("nvmlDeviceGetComputeRunningProcesses_v3", handle)
        return self._procs(handle, pynvml.c_nvmlProcessInfo_v3_t)

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle):
        self._enter("nvmlDeviceGetComputeRunningProcesses_v2", handle)
        return self._procs(handle, pynvml.c_nvmlProcessInfo_v2_t)

    def nvmlDeviceGetClockInfo(self, handle, type):  # noqa: A002 - the real parameter name
        self._enter("nvmlDeviceGetClockInfo", handle)
        if type == pynvml.NVML_CLOCK_SM:
            return handle.gpu.sm_mhz
        if type == pynvml.NVML_CLOCK_MEM:
            return handle.gpu.mem_mhz
        raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetPowerUsage(self, handle):
        self._enter("nvmlDeviceGetPowerUsage", handle)
        return handle.gpu.power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        self._enter("nvmlDeviceGetEnforcedPowerLimit", handle)
        return handle.gpu.limit_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        self._enter("nvmlDeviceGetTotalEnergyConsumption", handle)
        return handle.gpu.energy_mj

    def nvmlDeviceGetTemperatureV(self, handle, sensor, version=pynvml.nvmlTemperature_v1):
        self._enter("nvmlDeviceGetTemperatureV", handle)
        if sensor != pynvml.NVML_TEMPERATURE_GPU or version != pynvml.nvmlTemperature_v1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return handle.gpu.temp_c

    def nvmlDeviceGetTemperature(self, handle, sensor):
        self._enter("nvmlDeviceGetTemperature", handle)
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return handle.gpu.temp_c

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        self._enter("nvmlDeviceGetCurrentClocksEventReasons", handle)
        return handle.gpu.reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        self._enter("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        return handle.gpu.reasons

    def nvmlDeviceGetTotalEccErrors(self, handle, errorType, counterType):
        self._enter("nvmlDeviceGetTotalEccErrors", handle)
        return handle.gpu.ecc[0 if errorType == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED else 1]

    def nvmlDeviceGetRemappedRows(self, device):
        self._enter("nvmlDeviceGetRemappedRows", device)
        return tuple(device.gpu.rows)

    # -- events
    def nvmlEventSetCreate(self):
        self._enter("nvmlEventSetCreate")
        return types.SimpleNamespace(registered=set())

    def nvmlDeviceRegisterEvents(self, handle, eventTypes, eventSet):
        self._enter("nvmlDeviceRegisterEvents", handle)
        if eventTypes & pynvml.nvmlEventTypeXidCriticalError:
            eventSet.registered.add(handle.uuid)

    def nvmlEventSetWait_v2(self, eventSet, timeoutms):
        self._enter("nvmlEventSetWait_v2")
        try:
            uuid, code = self.events.get(timeout=timeoutms / 1000.0)
        except queue.Empty:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT) from None
        if uuid not in eventSet.registered:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
        return types.SimpleNamespace(device=self._handles[uuid], eventType=pynvml.nvmlEventTypeXidCriticalError,
                                     eventData=code, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)

    def nvmlEventSetFree(self, eventSet):
        self._enter("nvmlEventSetFree")


#: Names of the pynvml functions the fake models (``tests/test_gpu_fake.py`` compares signatures).
MODELED = sorted(name for name, v in vars(FakeNvml).items() if name.startswith("nvml") and callable(v))
