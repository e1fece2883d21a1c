"""The real-SGLang test bed: a real SGLang server on the CPU, driven by SGLang's own benchmark client.

``python3 -m testbed build`` builds the SGLang stacks once into a cache folder (:mod:`.stack`);
``python3 -m testbed run SCENARIO OUT`` runs one scenario (:mod:`.scenarios`) and keeps its log,
``/metrics`` scrapes, per-pass stream record and the client's result file. ``tests/test_real_sglang.py``
runs every scenario with the sidecar following the log. Only the standard library is used here, so
any Python 3.11 runs it; the servers run in the stack's own venvs. See ``docs/testbed.md``.
"""
