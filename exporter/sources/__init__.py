"""Sources of SGLang's signals, one package per source, each the same shape.

A source reads its input, parses it into typed values, hands what it learnt about a scheduler to
the scheduler state through its one interface, and keeps statistics about itself that its own
collector reads::

    read        bytes, messages, answers, calls       sources/log: file.py glob.py follower.py lines.py
    parse       -> typed events (exporter.events)     sources/log/parser.py
    hand over   store.apply(events, wall)             exporter.scheduler.store.SchedulerStore
    own stats   what the source did, under its lock   sources/log/stats.py
    collector   families from the metric table         sources/log/collector.py (exporter.metrics)

A source offers ``start()``/``stop()`` (its own thread) and ``collector()``; a source that is missing
or failing degrades only its own collector. Scheduler facts become events of :mod:`exporter.events`,
applied under the store's lock in one call per batch; a collector reads a snapshot copied under that
lock and builds its families outside it. Each package names its inputs (log line, message field,
SGLang version) in its docstrings and documents its metrics in ``docs/``.

* :mod:`.log`: SGLang's scheduler log (always on): file lines -> events, ``sglang_exporter_log_*``.
* :mod:`.fpm`: SGLang's per-forward-pass stream over ZeroMQ (``--fpm.endpoints``): exact per-pass
  figures kept in its own per-``dp_rank`` statistics, ``sglang_scheduler_forward_pass*`` and
  ``sglang_exporter_fpm_*``.
* :mod:`.gpu`: NVML: device readings kept as the source's own snapshot (no scheduler facts),
  ``sglang_gpu_*``.
* :mod:`.omni`: SGLang Omni's API (``--omni.url``): the live per-stage snapshot of ``/model_info`` and
  the pipeline's ``/health``, kept as the source's own snapshot, ``sglang_omni_*``. (Omni's log, one
  scheduler per stage, is read by :mod:`.log`.)
"""
