"""Restart semantics: a (re)started exporter starts at the end of an existing file, so what an earlier
exporter counted is not counted again; --log.from-beginning replays the whole file."""

from __future__ import annotations

from tail_support import Harness, append, decode_block


def test_restart_starts_at_end(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log) as first:
        append(log, decode_block(30))
        first.wait_decode(30)
    append(log, decode_block(4))  # written while no exporter runs: not counted by the next one
    append(log, decode_block(1)[:60])  # and the next exporter starts in the middle of this line
    with Harness(log) as second:
        second.settle()
        assert second.lines() == 0 and second.total_lines() == 0
        append(log, decode_block(1)[60:] + decode_block(9))
        second.wait_decode(9, "after the restart (the cut line's tail is skipped)")
        assert second.total_lines() == 9


def test_from_beginning_replays(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(decode_block(25) + b"partial")
    with Harness(log, from_beginning=True) as h:
        h.wait_decode(25)
        append(log, b" more\n" + decode_block(5))
        h.wait_decode(30)
        assert h.total_lines() == 31  # the completed partial line is an "other" line
