"""``sglang-exporter traffic``: the method's traffic model, built from a production server's own record.

Data flow, one module each: ``requestlog`` (SGLang's ``--log-requests`` lines -> one
:class:`~exporter.traffic.requestlog.Request` per finished request) or ``histogram`` (SGLang's
``/metrics`` length histograms) -> ``model`` (periods, windows, burstiness, length distributions) ->
``trace`` (a trace SGLang's benchmark client replays) -> ``text``; ``cli`` runs it.
"""

from __future__ import annotations

from .cli import main
from .model import build
from ..sources.log.requestlog import Request, RequestLog

__all__ = ["Request", "RequestLog", "build", "main"]
