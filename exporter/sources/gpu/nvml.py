"""The one module that imports ``pynvml`` (from NVIDIA's ``nvidia-ml-py`` distribution).

Everything else in :mod:`exporter.sources.gpu` receives the module object from :func:`load_pynvml` and calls
it by attribute, so that tests can hand in a strict fake with the same names instead (see
``tests/gpu_fake.py``). Importing this module does not touch the NVML library: ``libnvidia-ml.so.1``
is opened by ``nvmlInit`` (pynvml's own loader) or by :func:`load_pynvml` when a path is given.
"""

from __future__ import annotations

import ctypes
import threading
from types import ModuleType

import pynvml

_load_lock = threading.Lock()


def load_pynvml(library_path: str | None = None) -> ModuleType:
    """Return the ``pynvml`` module, with ``libnvidia-ml`` preloaded from ``library_path`` if given.

    Without a path, pynvml opens ``libnvidia-ml.so.1`` through the dynamic loader at ``nvmlInit``.
    With a path, the library is opened here and handed to pynvml (its ``nvmlLib``), replacing any
    library loaded before, and pynvml's function-pointer cache is cleared.

    Args:
        library_path: File of the NVML library (``--gpu.nvml-library-path``), or None.

    Raises:
        pynvml.NVMLError_LibraryNotFound: ``library_path`` cannot be opened (missing file, wrong
            architecture); the same error pynvml raises when the default library is not found.
    """
    if library_path:
        with _load_lock:
            try:
                lib = ctypes.CDLL(library_path)
            except OSError:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND) from None
            with pynvml.libLoadLock:
                pynvml.nvmlLib = lib
                pynvml._nvmlGetFunctionPointer_cache.clear()
    return pynvml


def unload_pynvml() -> None:
    """Forget the library handed to pynvml (tests switch between fake libraries in one process)."""
    with _load_lock, pynvml.libLoadLock:
        pynvml.nvmlLib = None
        pynvml._nvmlGetFunctionPointer_cache.clear()
