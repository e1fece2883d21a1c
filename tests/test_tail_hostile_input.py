"""Hostile input through the real tailer: CRLF, bare CR (tqdm), invalid UTF-8, NUL bytes, two
writers interleaved mid-line. Nothing raises, and the counts equal those of the same bytes split into
lines at once (so chunking, held partial lines and wake-ups neither lose nor duplicate a line)."""

from __future__ import annotations

import os
from collections import Counter

from tail_support import DECODE_LINES, OTHER_LINES, Harness, append, decode_block

from exporter.sources.log.ingest import Ingest
from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore


def expected_counts(data: bytes) -> Counter:
    """Line counts for ``data`` read in one piece: complete lines only, CRLF/CR as documented."""
    p = Ingest(SchedulerStore(SchedulerStates(40)))
    lines = []
    for raw in data.split(b"\n")[:-1]:
        text = raw.lstrip(b"\0").decode("utf-8", "replace")
        text = text[:-1] if text.endswith("\r") else text
        lines += [s for s in text.split("\r") if s] if "\r" in text else [text]
    p.feed(lines)
    return +p.stats.lines


def run(tmp_path, pieces: list[bytes], clean_decode: int):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log) as h:
        for piece in pieces:
            append(log, piece)
        data = b"".join(pieces)
        want = expected_counts(data)
        h.wait(lambda: h.total_lines() >= sum(want.values()), "every line")
        h.settle()
        assert +h.log.stats.lines == want
        assert h.lines() >= clean_decode
        assert h.stats(log).bytes_read == len(data)
        return h


def test_crlf_line_ends(tmp_path):
    h = run(tmp_path, [decode_block(40, sep=b"\r\n")], 40)
    assert h.lines() == 40 and h.lines("decode", "malformed") == 0


def test_bare_cr_progress_bars(tmp_path):
    bar = b"".join(b"\rCapturing batches (bs=%d avail_mem=70.1 GB): %d%%|####| %d/23" % (i, i * 4, i)
                   for i in range(23))
    pieces = []
    for i in range(20):
        pieces.append(bar + b"\r" + DECODE_LINES[i % len(DECODE_LINES)] + b"\n")  # bar, then a log line
        pieces.append(DECODE_LINES[(i + 1) % len(DECODE_LINES)] + b"\r\n")
    h = run(tmp_path, pieces, 40)
    assert h.lines() == 40


def test_invalid_utf8_and_nul(tmp_path):
    pieces = []
    for i in range(30):
        pieces.append(OTHER_LINES[i % len(OTHER_LINES)] + b" \xff\xfe\xc3(\x00\x00 " + b"\n")  # junk in chatter
        pieces.append(b"\x00\x00\x00" + DECODE_LINES[i % len(DECODE_LINES)] + b"\n")  # NULs before a line
        pieces.append(DECODE_LINES[i % len(DECODE_LINES)][:50] + b"\xe2\x82" + b"\n")  # cut inside a char
        pieces.append(DECODE_LINES[i % len(DECODE_LINES)] + b"\n")
    h = run(tmp_path, pieces, 60)
    assert h.lines() == 60  # the NUL-prefixed and the clean lines; the cut ones are malformed
    assert h.lines("decode", "malformed") == 30


def test_two_writers_interleaved_mid_line(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log) as h:
        a = os.open(log, os.O_WRONLY | os.O_APPEND)
        b = os.open(log, os.O_WRONLY | os.O_APPEND)
        data = b""
        try:
            for i in range(60):
                line_a = DECODE_LINES[i % len(DECODE_LINES)]
                line_b = DECODE_LINES[(i + 5) % len(DECODE_LINES)]
                cut = 10 + (i * 7) % (len(line_a) - 20)
                for fd, piece in ((a, line_a[:cut]), (b, line_b + b"\n"), (a, line_a[cut:] + b"\n"),
                                  (b, line_b + b"\n")):
                    os.write(fd, piece)
                    data += piece
        finally:
            os.close(a)
            os.close(b)
        want = expected_counts(data)
        h.wait(lambda: h.total_lines() >= 3 * 60, "every line")
        h.settle()
        assert +h.log.stats.lines == want
        assert h.total_lines() == 3 * 60  # three newlines per round
        assert h.lines() >= 60  # B's second line each round is intact


def test_partial_line_waits_for_its_newline(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log) as h:
        line = decode_block(1)
        for k in range(0, len(line), 7):  # a slow writer: 7 bytes at a time, each seen by the tailer
            append(log, line[k:k + 7])
            h.settle(1)
            assert h.lines() == (1 if k + 7 >= len(line) else 0)
        h.wait_decode(1)
