"""NVML errors by kind, and the per-initialisation context every NVML call goes through.

A :class:`Session` lives from one successful ``nvmlInit`` to the next loss of initialisation. It
carries the pynvml module (or a fake), the poller's ``call`` (which names each C function for error
counting and deadline attribution), and what was learnt in that time: readings a device does not
support and C functions the driver lacks, so that neither is asked again until NVML starts anew.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Error kinds after which NVML must be initialised again (the whole library is gone).
REINIT_KINDS = frozenset({"Uninitialized", "DriverNotLoaded", "LibRmVersionMismatch", "LibraryNotFound"})
#: Init failures that mean "no NVIDIA driver on this machine" rather than a broken one.
ABSENT_KINDS = frozenset({"LibraryNotFound", "DriverNotLoaded"})
#: Error kinds that end the current device's cycle (the device, or access to it, is gone).
DEVICE_KINDS = frozenset({"GpuIsLost", "Unknown", "ResetRequired", "GpuNotFound", "Timeout"})
#: Error kinds meaning "this reading will never work here": cached, not asked again.
UNSUPPORTED_KINDS = frozenset({"NotSupported", "FunctionNotFound"})


def error_kind(exc: BaseException) -> str:
    """Short name of an NVML error: ``NVMLError_GpuIsLost`` -> ``"GpuIsLost"``.

    An ``NVMLError`` with a code pynvml has no class for gives ``"Code<n>"``; any other exception
    gives its class name.
    """
    name = type(exc).__name__
    if name.startswith("NVMLError_"):
        return name[len("NVMLError_"):]
    if name == "NVMLError":
        return f"Code{getattr(exc, 'value', '')}"
    return name


class DeviceFailed(Exception):
    """A device-level error (:data:`DEVICE_KINDS`) ended this device's cycle."""


class Reinit(Exception):
    """NVML lost its initialisation (:data:`REINIT_KINDS`); init again with backoff."""


#: ``call(symbol, fn, *args, **kwargs)``: calls ``fn``, naming it ``symbol`` (the C function) for
#: error counting and deadline attribution; raises what ``fn`` raises, or :class:`Reinit`.
Call = Callable[..., Any]


@dataclass
class Session:
    """NVML between one successful ``nvmlInit`` and the next loss of initialisation.

    Attributes:
        nv: The pynvml module (or a fake with the same names).
        call: The poller's counting call (:data:`Call`).
        unsupported: ``(uuid, reading)`` pairs that answered NotSupported/FunctionNotFound;
            ``("", "mig")`` when the driver has no MIG query at all.
        missing: C functions the driver lacks (an older call is used instead).
        slow: ``uuid`` -> ``(ecc, remapped rows)`` of the latest slow read (the poller keeps one
            dictionary across initialisations).
    """

    nv: Any
    call: Call
    unsupported: set[tuple[str, str]] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)
    slow: dict[str, tuple[dict, dict]] = field(default_factory=dict)

    def fallback(self, handle: Any, calls: list[tuple[str, Callable, tuple]]) -> tuple[str, Any]:
        """Try ``(symbol, fn, args)`` in order on ``handle``; a ``FunctionNotFound`` (old driver) or
        ``ArgumentVersionMismatch`` moves on to the next and is remembered for every device.

        Returns:
            ``(symbol that answered, its result)``.

        Raises:
            The last error when no call answered; ``FunctionNotFound`` when all are known missing.
        """
        last: BaseException | None = None
        for symbol, fn, args in calls:
            if symbol in self.missing:
                continue
            try:
                return symbol, self.call(symbol, fn, handle, *args)
            except self.nv.NVMLError as exc:
                if error_kind(exc) not in ("FunctionNotFound", "ArgumentVersionMismatch"):
                    raise
                self.missing.add(symbol)
                last = exc
        if last is not None:
            raise last
        raise self.nv.NVMLError(self.nv.NVML_ERROR_FUNCTION_NOT_FOUND)
