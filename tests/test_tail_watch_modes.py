"""Watch modes: inotify (events plus timer) by default, poll on request, and a fall-back to polling
with one warning when the inotify observer or a watch cannot be set up."""

from __future__ import annotations

import errno
import logging
import os

import pytest
from tail_support import Harness, append, decode_block


class _FailingObserver:
    """Stands in for watchdog's observer when the inotify instance or watch limit is reached."""

    def __init__(self, fail_on: str):
        self.fail_on = fail_on
        self.daemon = True
        self.ident = None

    def start(self):
        if self.fail_on == "start":
            raise OSError(errno.EMFILE, "inotify instance limit reached")

    def schedule(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "inotify watch limit reached")

    def stop(self):
        pass


def _fallback_warnings(caplog):
    return [r for r in caplog.records if r.levelno == logging.WARNING and "polling" in r.getMessage()]


def test_inotify_mode_reads_on_events(tmp_path):
    """A file created after the start is found on its create event: the timer that checks the path
    never fires within the test (appends to open files are read once a second, but that pass does
    not look at the path)."""
    log = tmp_path / "sglang.log"
    with Harness(log, poll_interval=30) as h:
        assert h.metric("sglang_exporter_log_watch_mode_info", mode="inotify") == 1
        cycles = h.follower.cycles
        append(log, decode_block(21))
        h.wait(lambda: h.lines() == 21, "lines of a new file, found on its file event")
        assert h.follower.cycles > cycles


def test_poll_mode(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log, watch_mode="poll", poll_interval=0.05) as h:
        assert h.follower._observer is None
        assert h.metric("sglang_exporter_log_watch_mode_info", mode="poll") == 1
        append(log, decode_block(13))
        h.wait_decode(13)


def test_falls_back_when_inotify_cannot_start(tmp_path, caplog):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    caplog.set_level(logging.WARNING, logger="exporter.sources.log.follower")
    with Harness(log, observer_factory=lambda: _FailingObserver("start")) as h:
        assert h.follower.mode == "poll"
        assert h.metric("sglang_exporter_log_watch_mode_info", mode="poll") == 1
        append(log, decode_block(16))
        h.wait_decode(16)
        h.settle(3)
    assert len(_fallback_warnings(caplog)) == 1


def test_falls_back_when_watch_limit_reached(tmp_path, caplog):
    log = tmp_path / "later" / "sglang.log"
    caplog.set_level(logging.WARNING, logger="exporter.sources.log.follower")
    with Harness(log, observer_factory=lambda: _FailingObserver("schedule")) as h:
        log.parent.mkdir()  # the watch is attempted (and fails) when the directory appears
        append(log, decode_block(7))
        h.wait_decode(7)
        h.settle(3)
        assert h.follower.mode == "poll"
        assert h.metric("sglang_exporter_log_watch_mode_info", mode="poll") == 1
        assert h.metric("sglang_exporter_log_watch_mode_info", mode="inotify") is None
    warnings = _fallback_warnings(caplog)
    assert len(warnings) == 1 and "max_user_watches" in warnings[0].getMessage()


@pytest.mark.parametrize("pattern", ["sglang.log", "*.log"])
def test_other_files_events_do_not_wake_the_reader(tmp_path, pattern):
    """Another program's temporary files in the log's directory (created and deleted by the hundred)
    wake the reader no more: before, each burst of their events made a full pass (a glob's listing
    of its directory included; 3,000 files there and ~700 such files a second cost 40% of a core).
    The log's own create event still wakes it; the timer never fires within the test."""
    log = tmp_path / "sglang.log"
    for i in range(50):
        (tmp_path / f"other{i}.txt").write_bytes(b"")
    with Harness(tmp_path / pattern, poll_interval=30) as h:
        assert h.follower.mode == "inotify"
        cycles = h.follower.cycles
        for i in range(300):
            tmp = tmp_path / f"tmp{i}.tmp"
            tmp.write_bytes(b"x")
            os.rename(tmp, tmp_path / f"tmp{i}.part")
            os.unlink(tmp_path / f"tmp{i}.part")
        append(log, decode_block(4))  # created after the others: its event comes after theirs
        h.wait(lambda: h.lines() == 4, "the log's lines, found on its create event")
        assert h.follower.cycles - cycles <= 2, f"{h.follower.cycles - cycles} passes for other files' events"
