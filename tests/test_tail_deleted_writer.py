"""A log deleted while SGLang keeps writing it (``rm sglang.log`` under a running server): the file
lives on through the writer's descriptor and the sidecar's own, so the sidecar follows it, as
``tail -F`` and fluent-bit do, until a new file appears at the path; then the old one is drained for
--log.rotate-wait and closed. Before: it was dropped --log.rotate-wait seconds after the deletion and
every later line was lost (116 of 200 in the attack round). Real command, real files."""

from __future__ import annotations

import os

from conftest import value
from exporter_support import Exporter
from tail_support import append, decode_block


def _decode(m: dict) -> float:
    return value(m, "sglang_exporter_log_lines_total", kind="decode", result="parsed") or 0


def test_a_deleted_log_is_followed_to_the_writers_end_until_a_new_file_appears(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    # --log.rotate-wait 0: before the fix the deleted file was closed at the first check after the
    # deletion, so the test needs no wait of its own for the grace period to pass.
    exp = Exporter("--log.path", str(log), "--log.rotate-wait", "0", "--gpu.enabled", "false")
    writer = open(log, "ab", buffering=0)  # the server's handler: O_APPEND, kept open
    try:
        writer.write(decode_block(10))
        exp.wait_for(lambda m: _decode(m) >= 10, "the first 10 lines")
        os.unlink(log)
        exp.wait_for(lambda m: value(m, "sglang_exporter_log_file_present", path=str(log)) == 0,
                     "the deletion to be seen")
        for i in range(200):  # written after the deletion was seen: only the open descriptor has them
            writer.write(decode_block(1, start=i))
        m = exp.wait_for(lambda m: _decode(m) >= 210, "the 200 lines written to the deleted file")
        assert _decode(m) == 210
        # A new file at the path (the server restarted, or logrotate created it): read from 0, and
        # the deleted one is drained and closed (rotate-wait 0), so it is not held forever.
        append(log, decode_block(7))
        m = exp.wait_for(lambda m: _decode(m) >= 217, "the new file's 7 lines")
        fds = exp.wait_for(lambda m: not _deleted_fds(exp.proc.pid), "the deleted file to be closed")
        assert _decode(fds) == 217
        writer.write(decode_block(5))  # the old file after its successor came: no longer read
        append(log, decode_block(1))
        m = exp.wait_for(lambda m: _decode(m) >= 218, "one more line of the new file")
        assert _decode(m) == 218
    finally:
        writer.close()
        assert exp.terminate() == 0


def _deleted_fds(pid: int) -> list[str]:
    """Targets of the process's descriptors that name deleted files."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.endswith(" (deleted)"):
            out.append(target)
    return out
