"""Several files: --log.path takes several paths and globs, each file followed on its own; a file
matched twice is read once; a rotated file matched by the glob under its new name is continued,
not read again; the command accepts the list from the flag, the environment and the TOML file."""

from __future__ import annotations

import os

from conftest import value
from tail_support import Harness, append, decode_block
from exporter_support import Exporter

from exporter.settings import load_settings


def test_paths_and_glob_each_followed(tmp_path):
    sched = tmp_path / "sglang.log"
    reqdir = tmp_path / "requests"
    reqdir.mkdir()
    first = reqdir / "2026-09-13_16.log"
    sched.write_bytes(b"")
    first.write_bytes(b"")
    with Harness(sched, f"{reqdir}/*.log") as h:
        append(sched, decode_block(10))
        append(first, decode_block(4))
        h.wait_decode(14)
        second = reqdir / "2026-09-13_17.log"  # the next hour's file: new, read from 0
        append(second, decode_block(6))
        append(first, decode_block(1))
        h.wait_decode(21)
        assert h.metric("sglang_exporter_log_glob_matched_files", pattern=f"{reqdir}/*.log") == 2
        for p in (sched, first, second):
            assert h.metric("sglang_exporter_log_file_present", path=str(p)) == 1
        os.unlink(first)  # an expired hourly file: drained, then dropped from the metrics
        h.wait(lambda: str(first) not in h.log.stats.files, "the removed file to be dropped")
        assert h.metric("sglang_exporter_log_glob_matched_files", pattern=f"{reqdir}/*.log") == 1
        assert h.lines() == 21


def test_file_matched_by_two_patterns_is_read_once(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log, f"{tmp_path}/*.log", f"{tmp_path}/sglang.*") as h:
        append(log, decode_block(33))
        h.wait_decode(33)
        assert list(h.log.stats.files) == [str(log)]


def test_glob_matching_rotated_name_does_not_reread(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(f"{tmp_path}/sglang.log*", rotate_wait=0.1) as h:
        append(log, decode_block(40))
        h.wait_decode(40)
        for k in (1, 2):
            if k == 2:
                os.rename(tmp_path / "sglang.log.1", tmp_path / "sglang.log.2")
            os.rename(log, tmp_path / "sglang.log.1")
            append(log, decode_block(5))
            append(tmp_path / "sglang.log.1", decode_block(2))  # the writer's last lines in the old file
            h.wait_decode(40 + 7 * k, f"after rotation {k}")
        h.wait(lambda: h.metric("sglang_exporter_log_glob_matched_files", pattern=f"{tmp_path}/sglang.log*") == 3,
               "three matches")
        append(tmp_path / "sglang.log.2", decode_block(1))
        h.wait_decode(55, "a late line in the oldest file")


def test_settings_accept_several_paths(tmp_path, monkeypatch):
    assert load_settings(["--log.path", "/a.log"]).log.paths == ["/a.log"]
    assert load_settings(["--log.path", "/a.log,/b/*.log"]).log.paths == ["/a.log", "/b/*.log"]
    assert load_settings(["--log.path", "/a.log", "--log.path=/b/*.log"]).log.paths == ["/a.log", "/b/*.log"]
    cfg = tmp_path / "c.toml"
    cfg.write_text('[log]\npath = ["/a.log", "/r/*.log"]\n')
    assert load_settings(["--config.file", str(cfg)]).log.paths == ["/a.log", "/r/*.log"]
    monkeypatch.setenv("SGLANG_EXPORTER_LOG__PATH", "/logs/sglang.log")
    s = load_settings([])
    assert (s.log.path, s.log.paths) == ("/logs/sglang.log", ["/logs/sglang.log"])


def test_command_follows_path_and_glob(tmp_path):
    sched = tmp_path / "sglang.log"
    reqdir = tmp_path / "req"
    reqdir.mkdir()
    sched.write_bytes(b"")
    (reqdir / "a.log").write_bytes(b"")  # files present at start are read from their end
    exp = Exporter("--log.path", f"{sched},{reqdir}/*.log", "--log.poll-interval", "0.1")
    try:
        exp.wait_for(lambda m: value(m, "sglang_exporter_log_glob_matched_files", pattern=f"{reqdir}/*.log") == 1,
                     "the first pass over the files")  # what exists then is history, read from its end
        append(sched, decode_block(12))
        append(reqdir / "a.log", decode_block(3))
        append(reqdir / "b.log", decode_block(2))  # appears later: read from 0
        m = exp.wait_for(lambda m: value(m, "sglang_exporter_log_lines_total", kind="decode", result="parsed") == 17,
                         "17 decode lines from three files")
        assert value(m, "sglang_exporter_log_watch_mode_info", mode="inotify") == 1
        assert value(m, "sglang_exporter_log_glob_matched_files", pattern=f"{reqdir}/*.log") == 2
    finally:
        assert exp.terminate() == 0
