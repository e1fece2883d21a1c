"""The command as a new user meets it, through the real console script: --help, --version, one-line
argument errors with exit code 2, boolean spellings, misspelt environment variables, unknown
config-file keys, and a demo without a GPU that warns about nothing and exposes no empty family."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import CORPUS, ROOT, default_sigint, value
from prometheus_client.parser import text_string_to_metric_families
from exporter_support import DEADLINE, Exporter, command

import exporter
from exporter.flags import BOOL_WORDS
from exporter.settings import SETTINGS, load_settings
from exporter.status import ExitStatus

LOG = str(CORPUS / "007-decode-oom-retract-tp16.log")


def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The real command with ``args``; the environment holds no SGLANG_EXPORTER_* but ``env``'s."""
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("SGLANG_EXPORTER")}
    return subprocess.run([*command(), *args], capture_output=True, text=True, timeout=60,
                          env={**base, "COLUMNS": "100", **(env or {})}, cwd=cwd)


def one_error_line(r: subprocess.CompletedProcess) -> str:
    """The single stderr line of a usage error (exit 2, nothing on stdout, no usage dump)."""
    assert r.returncode == ExitStatus.USAGE, (r.returncode, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("sglang-exporter: error: ") and r.stdout == ""
    assert "usage:" not in r.stderr and "Traceback" not in r.stderr
    return lines[0]


# --- item 3: --help, --version, argument errors ------------------------------------------------

def test_help_names_report_gives_one_example_each_and_lists_every_exit_status():
    r = run("--help")
    assert r.returncode == 0 and r.stderr == ""
    text = r.stdout
    examples = text[text.index("examples:"):text.index("exit status:")]
    assert "sglang-exporter --log.path /logs/sglang.log\n" in examples          # serve a live log
    assert "sglang-exporter --one-shot --log.path server.log" in examples      # one-shot a recorded log
    assert "sglang-exporter report server.log\n" in examples                   # report on a recorded log
    assert "sglang-exporter report --help" in text
    statuses = text[text.index("exit status:"):]
    for member in ExitStatus:
        assert re.search(rf"^  {int(member)}  \S", statuses, re.M), member
    assert re.search(r"^  2  A bad setting or argument", statuses, re.M)
    assert len(re.findall(r"^  \d+  ", statuses, re.M)) == len(ExitStatus)


def test_help_placeholders_read_as_values():
    text = run("--help").stdout
    for s in SETTINGS:
        assert s.synopsis in text, s.synopsis
    for token in ("{str,None}", "{int,None}", "None}"):
        assert token not in text
    # No bare type names as placeholders (the old help had '--log.poll-interval float').
    assert not re.findall(r"--[a-z.-]+ (?:float|int|str|bool)\b", text)
    assert "--log.path PATH" in text and "--log.poll-interval SECONDS" in text
    assert "--web.listen-address HOST:PORT" in text and "--log.max-line-bytes BYTES" in text
    assert "--log.from-beginning[=BOOL], --no-log.from-beginning" in text
    assert "--gpu.enabled[=BOOL], --no-gpu.enabled" in text


def test_help_group_headings_are_whole_sentences():
    # A group docstring wrapped over two lines once gave the heading "... Not used in:".
    headings = {line.split(":", 1)[0]: line for line in run("--help").stdout.splitlines()
                if re.match(r"^--[a-z]+(\.\*|\.file): ", line)}
    assert set(headings) == {"--log.*", "--web.*", "--sglang.*", "--gpu.*", "--fpm.*", "--omni.*", "--config.file"}
    for group in ("--gpu.*", "--fpm.*", "--omni.*"):
        assert headings[group].endswith("Not used in --one-shot mode:"), headings[group]


def test_version_prints_the_version_and_exits_0():
    r = run("--version")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"sglang-exporter {exporter.__version__}\n", "")


@pytest.mark.parametrize("args", [["server.log"], ["--one-shot", "server.log"], ["server.log", "--one-shot"]])
def test_a_bare_path_gets_one_line_suggesting_the_flag_and_the_report(args):
    line = one_error_line(run(*args))
    assert "--log.path server.log" in line and "sglang-exporter report server.log" in line


