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
from ..sources.log.ingest import Ingest
from ..sources.log.lines import LineSplitter
from ..sources.log.parser import Malformed
from ..sources.log.prefix import line_time
from ..sources.log.requestlog import RequestLog
from ..scheduler.state import SchedulerStates
from ..scheduler.store import SchedulerStore

__all__ = ["KINDS", "KIND_OF", "Capacity", "CudaGraphCapture", "DecodeBatch", "Ingest", "KvAllocation",
           "LineSplitter", "Malformed", "PrefillBatch", "ReqTimeStats", "RequestLog", "RetractAbort", "Retraction", "SchedulerStates",
           "SchedulerStore", "ServerArgs", "StageAttribution", "line_time"]
