"""The command says when it reads nothing (through the real command): a --log.path that does not
exist gets one warning and is waited for; starting at the end of a file that has content says how
many bytes were skipped; --one-shot on a file without an SGLang scheduler line warns naming the file
and the lines read, and exits 3 as `sglang-exporter report` does."""

from __future__ import annotations

import re
import subprocess

import pytest
from conftest import CORPUS, samples, value
from exporter_support import DEADLINE, Exporter, command
from tail_support import append, decode_block

from exporter.status import ExitStatus

ACCESS_LOG = CORPUS / "042-access-log-only-no-decode-lines.log"
STORM = CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log"


def _decode_parsed(m) -> float | None:
    return value(m, "sglang_exporter_log_lines_total", kind="decode", result="parsed")


@pytest.mark.parametrize("name, said", [("sglang.log", "{path} does not exist (yet); waiting for it"),
                                        ("*.log", "{path} matches no file (yet); waiting for files")])
def test_a_missing_path_or_an_empty_glob_gets_one_warning_and_is_waited_for(tmp_path, name, said):
    path = tmp_path / name
    # the interval given, so that the only warning is the one under test (the lines have no server_args)
    exp = Exporter("--log.path", str(path), "--gpu.enabled", "false", "--sglang.decode-log-interval", "40")
    try:
        for _ in range(3):
            m = exp.metrics()
            assert value(m, "sglang_exporter_log_file_present", path=str(path)) in (0, None)
            assert value(m, "sglang_exporter_log_glob_matched_files", pattern=str(path)) in (0, None)
        assert exp.get("/healthz")[0] == 200
        append(tmp_path / "sglang.log", decode_block(4))
        exp.wait_for(lambda m: _decode_parsed(m) == 4, "the file, read from its start once it exists")
    finally:
        assert exp.terminate() == 0
    warnings = [line for line in exp.stderr_lines if "WARNING" in line]
    assert len(warnings) == 1 and said.format(path=path) in warnings[0], warnings


def test_starting_at_the_end_says_how_much_was_skipped(tmp_path):
    path = tmp_path / "sglang.log"
    path.write_bytes(STORM.read_bytes())
    size = path.stat().st_size
    exp = Exporter("--log.path", str(path), "--gpu.enabled", "false")
    try:
        exp.wait_for(lambda m: value(m, "sglang_exporter_log_file_opens_total", path=str(path)) == 1, "the open")
        append(path, decode_block(2))
        exp.wait_for(lambda m: _decode_parsed(m) == 2, "only the lines written after the start")
    finally:
        assert exp.terminate() == 0
    said = [line for line in exp.stderr_lines if "skipped" in line]
    assert len(said) == 1, exp.stderr_lines
    assert f"starting at the end of {path}: the {size:,} bytes already in it are skipped " \
           "(--log.from-beginning reads them)" in said[0]
    assert re.search(r" INFO ", said[0])


def test_from_beginning_says_nothing_is_skipped(tmp_path):
    path = tmp_path / "sglang.log"
    path.write_bytes(STORM.read_bytes())
    exp = Exporter("--log.path", str(path), "--log.from-beginning", "--gpu.enabled", "false")
    try:
        exp.wait_for(lambda m: _decode_parsed(m) == 14, "the whole file")
    finally:
        assert exp.terminate() == 0
    assert not [line for line in exp.stderr_lines if "skipped" in line]


def _one_shot(*paths) -> subprocess.CompletedProcess:
    # the interval given: the warnings under test are the only ones (these logs have no server_args)
    return subprocess.run([*command(), "--one-shot", "--log.path", ",".join(map(str, paths)),
                           "--sglang.decode-log-interval", "40"], capture_output=True, text=True, timeout=DEADLINE)


@pytest.mark.parametrize("content, what", [(b"", "the file is empty"),
                                           (ACCESS_LOG.read_bytes(), "9 lines read"),
                                           (bytes(range(256)) * 40, "81 lines read")])
def test_one_shot_without_a_scheduler_line_warns_and_exits_3(tmp_path, content, what):
    path = tmp_path / "input.log"
    path.write_bytes(content)
    r = _one_shot(path)
    assert r.returncode == ExitStatus.NO_SCHEDULER_LINES == 3
    assert r.stderr.strip() == f"sglang-exporter: warning: no SGLang scheduler line in {str(path)!r} ({what})"
    m = samples(r.stdout)  # the exposition is printed all the same; its line count is the warning's
    read = sum(v for (name, _), v in m.items() if name == "sglang_exporter_log_lines_total")
    assert what == "the file is empty" and read == 0 or what == f"{read:.0f} lines read"


def test_one_shot_with_one_good_file_warns_for_the_other_and_exits_0(tmp_path):
    empty = tmp_path / "b-empty.log"
    empty.write_bytes(b"")
    r = _one_shot(STORM, empty)
    assert r.returncode == 0
    assert r.stderr.strip() == f"sglang-exporter: warning: no SGLang scheduler line in {str(empty)!r} (the file is empty)"
    r = _one_shot(STORM)
    assert r.returncode == 0 and r.stderr == ""
