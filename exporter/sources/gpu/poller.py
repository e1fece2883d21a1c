"""NVML polling: a background thread keeps the latest snapshot of every selected GPU.

Data flow::

    NVML (pynvml module or a fake) -> GpuPoller (thread "gpu-poller", one cycle thread at a time,
    thread "gpu-xid" on an event set: xid.py) -> GpuStatus (immutable) -> GpuCollector (at scrape time)

Devices and the UUID selection are in :mod:`.devices`, the readings of one device in
:mod:`.readings`, error kinds and the per-initialisation context in :mod:`.session`.

Rules this module keeps (``docs/gpu.md#how-it-polls``):

* ``nvmlInit`` runs once, in the poller, with exponential backoff while it fails (library not
  found, driver not loaded yet, driver/library mismatch, no permission, ...). It runs again only
  after NVML reports that it lost its initialisation (``Uninitialized``, ``DriverNotLoaded``,
  ``LibRmVersionMismatch`` from a later call). Scrapes never call NVML.
* A cycle has a deadline (``cycle_timeout``). A cycle that overruns (a hung call) is counted as
  ``kind="DeadlineExceeded"`` on the call that hung, the snapshot is marked stale (``up`` 0, per-GPU
  readings withheld) and no new cycle starts until the hung one returns.
* A reading a device does not support is not asked again until NVML is initialised anew, and an
  error on one device ends that device's cycle only (:mod:`.readings`). Every failed call is
  counted by call and kind.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ...limits import (
    DEFAULT_GPU_CYCLE_TIMEOUT,
    DEFAULT_GPU_POLL_INTERVAL,
    DEFAULT_GPU_SLOW_POLL_INTERVAL,
    DEFAULT_GPU_UNKNOWN_ERROR_THRESHOLD,
)
from .devices import Device, UuidSelection, enumerate_devices, parse_uuid_list
from .readings import DeviceSnapshot, read_device
from .session import ABSENT_KINDS, REINIT_KINDS, Reinit, Session, error_kind
from .xid import XidWatcher

log = logging.getLogger(__name__)


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

    def __init__(self, loader: Callable[[], Any], *, poll_interval: float = DEFAULT_GPU_POLL_INTERVAL,
                 cycle_timeout: float = DEFAULT_GPU_CYCLE_TIMEOUT,
                 slow_poll_interval: float = DEFAULT_GPU_SLOW_POLL_INTERVAL,
                 uuids: list[str] | None = None, uuids_file: str | None = None,
                 xid_events: bool = True, unknown_error_threshold: int = DEFAULT_GPU_UNKNOWN_ERROR_THRESHOLD,
                 backoff: tuple[float, float] = (1.0, 60.0), stale_after: float | None = None,
                 xid_wait_ms: int = 500,
                 clock: Callable[[], float] = time.monotonic, gpu_optional: bool = False):
        self.loader = loader
        self.gpu_optional = gpu_optional
        self.poll_interval = poll_interval
        self.cycle_timeout = cycle_timeout
        self.slow_poll_interval = slow_poll_interval
        self.selection = UuidSelection(uuids, uuids_file)
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

        self._session: Session | None = None      # NVML since the latest successful nvmlInit
        self._gpus: list[Device] = []             # every enumerated device, unfiltered
        self._slow: dict[str, tuple[dict, dict]] = {}  # uuid -> (ecc, remapped rows), kept across inits
        self._snapshot: tuple[DeviceSnapshot, ...] = ()
        self._snapshot_at: float | None = None
        self._enumerated = False
        self._overrun = False
        self._next_slow = 0.0
        self._backoff_now = backoff[0]
        self._cycle_unknown = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._xid: XidWatcher | None = None

    @property
    def uuids(self) -> list[str]:
        """``--gpu.uuids`` (see :class:`~.devices.UuidSelection`)."""
        return self.selection.uuids

    @uuids.setter
    def uuids(self, value: list[str]) -> None:
        self.selection.uuids = list(value)

    @property
    def uuids_file(self) -> str | None:
        """``--gpu.uuids-file``; may be changed while polling (re-read on the next cycle)."""
        return self.selection.uuids_file

    @uuids_file.setter
    def uuids_file(self, value: str | None) -> None:
        self.selection.uuids_file = value

    # ------------------------------------------------------------------ threads

    def start(self) -> None:
        """Start the poller thread (daemon); the first cycle runs at once."""
        self._thread = threading.Thread(target=self._run, name="gpu-poller", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the threads and shut NVML down if no call is hung (waits at most ``timeout`` s)."""
        self._stop.set()
        if self._xid is not None:
            self._xid.signal_stop()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._xid is not None:
            self._xid.join(timeout)
        busy = (self._thread is not None and self._thread.is_alive()) or (
            self._xid is not None and self._xid.is_alive())
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
        except Reinit:
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
                raise Reinit(kind) from exc
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
            elif kind in ABSENT_KINDS:
                log.warning("NVML init failed (%s); retrying with backoff (no GPU here? --gpu.enabled false "
                            "turns the GPU collector off)", kind)
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
            self._session = Session(nv, self._call, slow=self._slow)  # nothing learnt about support yet
            self._next_slow = 0.0
        self._backoff_now = self.backoff[0]
        log.info("NVML initialised (driver %s, CUDA %s)", driver or "?", cuda or "?")

    def _lose_init(self) -> None:
        """NVML lost its initialisation: stop the XID thread, shut down, init again with backoff."""
        log.warning("NVML lost its initialisation; re-initialising with backoff")
        if self._xid is not None:
            self._xid.stop(2.0)
        try:
            self.nv.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
        with self.lock:
            self.initialized = False
            self._enumerated = False
            self._gpus = []
            self._snapshot = ()

    def _poll(self) -> None:
        session = self._session
        now = self.clock()
        slow_due = now >= self._next_slow
        if slow_due or not self._enumerated:
            try:
                gpus = enumerate_devices(session)
            except Reinit:
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
            if self.xid_events and (self._xid is None or not self._xid.is_alive()):
                self._xid = XidWatcher(session, self._gpus, self._xid_wanted, self._record_xid, self._count,
                                       self._stop, self.xid_wait_ms)
                self._xid.start()
        selection = self.selection.current()
        snaps = [read_device(session, dev, slow_due) for dev in self._gpus
                 if self.selection.selected(dev, selection)]
        if slow_due:
            self._next_slow = now + self.slow_poll_interval
        with self.lock:
            self._snapshot = tuple(snaps)
            self._snapshot_at = self.clock()
            self._overrun = False

    # ------------------------------------------------------------------ XID events (xid.py)

    def _xid_wanted(self, gpu_uuid: str) -> bool:
        return self.selection.xid_wanted(gpu_uuid, self._gpus)

    def _record_xid(self, key: tuple[str, str, str]) -> None:
        with self.lock:
            self.xids[key] = self.xids.get(key, 0) + 1


def make_poller(settings, gpu_optional: bool = False) -> GpuPoller:
    """Build the poller from :class:`exporter.settings.GpuSettings` (real NVML via nvidia-ml-py).

    ``gpu_optional``: see :class:`GpuPoller` (True for the demo)."""
    from .nvml import load_pynvml  # the one module that imports pynvml, loaded only when NVML is polled

    path = settings.nvml_library_path
    return GpuPoller(lambda: load_pynvml(path), poll_interval=settings.poll_interval,
                     cycle_timeout=settings.cycle_timeout, slow_poll_interval=settings.slow_poll_interval,
                     uuids=parse_uuid_list(settings.uuids or ""), uuids_file=settings.uuids_file,
                     xid_events=settings.xid_events, unknown_error_threshold=settings.unknown_error_threshold,
                     gpu_optional=gpu_optional)
