"""Files of settings: --config.file and --gpu.uuids-file are read only when they are small regular
files (a FIFO must not hang start-up, /dev/zero must not be read for ever), and the TOML file's
values must have the right TOML type (``poll_interval = true`` is not 1.0).

Every read that could hang runs with a deadline: in a subprocess with a timeout, or in a thread
that is joined with one.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from pathlib import Path

import pytest
from gpu_fake import FakeGpu, FakeNvml
from exporter_support import command

from conftest import CORPUS, value
from exporter.sources.gpu import GpuPoller
from exporter.limits import UUIDS_FILE_MAX_BYTES
from exporter.files import read_small_file
from exporter.settings import load_settings

A = "GPU-aaaaaaaa-0000-0000-0000-000000000001"
TIMEOUT = 30


@pytest.fixture
def fifo(tmp_path) -> Path:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*command(), *args], capture_output=True, text=True, timeout=TIMEOUT)


def test_read_small_file_reads_regular_files_and_refuses_the_rest(tmp_path, fifo):
    small = tmp_path / "small"
    small.write_bytes(b"x" * 100)
    assert read_small_file(small, 100) == b"x" * 100
    with pytest.raises(ValueError, match="larger than"):
        read_small_file(small, 99)
    with pytest.raises(ValueError, match="FIFO"):
        read_small_file(fifo, 100)  # opened non-blocking: returns at once, reads nothing
    with pytest.raises(ValueError, match="device"):
        read_small_file("/dev/zero", 100)
    with pytest.raises(ValueError, match="directory"):
        read_small_file(tmp_path, 100)
    with pytest.raises(FileNotFoundError):
        read_small_file(tmp_path / "missing", 100)


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_config_file_that_is_a_fifo_or_a_device_exits_2_at_once(kind, fifo):
    path = str(fifo) if kind == "fifo" else kind
    r = _run("--config.file", path, "--log.path", "x")  # a hang fails here with TimeoutExpired
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "--config.file" in r.stderr and "not a regular file" in r.stderr, r.stderr


def test_config_file_larger_than_the_bound_exits_2(tmp_path):
    big = tmp_path / "big.toml"
    big.write_text("# padding\n" * 200_000)  # 2 MB of valid TOML
    r = _run("--config.file", str(big), "--log.path", "x")
    assert r.returncode == 2 and "larger than" in r.stderr and r.stderr.count("\n") == 1


@pytest.mark.parametrize("value", ["[" * 500 + "]" * 500, "{a = " * 500 + "1" + "}" * 500])
def test_config_file_nested_500_deep_exits_2_with_one_line(tmp_path, value):
    deep = tmp_path / "deep.toml"
    deep.write_text(f"x = {value}\n")  # tomllib recurses per level: a RecursionError traceback before
    r = _run("--config.file", str(deep), "--log.path", "x")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr[-300:]
    assert "--config.file" in r.stderr and "too deep" in r.stderr


@pytest.mark.parametrize("toml,key,expected,got", [
    ("[log]\npoll_interval = true\n", "[log] poll_interval", "a number", "true (a boolean)"),
    ('[gpu]\nenabled = "no"\n', "[gpu] enabled", "a boolean", "'no' (a string)"),
    ("[log]\nmax_line_bytes = 4096.0\n", "[log] max_line_bytes", "an integer", "4096.0 (a float)"),
    ("[web]\nlisten_address = 18400\n", "[web] listen_address", "a string", "18400 (an integer)"),
    ('one_shot = "true"\n', "one_shot", "a boolean", "'true' (a string)"),
])
def test_toml_values_of_the_wrong_type_exit_2_naming_setting_file_and_key(tmp_path, toml, key, expected, got):
    cfg = tmp_path / "exporter.toml"
    cfg.write_text(toml)
    r = _run("--config.file", str(cfg), "--log.path", "x")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("sglang-exporter: error: setting "), r.stderr
    dotted = key.replace("[", "").replace("] ", ".")
    flag = "--" + dotted.replace("_", "-")
    for part in (flag, str(cfg), f"key {key} ", f"must be {expected}", f"got {got}"):
        assert part in r.stderr, (part, r.stderr)


def test_toml_values_of_the_right_type_are_taken(tmp_path):
    cfg = tmp_path / "exporter.toml"
    cfg.write_text('[log]\npath = ["/a.log", "/b.log"]\npoll_interval = 2\nfrom_beginning = true\n'
                   "max_line_bytes = 4096\n[gpu]\nenabled = false\n")
    s = load_settings(["--config.file", str(cfg)])
    assert s.log.paths == ["/a.log", "/b.log"] and s.log.poll_interval == 2.0 and s.log.from_beginning is True
    assert s.log.max_line_bytes == 4096 and s.gpu.enabled is False
    # Flags are text, converted as before; range checks still apply to file values.
    assert load_settings(["--config.file", str(cfg), "--gpu.enabled", "true"]).gpu.enabled is True
    cfg.write_text("[log]\npoll_interval = -1\n")
    r = _run("--config.file", str(cfg), "--log.path", "x")
    assert r.returncode == 2 and "--log.poll-interval" in r.stderr


def test_one_shot_reads_a_good_config_file(tmp_path):
    cfg = tmp_path / "exporter.toml"
    log = CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log"
    cfg.write_text(f"one_shot = true\n[log]\npath = {str(log)!r}\n")
    r = _run("--config.file", str(cfg))
    assert r.returncode == 0, r.stderr
    assert value(r.stdout, "sglang_scheduler_retractions_total", stage="", dp_rank="0") == 9


def _cycle_with_deadline(poller: GpuPoller) -> None:
    t = threading.Thread(target=poller.run_cycle, daemon=True)
    t.start()
    t.join(TIMEOUT)
    assert not t.is_alive(), "the poll cycle hangs on the UUID file"


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "too large"])
def test_gpu_uuids_file_that_is_not_a_small_regular_file_selects_no_gpu(kind, fifo, tmp_path, caplog):
    if kind == "fifo":
        path = str(fifo)
    elif kind == "too large":
        path = str(tmp_path / "uuids")
        Path(path).write_text((A + "\n") * (UUIDS_FILE_MAX_BYTES // len(A) + 1))
    else:
        path = kind
    nv = FakeNvml([FakeGpu(A)])
    poller = GpuPoller(lambda: nv, xid_events=False, uuids_file=path)
    with caplog.at_level(logging.WARNING, logger="exporter.sources.gpu.devices"):
        _cycle_with_deadline(poller)
    assert poller.status().up
    assert nv.count("nvmlDeviceGetMemoryInfo", A) == 0 and nv.count("nvmlDeviceGetMemoryInfo_v2", A) == 0
    assert any("gpu.uuids-file" in r.message and path in r.message for r in caplog.records), caplog.text
    # Replaced by a regular file (the postStart hook's rename), the UUIDs are taken.
    good = tmp_path / "good-uuids"
    good.write_text(A + "\n")
    poller.uuids_file = str(good)
    _cycle_with_deadline(poller)
    assert nv.count("nvmlDeviceGetMemoryInfo", A) + nv.count("nvmlDeviceGetMemoryInfo_v2", A) >= 1
