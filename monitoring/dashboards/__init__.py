"""The Grafana dashboards, built with Grafana's foundation SDK: one module per dashboard
(``scheduler``, ``gpu``, ``capacity``) on the shared conventions of ``panels``."""

from __future__ import annotations

from ..config import Config
from . import capacity, gpu, scheduler
from .panels import to_json

BUILDERS = {"scheduler": scheduler.build, "gpu": gpu.build, "capacity": capacity.build}


def build(cfg: Config) -> dict[str, str]:
    """``{file name: JSON text}`` of every dashboard (``sglang-<name>.json``)."""
    return {f"sglang-{name}.json": to_json(fn(cfg)) for name, fn in BUILDERS.items()}
