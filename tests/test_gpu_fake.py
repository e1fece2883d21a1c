"""The fake NVML stays faithful to nvidia-ml-py: same signatures, real errors, strict about the rest."""

from __future__ import annotations

import inspect

import pynvml
import pytest
from gpu_fake import MODELED, FakeGpu, FakeNvml


@pytest.mark.parametrize("name", MODELED)
def test_fake_functions_have_the_real_signatures(name):
    real = inspect.signature(getattr(pynvml, name))
    fake = inspect.signature(getattr(FakeNvml([]), name))
    assert list(real.parameters) == list(fake.parameters), name


def test_fake_raises_the_real_error_classes_and_refuses_unmodeled_calls():
    nv = FakeNvml([FakeGpu("GPU-aaaaaaaa-0000")])
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nv.nvmlDeviceGetCount()
    nv.nvmlInit()
    assert nv.NVML_CLOCK_SM is pynvml.NVML_CLOCK_SM and nv.NVMLError_GpuIsLost is pynvml.NVMLError_GpuIsLost
    with pytest.raises(AssertionError):
        nv.nvmlDeviceGetFanSpeed(nv.nvmlDeviceGetHandleByIndex(0))
    assert nv.unmodeled == ["nvmlDeviceGetFanSpeed"]
    assert isinstance(nv.nvmlDeviceGetMemoryInfo(nv.nvmlDeviceGetHandleByIndex(0), version=pynvml.nvmlMemory_v2),
                      pynvml.c_nvmlMemory_v2_t)
