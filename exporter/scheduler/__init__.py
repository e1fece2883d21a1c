"""The scheduler state: what every source tells about each SGLang scheduler, and its collector.

* :mod:`.state` applies typed events (:mod:`exporter.events`) to per-scheduler counters, histograms
  and latest-line gauges (no Prometheus here, no lock);
* :mod:`.store` puts that state behind one lock and one interface for every source:
  ``apply(events, wall)`` to write, ``snapshot()`` to read;
* :mod:`.collector` turns a snapshot into the ``sglang_scheduler_*`` families at scrape time.
"""