@pytest.mark.parametrize("args, expected", [
    (["--log.path", LOG, "--bogus"], "unknown flag --bogus (see sglang-exporter --help)"),
    (["--log.path", LOG, "--bogus=3"], "unknown flag --bogus (see sglang-exporter --help)"),
    (["--log.path", LOG, "--log.poll_interval", "2"],
     "unknown flag --log.poll_interval; did you mean --log.poll-interval? (see sglang-exporter --help)"),
    (["-log.path", LOG], "unknown flag -log.path; did you mean --log.path?"),
    (["--log.pa", LOG], "did you mean --log.path?"),  # no abbreviations: a prefix is not the flag
    (["--log.path"], "--log.path needs a value (see sglang-exporter --help)"),
    (["--log.path", LOG, "--gpu.enabled", "maybe"],
     "--gpu.enabled: expected true or false (or yes/no, on/off, 1/0), got 'maybe'"),
    (["--log.path", LOG, "--demo=sometimes"], "--demo: expected true or false"),
])
def test_argument_errors_are_one_line_naming_the_flag_and_pointing_to_help(args, expected):
    line = one_error_line(run(*args))
    assert expected in line
    assert line.endswith("(see sglang-exporter --help)")


def test_value_errors_are_one_line_naming_flag_and_variable():
    line = one_error_line(run("--log.path", LOG, "--log.poll-interval", "0"))
    assert "--log.poll-interval" in line and "SGLANG_EXPORTER_LOG__POLL_INTERVAL" in line
    line = one_error_line(run("--one-shot", "--log.path", LOG, env={"SGLANG_EXPORTER_GPU__ENABLED": "maybe"}))
    assert "SGLANG_EXPORTER_GPU__ENABLED" in line and "must be true or false" in line


BOOLS = [s for s in SETTINGS if s.is_bool]


@pytest.mark.parametrize("flag", [s.flag for s in BOOLS])
def test_every_boolean_flag_takes_the_same_spellings(flag):
    setting = next(s for s in BOOLS if s.flag == flag)

    def parsed(*args: str) -> bool:
        s = load_settings(["--log.path", "x", *args])
        group = getattr(s, setting.group) if setting.group else s
        return getattr(group, setting.name)

    assert parsed(flag) is True
    assert parsed("--no-" + flag[2:]) is False
    for word, expected in [("true", True), ("false", False), ("yes", True), ("no", False), ("on", True),
                           ("off", False), ("1", True), ("0", False), ("FALSE", False)]:
        assert word.lower() in BOOL_WORDS
        assert parsed(flag, word) is expected, (flag, word)
        assert parsed(f"{flag}={word}") is expected, (flag, word)
    # A bare flag before another flag or at the end is true; the next flag is still read.
    assert parsed(flag, "--log.poll-interval", "2") is True


def test_boolean_flags_through_the_real_command(tmp_path):
    """What worked before keeps working, and the spellings that did not now do."""
    for args in (["--log.from-beginning", "false"],      # refused before ("unrecognized arguments: false")
                 ["--log.from-beginning"], ["--no-log.from-beginning"],
                 ["--gpu.enabled", "false"], ["--gpu.enabled=false"],  # worked before
                 ["--gpu.enabled"], ["--no-gpu.enabled"],             # refused before
                 ["--one-shot=true"]):
        r = run("--one-shot", "--log.path", LOG, *args)
        assert r.returncode == 0, (args, r.stderr)
        assert value(r.stdout, "sglang_scheduler_retractions_total", stage="", dp_rank="0") > 0
    r = run("--log.path", LOG, env={"SGLANG_EXPORTER_ONE_SHOT": "yes"})
    assert r.returncode == 0 and "sglang_scheduler_batches_total" in r.stdout


# --- item 5: environment variables and config-file keys ---------------------------------------

def test_a_missing_log_path_names_where_it_came_from(tmp_path):
    # From the config file, the error names the file: the user did not type --log.path.
    config = tmp_path / "exporter.toml"
    config.write_text('[log]\npath = "/nonexistent/sglang.log"\n')
    r = run("--config.file", str(config), "--one-shot")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.strip() == ("sglang-exporter: error: setting log.path (--log.path, SGLANG_EXPORTER_LOG__PATH, "
                                f"or path in [log] of {config}): '/nonexistent/sglang.log' does not exist")
    r = run("--one-shot", "--log.path", str(tmp_path / "*.log"))
    assert r.returncode == 2 and r.stderr.strip() == ("sglang-exporter: error: setting log.path (--log.path, "
                                                      f"SGLANG_EXPORTER_LOG__PATH): '{tmp_path}/*.log' matches no file")


