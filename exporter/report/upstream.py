"""The names the report takes from the rest of the exporter, imported in this one module only.

The report reads recorded logs through the live exporter's own parser and scheduler state, so every
counter follows the same rules as the metrics. When those modules move, this file is the one to fix.
"""

from __future__ import annotations

from ..events import (
    KIND_OF,
    KINDS,
    Capacity,
    CudaGraphCapture,
    DecodeBatch,
    KvAllocation,
    PrefillBatch,
    ReqTimeStats,
    RetractAbort,
    Retraction,
    ServerArgs,
)
from ..sources.log.attribution import StageAttribution
from ..sources.log.parser import Malformed, parse_line
from ..sources.log.templates import parse_template
from ..scheduler.state import SchedulerStates

__all__ = ["KINDS", "KIND_OF", "Capacity", "CudaGraphCapture", "DecodeBatch", "KvAllocation", "Malformed",
           "PrefillBatch", "ReqTimeStats", "RetractAbort", "Retraction", "SchedulerStates", "ServerArgs",
           "StageAttribution", "parse_line", "parse_template"]
