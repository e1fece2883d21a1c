"""The NVML source (``sglang_gpu_*``): a polling thread and a collector that serves its snapshot.

Data flow, one module per step::

    nvml.py       the only module that imports pynvml (nvidia-ml-py); loaded only when polling
    session.py    error kinds, and the per-initialisation context every call goes through
    devices.py    enumeration (GPUs, MIG devices) and the UUID selection
    readings.py   one device's readings in one cycle (DeviceSnapshot)
    xid.py        the XID event thread
    poller.py     GpuPoller: init with backoff, cycles with a deadline, GpuStatus for the collector
    collector.py  GpuStatus -> sglang_gpu_* families (no NVML call at scrape time)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__all__ = ["GpuCollector", "GpuPoller", "GpuStatus", "error_kind", "make_poller"]
_HOME = {"GpuCollector": "collector", "GpuPoller": "poller", "GpuStatus": "poller", "make_poller": "poller",
         "error_kind": "session"}

if TYPE_CHECKING:
    from .collector import GpuCollector
    from .poller import GpuPoller, GpuStatus, make_poller
    from .session import error_kind


def __getattr__(name: str):
    """The package's names, imported on first use: a sidecar with ``--gpu.enabled false`` (or the
    settings, which need only :mod:`.devices`) never loads the poller, the collector or NVML."""
    if name in _HOME:
        return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
