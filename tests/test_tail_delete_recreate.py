"""Delete and re-create: the deleted file is still read (until a file appears at the path), the path
is reported absent, and the file created again at the path is read from offset 0."""

from __future__ import annotations

import os

from tail_support import Harness, append, decode_block


def test_delete_then_recreate(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log, rotate_wait=0.2) as h:
        append(log, decode_block(25))
        h.wait_decode(25)
        writer = open(log, "ab", buffering=0)
        os.unlink(log)
        writer.write(decode_block(3))  # still written to the deleted file: drained in the grace period
        writer.close()
        h.wait(lambda: h.metric("sglang_exporter_log_file_present", path=str(log)) == 0, "the path to be absent")
        h.wait_decode(28, "from the deleted file")
        assert not h.follower.tailers[0].idle  # followed until a file appears at the path (issue 35)
        append(log, decode_block(11))  # re-created: read from 0
        h.wait_decode(39, "from the re-created file")
        assert h.metric("sglang_exporter_log_file_present", path=str(log)) == 1
        assert h.stats(log).opens == 2


def test_delete_and_recreate_between_two_checks(tmp_path):
    """Deleted and re-created before the exporter looks: a new inode, so a rotation."""
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log, poll_interval=5, watch_mode="poll") as h:  # no wake-ups but ours
        append(log, decode_block(12))
        h.settle(1)
        h.wait_decode(12)
        keep = open(log, "rb")  # keeps the inode alive so the new file cannot reuse its number
        os.unlink(log)
        append(log, decode_block(4))
        h.settle(1)
        h.wait_decode(16, "from the new file")
        keep.close()
        assert h.stats(log).rotations == 1
