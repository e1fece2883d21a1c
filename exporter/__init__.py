"""sglang-exporter: Prometheus metrics from SGLang scheduler logs (and NVML).

Data flow, one module per step::

    log file -> tailer -> parser -> state (scheduler state) -> collector -> web (/metrics)

``exporter.events`` defines the typed events the parser emits; ``exporter.pipeline`` ties parser and
state together; ``exporter.cli`` wires everything from ``exporter.settings``.
"""

__version__ = "0.1.0"

