"""Paths that are not regular files: a FIFO, a device, a directory that appears later. Each is skipped
with one warning and never blocks the reader, so every line of the regular files is counted; and
``/healthz`` answers from the reader making progress, not from its thread being alive."""

from __future__ import annotations

import logging
import os
import threading
import time

from exporter_support import Exporter
from tail_support import DEADLINE, Harness, append, decode_block

from exporter.sources.log.file import Tailer
from exporter.sources.log.stats import LogStats


def _skip_warnings(caplog, path) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and str(path) in r.getMessage() and "skipped" in r.getMessage()]


class _Sink:
    def __init__(self):
        self.lines: list[str] = []

    def feed(self, lines):
        self.lines += lines
        return 0

    def startup_facts(self, chunks):
        return 0


def test_fifo_device_and_late_directory_are_skipped_and_the_log_is_read(tmp_path, caplog):
    fifo, later, log = tmp_path / "pipe.log", tmp_path / "later.log", tmp_path / "sglang.log"
    os.mkfifo(fifo)
    log.write_bytes(b"")
    caplog.set_level(logging.INFO, logger="exporter.sources.log")
    with Harness(fifo, "/dev/zero", later, log) as h:
        append(log, decode_block(9))
        h.wait_decode(9, "from the regular file beside a FIFO and /dev/zero")
        later.mkdir()  # a directory where a log file was expected
        h.settle(3)
        append(log, decode_block(4, start=9))
        h.wait_decode(13, "after the directory appeared")
        for path in (fifo, "/dev/zero", later):
            assert h.metric("sglang_exporter_log_file_present", path=str(path)) == 0, path
            assert h.metric("sglang_exporter_log_bytes_read_total", path=str(path)) == 0, path
        assert h.metric("sglang_exporter_log_file_present", path=str(log)) == 1
        assert h.log.health() == (True, "ok")
    assert [len(_skip_warnings(caplog, p)) for p in (fifo, "/dev/zero", later)] == [1, 1, 1]
    assert "is a FIFO" in _skip_warnings(caplog, fifo)[0]
    assert "is a character device" in _skip_warnings(caplog, "/dev/zero")[0]
    assert "is a directory" in _skip_warnings(caplog, later)[0]


def test_a_fifo_swapped_in_after_the_check_does_not_block(tmp_path):
    """The path was a regular file when stat'ed and is a FIFO when opened: the non-blocking open and
    the check on the descriptor keep the reader from waiting for a writer."""
    regular, fifo = tmp_path / "a.log", tmp_path / "b.log"
    regular.write_bytes(b"x\n")
    os.mkfifo(fifo)
    t = Tailer(str(fifo), _Sink(), LogStats())
    st = os.stat(regular)
    done = threading.Event()
    threading.Thread(target=lambda: (t._open(st, (st.st_dev, st.st_ino)), done.set()), daemon=True).start()
    assert done.wait(DEADLINE), "opening a FIFO blocked the reader"
    assert t.idle and t.stats.opens == 0


def test_a_regular_file_replaced_by_a_directory_is_skipped(tmp_path, caplog):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    caplog.set_level(logging.WARNING, logger="exporter.sources.log")
    with Harness(log) as h:
        append(log, decode_block(5))
        h.wait_decode(5)
        os.unlink(log)
        log.mkdir()
        h.settle(3)
        assert h.metric("sglang_exporter_log_file_present", path=str(log)) == 0
        # a directory is no successor: the deleted file is still followed (issue 35), never the directory
        assert not h.follower.tailers[0].idle and h.stats(log).opens == 1
    assert len(_skip_warnings(caplog, log)) == 1


def test_health_follows_the_readers_progress(tmp_path):
    """A reader stuck inside a pass (a hung read, here a sink that blocks) fails /healthz although its
    thread is alive; once it moves again it is healthy."""
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log, stall_after=0.3) as h:
        assert h.log.health() == (True, "ok")
        release = threading.Event()
        feed = h.log.ingest.feed

        def stuck(lines):
            release.wait(DEADLINE)
            return feed(lines)

        h.log.ingest.feed = stuck
        append(log, decode_block(6))
        h.wait(lambda: not h.log.health()[0], "/healthz to fail while the reader is stuck")
        ok, reason = h.log.health()
        assert h.follower.is_alive() and "no progress" in reason and str(log) in reason
        release.set()
        h.wait(lambda: h.lines() == 6 and h.log.health()[0], "the reader to move again")


def test_searching_a_big_head_at_start_up_is_progress(tmp_path):
    """The start-up search of a log's head (up to 64 MiB a file, chunk after chunk) is reading: on a
    slow disk (here 50 ms per chunk, 16 chunks) /healthz stays 200 throughout the first pass (it
    failed once the pass was older than stall_after, so a liveness probe restarted the exporter into
    the same search)."""
    log = tmp_path / "sglang.log"
    with open(log, "wb") as f:
        f.write(decode_block(1) * ((4 << 20) // len(decode_block(1)) + 1))
    h = Harness(log, stall_after=0.3)
    search = h.log.ingest.startup_facts
    scanned = []

    def slow_disk(chunks):
        def slowly():
            for c in chunks:
                time.sleep(0.05)
                scanned.append(len(c))
                yield c
        return search(slowly())

    h.log.ingest.startup_facts = slow_disk
    unhealthy = []
    done = threading.Event()

    def probe():
        while not done.is_set():
            if h.follower.is_alive() and h.follower.cycles < 1:
                ok, reason = h.log.health()
                if not ok:
                    unhealthy.append(reason)
            time.sleep(0.01)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        with h:
            done.set()
    finally:
        done.set()
        prober.join()
    assert sum(scanned) >= 4 << 20 and unhealthy == []


def test_a_scrape_does_not_wait_for_a_stuck_reader(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log) as h:
        release = threading.Event()
        feed = h.log.ingest.feed
        h.log.ingest.feed = lambda lines: (release.wait(DEADLINE), feed(lines))[1]
        append(log, decode_block(3))
        h.wait(lambda: h.follower.busy_since is not None and time.monotonic() - h.follower.busy_since > 1,
               "the reader to be stuck for a second")
        start = time.monotonic()
        h.metrics()
        assert time.monotonic() - start < 0.5, "a scrape waited for a stuck reader"
        release.set()
        h.wait(lambda: h.lines() == 3, "the lines once the reader moves")


def test_real_command_with_a_fifo_among_its_paths(tmp_path):
    fifo, log = tmp_path / "pipe.log", tmp_path / "sglang.log"
    os.mkfifo(fifo)
    log.write_bytes(b"")
    exp = Exporter("--log.path", f"{fifo},{log}", "--gpu.enabled", "false")
    try:
        append(log, decode_block(25))
        m = exp.wait_for(lambda m: m.get(("sglang_exporter_log_lines_total",
                                          (("kind", "decode"), ("result", "parsed")))) == 25,
                         "every line of the regular file")
        assert m[("sglang_exporter_log_file_present", (("path", str(fifo)),))] == 0
        assert exp.get("/healthz")[0] == 200
    finally:
        assert exp.terminate() == 0
    warnings = [line for line in exp.stderr_lines if "WARNING" in line and str(fifo) in line]
    assert len(warnings) == 1 and "FIFO" in warnings[0], exp.stderr_lines
