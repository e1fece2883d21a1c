"""A file that appears after start is read from its first line; so is one whose directory did not
exist at start (the watch on the directory is added when it appears)."""

from __future__ import annotations

from tail_support import Harness, append, decode_block


def test_file_appears_after_start(tmp_path):
    log = tmp_path / "sglang.log"
    with Harness(log) as h:
        assert h.metric("sglang_exporter_log_file_present", path=str(log)) == 0
        append(log, decode_block(17))
        h.wait_decode(17, "from the new file, from offset 0")
        assert h.metric("sglang_exporter_log_file_present", path=str(log)) == 1


def test_directory_missing_at_start(tmp_path):
    log = tmp_path / "not" / "yet" / "sglang.log"
    with Harness(log, poll_interval=0.1) as h:
        h.settle()
        (tmp_path / "not" / "yet").mkdir(parents=True)
        append(log, decode_block(9))
        h.wait_decode(9, "from a file in a directory created after start")
        h.wait(lambda: str(log.parent) in h.follower._watched, "the new directory to be watched")
        append(log, decode_block(4))
        h.wait_decode(13)


def test_existing_file_starts_at_end_but_late_file_from_zero(tmp_path):
    early, late = tmp_path / "early.log", tmp_path / "late.log"
    early.write_bytes(decode_block(30))
    with Harness(early, late) as h:
        h.settle()
        assert h.lines() == 0  # existing content is not replayed
        append(late, decode_block(5))
        append(early, decode_block(2))
        h.wait_decode(7)
