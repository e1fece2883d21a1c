"""sglang-exporter: Prometheus metrics from SGLang and SGLang Omni scheduler logs (and NVML).

Layout, one folder per source, data flowing down::

    sources/log/   log files -> lines -> parser -> typed events (events.py) -> stage attribution -> ingest
    sources/gpu/   NVML -> poller thread -> GpuStatus
    sources/fpm/   SGLang's per-forward-pass stream (ZeroMQ) -> per-dp_rank statistics
    sources/omni/  SGLang Omni's /health and /model_info -> poller thread -> OmniStatus
    scheduler/     SchedulerStore: apply(events, wall) from the sources, snapshot() for its collector;
                   a scheduler is (stage, dp_rank)
    metrics/       the metric table every collector builds and describes its families from
    selfmetrics.py, cli.py, web.py: guarded collectors -> registry -> /metrics

``exporter.cli`` wires everything from ``exporter.settings``; ``exporter.report`` reads recorded logs
through the same parser and state.
"""

__version__ = "0.1.0"
