"""--fpm.* settings: flag, environment, TOML, repeated flags, and bad endpoints that name the setting."""

from __future__ import annotations

import re

import pytest

from exporter.cli import main
from exporter.settings import SettingsError, load_settings, parse_zmq_endpoint

NAMED = "fpm.endpoints (--fpm.endpoints, SGLANG_EXPORTER_FPM__ENDPOINTS)"


def test_default_off_and_the_three_ways(tmp_path, monkeypatch):
    s = load_settings(["--log.path", "x"]).fpm
    assert (s.endpoints, s.endpoint_list, s.timeout) == (None, [], 5.0)
    s = load_settings(["--log.path", "x", "--fpm.endpoints", "ipc:///run/fpm/fpm.0, tcp://127.0.0.1:20381",
                       "--fpm.timeout", "2"]).fpm
    assert (s.endpoint_list, s.timeout) == (["ipc:///run/fpm/fpm.0", "tcp://127.0.0.1:20381"], 2.0)
    # Repeating the flag is the same as a comma-separated list.
    s = load_settings(["--log.path", "x", "--fpm.endpoints", "ipc:///a.0", "--fpm.endpoints=ipc:///a.1"]).fpm
    assert s.endpoint_list == ["ipc:///a.0", "ipc:///a.1"]
    monkeypatch.setenv("SGLANG_EXPORTER_FPM__ENDPOINTS", "tcp://localhost:20380")
    assert load_settings(["--log.path", "x"]).fpm.endpoint_list == ["tcp://localhost:20380"]
    monkeypatch.delenv("SGLANG_EXPORTER_FPM__ENDPOINTS")
    toml = tmp_path / "exporter.toml"
    toml.write_text('[fpm]\nendpoints = ["ipc:///run/fpm/fpm.0", "ipc:///run/fpm/fpm.1"]\ntimeout = 3\n')
    s = load_settings(["--log.path", "x", "--config.file", str(toml)]).fpm
    assert (s.endpoint_list, s.timeout) == (["ipc:///run/fpm/fpm.0", "ipc:///run/fpm/fpm.1"], 3.0)


@pytest.mark.parametrize("endpoints, why", [
    ("tcp://*:20380", "HOST:PORT|host name"),
    ("tcp://0.0.0.0", "HOST:PORT"),
    ("tcp://127.0.0.1:0", "needs a host and a port"),
    ("tcp://:20380", "needs a host and a port"),
    ("tcp://127.0.0.1:70000", "port 0..65535"),
    ("tcp://[::1:20380", "brackets"),
    ("http://127.0.0.1:1", "look like ipc"),
    ("/run/fpm/fpm.0", "look like ipc"),
    ("ipc://", "needs a socket path"),
    ("ipc:///a.0,ipc:///a.0", "given twice"),
    ("tcp://127.0.0.1:20380,tcp://localhost:20380", "same endpoint"),  # one socket, two spellings
    ("ipc:///x/fpm.0,ipc:///x/./fpm.0", "same endpoint"),
    ("ipc:///x/fpm.0,ipc:///x/y/../fpm.0", "same endpoint"),
    ("ipc:///a.0,", "empty endpoint"),
])
def test_bad_endpoints_name_the_setting(endpoints, why, capsys):
    with pytest.raises(SettingsError, match=re.escape("setting " + NAMED)) as info:
        load_settings(["--log.path", "x", "--fpm.endpoints", endpoints])
    assert re.search(why, str(info.value)), str(info.value)
    assert main(["--log.path", "x", "--fpm.endpoints", endpoints]) == 2
    assert NAMED in capsys.readouterr().err


def test_bad_timeout_names_the_setting():
    with pytest.raises(SettingsError, match=re.escape("setting fpm.timeout (--fpm.timeout")):
        load_settings(["--log.path", "x", "--fpm.timeout", "0"])


def test_endpoint_forms():
    assert parse_zmq_endpoint("ipc:///run/sglang-fpm/fpm.0") == ("ipc", "/run/sglang-fpm/fpm.0")
    assert parse_zmq_endpoint("ipc://@sglang-fpm.0") == ("ipc", "@sglang-fpm.0")  # Linux abstract socket
    assert parse_zmq_endpoint("tcp://[::1]:20380") == ("tcp", "[::1]:20380")
    assert parse_zmq_endpoint("tcp://sglang.default.svc:20380") == ("tcp", "sglang.default.svc:20380")
