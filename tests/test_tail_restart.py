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


def test_a_reused_inode_number_is_not_resumed_at_the_old_offset(tmp_path):
    """A remembered read position is kept with the file's first bytes: a new file that got the
    deleted file's inode number (ext4 reuses them) starts at 0, the same file resumes."""
    import os

    from exporter.sources.log.file import Registry

    reg = Registry()
    path = tmp_path / "x.log"
    path.write_bytes(b"[2026-01-01 10:00:00] first file\n" * 4)
    st = os.stat(path)
    ident = (st.st_dev, st.st_ino)
    reg.finish(ident, 66, path.read_bytes()[:66])
    with open(path, "rb") as f:
        assert reg.resume_offset(ident, f.fileno(), st.st_size) == 66  # same file: continue
    reg.finish(ident, 66, b"[2026-01-01 10:00:00] another file that had this inode\n"[:66])
    with open(path, "rb") as f:
        assert reg.resume_offset(ident, f.fileno(), st.st_size) is None  # other content: from 0
    reg.finish(ident, 10_000, b"")
    with open(path, "rb") as f:
        assert reg.resume_offset(ident, f.fileno(), st.st_size) is None  # shorter than the offset
