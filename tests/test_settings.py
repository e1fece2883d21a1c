"""Settings: flags, SGLANG_EXPORTER_* variables, the TOML file, --help, and exit code 2 naming the setting."""

from __future__ import annotations

import subprocess

import pytest
from exporter_support import command

from exporter.cli import main
from exporter.settings import load_settings, parse_listen_address


@pytest.mark.parametrize("args,names", [
    (["--log.path", "x", "--web.listen-address", "nope"], ["web.listen_address", "--web.listen-address",
                                                           "SGLANG_EXPORTER_WEB__LISTEN_ADDRESS"]),
    (["--log.path", "x", "--web.listen-address", ":70000"], ["--web.listen-address"]),
    (["--log.path", "x", "--web.listen-address", "::1:80"], ["--web.listen-address", "brackets"]),
    (["--log.path", "x", "--web.telemetry-path", "metrics"], ["--web.telemetry-path"]),
    (["--log.path", "x", "--web.telemetry-path", "/healthz"], ["--web.telemetry-path"]),
    (["--log.path", "x", "--sglang.decode-log-interval", "0"], ["--sglang.decode-log-interval"]),
    (["--log.path", "x", "--sglang.decode-log-interval", "forty"], ["--sglang.decode-log-interval"]),
    (["--log.path", "x", "--log.poll-interval", "-1"], ["--log.poll-interval"]),
    (["--log.path", "x", "--log.watch-mode", "fanotify"], ["--log.watch-mode"]),
    (["--log.path", "x", "--log.max-line-bytes", "10"], ["--log.max-line-bytes"]),
    (["--log.path", "x", "--sglang.idle-after", "0"], ["--sglang.idle-after"]),
    (["--log.path", "x", "--sglang.stage-decode-log-intervals", "thinker"], ["--sglang.stage-decode-log-intervals",
                                                                            "STAGE=STEPS"]),
    (["--log.path", "x", "--sglang.stage-decode-log-intervals", "thinker=0"], ["--sglang.stage-decode-log-intervals",
                                                                              "thinker: steps"]),
    (["--log.path", "x", "--sglang.stage-decode-log-intervals", "thinker=1,thinker=2"], ["given twice"]),
    (["--log.path", "x", "--sglang.stage-decode-log-intervals", "bad stage=1"], ["STAGE=STEPS"]),
    ([], ["log.path", "--log.path"]),
])
def test_bad_values_exit_2_naming_the_setting(args, names, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("sglang-exporter: error: ")
    for name in names:
        assert name in err


def test_bad_environment_variable_names_the_variable(monkeypatch, capsys):
    monkeypatch.setenv("SGLANG_EXPORTER_SGLANG__DECODE_LOG_INTERVAL", "-3")
    assert main(["--log.path", "x", "--one-shot"]) == 2
    assert "SGLANG_EXPORTER_SGLANG__DECODE_LOG_INTERVAL" in capsys.readouterr().err


def test_real_command_exit_codes_and_help():
    r = subprocess.run([*command(), "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0
    for flag in ("--log.path", "--log.from-beginning", "--web.listen-address", "--web.telemetry-path",
                 "--one-shot", "--sglang.decode-log-interval", "--demo", "--config.file"):
        assert flag in r.stdout
    assert "SGLANG_EXPORTER_" in r.stdout
    r = subprocess.run([*command(), "--log.path", "x", "--web.listen-address", "bad"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--web.listen-address" in r.stderr
    r = subprocess.run([*command(), "--no-such-flag"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--no-such-flag" in r.stderr


def test_precedence_flag_over_env_over_file(tmp_path, monkeypatch):
    cfg = tmp_path / "exporter.toml"
    cfg.write_text('[log]\npath = "/from/file.log"\nfrom_beginning = true\n'
                   '[web]\nlisten_address = "127.0.0.1:1111"\ntelemetry_path = "/file"\n')
    s = load_settings(["--config.file", str(cfg)])
    assert (s.log.path, s.log.from_beginning, s.web.listen_address) == ("/from/file.log", True, "127.0.0.1:1111")
    monkeypatch.setenv("SGLANG_EXPORTER_LOG__PATH", "/from/env.log")
    monkeypatch.setenv("SGLANG_EXPORTER_WEB__LISTEN_ADDRESS", "127.0.0.1:2222")
    s = load_settings(["--config.file", str(cfg)])
    assert (s.log.path, s.web.listen_address, s.web.telemetry_path) == ("/from/env.log", "127.0.0.1:2222", "/file")
    s = load_settings(["--config.file", str(cfg), "--log.path", "/from/flag.log"])
    assert s.log.path == "/from/flag.log"
    monkeypatch.setenv("SGLANG_EXPORTER_CONFIG__FILE", str(cfg))
    assert load_settings([]).web.telemetry_path == "/file"


def test_command_line_values_reach_the_model_as_written(capsys):
    """pydantic-settings parses the command line (exporter/flags.py, command_line_source); the words
    its defaults would read otherwise stay ours: "None" and "null" are paths, a repeated --log.path is
    one comma list, a group is set key by key (no --log JSON), and the toolkit's --web.config.file
    is --web.config-file."""
    assert load_settings(["--log.path", "None"]).log.paths == ["None"]
    assert load_settings(["--log.path", "null"]).log.path == "null"
    s = load_settings(["--log.path", "a", "--one-shot", "--log.path=b", "--log.path", "c,d"])
    assert (s.log.paths, s.one_shot, s.given("log", "path")) == (["a", "b", "c", "d"], True, True)
    assert load_settings(["--log.path", "x"]).given("log", "path") and not load_settings(["--demo"]).given("log", "path")
    assert main(["--log", '{"path": "x"}']) == 2
    assert capsys.readouterr().err == "sglang-exporter: error: unknown flag --log (see sglang-exporter --help)\n"
    assert main(["--log.path", "x", "--web.config.file"]) == 2
    assert "--web.config-file/--web.config.file needs a value" in capsys.readouterr().err
    help_text = subprocess.run([*command(), "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "JSON" not in help_text and "--log.path PATH" in help_text


def test_bad_config_file_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[log\npath=")
    assert main(["--config.file", str(bad)]) == 2
    assert "config.file" in capsys.readouterr().err
    assert main(["--config.file", str(tmp_path / "missing.toml")]) == 2
    assert "missing.toml" in capsys.readouterr().err
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("[log]\npaht = '/x'\n")
    assert main(["--config.file", str(unknown)]) == 2
    assert "paht" in capsys.readouterr().err


def test_defaults():
    s = load_settings(["--log.path", "x"])
    assert s.web.listen_address == ":18400" and s.web.telemetry_path == "/metrics"
    assert s.log.from_beginning is False and s.sglang.decode_log_interval == 40 and s.one_shot is False


@pytest.mark.parametrize("text,expected", [(":18400", ("", 18400)), ("127.0.0.1:0", ("127.0.0.1", 0)),
                                           ("[::1]:9", ("::1", 9)), ("localhost:80", ("localhost", 80))])
def test_listen_address_forms(text, expected):
    assert parse_listen_address(text) == expected


@pytest.mark.parametrize("args,name", [
    (["--log.path", "x", "--log.max-line-bytes", "9223372036854775807"], "--log.max-line-bytes"),
    (["--log.path", "x", "--sglang.idle-after", "inf"], "--sglang.idle-after"),
    (["--log.path", "x", "--web.listen-address", "999.1.1.1:18412"], "--web.listen-address"),
    (["--log.path", "x", "--web.listen-address", "127.0.0.1:" + "9" * 5000], "--web.listen-address"),
    (["--log.path", "x", "--web.listen-address", "bad_host!:80"], "--web.listen-address"),
    (["--log.path", "x", "--web.listen-address", "[nope]:80"], "--web.listen-address"),
    (["--demo", "--log.path", "x"], "--demo"),
])
def test_more_bad_values_exit_2(args, name, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert name in err and "Traceback" not in err


def test_config_file_that_is_not_a_small_utf8_regular_file_exits_2(tmp_path, capsys):
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b"\xff\xfe[log]\n")
    for cfg in (latin, tmp_path, "/dev/zero"):
        assert main(["--log.path", "x", "--one-shot", "--config.file", str(cfg)]) == 2
        err = capsys.readouterr().err
        assert "config.file" in err and "Traceback" not in err


def test_one_shot_glob_matching_nothing_exits_2(tmp_path, capsys):
    assert main(["--log.path", str(tmp_path / "nomatch*.log"), "--one-shot"]) == 2
    assert "matches no file" in capsys.readouterr().err


def test_chunked_prefill_size_setting_discounts_continuing_chunks(capsys):
    """Corpus 020 has no start-up line; its batches all fill a 2048-token chunk, and #queue-req falls
    by one per batch: one new request per batch after the first."""
    from conftest import CORPUS, value

    log = str(CORPUS / "020-chunked-prefill-cache-hit-rate-percent-2024.log")
    assert main(["--log.path", log, "--one-shot"]) == 0
    assert value(capsys.readouterr().out, "sglang_scheduler_admitted_requests_total", stage="", dp_rank="0") == 14
    assert main(["--log.path", log, "--one-shot", "--sglang.chunked-prefill-size", "2048"]) == 0
    assert value(capsys.readouterr().out, "sglang_scheduler_admitted_requests_total", stage="", dp_rank="0") == 8


def test_stage_decode_log_intervals_apply_per_stage(capsys, caplog):
    """Corpus 064 (a real SGLang Omni 0.1.9 pipeline, both stages at decode_log_interval 1): a stage
    named in --sglang.stage-decode-log-intervals gets its own interval, labelled setting; the other
    keeps the assumed default, labelled default and warned about once, naming the setting."""
    from conftest import CORPUS, value

    log = str(CORPUS / "064-real-omni-0.1.9-shim-two-stages.log")
    assert main(["--log.path", log, "--one-shot", "--sglang.stage-decode-log-intervals", "thinker=1"]) == 0
    out = capsys.readouterr().out
    assert value(out, "sglang_scheduler_batches_total", stage="thinker", dp_rank="0", phase="decode") == 51
    assert value(out, "sglang_scheduler_decode_log_interval", stage="thinker", dp_rank="0", source="setting") == 1
    assert value(out, "sglang_scheduler_batches_total", stage="talker_ar", dp_rank="0", phase="decode") == 31 * 40
    assert value(out, "sglang_scheduler_decode_log_interval", stage="talker_ar", dp_rank="0", source="default") == 40
    warned = [r.getMessage() for r in caplog.records if "decode_log_interval" in r.getMessage()]
    assert len(warned) == 1 and "(stage talker_ar)" in warned[0]
    assert "--sglang.stage-decode-log-intervals talker_ar=STEPS" in warned[0]


def test_another_sglang_setting_leaves_the_decode_interval_assumed(capsys, monkeypatch, tmp_path):
    """Settings are merged with their defaults, so a group's fields all look set once one is given;
    before, --sglang.idle-after alone labelled the assumed 40 source="setting" (a silent default).
    The interval is the user's only when a flag, a variable or the file gives it."""
    from conftest import CORPUS, value

    log = str(CORPUS / "064-real-omni-0.1.9-shim-two-stages.log")

    def source(*args) -> tuple[str, float]:
        assert main(["--log.path", log, "--one-shot", *args]) == 0
        out = capsys.readouterr().out
        for src in ("default", "setting"):
            v = value(out, "sglang_scheduler_decode_log_interval", stage="thinker", dp_rank="0", source=src)
            if v is not None:
                return src, v
        raise AssertionError("no interval series")

    assert source("--sglang.idle-after", "100") == ("default", 40)
    assert source("--sglang.decode-log-interval", "1") == ("setting", 1)
    cfg = tmp_path / "exporter.toml"
    cfg.write_text("[sglang]\ndecode_log_interval = 3\n")
    assert source("--config.file", str(cfg)) == ("setting", 3)
    monkeypatch.setenv("SGLANG_EXPORTER_SGLANG__DECODE_LOG_INTERVAL", "2")
    assert source("--sglang.idle-after", "100") == ("setting", 2)
