"""Start-up patches of the real-server test bed's SGLang venv (loaded by ``exporter_testbed.pth``).

This venv exists only for the test bed. Two things that the CPU build of torch and the package
index cannot give:

* (processes started with ``SGLANG_USE_CPU_ENGINE=1``: the servers) ``torch.cpu.Event`` takes no
  timing arguments, and SGLang's forward-pass timer (``sglang/srt/utils/device_timer.py``, used by
  ``--enable-forward-pass-metrics``) creates ``Event(enable_timing=True)`` (``torch.cuda.Event`` up
  to 0.5.18, the device module's since) and calls ``elapsed_time``: both are replaced by a
  wall-clock event (a CPU build's ``torch.cuda.Event`` is a placeholder that raises).
* (servers, SGLang Omni's stages) after loading a model SGLang calls its
  ``precompile_kernels_after_loading`` (``maybe_precompile_model_kernels_after_loading`` in
  ``sglang/srt/model_executor/model_runner_components/load_model_utils.py``, 0.5.22); Omni's
  Qwen3-Omni thinker and talker warm up their MoE kernels there, which on a CPU fails
  (``get_device_name()`` is None, then ``.replace``). On the CPU that warm-up is skipped; the MoE
  itself runs on SGLang's native CPU path.
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

_PRECOMPILE = "sglang.srt.model_executor.model_runner_components.load_model_utils"


class _SkipCpuPrecompile:
    """Import hook: once ``load_model_utils`` is executed, its precompile step returns at once for
    ``device == "cpu"`` (before ``model_runner`` imports the name)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _PRECOMPILE:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            original = getattr(module, "maybe_precompile_model_kernels_after_loading", None)
            if original is not None:
                def maybe_precompile(model, device, *args, **kwargs):
                    if device == "cpu":
                        return None
                    return original(model, device, *args, **kwargs)

                module.maybe_precompile_model_kernels_after_loading = maybe_precompile

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("SGLANG_USE_CPU_ENGINE") == "1":
    import torch

    sys.meta_path.insert(0, _SkipCpuPrecompile())

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
