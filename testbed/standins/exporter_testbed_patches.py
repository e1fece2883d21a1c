"""Start-up patches of the real-server test bed's SGLang venv (loaded by ``exporter_testbed.pth``).

This venv exists only for the test bed. Two things that the CPU build of torch and the package
index cannot give:

* (processes started with ``SGLANG_USE_CPU_ENGINE=1``: the servers) ``torch.cpu.Event`` takes no
  timing arguments, and SGLang's forward-pass timer (``sglang/srt/utils/device_timer.py``, used by
  ``--enable-forward-pass-metrics``) creates ``Event(enable_timing=True)`` (``torch.cuda.Event`` up
  to 0.5.18, the device module's since) and calls ``elapsed_time``: both are replaced by a
  wall-clock event (a CPU build's ``torch.cuda.Event`` is a placeholder that raises).
* (every process of the venv, e.g. the benchmark client) torchvision from the index is built for CUDA torch; its import registers fake kernels for ops
  that a CPU torch does not have (``torchvision::nms``). SGLang needs ``torchvision.transforms``
  only, so those registrations are skipped.
"""

import os
import sys
import time
import types

sys.modules.setdefault("torchvision._meta_registrations",
                       types.ModuleType("torchvision._meta_registrations"))

if os.environ.get("SGLANG_USE_CPU_ENGINE") == "1":
    import torch

    class _WallClockEvent:
        """``torch.cpu.Event`` with timing: ``record`` notes ``time.perf_counter``."""

        def __init__(self, enable_timing=False, blocking=False, interprocess=False):
            self._t = None

        def record(self, stream=None):
            self._t = time.perf_counter()

        def synchronize(self):
            pass

        def wait(self, stream=None):
            pass

        def query(self):
            return True

        def elapsed_time(self, end_event):
            return (end_event._t - self._t) * 1000.0

    torch.cpu.Event = _WallClockEvent
    if not torch.cuda.is_available():
        torch.cuda.Event = _WallClockEvent
