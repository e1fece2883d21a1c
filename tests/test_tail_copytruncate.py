"""copytruncate: size below the read offset means truncation: the held partial line is flushed,
reading restarts at 0, the event is counted. The documented loss window (lines written between the
last read and the truncation; a file grown back past the offset before the next check) is avoided
here by writing after the exporter has read, which is the part that is under its control."""

from __future__ import annotations

import os
import shutil

from tail_support import Harness, append, decode_block


def copytruncate(log, dest):
    shutil.copyfile(log, dest)
    os.truncate(log, 0)


def test_truncation_restarts_at_zero_and_is_counted(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log) as h:
        append(log, decode_block(50))
        h.wait_decode(50, "before the truncation")
        copytruncate(log, tmp_path / "sglang.log.1")
        append(log, decode_block(8))  # fewer bytes than were read: always seen as a truncation
        h.wait_decode(58, "after the truncation")
        st = h.stats(log)
        assert (st.truncations, st.rotations, st.opens) == (1, 0, 1)
        assert h.metric("sglang_exporter_log_truncations_total", path=str(log)) == 1


def test_truncation_flushes_the_partial_line(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log) as h:
        append(log, decode_block(20) + decode_block(1).rstrip(b"\n"))
        h.wait_decode(20)
        copytruncate(log, tmp_path / "sglang.log.1")
        h.wait(lambda: h.stats(log).truncations == 1, "the truncation")
        append(log, decode_block(30))  # more than before: only safe once the truncation was seen
        h.wait_decode(20 + 1 + 30, "held line flushed, new content read from 0")


def test_writer_without_o_append_leaves_nul_hole(tmp_path):
    """A writer that keeps its offset after copytruncate writes past a hole of NUL bytes."""
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log) as h:
        writer = open(log, "r+b", buffering=0)  # not O_APPEND: keeps its own offset
        writer.write(decode_block(40))
        h.wait_decode(40)
        os.truncate(log, 0)
        h.wait(lambda: h.stats(log).truncations == 1, "the truncation")
        writer.write(decode_block(6))  # lands after a hole as long as what was there
        writer.close()
        h.wait_decode(46, "lines after the NUL hole")
        assert h.stats(log).oversized_lines == 0
