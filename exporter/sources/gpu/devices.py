"""Which devices NVML reports: enumeration (whole GPUs and MIG devices) and the UUID selection."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from ...files import read_small_file
from ...limits import UUIDS_FILE_MAX_BYTES
from .session import Session, error_kind

log = logging.getLogger(__name__)


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


def enumerate_devices(session: Session) -> list[Device]:
    """Every device NVML reports, MIG devices after their GPU.

    Sources: ``nvmlDeviceGetCount_v2``, ``nvmlDeviceGetHandleByIndex_v2``, ``nvmlDeviceGetUUID``,
    ``nvmlDeviceGetName``, ``nvmlDeviceGetMigMode``; a GPU that cannot even be named (lost, no
    permission) is left out.

    Raises:
        What ``nvmlDeviceGetCount_v2`` raises (nothing is known about the GPUs then).
    """
    nv, call = session.nv, session.call
    devices: list[Device] = []
    count = call("nvmlDeviceGetCount_v2", nv.nvmlDeviceGetCount)
    for i in range(count):
        try:
            h = call("nvmlDeviceGetHandleByIndex_v2", nv.nvmlDeviceGetHandleByIndex, i)
            uuid = str(call("nvmlDeviceGetUUID", nv.nvmlDeviceGetUUID, h))
            name = str(call("nvmlDeviceGetName", nv.nvmlDeviceGetName, h))
        except nv.NVMLError:
            continue  # a GPU that cannot even be named (lost, no permission) is not reported
        mig_mode = "unsupported"
        if ("", "mig") not in session.unsupported:
            try:
                current, _pending = call("nvmlDeviceGetMigMode", nv.nvmlDeviceGetMigMode, h)
                mig_mode = "enabled" if current == nv.NVML_DEVICE_MIG_ENABLE else "disabled"
            except nv.NVMLError as exc:
                if error_kind(exc) == "FunctionNotFound":
                    session.unsupported.add(("", "mig"))
        devices.append(Device(i, uuid, name, h, mig_mode))
        if mig_mode == "enabled":
            devices.extend(_mig_devices(session, i, uuid, name, h))
    return devices


def _mig_devices(session: Session, index: int, parent: str, parent_name: str, h) -> list[Device]:
    """The MIG devices of GPU ``index`` (``nvmlDeviceGetMaxMigDeviceCount``,
    ``nvmlDeviceGetMigDeviceHandleByIndex``; an empty slot answers NotFound and is skipped)."""
    nv, call = session.nv, session.call
    out: list[Device] = []
    try:
        n = call("nvmlDeviceGetMaxMigDeviceCount", nv.nvmlDeviceGetMaxMigDeviceCount, h)
    except nv.NVMLError:
        return out
    for j in range(n):
        try:
            mh = call("nvmlDeviceGetMigDeviceHandleByIndex", nv.nvmlDeviceGetMigDeviceHandleByIndex, h, j)
        except nv.NVMLError:
            continue  # an empty MIG slot (NotFound), or a slot that cannot be read
        try:
            uuid = str(call("nvmlDeviceGetUUID", nv.nvmlDeviceGetUUID, mh))
            gi = int(call("nvmlDeviceGetGpuInstanceId", nv.nvmlDeviceGetGpuInstanceId, mh))
            ci = int(call("nvmlDeviceGetComputeInstanceId", nv.nvmlDeviceGetComputeInstanceId, mh))
        except nv.NVMLError:
            continue
        try:
            name = str(call("nvmlDeviceGetName", nv.nvmlDeviceGetName, mh))
        except nv.NVMLError:
            name = parent_name
        out.append(Device(index, uuid, name, mh, "enabled", parent, gi, ci))
    return out


def parse_uuid_list(text: str) -> list[str]:
    """Split a GPU UUID list (commas, whitespace, newlines; ``#`` starts a comment) into UUIDs.

    Returns:
        The UUIDs in order, duplicates removed.

    Raises:
        ValueError: an item does not start with ``GPU-`` or ``MIG-`` (the form NVML and nvidia-smi print).
    """
    out: list[str] = []
    for line in text.splitlines():
        for item in line.split("#", 1)[0].replace(",", " ").split():
            if not item.startswith(("GPU-", "MIG-")) or len(item) < 8:
                raise ValueError(f"GPU UUIDs look like GPU-xxxxxxxx-... or MIG-...; got {item!r}")
            if item not in out:
                out.append(item)
    return out


class UuidSelection:
    """Which devices to report: ``--gpu.uuids`` plus the UUIDs of ``--gpu.uuids-file``.

    Args:
        uuids: UUIDs to report (``GPU-``/``MIG-``); a GPU UUID includes its MIG devices.
        uuids_file: File of UUIDs, re-read when its mtime or size changes; while it is missing only
            ``uuids`` are reported. Without both, every device is reported.
    """

    def __init__(self, uuids: list[str] | None = None, uuids_file: str | None = None):
        self.uuids = list(uuids or [])
        self.uuids_file = uuids_file
        self._file_key: tuple[float, int] | None = None
        self._file_uuids: list[str] = []

    @property
    def everything(self) -> bool:
        """True when no selection is configured (every device is reported)."""
        return not self.uuids and not self.uuids_file

    def current(self) -> set[str] | None:
        """Selected UUIDs, or None for all. Re-reads ``uuids_file`` when it changed."""
        if self.everything:
            return None
        if self.uuids_file:
            try:
                st = os.stat(self.uuids_file)
                key = (st.st_mtime, st.st_size)
            except OSError:
                key = None
                self._file_uuids = []
            if key is not None and key != self._file_key:
                self._file_uuids = self._read_file()
            self._file_key = key
        return set(self.uuids) | set(self._file_uuids)

    def _read_file(self) -> list[str]:
        try:
            # A regular file of bounded size only: a FIFO must not block, /dev/zero not grow.
            text = read_small_file(self.uuids_file, UUIDS_FILE_MAX_BYTES).decode("utf-8", "replace")
        except (OSError, ValueError) as exc:
            log.warning("gpu.uuids-file %s: %s", self.uuids_file, exc)
            return []
        uuids: list[str] = []
        for line in text.splitlines():
            try:
                uuids += parse_uuid_list(line)
            except ValueError as exc:
                log.warning("gpu.uuids-file %s: %s", self.uuids_file, exc)
        log.info("gpu.uuids-file %s: reporting %s", self.uuids_file, ", ".join(uuids) or "no GPU")
        return uuids

    @staticmethod
    def selected(dev: Device, selection: set[str] | None) -> bool:
        """A device is reported when selected by its own UUID or by its GPU's."""
        return selection is None or dev.uuid in selection or (dev.parent_uuid in selection)

    def xid_wanted(self, gpu_uuid: str, devices: list[Device]) -> bool:
        """An XID of this GPU counts when the GPU or one of its MIG devices is selected (the file is
        not re-read here: the poller thread does that each cycle)."""
        if self.everything:
            return True
        selection = set(self.uuids) | set(self._file_uuids)
        return any(self.selected(d, selection) for d in devices
                   if d.uuid == gpu_uuid or d.parent_uuid == gpu_uuid)
