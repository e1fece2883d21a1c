"""XID errors: a thread waiting on an NVML event set (``nvmlEventTypeXidCriticalError``).

The wait (``nvmlEventSetWait_v2``) cannot be interrupted, so it is bounded by ``wait_ms`` and
:meth:`XidWatcher.stop` waits at most that long. ``Timeout`` is the normal idle answer and is not
counted; other failures are counted by the poller's ``count``, and a lost initialisation ends the
thread (the poller starts a new one after it initialises NVML again).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from .devices import Device
from .session import REINIT_KINDS, Session, error_kind

log = logging.getLogger(__name__)


class XidWatcher:
    """Counts XID events of the reported GPUs in a thread named ``gpu-xid``.

    Args:
        session: The NVML session (its ``call`` counts the set-up calls).
        gpus: The devices enumerated when the thread starts (MIG devices are skipped: events are
            registered per GPU).
        wanted: ``wanted(gpu_uuid)``: whether an XID of that GPU is reported (UUID selection).
        record: ``record((gpu_index, uuid, xid))``: count one event.
        count: ``count(call, exc)``: count a failed call during the wait.
        stopping: The poller's own stop event (the thread ends with the poller).
        wait_ms: Timeout of one ``nvmlEventSetWait_v2``.
    """

    def __init__(self, session: Session, gpus: list[Device], wanted: Callable[[str], bool],
                 record: Callable[[tuple[str, str, str]], None], count: Callable[[str, BaseException], str],
                 stopping: threading.Event, wait_ms: int = 500):
        self.session = session
        self.gpus = list(gpus)
        self.wanted = wanted
        self.record = record
        self.count = count
        self.stopping = stopping
        self.wait_ms = wait_ms
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpu-xid", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Ask the thread to end, and wait for it (not from the thread itself)."""
        self._stop.set()
        if self._thread is not threading.current_thread() and self._thread.ident is not None:
            self._thread.join(timeout)

    def signal_stop(self) -> None:
        """Ask the thread to end without waiting."""
        self._stop.set()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float) -> None:
        if self._thread.ident is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        nv, call = self.session.nv, self.session.call
        try:
            event_set = call("nvmlEventSetCreate", nv.nvmlEventSetCreate)
        except Exception:  # noqa: BLE001 - counted; no XID counting without an event set
            return
        by_uuid = {d.uuid: d for d in self.gpus if not d.is_mig}
        registered = 0
        for dev in by_uuid.values():
            try:
                call("nvmlDeviceRegisterEvents", nv.nvmlDeviceRegisterEvents, dev.handle,
                     nv.nvmlEventTypeXidCriticalError, event_set)
                registered += 1
            except Exception:  # noqa: BLE001 - counted (NotSupported on some SKUs and vGPUs)
                pass
        try:
            while registered and not self._stop.is_set() and not self.stopping.is_set():
                try:
                    data = nv.nvmlEventSetWait_v2(event_set, self.wait_ms)
                except nv.NVMLError as exc:
                    kind = error_kind(exc)
                    if kind == "Timeout":
                        continue
                    self.count("nvmlEventSetWait_v2", exc)
                    if kind in REINIT_KINDS:
                        return
                    self._stop.wait(1.0)
                    continue
                if not data.eventType & nv.nvmlEventTypeXidCriticalError:
                    continue
                try:
                    uuid = str(nv.nvmlDeviceGetUUID(data.device))
                except nv.NVMLError as exc:
                    self.count("nvmlDeviceGetUUID", exc)
                    uuid = ""
                dev = by_uuid.get(uuid)
                if not self.wanted(uuid):
                    continue
                key = (str(dev.index) if dev else "", uuid, str(int(data.eventData)))
                self.record(key)
                log.warning("XID %s on GPU %s", key[2], uuid or "?")
        finally:
            try:
                nv.nvmlEventSetFree(event_set)
            except Exception:  # noqa: BLE001
                pass
