"""Bytes to lines (exporter/sources/log/lines.py), one table like mtail's reader_test.go.

Each case feeds chunks, as ``read`` may return them, to one splitter and states the lines it must
hand over, what a final ``flush`` hands over, and how many lines it must have dropped. The scenario
tests (tests/test_tail_*.py) cover the same rules through real files; this table pins each rule
alone, at chunk boundaries that real files rarely produce on cue.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from exporter.sources.log.lines import LineSplitter


class Case(NamedTuple):
    chunks: list[bytes]
    lines: list[str]
    flushed: list[str] = []
    dropped: int = 0
    max_line_bytes: int = 16
    skipping: bool = False


CASES = {
    "one line": Case([b"abc\n"], ["abc"]),
    "two lines in one chunk": Case([b"a\nb\n"], ["a", "b"]),
    "partial held until its newline": Case([b"ab", b"c\nd"], ["abc"], ["d"]),
    "newline alone completes the held line": Case([b"abc", b"\n"], ["abc"]),
    "empty lines are lines": Case([b"\n\na\n"], ["", "", "a"]),
    "crlf ends a line": Case([b"a\r\nb\r\n"], ["a", "b"]),
    "crlf split across chunks": Case([b"a\r", b"\nb\n"], ["a", "b"]),
    "bare cr separates tqdm updates": Case([b"10%\r50%\r100%\n"], ["10%", "50%", "100%"]),
    "empty pieces between carriage returns are dropped": Case([b"\r\ra\r\rb\n"], ["a", "b"]),
    "nul hole at the start of a chunk is dropped": Case([b"\0\0\0a\n"], ["a"]),
    "nul hole at the start of a line is dropped": Case([b"a\n\0\0b\n"], ["a", "b"]),
    "nul inside a line is kept": Case([b"a\0b\n"], ["a\0b"]),
    "invalid utf-8 is replaced": Case([b"\xffa\n"], ["\ufffda"]),
    "utf-8 split across chunks is kept whole": Case([b"\xc3", b"\xa9\n"], ["\u00e9"]),
    "line at the limit is kept": Case([b"x" * 16 + b"\n"], ["x" * 16]),
    "line over the limit is dropped once": Case([b"x" * 17 + b"\nok\n"], ["ok"], dropped=1),
    "oversized partial is dropped up to its newline": Case(
        [b"x" * 10, b"x" * 10, b"x" * 10, b"tail\nok\n"], ["ok"], dropped=1),
    "oversized held rest is dropped up to its newline": Case(
        [b"a\n" + b"y" * 17, b"yyy\nb\n"], ["a", "b"], dropped=1),
    "oversized line in a chunk of many": Case([b"a\n" + b"z" * 20 + b"\nb\n"], ["a", "b"], dropped=1),
    "the limit counts the cr of a crlf": Case([b"x" * 16 + b"\r\n", b"x" * 15 + b"\r\n"], ["x" * 15], dropped=1),
    "start mid-line skips the fragment": Case([b"ment\na\n"], ["a"], skipping=True),
    "start mid-line without a newline yet": Case([b"frag", b"ment\na\n"], ["a"], skipping=True),
    "flush hands over the held line": Case([b"a\nlast"], ["a"], ["last"]),
    "flush of nothing": Case([b"a\n"], ["a"], []),
    "flush while dropping hands over nothing": Case([b"x" * 20], [], [], dropped=1),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_line_splitter(case: Case):
    splitter = LineSplitter(case.max_line_bytes, skipping=case.skipping)
    lines = [line for chunk in case.chunks for line in splitter.consume(chunk)]
    assert lines == case.lines
    assert splitter.flush() == case.flushed
    assert splitter.dropped == case.dropped


def test_held_bytes_stay_bounded_whatever_the_line_length():
    splitter = LineSplitter(1024)
    for _ in range(1000):
        assert splitter.consume(b"x" * 4096) == []
        assert len(splitter.partial) <= 1024
    assert splitter.consume(b"\nok\n") == ["ok"]
    assert splitter.dropped == 1


def test_restart_after_truncation_flushes_and_stops_skipping():
    splitter = LineSplitter(16, skipping=True)
    assert splitter.consume(b"frag") == []
    assert splitter.restart() == []  # the fragment being skipped is not a line
    assert splitter.consume(b"new\n") == ["new"]
    held = LineSplitter(16)
    assert held.consume(b"a\nheld") == ["a"]
    assert held.restart() == ["held"]
    assert held.consume(b"b\n") == ["b"]
