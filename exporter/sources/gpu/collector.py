"""``sglang_gpu_*`` families from the poller's latest snapshot (no NVML call at scrape time), built
from the metric table (:mod:`exporter.metrics.gpu`).

Per-device series carry ``gpu`` (NVML index; a MIG device's GPU index) and ``uuid`` (``GPU-...``
or ``MIG-...``); MIG devices add ``gpu_instance_id`` and ``compute_instance_id`` (so these series
are added with explicit label dictionaries). A reading the device does not support, or that failed
in the latest cycle, has no series.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from ...metrics import DEVICE_LABELS, MetricDef
from ...metrics.families import Compiled, describe, fill
from .poller import GpuPoller
from .session import ABSENT_KINDS


def _per_device(m: MetricDef) -> bool:
    return isinstance(m.read, str) and m.read.startswith("device.")


class GpuCollector(Collector):
    """Yields every ``sglang_gpu_*`` family from :meth:`GpuPoller.status` (a copy, no NVML call).

    Args:
        poller: The running poller; None when NVML polling is off for this process, which yields
            only ``sglang_gpu_up 0``. A poller whose GPU is optional (the demo) and whose NVML is
            absent yields nothing.
    """

    def __init__(self, poller: GpuPoller | None):
        self.poller = poller
        self._rows = Compiled("gpu")
        self._poller_rows = Compiled("gpu", lambda m: not _per_device(m))
        # Device rows read "device.<part>" (a mapping: one series per key, the key filling the labels
        # after the device's) or "device.<part>.<key>" (one value).
        self._device_rows = [(m.name, parts[1], parts[2] if len(parts) > 2 else None, m.labels[len(DEVICE_LABELS):])
                             for m, steps, _ in Compiled("gpu", _per_device).rows for _, parts, _ in steps]

    def describe(self) -> Iterator[Metric]:
        return describe("gpu")

    def collect(self) -> Iterator[Metric]:
        fams = self._rows.families()
        up = fams["sglang_gpu_up"]
        if self.poller is None:
            up.add_metric([], 0)
            return iter([up])
        st = self.poller.status()
        if self.poller.gpu_optional and st.init_error in ABSENT_KINDS:
            # The demo on a machine without a GPU: nothing to report, and no sglang_gpu_up 0 for
            # SGLangGPUNVMLDown to page on (a sidecar that expects a GPU keeps the 0).
            return iter([])
        fill(fams, self._poller_rows, {
            "up": st.up,
            "init_error": {st.init_error: 1} if st.init_error else {},
            "errors": st.errors,
            "snapshot_age": st.snapshot_age,
            "xids": st.xids,
        })
        for snap in st.devices:
            d = snap.device
            parts = {
                "info": {(d.name, st.driver_version, st.cuda_version, d.mig_mode): 1},
                "values": snap.values,
                "clock_events": snap.clock_events,
                "ecc": snap.ecc,
                "remapped_rows": snap.remapped_rows,
            }
            base = d.labels()  # gpu, uuid (+ MIG labels), shared by the device's series
            for name, part, key, names in self._device_rows:
                src, fam = parts[part], fams[name]
                if key is not None:
                    value = src.get(key)
                    if value is not None:
                        fam.add_sample(name, base, value)
                    continue
                if len(names) == 1:
                    label = names[0]
                    for k, value in sorted(src.items()):
                        fam.add_sample(name, {**base, label: str(k)}, value)
                else:
                    for k, value in sorted(src.items()):
                        fam.add_sample(name, {**base, **dict(zip(names, map(str, k)))}, value)
        return iter(fams.values())
