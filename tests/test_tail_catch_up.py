"""A scrape shows every line written before it: the reader reads the appends when a scrape asks
(and every second otherwise), not on a fast timer, so a live exporter wakes about once a second
while /metrics stays current (the measured cost was the wake-ups: bench/run.py's live part)."""

from __future__ import annotations

import threading
import urllib.request

from conftest import samples, value
from exporter_support import Exporter
from tail_support import Harness, append, decode_block

from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.sources.log.source import LogSource


def test_each_scrape_shows_the_lines_written_just_before_it(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log, poll_interval=30) as h:  # no timer pass within the test
        for i in range(1, 21):
            append(log, decode_block(1, start=i))
            assert value(h.metrics(), "sglang_exporter_log_lines_total", kind="decode", result="parsed") == i


def test_concurrent_scrapes_are_answered_by_one_pass(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log, poll_interval=30) as h:
        append(log, decode_block(5))
        start = h.follower.passes
        barrier = threading.Barrier(20)
        answers = []

        def scrape():
            barrier.wait()
            answers.append(h.log.catch_up())

        threads = [threading.Thread(target=scrape) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert answers == [True] * 20 and h.lines() == 5
        assert h.follower.passes - start <= 3, f"{h.follower.passes - start} passes for 20 scrapes at once"


def test_without_a_reader_thread_a_scrape_does_not_wait(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    source = LogSource([str(log)], SchedulerStore(SchedulerStates(40)))
    assert source.catch_up(timeout=30) is False  # one-shot mode: nothing to wait for


def test_the_real_command_scrape_after_write(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    exp = Exporter("--log.path", str(log), "--log.poll-interval", "30", "--gpu.enabled", "false")
    try:
        for i in range(1, 11):
            append(log, decode_block(1, start=i))
            with urllib.request.urlopen(f"http://127.0.0.1:{exp.port}/metrics", timeout=10) as r:
                m = samples(r.read().decode())
            assert value(m, "sglang_exporter_log_lines_total", kind="decode", result="parsed") == i
    finally:
        assert exp.terminate() == 0
