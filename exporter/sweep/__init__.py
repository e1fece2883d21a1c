"""``sglang-exporter sweep``: the method's sweep run end to end (``server`` -> ``run`` -> ``cli``, then
:mod:`exporter.compare`)."""

from __future__ import annotations

from .cli import main

__all__ = ["main"]
