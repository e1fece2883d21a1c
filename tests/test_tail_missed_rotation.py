"""Rotations faster than the exporter looks (poll mode with a long --log.poll-interval): a file written
and rotated away between two checks was never opened under the path. It is found among the path's
rotated siblings and read, oldest first, before the new file; one already gone when the reader opens
it is counted in sglang_exporter_log_missed_rotations_total and warned about; a glob over the
rotated names reads such a file itself, and nothing is counted then.

Here the follower runs in poll mode with a timer that never fires within a test, so it looks at the
path only when the test wakes it (``settle``): the rotations between two looks are exact."""

from __future__ import annotations

import logging
import os
import time

from conftest import value
from exporter_support import Exporter
from tail_support import DEADLINE, Harness, append, decode_block


def _past(mark_ns: int, probe) -> None:
    """Wait until a file written now gets a modification time after ``mark_ns`` (file times come
    from the kernel's coarse clock, a few ms behind)."""
    end = time.monotonic() + DEADLINE
    while True:
        probe.write_bytes(b"")
        if probe.stat().st_mtime_ns > mark_ns:
            return
        assert time.monotonic() < end, "the file system clock does not move"
        time.sleep(0.001)


def _rotate(log, keep: int = 5) -> None:
    """RotatingFileHandler's rotation: sglang.log.N-1 -> .N, ..., sglang.log -> sglang.log.1."""
    for i in range(keep - 1, 0, -1):
        if os.path.exists(f"{log}.{i}"):
            os.replace(f"{log}.{i}", f"{log}.{i + 1}")
    os.replace(log, f"{log}.1")


def _missed(h, path) -> float:
    return h.metric("sglang_exporter_log_missed_rotations_total", path=str(path))


def test_a_file_rotated_away_unseen_is_read_oldest_first(tmp_path, caplog):
    """Issue 35: such a file is read (it was only counted: 5.6-27.9% of the lines were lost under a
    RotatingFileHandler rotating every ~11 ms)."""
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    caplog.set_level(logging.WARNING, logger="exporter.sources.log")
    with Harness(log, watch_mode="poll", poll_interval=30, rotate_wait=0.1) as h:
        append(log, decode_block(5))
        h.wait_decode(5, "from the first file")
        _past(time.time_ns(), tmp_path / "probe")
        _rotate(log)
        append(log, decode_block(7, start=5))  # B: written and rotated away before the next look
        _rotate(log)
        append(log, decode_block(2, start=12))  # C: written and rotated away too (B is .2 now)
        _rotate(log)
        append(log, decode_block(3, start=14))  # D: at the path at the next look
        (tmp_path / "sglang.log.3.gz").write_bytes(b"\x1f\x8b compressed")  # logrotate's archive: no log
        (tmp_path / "sglang.log.lock").write_bytes(b"")  # empty: nothing to read
        (tmp_path / "sglang.log.err").write_bytes(b"Traceback\n")  # another log beside it: no rotation
        (tmp_path / "sglang.log-access").write_bytes(b"GET /health 200\n")
        order = []
        feed = h.log.ingest.feed
        h.log.ingest.feed = lambda lines: order.extend(lines) or feed(lines)
        h.follower.wake()  # the exporter looks now
        h.wait_decode(5 + 7 + 2 + 3, "from every file, the two rotated away unseen included")
        assert [line.encode() for line in order] == decode_block(12, start=5).splitlines()  # B, C, D: in order
        assert h.stats(log).rotations == 1
        assert _missed(h, log) == 0
        _past(time.time_ns(), tmp_path / "probe")
        os.replace(log, f"{log}.old")  # a hand-written rotation: the .old suffix has no digit
        append(log, decode_block(2, start=19))
        os.replace(log, f"{log}.old")  # written and renamed away unseen (D, held open, is unlinked)
        append(log, decode_block(1, start=21))
        h.follower.wake()
        h.wait_decode(20)
        assert _missed(h, log) == 0
    assert not [r for r in caplog.records if "never read" in r.getMessage()]


def test_a_file_rotated_away_and_gone_before_the_next_look_is_counted(tmp_path, caplog):
    """What cannot be read is still seen: a file found rotated away unseen but gone (renamed again, or
    deleted) when the reader opens it is counted in sglang_exporter_log_missed_rotations_total."""
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    caplog.set_level(logging.WARNING, logger="exporter.sources.log")
    with Harness(log, watch_mode="poll", poll_interval=30, rotate_wait=0.1) as h:
        append(log, decode_block(5))
        h.wait_decode(5)
        _past(time.time_ns(), tmp_path / "probe")
        _rotate(log)
        append(log, decode_block(7, start=5))  # B
        _rotate(log)
        append(log, decode_block(3, start=12))  # C at the path
        tailer = h.follower.tailers[0]
        real_open = os.open

        def vanish(path, *args, **kw):  # B is deleted between the listing and the open
            if str(path).endswith("sglang.log.1"):
                os.unlink(path)
            return real_open(path, *args, **kw)

        os.open = vanish
        try:
            h.follower.wake()
            h.wait_decode(5 + 3, "from the first and the last file; the middle one is gone")
        finally:
            os.open = real_open
        assert tailer.stats.rotations == 1 and _missed(h, log) == 1
    warnings = [r.getMessage() for r in caplog.records if "never read" in r.getMessage()]
    assert len(warnings) == 1 and "sglang.log.1" in warnings[0] and "--log.poll-interval" in warnings[0]


def test_a_glob_over_the_rotated_names_reads_what_the_path_missed(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log, f"{log}.*", watch_mode="poll", poll_interval=30, rotate_wait=0.1) as h:
        append(log, decode_block(5))
        h.wait_decode(5)
        _past(time.time_ns(), tmp_path / "probe")
        _rotate(log)
        append(log, decode_block(7, start=5))
        _rotate(log)
        append(log, decode_block(3, start=12))
        h.follower.wake()
        h.wait_decode(15, "every line: the glob reads the file the path missed")
        assert _missed(h, log) == 0


def test_the_command_reads_a_file_rotated_away_between_two_scrapes(tmp_path):
    """The real command in poll mode with a poll interval longer than the test: each scrape makes the
    only check of the path, so two RotatingFileHandler rotations fall between two checks. Before: the
    middle file's 7 lines were lost (and counted as 1 missed rotation); now they are read, in order."""
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    exp = Exporter("--log.path", str(log), "--log.watch-mode", "poll", "--log.poll-interval", "60",
                   "--log.rotate-wait", "0.1", "--gpu.enabled", "false")
    decode = lambda m: value(m, "sglang_exporter_log_lines_total", kind="decode", result="parsed") or 0  # noqa: E731
    try:
        append(log, decode_block(5))
        exp.wait_for(lambda m: decode(m) >= 5, "the first file's lines")
        _past(time.time_ns(), tmp_path / "probe")
        _rotate(log)
        append(log, decode_block(7, start=5))  # rotated away before the next scrape looks
        _rotate(log)
        append(log, decode_block(3, start=12))
        m = exp.wait_for(lambda m: decode(m) >= 15, "every line, the middle file's included")
        assert decode(m) == 15
        assert value(m, "sglang_exporter_log_missed_rotations_total", path=str(log)) == 0
    finally:
        assert exp.terminate() == 0
