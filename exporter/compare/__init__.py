"""``sglang-exporter compare``: the method's experiment, runs of several configurations side by side.

Data flow, one module each: ``runs`` (a RUN argument -> the report's document of its log via
:func:`exporter.report.analyse`, and its client's result file) -> ``figures`` (the table's columns,
read from those, each exact / estimated / client) -> ``sweep`` (the swept setting, groups of repeats,
settings that differ beyond it) -> ``decide`` (the knee, the online and offline choices) -> ``document``
(the JSON contract) -> ``render`` (text, HTML) and ``plots``; ``cli`` runs it.
"""

from __future__ import annotations

from .cli import main
from .document import SCHEMA, build
from .runs import Run, RunError, load

__all__ = ["SCHEMA", "Run", "RunError", "build", "load", "main"]
