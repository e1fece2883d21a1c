"""The SGLang logging configuration of the sidecar ConfigMap (deploy/kubernetes/base/logging/).

SGLang loads ``SGLANG_LOGGING_CONFIG_PATH`` with ``logging.config.dictConfig`` in every process; here
the same file is loaded the same way, scheduler processes are imitated (their process title, their
logger name, real ``Prefill``/``Decode batch`` and retraction messages from the shared corpus), and
the written file must read back through the exporter's parser with the right rank labels.
"""

from __future__ import annotations

import importlib
import json
import logging
import logging.config
import re
import sys
from pathlib import Path

import pytest

from exporter.events import DecodeBatch, PrefillBatch, Retraction
from exporter.sources.log.parser import parse_line

from conftest import CORPUS, ROOT

LOGGING_DIR = ROOT / "deploy" / "kubernetes" / "base" / "logging"
PREFIX = re.compile(r"^\[[^\]]*\] ")


def _messages(kind: str, n: int) -> list[str]:
    """The first ``n`` real, intact messages of a kind from the corpus, without SGLang's prefix."""
    out = []
    for path in sorted(CORPUS.glob("*.log")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if (PREFIX.match(line) and PREFIX.sub("", line, count=1).startswith(kind)
                    and isinstance(parse_line(line), (DecodeBatch, PrefillBatch, Retraction))):
                out.append(PREFIX.sub("", line, count=1))
                if len(out) == n:
                    return out
    pytest.fail(f"the corpus has fewer than {n} {kind!r} lines")


@pytest.fixture
def helper_module(monkeypatch):
    """The ConfigMap's module, imported as SGLang imports it (its directory on sys.path)."""
    monkeypatch.syspath_prepend(str(LOGGING_DIR))
    sys.modules.pop("sglang_exporter_logging", None)
    module = importlib.import_module("sglang_exporter_logging")
    yield module
    sys.modules.pop("sglang_exporter_logging", None)


@pytest.fixture
def isolated_logging():
    """Restores the root logger and the scheduler loggers after dictConfig replaced them."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.Logger.manager.disable)
    yield
    for handler in root.handlers:
        if handler not in saved[0]:
            handler.close()
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    logging.disable(saved[2])


def _config(log_file: Path, **handler_overrides) -> dict:
    config = json.loads((LOGGING_DIR / "logging.json").read_text(encoding="utf-8"))
    config["handlers"]["shared_file"]["filename"] = str(log_file)
    config["handlers"]["shared_file"].update(handler_overrides)
    config["handlers"]["console"]["stream"] = "ext://sys.stdout"  # captured by pytest
    return config


@pytest.mark.parametrize(("title", "prefix"), [
    ("sglang::scheduler", ""),                                   # single GPU: SGLang prints no tags
    ("sglang::scheduler_TP3", " TP3"),
    ("sglang::scheduler_DP1_TP1", " DP1 TP1"),
    ("sglang::scheduler_DP3_TP3_EP3", " DP3 TP3 EP3"),
    ("sglang::scheduler_DP0_PP1_TP2_EP2", " DP0 PP1 TP2 EP2"),
    ("sglang::scheduler_DP2_PP0_ATTN_CP1_MOE_DP1_TP5_EP5", " DP2 PP0 ATTN_CP1 MOE_DP1 TP5 EP5"),
    ("sglang::detokenizer", ""),
    ("python3 -m sglang.launch_server --model-path m", ""),
    ("", ""),
])
def test_prefix_from_the_process_title(helper_module, title, prefix):
    assert helper_module.prefix_from_title(title) == prefix


def test_config_writes_lines_the_exporter_reads_with_rank_labels(helper_module, isolated_logging,
                                                                 monkeypatch, tmp_path, capsys):
    log_file = tmp_path / "sglang.log"
    logging.config.dictConfig(_config(log_file))
    decode = _messages("Decode batch", 3)
    prefill = _messages("Prefill batch", 2)
    retract = _messages("KV cache pool is full. Retract requests.", 1)
    schedulers = {  # process title -> (dp_rank, replica) the exporter must see
        "sglang::scheduler_DP1_TP1": ("1", "TP1"),
        "sglang::scheduler_DP0_PP1_TP2_EP2": ("0", "PP1 TP2 EP2"),
        "sglang::scheduler_DP3_ATTN_CP1_MOE_DP1_TP3": ("3", "ATTN_CP1 MOE_DP1 TP3"),
        "sglang::scheduler": ("0", ""),
    }
    logger = logging.getLogger("sglang.srt.managers.scheduler")
    expected = []
    for title, labels in schedulers.items():
        # Each scheduler is its own process: a new pid makes the filter read the title again.
        monkeypatch.setattr(helper_module, "_current_title", lambda title=title: title)
        monkeypatch.setattr(helper_module.os, "getpid", lambda title=title: hash(title))
        for message in decode + prefill:
            logger.info(message)
            expected.append(labels)
        logging.getLogger("sglang.srt.managers.schedule_batch").warning(retract[0])
        expected.append(labels)
    monkeypatch.setattr(helper_module, "_current_title", lambda: "python3 -m sglang.launch_server")
    monkeypatch.setattr(helper_module.os, "getpid", lambda: -1)
    logging.getLogger("sglang.srt.entrypoints.http_server").info("INFO:     127.0.0.1 - \"GET /health HTTP/1.1\" 200")
    for handler in logging.getLogger().handlers:
        handler.flush()

    lines = log_file.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(expected) + 1
    seen = []
    for line in lines[:-1]:
        event = parse_line(line)
        assert isinstance(event, (DecodeBatch, PrefillBatch, Retraction)), line
        assert event.origin.log_time is not None, line  # SGLang's date-time prefix survived
        seen.append((event.origin.dp_rank, event.origin.replica))
    assert seen == expected
    assert parse_line(lines[-1]) is None  # the HTTP process's lines are not scheduler lines
    assert re.match(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] INFO: ", lines[-1])
    # The console keeps the same lines (SGLang's console output is not lost).
    console = capsys.readouterr().out.splitlines()
    assert console == lines


def test_the_file_is_bounded_and_every_writer_follows_the_rotation(helper_module, tmp_path):
    """Two handlers on one path stand for two scheduler processes."""
    log_file = tmp_path / "sglang.log"
    one = helper_module.SharedFileHandler(str(log_file), max_bytes=2000)
    two = helper_module.SharedFileHandler(str(log_file), max_bytes=2000)
    fmt = logging.Formatter("%(message)s")
    for handler in (one, two):
        handler.setFormatter(fmt)
    try:
        record = lambda i: logging.LogRecord("sglang", logging.INFO, __file__, 0, f"line {i:04d} " + "x" * 90, None, None)
        for i in range(100):
            (one if i % 2 else two).handle(record(i))
        rotated = tmp_path / "sglang.log.1"
        assert rotated.exists()
        assert log_file.stat().st_size < 2000 + 200
        assert rotated.stat().st_size < 2000 + 200
        # The newest lines of both writers are in the current file, in order.
        current = log_file.read_text().splitlines()
        numbers = [int(line.split()[1]) for line in current]
        assert numbers == sorted(numbers) and numbers[-1] == 99 and 98 in numbers
    finally:
        one.close()
        two.close()


WRITER = r"""
import logging, sys, time
sys.path.insert(0, sys.argv[1])
import sglang_exporter_logging as m

path, who, lines, start = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
handler = m.SharedFileHandler(path, max_bytes=int(sys.argv[6]), backup_count=100000)
handler.setFormatter(logging.Formatter("%(message)s"))
while time.time() < start:  # all writers begin together
    time.sleep(0.001)
for i in range(lines):
    handler.handle(logging.LogRecord("sglang", logging.INFO, "writer", 0, f"w{who:02d} {i:05d} " + "x" * 40,
                                     None, None))
handler.close()
"""


def test_concurrent_writers_rotating_at_once_lose_no_line(tmp_path):
    """16 writer processes, thousands of lines, a rotation every few dozen lines: each line is in
    exactly one segment. (Without the lock, two processes that see the full file at the same
    moment both rename it, and the second rename replaces the first segment.) Segments are all
    kept here (a large backup_count) so that every line can be counted."""
    import subprocess
    import time

    writers, lines, max_bytes = 16, 500, 4096
    log_file = tmp_path / "sglang.log"
    start = time.time() + 1.5
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(LOGGING_DIR), str(log_file), str(w), str(lines),
                               str(start), str(max_bytes)]) for w in range(writers)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    segments = [log_file] + sorted(tmp_path.glob("sglang.log.*"), key=lambda p: int(p.suffix[1:]))
    assert len(segments) > 50, "too few rotations to test them"
    seen: dict[str, int] = {}
    for segment in segments:
        for line in segment.read_text().splitlines():
            seen[line] = seen.get(line, 0) + 1
    expected = {f"w{w:02d} {i:05d} " + "x" * 40 for w in range(writers) for i in range(lines)}
    assert set(seen) == expected, f"{len(expected - set(seen))} lines lost, {len(set(seen) - expected)} unexpected"
    assert all(n == 1 for n in seen.values()), "a line was written twice"
    # Bounded: no segment grew far past max_bytes (one line of slack).
    assert max(s.stat().st_size for s in segments) < max_bytes + 100
    # Each writer's lines are in order across the segments (oldest segment first).
    order = [line for segment in reversed(segments) for line in segment.read_text().splitlines()]
    for w in range(writers):
        mine = [int(line.split()[1]) for line in order if line.startswith(f"w{w:02d} ")]
        assert mine == list(range(lines))
