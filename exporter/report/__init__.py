"""``sglang-exporter report``: the performance-validation checklist answered from recorded logs.

The method (``docs/method.md``) ends in a decision: which batch-size ceiling, which scenario, is the
throughput real. The data flow, one module each:

``read`` (lines -> parser + scheduler state + per-line samples) -> ``basis`` (the facts every section
shares) -> one module per checklist section, each declaring its figures' domains (``batch``,
``retractions``, ``throughput``, ``kv``, ``queue``, ``ranks`` (the DP ranks side by side),
``classes`` (priority classes), ``scenario``, ``startup``; ``header`` for what was read) -> ``analyse`` (the document) -> ``schema`` (its keys and domains) -> ``text`` / ``html`` /
``plots`` (via ``rows``) and ``baseline`` (two documents compared); ``cli`` runs it. The names taken
from the rest of the exporter are imported in ``upstream`` only. No module imports this package's
``__init__``, so there is no import circle.
"""

from __future__ import annotations

from .analyse import analyse
from .baseline import BASELINE_SCHEMA, compare
from .cli import main
from .kv import model_kv_bytes_per_token
from .plots import make_plots
from .files import MAX_LINE_BYTES, read_logs
from .read import Recorder
from .schema import SCHEMA, jsonable, violations
from .stats import distribution, percentile

__all__ = ["BASELINE_SCHEMA", "MAX_LINE_BYTES", "SCHEMA", "Recorder", "analyse", "compare", "distribution",
           "jsonable", "main", "make_plots", "model_kv_bytes_per_token", "percentile", "read_logs",
           "violations"]
