"""--gpu.* settings: defaults, flags, environment, and bad values that name the setting (exit 2)."""

from __future__ import annotations

import re

import pytest

from exporter.cli import main
from exporter.settings import SettingsError, load_settings
from exporter.sources.gpu.devices import parse_uuid_list


def test_defaults_and_flags(monkeypatch):
    s = load_settings(["--log.path", "x"]).gpu
    assert (s.enabled, s.poll_interval, s.cycle_timeout, s.uuids, s.unknown_error_threshold) == (True, 10.0, 5.0, None, 3)
    s = load_settings(["--log.path", "x", "--gpu.enabled=false", "--gpu.poll-interval", "2",
                       "--gpu.cycle-timeout", "1", "--gpu.uuids", "GPU-aaaaaaaa-1,MIG-bbbbbbbb-2"]).gpu
    assert (s.enabled, s.poll_interval, s.cycle_timeout) == (False, 2.0, 1.0)
    monkeypatch.setenv("SGLANG_EXPORTER_GPU__NVML_LIBRARY_PATH", "/host/lib/libnvidia-ml.so.1")
    assert load_settings(["--log.path", "x"]).gpu.nvml_library_path == "/host/lib/libnvidia-ml.so.1"


@pytest.mark.parametrize("args, named", [
    (["--gpu.uuids", "0,1"], "gpu.uuids (--gpu.uuids, SGLANG_EXPORTER_GPU__UUIDS)"),
    (["--gpu.cycle-timeout", "20"], "gpu.cycle_timeout (--gpu.cycle-timeout"),
    (["--gpu.poll-interval", "0"], "gpu.poll_interval (--gpu.poll-interval"),
    (["--gpu.unknown-error-threshold", "-1"], "gpu.unknown_error_threshold"),
])
def test_bad_values_name_the_setting(args, named, capsys):
    with pytest.raises(SettingsError, match=re.escape("setting " + named)):
        load_settings(["--log.path", "x", *args])
    assert main(["--log.path", "x", *args]) == 2
    assert named in capsys.readouterr().err


def test_uuid_list_parsing():
    text = "# from the entrypoint\nGPU-aaaaaaaa-1, GPU-bbbbbbbb-2\n\nMIG-cccccccc-3  # a MIG device\nGPU-aaaaaaaa-1\n"
    assert parse_uuid_list(text) == ["GPU-aaaaaaaa-1", "GPU-bbbbbbbb-2", "MIG-cccccccc-3"]
    with pytest.raises(ValueError, match="'3'"):
        parse_uuid_list("GPU-aaaaaaaa-1,3")
