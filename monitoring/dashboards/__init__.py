"""The Grafana dashboards, built with Grafana's foundation SDK: one module per dashboard
(``oncall``, ``scheduler``, ``gpu``, ``capacity``) on the shared conventions of ``panels``."""

from __future__ import annotations

from ..config import Config
from . import capacity, gpu, oncall, scheduler
from .panels import to_json

BUILDERS = {"oncall": oncall.build, "scheduler": scheduler.build, "gpu": gpu.build, "capacity": capacity.build}


def build(cfg: Config) -> dict[str, str]:
    """``{file name: JSON text}`` of every dashboard (``sglang-<name>.json``)."""
    return {f"sglang-{name}.json": to_json(fn(cfg)) for name, fn in BUILDERS.items()}
