"""NVML polling: a background thread keeps the latest snapshot of every selected GPU.

Data flow::

    NVML (pynvml module or a fake) -> GpuPoller (thread "gpu-poller", one cycle thread at a time,
    thread "gpu-xid" on an event set) -> GpuStatus (immutable) -> GpuCollector (at scrape time)

Rules this module keeps (see the README's GPU section):

* ``nvmlInit`` runs once, in the poller, with exponential backoff while it fails (library not
  found, driver not loaded yet, driver/library mismatch, no permission, ...). It runs again only
  after NVML reports that it lost its initialisation (``Uninitialized``, ``DriverNotLoaded``,
  ``LibRmVersionMismatch`` from a later call). Scrapes never call NVML.
* A cycle has a deadline (``cycle_timeout``). A cycle that overruns (a hung call) is counted as
  ``kind="DeadlineExceeded"`` on the call that hung, the snapshot is marked stale (``up`` 0, per-GPU
  readings withheld) and no new cycle starts until the hung one returns.
* A reading a device does not support (``NotSupported``) or a function the driver lacks
  (``FunctionNotFound``, after the older call was tried) is remembered and not asked again until
  NVML is initialised anew; the series is absent, never 0.
* An error on one device (``GpuIsLost``, ``Unknown``, ...) ends that device's cycle; other devices
  keep reporting. Every failed call is counted by call and kind.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ...limits import UUIDS_FILE_MAX_BYTES
from ...settings import parse_uuid_list, read_small_file

log = logging.getLogger(__name__)

#: Error kinds after which NVML must be initialised again (the whole library is gone).
REINIT_KINDS = frozenset({"Uninitialized", "DriverNotLoaded", "LibRmVersionMismatch", "LibraryNotFound"})
#: Init failures that mean "no NVIDIA driver on this machine" rather than a broken one.
ABSENT_KINDS = frozenset({"LibraryNotFound", "DriverNotLoaded"})
#: Error kinds that end the current device's cycle (the device, or access to it, is gone).
DEVICE_KINDS = frozenset({"GpuIsLost", "Unknown", "ResetRequired", "GpuNotFound", "Timeout"})
#: Error kinds meaning "this reading will never work here": cached, not asked again.
UNSUPPORTED_KINDS = frozenset({"NotSupported", "FunctionNotFound"})

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


def error_kind(exc: BaseException) -> str:
    """Short name of an NVML error: ``NVMLError_GpuIsLost`` -> ``"GpuIsLost"``.

    An ``NVMLError`` with a code pynvml has no class for gives ``"Code<n>"``; any other exception
    gives its class name.
    """
    name = type(exc).__name__
    if name.startswith("NVMLError_"):
        return name[len("NVMLError_"):]
    if name == "NVMLError":
        return f"Code{getattr(exc, 'value', '')}"
    return name


@dataclass(frozen=True)
class Device:
    """One reported NVML device: a whole GPU, or a MIG device of a GPU in MIG mode.

    Attributes:
        index: NVML index of the GPU (the parent's index for a MIG device); label ``gpu``.
        uuid: ``GPU-...`` or ``MIG-...`` (``nvmlDeviceGetUUID``); label ``uuid``.
        name: Product name (``nvmlDeviceGetName``).
        handle: NVML device handle.
        mig_mode: ``enabled``/``disabled`` (``nvmlDeviceGetMigMode``, current mode), ``unsupported``.
        parent_uuid: For a MIG device, its GPU's UUID; else None.
        gpu_instance_id, compute_instance_id: For a MIG device (``nvmlDeviceGetGpuInstanceId``,
            ``nvmlDeviceGetComputeInstanceId``); else None.
    """

    index: int
    uuid: str
    name: str
    handle: Any = field(compare=False, repr=False)
    mig_mode: str = "unsupported"
    parent_uuid: str | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None

    @property
    def is_mig(self) -> bool:
        return self.parent_uuid is not None

    def labels(self) -> dict[str, str]:
        """Labels of the device's series: ``gpu``, ``uuid``; MIG devices add ``gpu_instance_id`` and
        ``compute_instance_id``."""
        out = {"gpu": str(self.index), "uuid": self.uuid}
        if self.is_mig:
            out["gpu_instance_id"] = str(self.gpu_instance_id)
            out["compute_instance_id"] = str(self.compute_instance_id)
        return out


@dataclass(frozen=True)
class DeviceSnapshot:
    """Readings of one device in one cycle; a reading that failed or is unsupported is absent.

    Attributes:
        device: The device.
        values: Reading key -> value in base units (keys of :data:`exporter.sources.gpu.collector.GAUGES`
            and counters: ``memory_used_bytes``, ``power_watts``, ``energy_joules``, ...).
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


@dataclass(frozen=True)
class GpuStatus:
    """What the collector serves, copied under the poller's lock at scrape time.

    Attributes:
        up: NVML is initialised, the latest cycle enumerated devices within its deadline, the
            snapshot is fresh, and at least one reported device answered (or none is selected).
        init_error: Kind of the latest failed ``nvmlInit`` while NVML is not initialised, else None.
        driver_version, cuda_version: ``nvmlSystemGetDriverVersion``, ``nvmlSystemGetCudaDriverVersion``
            (``"12.4"``); ``""`` when unknown.
        devices: Device snapshots of the latest completed cycle; empty when stale.
        snapshot_age: Seconds since the latest completed cycle, None before the first.
        stale: The snapshot is too old or a cycle overran its deadline.
        errors: ``(call, kind)`` -> failed NVML calls since start.
        xids: ``(gpu, uuid, xid)`` -> XID events since start.
    """

    up: bool
    init_error: str | None
    driver_version: str
    cuda_version: str
    devices: tuple[DeviceSnapshot, ...]
    snapshot_age: float | None
    stale: bool
    errors: MappingProxyType
    xids: MappingProxyType


class _DeviceFailed(Exception):
    """A device-level error ended this device's cycle."""


class _Reinit(Exception):
    """NVML lost its initialisation; init again with backoff."""


class GpuPoller:
    """Polls NVML in background threads; :meth:`status` returns the latest snapshot without NVML calls.

    Args:
        loader: Returns the pynvml module (or a fake with the same names); called before each
            ``nvmlInit`` attempt. Raising an ``NVMLError`` counts as a failed init
            (:func:`exporter.sources.gpu.nvml.load_pynvml` raises ``LibraryNotFound`` for a bad path).
        poll_interval: Seconds between cycle starts.
        cycle_timeout: Deadline of one cycle in seconds.
        slow_poll_interval: Seconds between ECC / remapped-rows reads and device re-enumeration.
        uuids: UUIDs to report (``GPU-``/``MIG-``); None or empty with no ``uuids_file`` = all.
        uuids_file: File of UUIDs, re-read when its mtime or size changes; while it is missing only
            ``uuids`` are reported.
        xid_events: Run the XID event thread.
        unknown_error_threshold: Consecutive cycles with an ``Unknown`` error after which
            :meth:`health` reports unhealthy; 0 never.
        backoff: ``(first, max)`` seconds between failed ``nvmlInit`` attempts (doubling).
        stale_after: Seconds after which a snapshot is stale; default 3 poll intervals + deadline.
        xid_wait_ms: Timeout of one ``nvmlEventSetWait_v2`` (bounds how long :meth:`stop` waits for
            the XID thread, since the wait cannot be interrupted).
        clock: Monotonic clock (seconds).
        gpu_optional: The machine may well have no GPU (the demo): an NVML that is absent
            (``LibraryNotFound``, ``DriverNotLoaded``) is said once at INFO ("GPU collector idle"),
            not as a WARNING. Other init failures are warnings either way.
    """

    def __init__(self, loader: Callable[[], Any], *, poll_interval: float = 10.0,
                 cycle_timeout: float = 5.0, slow_poll_interval: float = 300.0,
                 uuids: list[str] | None = None, uuids_file: str | None = None,
                 xid_events: bool = True, unknown_error_threshold: int = 3,
                 backoff: tuple[float, float] = (1.0, 60.0), stale_after: float | None = None,
                 xid_wait_ms: int = 500,
                 clock: Callable[[], float] = time.monotonic, gpu_optional: bool = False):
        self.loader = loader
        self.gpu_optional = gpu_optional
        self.poll_interval = poll_interval
        self.cycle_timeout = cycle_timeout
        self.slow_poll_interval = slow_poll_interval
        self.uuids = list(uuids or [])
        self.uuids_file = uuids_file
        self.xid_events = xid_events
        self.unknown_error_threshold = unknown_error_threshold
        self.backoff = backoff
        self.stale_after = stale_after if stale_after is not None else 3 * poll_interval + cycle_timeout
        self.clock = clock
        self.xid_wait_ms = xid_wait_ms

        self.lock = threading.Lock()
        self.nv: Any = None                       # the pynvml module once initialised
        self.initialized = False
        self.init_attempts = 0                    # nvmlInit calls (tests prove "once")
        self.init_error: str | None = None
        self.driver_version = ""
        self.cuda_version = ""
        self.errors: dict[tuple[str, str], int] = {}
        self.xids: dict[tuple[str, str, str], int] = {}
        self.cycles = 0                           # completed cycles (tests wait on it)
        self.overruns = 0                         # cycles that missed their deadline
        self.unknown_streak = 0                   # consecutive cycles with an Unknown error
        self.current_call = ""                    # NVML call in progress (for overrun attribution)

        self._gpus: list[Device] = []             # every enumerated device, unfiltered
        self._snapshot: tuple[DeviceSnapshot, ...] = ()
        self._snapshot_at: float | None = None
        self._enumerated = False
        self._overrun = False
        self._unsupported: set[tuple[str, str]] = set()  # (uuid, reading) never asked again
        self._missing: set[str] = set()                   # C symbols the driver lacks
        self._slow: dict[str, tuple[dict, dict]] = {}     # uuid -> (ecc, remapped rows)
        self._next_slow = 0.0
        self._backoff_now = backoff[0]
        self._cycle_unknown = False
        self._file_key: tuple[float, int] | None = None
        self._file_uuids: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._xid_thread: threading.Thread | None = None
        self._xid_stop = threading.Event()

    # ------------------------------------------------------------------ threads

    def start(self) -> None:
        """Start the poller thread (daemon); the first cycle runs at once."""
        self._thread = threading.Thread(target=self._run, name="gpu-poller", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the threads and shut NVML down if no call is hung (waits at most ``timeout`` s)."""
        self._stop.set()
        self._xid_stop.set()
        for t in (self._thread, self._xid_thread):
            if t is not None:
                t.join(timeout)
        busy = any(t is not None and t.is_alive() for t in (self._thread, self._xid_thread))
        if self.initialized and not busy:
            try:
                self.nv.nvmlShutdown()
            except Exception:  # noqa: BLE001 - shutting down anyway
                pass
            self.initialized = False

    def _run(self) -> None:
        while not self._stop.is_set():
            started = self.clock()
            worker = threading.Thread(target=self.run_cycle, name="gpu-cycle", daemon=True)
            worker.start()
            worker.join(self.cycle_timeout)
            if worker.is_alive():
                with self.lock:
                    call = self.current_call or "cycle"
                    self.errors[(call, "DeadlineExceeded")] = self.errors.get((call, "DeadlineExceeded"), 0) + 1
                    self.overruns += 1
                    self._overrun = True
                log.warning("NVML cycle exceeded its %.1f s deadline in %s; serving a stale snapshot",
                            self.cycle_timeout, call)
                while worker.is_alive() and not self._stop.is_set():
                    worker.join(0.2)
            delay = (self.poll_interval - (self.clock() - started)) if self.initialized else self._backoff_now
            if not self.initialized:
                self._backoff_now = min(self._backoff_now * 2, self.backoff[1])
            self._stop.wait(max(0.0, delay))

    # ------------------------------------------------------------------ status

    def status(self) -> GpuStatus:
        """The latest snapshot and counters; never calls NVML (safe at scrape time)."""
        with self.lock:
            age = None if self._snapshot_at is None else max(0.0, self.clock() - self._snapshot_at)
            stale = self._overrun or age is None or age > self.stale_after
            reachable = not self._snapshot or any(d.ok for d in self._snapshot)
            up = self.initialized and self._enumerated and not stale and reachable
            return GpuStatus(
                up=up, init_error=None if self.initialized else self.init_error,
                driver_version=self.driver_version, cuda_version=self.cuda_version,
                devices=() if stale else self._snapshot, snapshot_age=age, stale=stale,
                errors=MappingProxyType(dict(self.errors)), xids=MappingProxyType(dict(self.xids)))

    def health(self) -> tuple[bool, str]:
        """``(False, reason)`` after ``unknown_error_threshold`` consecutive cycles with an NVML
        ``Unknown`` error (the container lost device access; a restart re-attaches the devices)."""
        with self.lock:
            n = self.unknown_streak
        if self.unknown_error_threshold and n >= self.unknown_error_threshold:
            return False, f"NVML returned Unknown errors in {n} consecutive poll cycles (lost GPU access?)"
        return True, "ok"

    # ------------------------------------------------------------------ one cycle

    def run_cycle(self) -> None:
        """One cycle: init if needed, then read every selected device. No deadline here (see
        :meth:`_run`); tests call it directly. Never raises for NVML errors."""
        self._cycle_unknown = False
        try:
            if not self.initialized:
                self._init()
            if self.initialized:
                self._poll()
        except _Reinit:
            self._lose_init()
        except Exception:  # noqa: BLE001 - a bug must not kill the poller thread
            log.exception("GPU poll cycle failed")
        with self.lock:
            self.current_call = ""
            self.cycles += 1
            self.unknown_streak = self.unknown_streak + 1 if self._cycle_unknown else 0

    def _count(self, call: str, exc: BaseException) -> str:
        kind = error_kind(exc)
        with self.lock:
            self.errors[(call, kind)] = self.errors.get((call, kind), 0) + 1
        if kind == "Unknown":
            self._cycle_unknown = True
        log.debug("NVML %s failed: %s", call, kind)
        return kind

    def _call(self, call: str, fn: Callable, *args, **kwargs):
        """Call ``fn``, naming it ``call`` (the C symbol) for error counting and overrun attribution."""
        self.current_call = call
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            kind = self._count(call, exc)
            if kind in REINIT_KINDS and self.initialized:
                raise _Reinit(kind) from exc
            raise

    def _init(self) -> None:
        self.init_attempts += 1
        try:
            self.current_call = "nvmlInit"
            nv = self.loader()
            self.nv = nv
            nv.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - any failure to load or init the library
            kind = self._count("nvmlInit", exc)
            with self.lock:
                first = self.init_error != kind
                self.init_error = kind
            if not first:
                log.debug("NVML init failed (%s); retrying with backoff", kind)
            elif self.gpu_optional and kind in ABSENT_KINDS:
                log.info("GPU collector idle: no NVML on this machine (%s); sglang_gpu_up is 0 and no "
                         "GPU readings are served (--gpu.enabled false turns the collector off)", kind)
            else:
                log.warning("NVML init failed (%s); retrying with backoff", kind)
            return
        nv = self.nv
        driver = cuda = ""
        try:
            driver = str(self._call("nvmlSystemGetDriverVersion", nv.nvmlSystemGetDriverVersion))
        except nv.NVMLError:
            pass
        try:
            v = int(self._call("nvmlSystemGetCudaDriverVersion", nv.nvmlSystemGetCudaDriverVersion))
            cuda = f"{v // 1000}.{v % 1000 // 10}"
        except nv.NVMLError:
            pass
        with self.lock:
            self.initialized = True
            self.init_error = None
            self.driver_version, self.cuda_version = driver, cuda
            self._unsupported.clear()
            self._missing.clear()
            self._next_slow = 0.0
        self._backoff_now = self.backoff[0]
        log.info("NVML initialised (driver %s, CUDA %s)", driver or "?", cuda or "?")

    def _lose_init(self) -> None:
        """NVML lost its initialisation: stop the XID thread, shut down, init again with backoff."""
        log.warning("NVML lost its initialisation; re-initialising with backoff")
        self._stop_xid()
        try:
            self.nv.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
        with self.lock:
            self.initialized = False
            self._enumerated = False
            self._gpus = []
            self._snapshot = ()

    # ------------------------------------------------------------------ enumeration

    def _enumerate(self) -> list[Device]:
        nv = self.nv
        devices: list[Device] = []
        count = self._call("nvmlDeviceGetCount_v2", nv.nvmlDeviceGetCount)
        for i in range(count):
            try:
                h = self._call("nvmlDeviceGetHandleByIndex_v2", nv.nvmlDeviceGetHandleByIndex, i)
                uuid = str(self._call("nvmlDeviceGetUUID", nv.nvmlDeviceGetUUID, h))
                name = str(self._call("nvmlDeviceGetName", nv.nvmlDeviceGetName, h))
            except nv.NVMLError:
                continue  # a GPU that cannot even be named (lost, no permission) is not reported
            mig_mode = "unsupported"
            if ("", "mig") not in self._unsupported:
                try:
                    current, _pending = self._call("nvmlDeviceGetMigMode", nv.nvmlDeviceGetMigMode, h)
                    mig_mode = "enabled" if current == nv.NVML_DEVICE_MIG_ENABLE else "disabled"
                except nv.NVMLError as exc:
                    if error_kind(exc) == "FunctionNotFound":
                        self._unsupported.add(("", "mig"))
            devices.append(Device(i, uuid, name, h, mig_mode))
            if mig_mode == "enabled":
                devices.extend(self._mig_devices(i, uuid, name, h))
        return devices

    def _mig_devices(self, index: int, parent: str, parent_name: str, h) -> list[Device]:
        nv = self.nv
        out: list[Device] = []
        try:
            n = self._call("nvmlDeviceGetMaxMigDeviceCount", nv.nvmlDeviceGetMaxMigDeviceCount, h)
        except nv.NVMLError:
            return out
        for j in range(n):
            try:
                mh = self._call("nvmlDeviceGetMigDeviceHandleByIndex", nv.nvmlDeviceGetMigDeviceHandleByIndex, h, j)
            except nv.NVMLError as exc:
                if error_kind(exc) == "NotFound":
                    continue  # an empty MIG slot
                continue
            try:
                uuid = str(self._call("nvmlDeviceGetUUID", nv.nvmlDeviceGetUUID, mh))
                gi = int(self._call("nvmlDeviceGetGpuInstanceId", nv.nvmlDeviceGetGpuInstanceId, mh))
                ci = int(self._call("nvmlDeviceGetComputeInstanceId", nv.nvmlDeviceGetComputeInstanceId, mh))
            except nv.NVMLError:
                continue
            try:
                name = str(self._call("nvmlDeviceGetName", nv.nvmlDeviceGetName, mh))
            except nv.NVMLError:
                name = parent_name
            out.append(Device(index, uuid, name, mh, "enabled", parent, gi, ci))
        return out

    def _selection(self) -> set[str] | None:
        """Selected UUIDs, or None for all. Re-reads ``uuids_file`` when it changed."""
        if not self.uuids and not self.uuids_file:
            return None
        if self.uuids_file:
            try:
                st = os.stat(self.uuids_file)
                key = (st.st_mtime, st.st_size)
            except OSError:
                key = None
                self._file_uuids = []
            if key is not None and key != self._file_key:
                try:
                    # A regular file of bounded size only: a FIFO must not block, /dev/zero not grow.
                    text = read_small_file(self.uuids_file, UUIDS_FILE_MAX_BYTES).decode("utf-8", "replace")
                    uuids: list[str] = []
                    for line in text.splitlines():
                        try:
                            uuids += parse_uuid_list(line)
                        except ValueError as exc:
                            log.warning("gpu.uuids-file %s: %s", self.uuids_file, exc)
                    self._file_uuids = uuids
                    log.info("gpu.uuids-file %s: reporting %s", self.uuids_file, ", ".join(uuids) or "no GPU")
                except (OSError, ValueError) as exc:
                    log.warning("gpu.uuids-file %s: %s", self.uuids_file, exc)
                    self._file_uuids = []
            self._file_key = key
        return set(self.uuids) | set(self._file_uuids)

    @staticmethod
    def _selected(dev: Device, selection: set[str] | None) -> bool:
        return selection is None or dev.uuid in selection or (dev.parent_uuid in selection)

    # ------------------------------------------------------------------ readings

    def _poll(self) -> None:
        now = self.clock()
        slow_due = now >= self._next_slow
        if slow_due or not self._enumerated:
            try:
                gpus = self._enumerate()
            except _Reinit:
                raise
            except Exception:  # noqa: BLE001 - counted in _call; nothing is known about the GPUs
                with self.lock:
                    self._enumerated = False
                    self._snapshot = ()
                    self._snapshot_at = self.clock()
                    self._overrun = False
                return
            with self.lock:
                self._gpus, self._enumerated = gpus, True
            if self.xid_events and (self._xid_thread is None or not self._xid_thread.is_alive()):
                self._start_xid()
        selection = self._selection()
        snaps: list[DeviceSnapshot] = []
        for dev in self._gpus:
            if not self._selected(dev, selection):
                continue
            snaps.append(self._read_device(dev, slow_due))
        if slow_due:
            self._next_slow = now + self.slow_poll_interval
        with self.lock:
            self._snapshot = tuple(snaps)
            self._snapshot_at = self.clock()
            self._overrun = False

    def _read_device(self, dev: Device, slow_due: bool) -> DeviceSnapshot:
        values: dict[str, float] = {}
        events: dict[str, int] = {}
        ok = True
        readers: list[tuple[str, Callable[[Device], dict]]] = [
            ("memory", self._memory), ("utilization", self._utilization), ("processes", self._processes)]
        if not dev.is_mig:
            readers += [("sm_clock", self._sm_clock), ("memory_clock", self._mem_clock),
                        ("power", self._power), ("power_limit", self._power_limit),
                        ("energy", self._energy), ("temperature", self._temperature)]
        ecc, rows = self._slow.get(dev.uuid, ({}, {}))
        try:
            for key, reader in readers:
                values.update(self._guarded(dev, key, reader))
            if not dev.is_mig:
                events = self._guarded(dev, "clock_events", self._clock_events)
                if slow_due:
                    ecc = self._guarded(dev, "ecc", self._ecc)
                    rows = self._guarded(dev, "remapped_rows", self._remapped_rows)
                    self._slow[dev.uuid] = (ecc, rows)
        except _DeviceFailed:
            ok = False
        return DeviceSnapshot(dev, MappingProxyType(values), MappingProxyType(events),
                              MappingProxyType(dict(ecc)), MappingProxyType(dict(rows)), ok)

    def _guarded(self, dev: Device, key: str, reader: Callable[[Device], dict]) -> dict:
        """Run one reader; cache unsupported readings, end the device's cycle on device errors."""
        if (dev.uuid, key) in self._unsupported:
            return {}
        try:
            return reader(dev)
        except _Reinit:
            raise
        except self.nv.NVMLError as exc:
            kind = error_kind(exc)
            if kind in UNSUPPORTED_KINDS:
                self._unsupported.add((dev.uuid, key))
            elif kind in DEVICE_KINDS:
                raise _DeviceFailed(kind) from exc
            return {}

    def _fallback(self, dev: Device, calls: list[tuple[str, Callable, tuple]]):
        """Try ``(symbol, fn, args)`` in order; a ``FunctionNotFound`` (old driver) or
        ``ArgumentVersionMismatch`` moves on to the next and is remembered for every device."""
        last: BaseException | None = None
        for symbol, fn, args in calls:
            if symbol in self._missing:
                continue
            try:
                return symbol, self._call(symbol, fn, dev.handle, *args)
            except self.nv.NVMLError as exc:
                if error_kind(exc) not in ("FunctionNotFound", "ArgumentVersionMismatch"):
                    raise
                self._missing.add(symbol)
                last = exc
        if last is not None:
            raise last
        raise self.nv.NVMLError(self.nv.NVML_ERROR_FUNCTION_NOT_FOUND)

    def _memory(self, dev: Device) -> dict:
        nv = self.nv
        symbol, m = self._fallback(dev, [
            ("nvmlDeviceGetMemoryInfo_v2", lambda h: nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2), ()),
            ("nvmlDeviceGetMemoryInfo", nv.nvmlDeviceGetMemoryInfo, ())])
        out = {"memory_used_bytes": float(m.used), "memory_free_bytes": float(m.free),
               "memory_total_bytes": float(m.total)}
        if symbol.endswith("_v2"):
            out["memory_reserved_bytes"] = float(m.reserved)
        return out

    def _utilization(self, dev: Device) -> dict:
        u = self._call("nvmlDeviceGetUtilizationRates", self.nv.nvmlDeviceGetUtilizationRates, dev.handle)
        return {"utilization_ratio": u.gpu / 100.0, "memory_utilization_ratio": u.memory / 100.0}

    def _processes(self, dev: Device) -> dict:
        nv = self.nv
        _, procs = self._fallback(dev, [
            ("nvmlDeviceGetComputeRunningProcesses_v3", nv.nvmlDeviceGetComputeRunningProcesses_v3, ()),
            ("nvmlDeviceGetComputeRunningProcesses_v2", nv.nvmlDeviceGetComputeRunningProcesses_v2, ())])
        used = sum(p.usedGpuMemory for p in procs if p.usedGpuMemory is not None)
        return {"processes": float(len(procs)), "process_memory_used_bytes": float(used)}

    def _sm_clock(self, dev: Device) -> dict:
        mhz = self._call("nvmlDeviceGetClockInfo", self.nv.nvmlDeviceGetClockInfo, dev.handle, self.nv.NVML_CLOCK_SM)
        return {"sm_clock_hertz": mhz * 1e6}

    def _mem_clock(self, dev: Device) -> dict:
        mhz = self._call("nvmlDeviceGetClockInfo", self.nv.nvmlDeviceGetClockInfo, dev.handle, self.nv.NVML_CLOCK_MEM)
        return {"memory_clock_hertz": mhz * 1e6}

    def _power(self, dev: Device) -> dict:
        mw = self._call("nvmlDeviceGetPowerUsage", self.nv.nvmlDeviceGetPowerUsage, dev.handle)
        return {"power_watts": mw / 1000.0}

    def _power_limit(self, dev: Device) -> dict:
        mw = self._call("nvmlDeviceGetEnforcedPowerLimit", self.nv.nvmlDeviceGetEnforcedPowerLimit, dev.handle)
        return {"power_limit_watts": mw / 1000.0}

    def _energy(self, dev: Device) -> dict:
        mj = self._call("nvmlDeviceGetTotalEnergyConsumption", self.nv.nvmlDeviceGetTotalEnergyConsumption,
                        dev.handle)
        return {"energy_joules": mj / 1000.0}

    def _temperature(self, dev: Device) -> dict:
        nv = self.nv
        _, c = self._fallback(dev, [
            ("nvmlDeviceGetTemperatureV", nv.nvmlDeviceGetTemperatureV, (nv.NVML_TEMPERATURE_GPU,)),
            ("nvmlDeviceGetTemperature", nv.nvmlDeviceGetTemperature, (nv.NVML_TEMPERATURE_GPU,))])
        return {"temperature_celsius": float(c)}

    def _clock_events(self, dev: Device) -> dict:
        nv = self.nv
        _, mask = self._fallback(dev, [
            ("nvmlDeviceGetCurrentClocksEventReasons", nv.nvmlDeviceGetCurrentClocksEventReasons, ()),
            ("nvmlDeviceGetCurrentClocksThrottleReasons", nv.nvmlDeviceGetCurrentClocksThrottleReasons, ())])
        return {label: 1 if mask & getattr(nv, const) else 0 for label, const in CLOCK_EVENT_REASONS}

    def _ecc(self, dev: Device) -> dict:
        nv = self.nv
        out = {}
        for label, etype in (("corrected", nv.NVML_MEMORY_ERROR_TYPE_CORRECTED),
                             ("uncorrected", nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED)):
            out[label] = float(self._call("nvmlDeviceGetTotalEccErrors", nv.nvmlDeviceGetTotalEccErrors,
                                          dev.handle, etype, nv.NVML_VOLATILE_ECC))
        return out

    def _remapped_rows(self, dev: Device) -> dict:
        corr, unc, pending, failure = self._call("nvmlDeviceGetRemappedRows", self.nv.nvmlDeviceGetRemappedRows,
                                                 dev.handle)
        return {"correctable": float(corr), "uncorrectable": float(unc),
                "pending": float(bool(pending)), "failure": float(bool(failure))}

    # ------------------------------------------------------------------ XID events

    def _start_xid(self) -> None:
        self._xid_stop = threading.Event()
        self._xid_thread = threading.Thread(target=self._xid_loop, args=(self._xid_stop, list(self._gpus)),
                                            name="gpu-xid", daemon=True)
        self._xid_thread.start()

    def _stop_xid(self) -> None:
        self._xid_stop.set()
        if self._xid_thread is not None and self._xid_thread is not threading.current_thread():
            self._xid_thread.join(2.0)

    def _xid_loop(self, stop: threading.Event, gpus: list[Device]) -> None:
        nv = self.nv
        try:
            event_set = self._call("nvmlEventSetCreate", nv.nvmlEventSetCreate)
        except Exception:  # noqa: BLE001 - counted; no XID counting without an event set
            return
        by_uuid = {d.uuid: d for d in gpus if not d.is_mig}
        registered = 0
        for dev in by_uuid.values():
            try:
                self._call("nvmlDeviceRegisterEvents", nv.nvmlDeviceRegisterEvents, dev.handle,
                           nv.nvmlEventTypeXidCriticalError, event_set)
                registered += 1
            except Exception:  # noqa: BLE001 - counted (NotSupported on some SKUs and vGPUs)
                pass
        try:
            while registered and not stop.is_set() and not self._stop.is_set():
                try:
                    data = self._xid_call("nvmlEventSetWait_v2", nv.nvmlEventSetWait_v2, event_set,
                                          self.xid_wait_ms)
                except nv.NVMLError as exc:
                    kind = error_kind(exc)
                    if kind == "Timeout":
                        continue
                    self._count("nvmlEventSetWait_v2", exc)
                    if kind in REINIT_KINDS:
                        return
                    stop.wait(1.0)
                    continue
                if not data.eventType & nv.nvmlEventTypeXidCriticalError:
                    continue
                try:
                    uuid = str(self._xid_call("nvmlDeviceGetUUID", nv.nvmlDeviceGetUUID, data.device))
                except nv.NVMLError as exc:
                    self._count("nvmlDeviceGetUUID", exc)
                    uuid = ""
                dev = by_uuid.get(uuid)
                if not self._xid_wanted(uuid):
                    continue
                key = (str(dev.index) if dev else "", uuid, str(int(data.eventData)))
                with self.lock:
                    self.xids[key] = self.xids.get(key, 0) + 1
                log.warning("XID %s on GPU %s", key[2], uuid or "?")
        finally:
            try:
                nv.nvmlEventSetFree(event_set)
            except Exception:  # noqa: BLE001
                pass

    def _xid_call(self, call: str, fn: Callable, *args):
        return fn(*args)  # errors counted by the caller (Timeout is the normal idle case, not counted)

    def _xid_wanted(self, gpu_uuid: str) -> bool:
        """An XID of this GPU counts when the GPU or one of its MIG devices is selected."""
        if not self.uuids and not self.uuids_file:
            return True
        selection = set(self.uuids) | set(self._file_uuids)
        return any(self._selected(d, selection) for d in self._gpus
                   if d.uuid == gpu_uuid or d.parent_uuid == gpu_uuid)
