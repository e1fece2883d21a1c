"""Sources of SGLang's signals, one package per source, each the same shape.

``read -> parse into typed events -> hand them to the scheduler state through one small interface ->
keep its own statistics, read by its collector``. Each package names its inputs (log line, message
field, SGLang version) in its docstrings and documents its metrics in ``docs/``.

* :mod:`.log`: SGLang's scheduler log (always on).
* :mod:`.fpm`: SGLang's per-forward-pass stream over ZeroMQ (``--fpm.endpoints``).
"""