def test_a_variable_that_looks_like_ours_gets_one_warning_naming_the_right_one():
    r = run("--one-shot", "--log.path", LOG, env={"SGLANG_EXPORTER_LOG_PATH": "/x.log"})
    assert r.returncode == 0
    warnings = [line for line in r.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1, r.stderr
    assert warnings[0].endswith("environment variable SGLANG_EXPORTER_LOG_PATH is not a setting and is "
                                "ignored; did you mean SGLANG_EXPORTER_LOG__PATH?")
    # The misspelling is why log.path is missing: the warning comes before the one-line error.
    r = run(env={"SGLANG_EXPORTER_LOG_PATH": LOG})
    assert r.returncode == 2
    first, second = r.stderr.splitlines()
    assert " WARNING " in first and first.endswith("did you mean SGLANG_EXPORTER_LOG__PATH?")
    assert second.startswith("sglang-exporter: error: setting log.path")
    # When the settings themselves are refused, before logging is set up, the warning is a plain line.
    r = run("--log.poll-interval", "0", env={"SGLANG_EXPORTER_LOG_PATH": LOG})
    first, second = r.stderr.splitlines()
    assert first == ("sglang-exporter: warning: environment variable SGLANG_EXPORTER_LOG_PATH is not a "
                     "setting and is ignored; did you mean SGLANG_EXPORTER_LOG__PATH?")
    assert second.startswith("sglang-exporter: error: setting log.poll_interval") and r.returncode == 2


@pytest.mark.parametrize("name, meant", [
    ("SGLANG_EXPORTER_LGO__PATH", "SGLANG_EXPORTER_LOG__PATH"),          # a misspelt group
    ("SGLANG_EXPORTER_GPU__ENABLE", "SGLANG_EXPORTER_GPU__ENABLED"),     # a misspelt name
    ("SGLANG_EXPORTER__ONE_SHOT", "SGLANG_EXPORTER_ONE_SHOT"),           # a doubled underscore
    ("sglang_exporter_web_listen_address", "SGLANG_EXPORTER_WEB__LISTEN_ADDRESS"),
])
def test_misspelt_variables_are_named_with_the_variable_meant(name, meant):
    r = run("--one-shot", "--log.path", LOG, env={name: "1"})
    assert r.returncode == 0
    assert f"environment variable {name} is not a setting and is ignored; did you mean {meant}?" in r.stderr


def test_real_variables_and_unrelated_ones_get_no_warning():
    r = run("--one-shot", env={"SGLANG_EXPORTER_LOG__PATH": LOG, "sglang_exporter_gpu__enabled": "false",
                                 "SGLANG_LOG_LEVEL": "info", "SGLANG_EXPORTER_LOG": '{"level": "info"}'})
    assert r.returncode == 0 and r.stderr == ""


@pytest.mark.parametrize("toml, expected", [
    ("[log]\npoll-interval = 2\n", "table [log] has no key 'poll-interval' (did you mean poll_interval?)"),
    ("[logs]\npath = 'x'\n", "there is no table [logs] (did you mean [log]?)"),
    ("[log]\nenabled = false\n", "table [log] has no key 'enabled' (did you mean [gpu] enabled?)"),
    ("demoo = true\n", "the top level has no key 'demoo' (did you mean demo?)"),
    ("path = 'x'\n", "the top level has no key 'path' (did you mean [log] path?)"),
    ("[metrics]\nx = 1\n", "there is no table [metrics] (the tables are log, web, sglang, gpu, fpm, omni, config)"),
])
def test_unknown_config_file_keys_name_file_table_key_and_suggest(tmp_path, toml, expected):
    (tmp_path / "exporter.toml").write_text(toml)
    line = one_error_line(run("--config.file", "exporter.toml", cwd=tmp_path))
    assert line.startswith("sglang-exporter: error: config file exporter.toml: ")
    assert expected in line


def test_every_unknown_key_of_a_file_is_named_at_once(tmp_path):
    (tmp_path / "exporter.toml").write_text("[log]\npoll-interval = 2\nwatchmode = 'poll'\n[gpus]\nx = 1\n")
    line = one_error_line(run("--config.file", "exporter.toml", cwd=tmp_path))
    assert "'poll-interval'" in line and "(did you mean watch_mode?)" in line and "[gpus]" in line


# --- item 6: the demo on a machine without a GPU ------------------------------------------------

def _families_without_samples(text: str) -> list[str]:
    """Families whose HELP/TYPE block has no sample line (parsed from the raw text, not trusted to a parser)."""
    empty, current, seen = [], None, False
    for line in text.splitlines() + ["# HELP end"]:
        if line.startswith("# HELP "):
            if current is not None and not seen:
                empty.append(current)
            current, seen = line.split()[2], False
        elif line and not line.startswith("#"):
            seen = True
    return empty


def test_demo_without_nvml_warns_about_nothing_and_exposes_no_empty_family(tmp_path, promtool):
    # Force NVML's absence, so that this holds on a machine with a GPU too (as tests/test_gpu_e2e.py does).
    missing = str(tmp_path / "missing" / "libnvidia-ml.so.1")
    exp = Exporter("--demo", "--gpu.nvml-library-path", missing, "--gpu.poll-interval", "0.5",
                   "--gpu.cycle-timeout", "0.5")
    try:
        exp.wait_for(lambda m: (value(m, "sglang_scheduler_batches_total", stage="", dp_rank="0", phase="decode") or 0) > 0
                     and any("GPU collector idle" in line for line in exp.stderr_lines),
                     "the GPU collector's missing library and the demo's first decode batches")
        status, body = exp.get("/metrics")
        assert status == 200
        assert _families_without_samples(body) == []
        assert all(f.samples for f in text_string_to_metric_families(body))
        # no GPU where none is expected: no sglang_gpu_* series, so SGLangGPUNVMLDown cannot fire (issue 24)
        assert not [k for k in exp.metrics() if k[0].startswith("sglang_gpu_")]
        r = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        assert exp.terminate() == 0
    end = time.monotonic() + DEADLINE
    while not any("shutting down" in line for line in exp.stderr_lines) and time.monotonic() < end:
        time.sleep(0.05)
    stderr = "".join(exp.stderr_lines)
    assert "shutting down" in stderr
    assert " WARNING " not in stderr and " ERROR " not in stderr, stderr
    idle = [line for line in exp.stderr_lines if "GPU collector idle" in line]
    assert len(idle) == 1 and " INFO " in idle[0] and "LibraryNotFound" in idle[0], stderr


def test_one_shot_exposes_no_empty_family():
    r = run("--one-shot", "--log.path", LOG)
    assert r.returncode == 0 and "sglang_scheduler_batches_total" in r.stdout
    assert _families_without_samples(r.stdout) == []


def _nvml_error(code_name: str):
    import pynvml

    def loader():
        raise pynvml.NVMLError(getattr(pynvml, code_name))
    return loader


@pytest.mark.parametrize("gpu_optional, code, level, hint", [
    (True, "NVML_ERROR_LIBRARY_NOT_FOUND", logging.INFO, True),     # the demo on a machine without a GPU
    (True, "NVML_ERROR_DRIVER_NOT_LOADED", logging.INFO, True),
    (True, "NVML_ERROR_NO_PERMISSION", logging.WARNING, False),     # a broken GPU is still a warning
    (False, "NVML_ERROR_LIBRARY_NOT_FOUND", logging.WARNING, True),  # serving a real log: the GPU is expected
    (False, "NVML_ERROR_DRIVER_NOT_LOADED", logging.WARNING, True),
])
def test_gpu_absence_is_info_only_where_no_gpu_is_expected(gpu_optional, code, level, hint, caplog):
    from exporter.sources.gpu.poller import GpuPoller

    poller = GpuPoller(_nvml_error(code), xid_events=False, gpu_optional=gpu_optional)
    with caplog.at_level(logging.DEBUG, logger="exporter.sources.gpu.poller"):
        poller.run_cycle()
        poller.run_cycle()  # a repeated failure is said once, then at debug
    said = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert [r.levelno for r in said] == [level], [(r.levelname, r.getMessage()) for r in said]
    # No NVML at all: the one line names the setting that turns the collector off.
    assert ("--gpu.enabled false" in said[0].getMessage()) == hint, said[0].getMessage()


# --- docs ----------------------------------------------------------------------------------------

def test_configuration_doc_has_a_row_for_every_exit_status():
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    table = text[text.index("## Exit codes"):]
    table = table[:table.index("\n## ")]
    for member in ExitStatus:
        assert re.search(rf"^\| {int(member)} \|", table, re.M), f"docs/configuration.md: no row for {member!r}"


# --- what each mode loads ------------------------------------------------------------------------

_PROBE = """
import sys
from exporter.cli import main
{call}
print(" ".join(sorted(sys.modules)))
"""


def _modules_after(call: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", _PROBE.format(call=call)], capture_output=True, text=True,
                         timeout=60, cwd=ROOT, env=dict(os.environ, SGLANG_EXPORTER_GPU__ENABLED="false"))
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split("\n")[-2].split())


