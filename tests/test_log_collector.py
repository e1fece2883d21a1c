"""The log source's collector (exporter/sources/log/collector.py): its families and their labels."""

from __future__ import annotations

import os
import subprocess

from conftest import CORPUS, samples, value
from prometheus_client import generate_latest

from exporter.cli import build_registry
from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.sources.log.collector import path_label
from exporter.sources.log.source import LogSource


def test_a_file_name_that_is_not_utf8_does_not_break_metrics(tmp_path, promtool):
    bad = os.fsdecode(os.path.join(os.fsencode(str(tmp_path)), b"evil\xff.log"))
    with open(bad, "w", encoding="utf-8") as f:
        f.write((CORPUS / "007-decode-oom-retract-tp16.log").read_text(encoding="utf-8"))
    store = SchedulerStore(SchedulerStates())
    log_source = LogSource([str(tmp_path / "*.log")], store, from_beginning=True)
    for source in log_source.tailers:
        source.poll()
    text = generate_latest(build_registry(store, log_source, None)).decode()
    m = samples(text)
    assert value(m, "sglang_exporter_log_file_opens_total", path=str(tmp_path / "evil\\xff.log")) == 1
    assert value(m, "sglang_scheduler_retractions_total", stage="", dp_rank="0") == 2
    lint = subprocess.run([promtool, "check", "metrics"], input=text, text=True, capture_output=True, timeout=60)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_path_labels_are_utf8_and_keep_valid_paths_as_they_are():
    assert path_label("/var/log/sglang.log") == "/var/log/sglang.log"
    assert path_label("/var/log/d\u00e9j\u00e0.log") == "/var/log/d\u00e9j\u00e0.log"
    assert path_label(os.fsdecode(b"/x/evil\xff.log")) == "/x/evil\\xff.log"


def test_a_glob_reports_its_matches_and_the_watch_mode_of_its_follower(tmp_path):
    for name in ("a.log", "b.log", "c.txt"):
        (tmp_path / name).write_text("")
    store = SchedulerStore(SchedulerStates())
    log_source = LogSource([str(tmp_path / "*.log")], store, watch_mode="poll")
    log_source.start()
    try:
        assert log_source.wait_first_pass(10)
        m = samples(generate_latest(build_registry(store, log_source, None)).decode())
    finally:
        log_source.stop()
    assert value(m, "sglang_exporter_log_glob_matched_files", pattern=str(tmp_path / "*.log")) == 2
    assert value(m, "sglang_exporter_log_watch_mode_info", mode="poll") == 1
    assert value(m, "sglang_exporter_log_file_present", path=str(tmp_path / "a.log")) == 1
