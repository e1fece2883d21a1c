"""GPU readings from NVML (``sglang_gpu_*``): a polling thread and a collector that serves its snapshot.

* :mod:`exporter.sources.gpu.nvml` is the only module that imports ``pynvml`` (``nvidia-ml-py``).
* :class:`~exporter.sources.gpu.poller.GpuPoller` polls NVML in the background.
* :class:`~exporter.sources.gpu.collector.GpuCollector` turns its latest snapshot into metric families.
"""

from __future__ import annotations

from .collector import GpuCollector
from .poller import GpuPoller, GpuStatus, error_kind

__all__ = ["GpuCollector", "GpuPoller", "GpuStatus", "error_kind", "make_poller"]


def make_poller(settings, gpu_optional: bool = False) -> GpuPoller:
    """Build the poller from :class:`exporter.settings.GpuSettings` (real NVML via nvidia-ml-py).

    ``gpu_optional``: see :class:`GpuPoller` (True for the demo)."""
    from ...settings import parse_uuid_list
    from .nvml import load_pynvml

    path = settings.nvml_library_path
    return GpuPoller(lambda: load_pynvml(path), poll_interval=settings.poll_interval,
                     cycle_timeout=settings.cycle_timeout, slow_poll_interval=settings.slow_poll_interval,
                     uuids=parse_uuid_list(settings.uuids or ""), uuids_file=settings.uuids_file,
                     xid_events=settings.xid_events, unknown_error_threshold=settings.unknown_error_threshold,
                     gpu_optional=gpu_optional)
