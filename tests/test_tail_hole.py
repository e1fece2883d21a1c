"""``tee`` without ``-a`` under logrotate's ``copytruncate``: tee keeps writing at its old offset, so the
truncated file grows back as a hole of NUL bytes up to the old size before its next line. The
sidecar skips the hole (``SEEK_DATA``) instead of reading it: before, it read the whole hole first,
17.7 s for 4 GiB, at every rotation. Real command, real sparse files (ext4 and tmpfs report holes)."""

from __future__ import annotations

import os

from conftest import value
from exporter_support import Exporter
from tail_support import decode_block

GIB = 1 << 30


def _decode(m: dict) -> float:
    return value(m, "sglang_exporter_log_lines_total", kind="decode", result="parsed") or 0


def test_the_hole_a_writer_without_append_leaves_after_copytruncate_is_skipped(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    exp = Exporter("--log.path", str(log), "--gpu.enabled", "false")
    fd = os.open(log, os.O_WRONLY)  # tee's descriptor: no O_APPEND
    try:
        os.write(fd, decode_block(10))
        exp.wait_for(lambda m: _decode(m) >= 10, "the first 10 lines")
        read_before = value(exp.metrics(), "sglang_exporter_log_bytes_read_total", path=str(log))
        # tee has written 4 GiB by the time logrotate copies and truncates (its offset stands for them:
        # where tee writes next is all that matters to the sidecar).
        os.lseek(fd, 4 * GIB, os.SEEK_SET)
        os.truncate(log, 0)  # copytruncate's truncation (its copy is not followed here)
        os.write(fd, decode_block(8, start=10))  # the file is now a 4 GiB hole, then these 8 lines
        m = exp.wait_for(lambda m: _decode(m) >= 18, "the 8 lines after the hole")
        assert _decode(m) == 18
        assert value(m, "sglang_exporter_log_truncations_total", path=str(log)) == 1
        read = value(m, "sglang_exporter_log_bytes_read_total", path=str(log)) - read_before
        assert read < (1 << 20), f"{read:,} bytes read: the hole was read, not skipped"
    finally:
        os.close(fd)
        assert exp.terminate() == 0
