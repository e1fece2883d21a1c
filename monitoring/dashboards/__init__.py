"""The Grafana dashboards, built with Grafana's foundation SDK: one module per dashboard
(``oncall``, ``scheduler``, ``gpu``, ``capacity``) on the shared conventions of ``panels``."""

from __future__ import annotations

from ..config import Config
from . import capacity, gpu, oncall, scheduler
from .panels import to_json

BUILDERS = {"oncall": oncall.build, "scheduler": scheduler.build, "gpu": gpu.build, "capacity": capacity.build}


#: Rows open when a dashboard loads; the others are collapsed, one click away. The scheduler
#: dashboard opens on its at-a-glance and latency rows (the on-call dashboard has no rows).
OPEN_ROWS = {"scheduler": 2}


def build(cfg: Config) -> dict[str, str]:
    """``{file name: JSON text}`` of every dashboard (``sglang-<name>.json``)."""
    return {f"sglang-{name}.json": to_json(fn(cfg), OPEN_ROWS.get(name)) for name, fn in BUILDERS.items()}
