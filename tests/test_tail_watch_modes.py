"""Watch modes: inotify (events plus timer) by default, poll on request, and a fall-back to polling
with one warning when the inotify observer or a watch cannot be set up."""

from __future__ import annotations

import errno
import logging

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
