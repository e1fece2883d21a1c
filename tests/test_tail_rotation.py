"""Rotation by rename + create: the old file is drained during --log.rotate-wait, the new one is read
from 0, nothing is lost or read twice; identity is (st_dev, st_ino)."""

from __future__ import annotations

import os

from tail_support import Harness, append, decode_block


def test_rename_create_drains_old_file_during_grace(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log, rotate_wait=60) as h:  # long grace: the old file stays open for the whole test
        append(log, decode_block(30))
        h.wait_decode(30, "before rotation")
        # The writer keeps its descriptor (as a logging handler does until it reopens the file).
        writer = open(log, "ab", buffering=0)
        writer.write(decode_block(5) + decode_block(1)[:40])  # 5 lines and half of one more
        os.rename(log, tmp_path / "sglang.log.1")
        append(log, decode_block(7))  # the new file
        h.wait(lambda: h.stats(log).rotations == 1, "the rotation to be seen")
        writer.write(decode_block(1)[40:] + decode_block(4))  # the old file still grows
        writer.close()
        h.wait_decode(30 + 5 + 1 + 4 + 7, "from the old and the new file")
        st = h.stats(log)
        assert (st.rotations, st.opens, st.truncations) == (1, 2, 0)
        assert h.metric("sglang_exporter_log_rotations_total", path=str(log)) == 1
        assert h.metric("sglang_exporter_log_behind_bytes", path=str(log)) == 0
        assert h.lines("decode", "malformed") == 0


def test_old_file_closed_after_grace_and_partial_line_flushed(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log, rotate_wait=0.2) as h:
        append(log, decode_block(10) + decode_block(1).rstrip(b"\n"))  # last line lacks its newline
        h.wait_decode(10)
        os.rename(log, tmp_path / "sglang.log.1")
        append(log, decode_block(3))
        # After the grace period the old file's held line is flushed as a complete line.
        h.wait_decode(10 + 1 + 3, "after the grace period")
        assert h.follower.tailers[0]._draining == []
        assert h.stats(log).rotations == 1


def test_repeated_rotations_within_grace(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log, rotate_wait=0.5) as h:
        written = 0
        for i in range(5):  # rotate faster than the grace period, as a log storm would
            append(log, decode_block(20, start=i))
            written += 20
            for k in range(i, 0, -1):
                if (tmp_path / f"sglang.log.{k}").exists():
                    os.rename(tmp_path / f"sglang.log.{k}", tmp_path / f"sglang.log.{k + 1}")
            os.rename(log, tmp_path / "sglang.log.1")
            log.write_bytes(b"")
            h.wait(lambda: h.stats(log).rotations == i + 1, f"rotation {i + 1}")
        append(log, decode_block(9))
        written += 9
        h.wait_decode(written, "after five rotations")
        assert h.stats(log).rotations == 5
