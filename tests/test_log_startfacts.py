"""The live sidecar's start-up facts after a sidecar restart (exporter/sources/log/startfacts.py): it
serves the decode-log interval, ceiling and capacity of the server's LAST start before its start
position, on a log SGLang restarted into (past the 64 MiB the head search once covered) and after the
shipped logging config rotated the start away; where no start is within reach, the interval is not
labelled ``server_args`` and the capacity is absent.

The logs are corpus 060's real lines (SGLang 0.5.23 started twice into one file: first start
interval 40 (the default, printed in server_args), 16 requests, 20,000 tokens; second start interval
5, 8 requests, 6,000 tokens), scraped from the installed command over HTTP."""

from __future__ import annotations

import gzip
import importlib
import logging
import os
import sys
import time

import pytest
from conftest import CORPUS, ROOT, value
from exporter_support import DEADLINE, Exporter

from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.sources.log.file import SCAN_CHUNK, STARTUP_SCAN_BYTES
from exporter.sources.log.ingest import Ingest
from exporter.sources.log.startfacts import start_chunks

LINES = (CORPUS / "060-real-0.5.23-steady-restart-default-interval.log").read_bytes().splitlines()[3:]
SECOND = next(i for i, line in enumerate(LINES) if b"server_args=" in line and i > 100)
#: The first start with its traffic; the second start's lines up to its first batch; its batches.
FIRST = LINES[:SECOND]
_SERVING = next(i for i in range(SECOND, len(LINES)) if b"Prefill batch" in LINES[i])
SECOND_START, SECOND_TRAFFIC = LINES[SECOND:_SERVING], LINES[_SERVING:]
DECODES = [line for line in SECOND_TRAFFIC if b"Decode batch" in line]
#: Real stats lines (no start-up line among them), to fill a log.
STATS = [line for line in FIRST if b"Prefill batch" in line or b"Decode batch" in line]
S = {"stage": "", "dp_rank": "0"}