def test_one_shot_loads_no_http_server_nvml_demo_or_report():
    """One-shot reads a recorded log: the HTTP server, the GPU poller, NVML and the report stay unloaded."""
    small = CORPUS / "005-no-timestamp-single-decode-line.log"
    loaded = _modules_after(f"main(['--one-shot', '--log.path', {str(small)!r}])")
    assert "exporter.sources.log.bulk" in loaded
    assert not loaded & {"waitress", "exporter.web", "exporter.sources.gpu.poller", "pynvml", "exporter.demo",
                         "exporter.report", "zmq", "multiprocessing"}, loaded
    assert "watchdog.observers" not in loaded


def test_the_sidecar_without_gpu_loads_no_nvml_bulk_path_or_report():
    """What the live sidecar imports before it serves, with --gpu.enabled false (from the environment)."""
    loaded = _modules_after("import exporter.cli as c; c._serve = lambda settings, store: 0; "
                            "main(['--log.path', '/nonexistent/sglang.log'])")
    assert not loaded & {"exporter.sources.gpu.poller", "exporter.sources.gpu.collector", "pynvml",
                         "exporter.sources.log.bulk", "exporter.sources.log.bulk_ingest", "multiprocessing",
                         "exporter.report", "exporter.demo"}, loaded


# --- Ctrl-C --------------------------------------------------------------------------------------

