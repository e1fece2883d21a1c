"""A scrape shows every line written before it: the reader reads the appends when a scrape asks
(and every second otherwise), not on a fast timer, so a live exporter wakes about once a second
while /metrics stays current (the measured cost was the wake-ups: bench/run.py's live part)."""

from __future__ import annotations

import os
import threading
import urllib.request

import pytest

from conftest import samples, value
from exporter_support import Exporter
from tail_support import DEADLINE, Harness, append, decode_block

from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.sources.log import follower
from exporter.sources.log.source import LogSource


def test_each_scrape_shows_the_lines_written_just_before_it(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log, poll_interval=30) as h:  # no timer pass within the test
        for i in range(1, 21):
            append(log, decode_block(1, start=i))
            assert value(h.metrics(), "sglang_exporter_log_lines_total", kind="decode", result="parsed") == i


@pytest.mark.parametrize("watch_mode", ["poll", "inotify"])
@pytest.mark.parametrize("how", ["rename", "delete"])
def test_a_scrape_reads_the_file_that_replaced_a_rotated_one(tmp_path, watch_mode, how):
    """The scrape checks the path itself: no timer pass within the test, and in poll mode no file
    event either (before, the new file's lines waited for the poll timer, and a second rotation
    before it lost them for good)."""
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log, poll_interval=30, watch_mode=watch_mode, rotate_wait=30) as h:
        n = 0
        for i in range(5):
            append(log, decode_block(1, start=n))
            if how == "rename":
                os.rename(log, tmp_path / f"sglang.log.{i}")
            else:
                os.unlink(log)
            append(log, decode_block(2, start=n + 1))  # the new file at the path
            n += 3
            assert value(h.metrics(), "sglang_exporter_log_lines_total", kind="decode", result="parsed") == n
        assert value(h.metrics(), "sglang_exporter_log_missed_rotations_total", path=str(log)) == 0


class _SilentObserver:
    """An inotify observer whose events have not been delivered yet (they never are here)."""

    daemon = True
    ident = None

    def start(self):
        pass

    def schedule(self, *args, **kwargs):
        return object()

    def unschedule(self, watch):
        pass

    def stop(self):
        pass


def test_a_scrape_reads_a_new_match_of_a_glob_before_its_event(tmp_path):
    """A file created just before a scrape, matching a glob: the scrape lists the glob's directory
    itself rather than wait for the create event (6 of 50 such scrapes missed the new file's lines
    when the event came after the scrape's pass began)."""
    with Harness(tmp_path / "*.log", poll_interval=30, observer_factory=_SilentObserver) as h:
        assert h.follower.mode == "inotify"
        for i in range(1, 6):
            append(tmp_path / f"worker{i}.log", decode_block(1, start=i))
            assert value(h.metrics(), "sglang_exporter_log_lines_total", kind="decode", result="parsed") == i


def test_concurrent_scrapes_are_answered_by_one_pass(tmp_path, monkeypatch):
    """Twenty scrapes that arrive while the reader is in a pass are all answered by the next one.

    The reader is held in a pass (its tailer's read blocks on an event) while the scrapes arrive, so
    the count does not depend on how the threads happen to be scheduled (with threads released by a
    barrier instead, 4 to 6 passes were seen on a loaded machine)."""
    monkeypatch.setattr(follower, "APPEND_CHECK_INTERVAL", 30.0)  # no timer pass within the test
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log, poll_interval=30) as h:
        tailer = h.sources[0]
        entered, release = threading.Event(), threading.Event()
        real_poll, real_appends = tailer.poll, tailer.read_appends

        def held(read):
            def run():
                entered.set()
                assert release.wait(DEADLINE)
                return read()
            return run

        tailer.poll, tailer.read_appends = held(real_poll), held(real_appends)
        append(log, decode_block(5))
        h.follower.wake()
        assert entered.wait(DEADLINE)  # the reader is in its pass, before any scrape
        start = h.follower.passes
        asked = h.follower._asked
        answers = []
        threads = [threading.Thread(target=lambda: answers.append(h.log.catch_up(timeout=DEADLINE)))
                   for _ in range(20)]
        for t in threads:
            t.start()
        h.wait(lambda: h.follower._asked == asked + 20, "the 20 scrapes to ask")
        release.set()
        for t in threads:
            t.join()
        assert answers == [True] * 20 and h.lines() == 5
        # the held pass, then one pass for all twenty
        assert h.follower.passes - start == 2, f"{h.follower.passes - start} passes for 20 scrapes at once"


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
