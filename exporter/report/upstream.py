"""The names the report takes from the rest of the exporter, imported in this one module only.

The report reads recorded logs through the live exporter's own parser and scheduler state, so every
counter follows the same rules as the metrics. When those modules move, this file is the one to fix.
"""

from __future__ import annotations

from ..events import (  # noqa: F401 - re-exported for the report's modules
    KINDS,
    Capacity,
    DecodeBatch,
    PrefillBatch,
    ReqTimeStats,
    RetractAbort,
    Retraction,
    ServerArgs,
)
from ..parser import Malformed, parse_line  # noqa: F401
from ..pipeline import KIND_OF  # noqa: F401
from ..state import SchedulerStates  # noqa: F401