def _text(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def _hundred_decodes() -> bytes:
    return _text([DECODES[i % len(DECODES)] for i in range(100)])


def _facts(m) -> tuple:
    return (value(m, "sglang_scheduler_decode_log_interval", source="server_args", **S),
            value(m, "sglang_scheduler_max_running_requests", **S),
            value(m, "sglang_scheduler_max_total_tokens", **S))


def _opened(exp: Exporter, path) -> dict:
    return exp.wait_for(lambda m: value(m, "sglang_exporter_log_file_opens_total", path=str(path)) == 1,
                        f"{path} opened")


@pytest.fixture(scope="module")
def restarted_log(tmp_path_factory):
    """First start, then more than the 64 MiB head of real stats lines, then the second start."""
    path = tmp_path_factory.mktemp("restart") / "sglang.log"
    filler = _text(STATS) * 64
    with open(path, "wb") as f:
        f.write(_text(FIRST))
        written = 0
        while written <= STARTUP_SCAN_BYTES:
            f.write(filler)
            written += len(filler)
        f.write(_text(SECOND_START))
    assert path.stat().st_size > STARTUP_SCAN_BYTES + len(_text(FIRST))
    return path


def test_a_sidecar_restarted_past_the_head_serves_the_running_start(restarted_log, tmp_path):
    """Before: interval 40 (source server_args), 16 requests, 20,000 tokens, 100 Decode lines = 4,000
    decode steps, all from the first start."""
    path = tmp_path / "sglang.log"
    os.link(restarted_log, path)  # the module's 64 MiB log, under a name of this test
    exp = Exporter("--log.path", str(path), "--gpu.enabled", "false")
    try:
        m = _opened(exp, path)
        assert _facts(m) == (5, 8, 6000)
        assert value(m, "sglang_scheduler_decode_log_interval", source="default", **S) is None
        with open(path, "ab") as f:
            f.write(_hundred_decodes())
        m = exp.wait_for(lambda m: value(m, "sglang_exporter_log_lines_total", kind="decode", result="parsed") == 100,
                         "the 100 Decode lines appended")
        assert value(m, "sglang_scheduler_batches_total", phase="decode", **S) == 100 * 5
    finally:
        assert exp.terminate() == 0


@pytest.fixture
def shipped_handler(monkeypatch):
    """The shipped logging config's SharedFileHandler class (imported as SGLang imports it)."""
    monkeypatch.syspath_prepend(str(ROOT / "deploy" / "kubernetes" / "base" / "logging"))
    sys.modules.pop("sglang_exporter_logging", None)
    yield importlib.import_module("sglang_exporter_logging").SharedFileHandler
    sys.modules.pop("sglang_exporter_logging", None)


def _write_through(handler, lines: list[bytes]) -> None:
    handler.setFormatter(logging.Formatter("%(message)s"))
    for line in lines:
        handler.emit(logging.LogRecord("sglang", logging.INFO, __file__, 0, line.decode("utf-8", "replace"),
                                       None, None))


def _fill(handler, path, size: int) -> None:
    """Write real stats lines through ``handler`` until ``path`` holds ``size`` bytes (the next line
    rotates it)."""
    i = 0
    while path.stat().st_size < size:
        _write_through(handler, [STATS[i % len(STATS)]])
        i += 1


@pytest.mark.parametrize("cut,glob", [("before-the-start", False), ("inside-the-start", False),
                                      ("before-the-start", True)])
def test_after_the_shipped_rotation_the_start_is_read_from_the_rotated_file(shipped_handler, tmp_path, cut, glob):
    """The shipped handler (backup_count 2) rotated the first start into sglang.log.2 and the second
    into sglang.log.1 (whole, or with its later start-up lines in sglang.log when the rotation fell
    inside it); sglang.log holds no server_args line. Before: no ceiling, and the interval 40
    (source default), or no capacity either. Followed with a glob over the rotated names too
    (docs/tailing.md#rotation), the oldest file's start was applied last: the first start's facts."""
    path = tmp_path / "sglang.log"
    segment = max(len(_text(FIRST)), len(_text(SECOND_START + SECOND_TRAFFIC))) + 1
    handler = shipped_handler(str(path), max_bytes=segment, backup_count=2)
    try:
        _write_through(handler, FIRST)
        _fill(handler, path, segment)
        if cut == "inside-the-start":  # the server_args line, then the rotation
            _write_through(handler, SECOND_START[:1])
            _fill(handler, path, segment)
            _write_through(handler, SECOND_START[1:])
        else:
            _write_through(handler, SECOND_START + SECOND_TRAFFIC)
            _fill(handler, path, segment)
        _write_through(handler, STATS[:20])
    finally:
        handler.close()
    current, newest = path.read_bytes(), (tmp_path / "sglang.log.1").read_bytes()
    assert b"server_args=" not in current and b"'decode_log_interval': 5" in newest
    assert (b"max_total_num_tokens=6000" in current) == (cut == "inside-the-start")
    assert b"'decode_log_interval': 40" in (tmp_path / "sglang.log.2").read_bytes()
    followed = str(tmp_path / "sglang.log*") if glob else str(path)  # the rotated names too
    exp = Exporter("--log.path", followed, "--gpu.enabled", "false")
    try:
        m = _opened(exp, path)
        assert _facts(m) == (5, 8, 6000)
        with open(path, "ab") as f:
            f.write(_text(DECODES[:10]))
        m = exp.wait_for(lambda m: value(m, "sglang_exporter_log_lines_total", kind="decode", result="parsed") == 10,
                         "the 10 Decode lines appended")
        assert value(m, "sglang_scheduler_batches_total", phase="decode", **S) == 10 * 5
    finally:
        assert exp.terminate() == 0


def test_an_empty_log_after_logrotate_takes_the_start_of_its_rotated_file(tmp_path):
    """logrotate's create leaves an empty sglang.log until the server writes (hours for an idle
    one); a sidecar restarted then found no start-up facts at all."""
    path = tmp_path / "sglang.log"
    (tmp_path / "sglang.log.2").write_bytes(_text(FIRST))
    (tmp_path / "sglang.log.1").write_bytes(_text(SECOND_START + SECOND_TRAFFIC))
    os.utime(tmp_path / "sglang.log.2", ns=(1, 1_000_000_000))
    os.utime(tmp_path / "sglang.log.1", ns=(1, 2_000_000_000))
    path.write_bytes(b"")
    exp = Exporter("--log.path", str(path), "--gpu.enabled", "false")
    try:
        assert _facts(_opened(exp, path)) == (5, 8, 6000)
    finally:
        assert exp.terminate() == 0


@pytest.mark.parametrize("compressed", [False, True])
def test_no_start_within_reach_leaves_the_interval_assumed_and_no_capacity(tmp_path, compressed):
    """No server_args line in the log and its rotated files; or only in logrotate's compressed
    sglang.log.2.gz, which is not searched: then one warning names it."""
    path = tmp_path / "sglang.log"
    if compressed:
        (tmp_path / "sglang.log.2.gz").write_bytes(gzip.compress(_text(SECOND_START + SECOND_TRAFFIC)))
    (tmp_path / "sglang.log.1").write_bytes(_text(STATS))
    os.utime(tmp_path / "sglang.log.1", ns=(1, 1))
    path.write_bytes(_text(STATS))
    exp = Exporter("--log.path", str(path), "--gpu.enabled", "false")
    try:
        m = _opened(exp, path)
        end = time.monotonic() + DEADLINE  # the search's lines come before this one on stderr
        while not any("starting at the end of" in line for line in exp.stderr_lines):
            assert time.monotonic() < end, "".join(exp.stderr_lines)
            time.sleep(0.05)
        warned = [line for line in exp.stderr_lines if "are not searched" in line]
        assert len(warned) == (1 if compressed else 0) and all("sglang.log.2.gz" in line for line in warned)
        with open(path, "ab") as f:
            f.write(_text(DECODES[:3]))
        m = exp.wait_for(lambda m: value(m, "sglang_exporter_log_lines_total", kind="decode", result="parsed") == 3,
                         "the 3 Decode lines appended")
        assert value(m, "sglang_scheduler_decode_log_interval", source="default", **S) == 40
        assert value(m, "sglang_scheduler_decode_log_interval", source="server_args", **S) is None
        assert value(m, "sglang_scheduler_max_total_tokens", **S) is None
        assert value(m, "sglang_scheduler_max_running_requests", **S) is None
    finally:
        assert exp.terminate() == 0


def _searched(path, back_limit: int) -> SchedulerStates:
    store = SchedulerStore(SchedulerStates(40, decode_log_interval_source="default"))
    fd = os.open(path, os.O_RDONLY)
    try:
        Ingest(store).startup_facts(start_chunks(str(path), fd, os.fstat(fd).st_size, STARTUP_SCAN_BYTES,
                                                 SCAN_CHUNK, back_limit=back_limit))
    finally:
        os.close(fd)
    return store.states


def test_past_the_search_bound_no_start_is_guessed(tmp_path):
    """The last start lies further back than the bound, and a start is in the head: neither start is
    applied (the first one would be wrong if the server restarted in the part not searched). A log
    without any server_args line (SGLang Omni, SGLang before 2024-10) keeps its head's capacity."""
    path = tmp_path / "sglang.log"
    path.write_bytes(_text(FIRST + SECOND_START) + _text(STATS) * 20)
    bound = len(_text(STATS)) * 10
    states = _searched(path, bound)
    assert states.server_args is None and states.capacity is None
    assert states.decode_log_interval_source == "default"
    assert _searched(path, 1 << 30).decode_log_interval == 5  # within the bound: the last start

    no_args = tmp_path / "old.log"
    no_args.write_bytes(_text([line for line in FIRST if b"server_args=" not in line]) + _text(STATS) * 20)
    states = _searched(no_args, bound)
    assert states.server_args is None and states.capacity is not None
    assert states.capacity.max_total_num_tokens == 20000