def test_ctrl_c_stops_a_one_shot_with_one_line_and_exit_130(tmp_path):
    """Ctrl-C (SIGINT to the foreground process group: the command and its scan workers) during a
    one-shot of a large log: one line on stderr, no traceback, nothing on stdout, exit 130."""
    import signal

    from conftest import corpus_files

    lines = b"".join(p.read_bytes() for p in corpus_files())
    path = tmp_path / "big.log"
    with open(path, "wb") as f:
        while f.tell() < (48 << 20):  # large enough for worker processes and a read of seconds
            f.write(lines)
    # the interval given: the interruption's line is the only one (an assumed interval is said too)
    proc = subprocess.Popen([*command(), "--one-shot", "--log.path", str(path), "--sglang.decode-log-interval", "40"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=default_sigint)
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:  # wait until the workers are forked
        if children.exists() and children.read_text().split():
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the one-shot ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == ExitStatus.INTERRUPTED == 130, err
    assert err.decode().splitlines() == ["sglang-exporter: error: interrupted (Ctrl-C): the output is missing or "
                                         "incomplete"], err
    assert out == b""


def test_ctrl_c_stops_a_report_with_one_line_and_exit_130(monkeypatch, capsys):
    from exporter.report import cli as report_cli

    def interrupted(*args, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(report_cli, "_load", interrupted)
    assert exporter.cli.main(["report", LOG]) == ExitStatus.INTERRUPTED
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.splitlines() == [
        "sglang-exporter report: error: interrupted (Ctrl-C): the output is missing or incomplete"]


def test_demo_listens_on_loopback_unless_told_otherwise():
    # issue 24: the README's demo serves on localhost:18400, not on every interface of the machine
    from exporter.cli import listen_address

    assert listen_address(load_settings(["--demo"])) == "127.0.0.1:18400"
    assert listen_address(load_settings(["--demo", "--web.listen-address", ":9000"])) == ":9000"
    assert listen_address(load_settings(["--log.path", "x.log"])) == ":18400"


def test_demo_in_the_image_listens_on_every_interface_of_the_container(monkeypatch):
    # the Dockerfile sets the address explicitly, so that `docker run -p ... --demo` is reachable
    from exporter.cli import listen_address

    env = re.search(r"SGLANG_EXPORTER_WEB__LISTEN_ADDRESS=(\S+)", (ROOT / "Dockerfile").read_text()).group(1)
    monkeypatch.setenv("SGLANG_EXPORTER_WEB__LISTEN_ADDRESS", env)
    assert listen_address(load_settings(["--demo"])) == env == "0.0.0.0:18400"


# --- issue 38: one command line: misspelt subcommands and flags of every subcommand ----------------

@pytest.mark.parametrize("args, meant", [(["reprot", "x.log"], "sglang-exporter report x.log"),
                                         (["Report", "a.log", "b.log"], "sglang-exporter report a.log b.log"),
                                         (["compre", "run1"], "sglang-exporter compare run1")])
def test_a_misspelt_subcommand_is_named_with_the_one_meant(args, meant):
    """Before, ``reprot x.log`` was read as two log paths: "did you mean --log.path reprot,x.log"."""
    line = one_error_line(run(*args))
    assert f"unknown command {args[0]!r}: did you mean {meant}?" in line
    assert line.endswith("(see sglang-exporter --help)") and "--log.path" not in line


def test_an_existing_file_named_like_a_subcommand_is_still_a_path(tmp_path):
    (tmp_path / "reprot").write_text("")
    line = one_error_line(run("reprot", cwd=tmp_path))
    assert "--log.path reprot" in line and "unknown command" not in line


def _subcommand_flags() -> list[tuple[str, str]]:
    import importlib

    from exporter.commands import SUBCOMMANDS
    out = []
    for name, sub in SUBCOMMANDS.items():
        parser = importlib.import_module(sub.module).build_parser()
        for flag in sorted({o for a in parser._actions for o in a.option_strings if o.startswith("--")} - {"--help"}):
            out.append((name, flag))
    return out


@pytest.mark.parametrize("name, flag", _subcommand_flags())
def test_every_flag_of_every_subcommand_is_suggested_when_misspelt(name, flag, tmp_path):
    """A letter dropped from any flag of any subcommand (``report --formt``): one line, exit 2, the
    flag meant; a prefix is no flag (as on the sidecar's command line)."""
    log = tmp_path / "x.log"
    log.write_text("")
    typo = flag[:-2] + flag[-1]
    r = run(name, typo, "1", str(log))
    assert r.returncode == ExitStatus.USAGE and r.stdout == "", r.stderr
    [line] = r.stderr.splitlines()
    assert f"unknown flag {typo}; did you mean {flag}?" in line, line
    assert line.endswith(f"(see sglang-exporter {name} --help)"), line
    if len(flag) > 6:
        assert run(name, flag[:-1], "1", str(log)).returncode == ExitStatus.USAGE


def test_report_takes_the_sidecars_names_of_the_settings_both_have(tmp_path):
    """The sidecar's --sglang.decode-log-interval and report's --decode-log-interval were one setting
    under two names; report now takes both and gives the same figures."""
    storm = CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log"
    mine = run("report", "--format", "json", "--decode-log-interval", "10", str(storm))
    sidecars = run("report", "--format", "json", "--sglang.decode-log-interval", "10", str(storm))
    assert mine.returncode == sidecars.returncode == 0
    assert mine.stdout == sidecars.stdout and '"decode_log_interval": 10' in mine.stdout
    names = {s.flag for s in SETTINGS}
    report_help = run("report", "--help").stdout
    for flag in ("--sglang.decode-log-interval", "--sglang.stage-decode-log-intervals", "--sglang.chunked-prefill-size"):
        assert flag in names and flag in report_help


# --- issue 35, items 5 and 6: a telemetry path that cannot be served; huge values and many variables ----

@pytest.mark.parametrize("path", ["/metrics?x", "/metrics#top", "/m?"])
def test_a_telemetry_path_with_a_query_or_fragment_is_refused_at_start_up(path):
    # Before: accepted, then both /metrics?x and /metrics answered 404 for the life of the process.
    line = one_error_line(run("--log.path", LOG, "--web.telemetry-path", path))
    assert "--web.telemetry-path" in line and "without a query ('?') or fragment ('#')" in line


def test_a_huge_invalid_environment_value_is_cut_in_its_one_line_error():
    huge = "x" * 100_000  # before: the whole 100 KB came back in the error
    line = one_error_line(run("--one-shot", "--log.path", LOG, env={"SGLANG_EXPORTER_LOG__POLL_INTERVAL": huge}))
    assert "SGLANG_EXPORTER_LOG__POLL_INTERVAL" in line and "(100000 characters)" in line
    assert len(line) < 400, len(line)


def test_thousands_of_unknown_variables_give_one_warning_line():
    many = {f"SGLANG_EXPORTER_X{i}": "1" for i in range(5000)}  # before: 5,000 lines, 1 MB of stderr
    r = run("--one-shot", "--log.path", LOG, env=many)
    assert r.returncode == 0
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and len(lines[0]) < 500, (len(lines), r.stderr[:300])
    assert "5000 environment variables are not settings and are ignored" in lines[0]
    assert "and 4995 more" in lines[0]
